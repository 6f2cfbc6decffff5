#!/bin/sh
# Benchmark `pcmap-fleet merge` (Apache DataFusion embedded; Ballista with one and with two
# executors) against merge-fdata 22 on the equivalent fdata files.
#
# Generates (once, cached in $OUT) SHARDS fdata files of RECORDS branch records each
# (bench/gen-fdata.py: one shared code base, so hosts overlap) and converts each to a shard with
# `pcmap-fleet convert`; then times each merge under /usr/bin/time -v (wall time, peak RSS) and
# checks that every output has merge-fdata's lines.
#
# Usage: bench/fleet.sh [SHARDS [RECORDS]]   (defaults: 1000 shards of 100000 records, the
# issue's size; that needs about 5 GB of disk for the fdata and the shards)
# Environment: OUT=dir (default target/bench-fleet), FLEET=binary (default: build the release one).
# Set GEN_ONLY=1 to stop after generating the inputs.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARDS=${1:-1000}
RECORDS=${2:-100000}
OUT=${OUT:-$ROOT/target/bench-fleet}/$SHARDS-$RECORDS
LLVM=/usr/lib/llvm-22/bin
mkdir -p "$OUT"
cd "$OUT"
# FLEET=path uses that pcmap-fleet binary instead of building the release one.
if [ -z "${FLEET:-}" ]; then
  (cd "$ROOT" && cargo build --release -q -p pcmap-fleet)
  FLEET=$ROOT/target/release/pcmap-fleet
fi

if [ ! -f fdata/.done ]; then
  echo "generating $SHARDS fdata files of $RECORDS records..." >&2
  python3 "$ROOT/bench/gen-fdata.py" fdata "$SHARDS" "$RECORDS"
  touch fdata/.done
fi
if [ ! -f shards/.done ]; then
  echo "converting them to shards..." >&2
  mkdir -p shards
  i=0
  for f in fdata/*.fdata; do
    b=$(basename "$f" .fdata)
    "$FLEET" convert "$f" -o "shards/$b.parquet" --host "$b" --build-id 00 \
      --collected-at $((1700000000 + i)) > /dev/null
    i=$((i + 1))
  done
  touch shards/.done
fi
[ -n "${GEN_ONLY:-}" ] && exit 0
echo "input: $SHARDS files; fdata $(du -sh fdata | cut -f1), shards $(du -sh shards | cut -f1)"

# run NAME CMD...: time CMD, print wall and peak RSS.
run() {
  name=$1; shift
  /usr/bin/time -v "$@" > "$name.stdout" 2> "$name.time" || { cat "$name.time" >&2; exit 1; }
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$name.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$name.time")
  printf '%-28s wall %8s  peak RSS %6d MB\n' "$name" "$wall" $((rss / 1024))
}
same() {
  sort "$1" > "$1.sorted"
  cmp -s "$1.sorted" merge-fdata.fdata.sorted || { echo "$1 differs from merge-fdata" >&2; exit 1; }
}

run merge-fdata "$LLVM/merge-fdata" fdata/*.fdata -o merge-fdata.fdata
sort merge-fdata.fdata > merge-fdata.fdata.sorted
run datafusion-embedded "$FLEET" merge shards -o embedded.fdata
same embedded.fdata
# Where the embedded engine's time goes: the same plan under EXPLAIN ANALYZE (operator metrics:
# elapsed_compute, spills, rows), summarised per operator.
"$FLEET" query "EXPLAIN ANALYZE $("$FLEET" merge --print-sql)" shards --format csv > explain.csv
echo "  operators (EXPLAIN ANALYZE, see $OUT/explain.csv):"
python3 - explain.csv <<'PY'
import csv, re, sys
plan = list(csv.reader(open(sys.argv[1])))[1][1]
keep = re.compile(r"(output_rows|elapsed_compute|spill_count|spilled_bytes)=")
for line in plan.split("\n"):
    name = re.match(r"\s*([A-Za-z]+Exec(: mode=\w+)?)", line)
    metrics = re.search(r"metrics=\[(.*)\]", line)
    if name and metrics:
        shown = [m for m in metrics.group(1).split(", ") if keep.match(m)]
        print("    " + name.group(1) + ": " + " ".join(shown))
PY

# Ballista: one scheduler and 1 or 2 executors on this host (ports 50150...).
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; PIDS=""; }
trap cleanup EXIT INT TERM
for n in 1 2; do
  "$FLEET" scheduler --port 50150 > scheduler.log 2>&1 &
  PIDS="$!"
  sleep 1
  e=0
  while [ $e -lt $n ]; do
    mkdir -p "work$e"
    "$FLEET" executor --port $((50151 + 2 * e)) --grpc-port $((50152 + 2 * e)) \
      --scheduler 127.0.0.1:50150 --work-dir "work$e" > "executor$e.log" 2>&1 &
    PIDS="$PIDS $!"
    e=$((e + 1))
  done
  sleep 3
  run "ballista-$n-executor" "$FLEET" merge shards -o "ballista$n.fdata" \
    --engine ballista --scheduler 127.0.0.1:50150
  same "ballista$n.fdata"
  for p in $PIDS; do
    printf '    process %-8s peak RSS %s\n' "$p" "$(sed -n 's/^VmHWM: *//p' /proc/$p/status)"
  done
  cleanup
  sleep 1
done
echo "all outputs have merge-fdata's $(wc -l < merge-fdata.fdata) lines"

#!/bin/sh
# Benchmark `pcmap perf2bolt` against perf2bolt 22 on a large synthetic binary.
#
# Builds (once, cached in $OUT) a ~20,000-function C program (about 8 MB of .text) with
# clang-22 -O2 -fno-pie -no-pie -Wl,--emit-relocs and lld, and a 1.2-million-record
# pre-aggregated profile of valid traces; runs both tools under /usr/bin/time -v, checks that
# the fdata outputs are identical and prints wall-time and peak-memory ratios.
#
# Usage: bench/perf2bolt.sh [RUNS]   (environment: OUT=dir, default target/bench-perf2bolt)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/target/bench-perf2bolt}
RUNS=${1:-3}
LLVM=/usr/lib/llvm-22/bin
mkdir -p "$OUT"
cd "$OUT"

if [ ! -x big ]; then
  echo "building the synthetic binary (takes a few minutes)..." >&2
  python3 "$ROOT/bench/gen-bigprog.py" src 20000 16
  ls src/*.c | xargs -P "$(nproc)" -I{} "$LLVM/clang" -O2 -fno-pie -c {} -o {}.o
  "$LLVM/clang" -O2 -fno-pie -no-pie -fuse-ld=lld -Wl,--emit-relocs src/*.o -o big.tmp
  mv big.tmp big
fi
if [ ! -s big.pa ]; then
  echo "generating the 1.2M-record profile..." >&2
  python3 "$ROOT/bench/gen-preagg.py" big 1200000 > big.pa.tmp
  mv big.pa.tmp big.pa
fi
(cd "$ROOT" && cargo build --release -q -p pcmap)
PCMAP=$ROOT/target/release/pcmap

# run NAME CMD... : best wall time (s) and peak RSS (KB) over $RUNS runs, into $NAME.wall/.rss
run() {
  name=$1; shift
  best_wall=""; best_rss=""
  i=0
  while [ "$i" -lt "$RUNS" ]; do
    /usr/bin/time -v -o "$name.time" "$@" > "$name.log" 2>&1
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(k=1;k<=n;k++) s=s*60+t[k]; print s}' "$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$name.time")
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [ -z "$best_rss" ] || [ "$rss" -lt "$best_rss" ]; then best_rss=$rss; fi
    i=$((i + 1))
  done
  echo "$best_wall" > "$name.wall"; echo "$best_rss" > "$name.rss"
}

run perf2bolt "$LLVM/perf2bolt" --pa -p big.pa -o perf2bolt.fdata big
run pcmap "$PCMAP" perf2bolt big --pa -p big.pa -o pcmap.fdata

if cmp -s perf2bolt.fdata pcmap.fdata; then agree="identical"; else agree="DIFFERENT"; fi
grep -h "PERF2BOLT: \(traces\|out of\|wrote\)" perf2bolt.log | sed 's/^/perf2bolt: /'
grep -h "PERF2BOLT: \(traces\|out of\|wrote\)" pcmap.log | sed 's/^/pcmap:     /'
pw=$(cat perf2bolt.wall); pr=$(cat perf2bolt.rss); cw=$(cat pcmap.wall); cr=$(cat pcmap.rss)
echo "fdata outputs: $agree ($(wc -l < perf2bolt.fdata) lines)"
echo "perf2bolt-22: wall ${pw} s, peak RSS $((pr / 1024)) MB"
echo "pcmap:        wall ${cw} s, peak RSS $((cr / 1024)) MB"
awk "BEGIN{printf \"speed-up: %.1fx wall, memory: %.1fx less (best of $RUNS runs)\n\", $pw/$cw, $pr/$cr}"
[ "$agree" = identical ]

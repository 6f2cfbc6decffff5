# Shared by the whole-process benchmarks in bench/: building the synthetic programs, running a
# command under /usr/bin/time, and printing side-by-side figures. Source it; it sets ROOT, LLVM,
# PCMAP and RUNS (default 3).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LLVM=/usr/lib/llvm-22/bin
RUNS=${RUNS:-3}
PCMAP=$ROOT/target/release/pcmap

# build_pcmap: the release pcmap the benchmarks run.
build_pcmap() {
  (cd "$ROOT" && cargo build --release -q -p pcmap)
}

# build_prog DIR NFUNCS: DIR/big, a NFUNCS-function C program (clang-22 -O2, non-PIE, lld,
# --emit-relocs, so BOLT can rewrite it), built once and cached.
build_prog() {
  dir=$1; nfuncs=$2
  mkdir -p "$dir"
  if [ ! -x "$dir/big" ]; then
    echo "building a $nfuncs-function program in $dir (takes a few minutes)..." >&2
    nfiles=$(( (nfuncs + 1249) / 1250 ))
    python3 "$ROOT/bench/gen-bigprog.py" "$dir/src" "$nfuncs" "$nfiles"
    ls "$dir"/src/*.c | xargs -P "$(nproc)" -I{} "$LLVM/clang" -O2 -fno-pie -c {} -o {}.o
    "$LLVM/clang" -O2 -fno-pie -no-pie -fuse-ld=lld -Wl,--emit-relocs "$dir"/src/*.o -o "$dir/big.tmp"
    mv "$dir/big.tmp" "$dir/big"
    rm -f "$dir"/src/*.o
  fi
}

# build_preagg DIR NRECORDS [HOT]: DIR/big.pa, a pre-aggregated profile of valid traces of
# DIR/big (HOT: only that many functions, picked at random, are profiled).
build_preagg() {
  dir=$1; n=$2; hot=${3:-0}
  if [ ! -s "$dir/big.pa" ]; then
    echo "generating the $n-record profile of $dir/big..." >&2
    python3 "$ROOT/bench/gen-preagg.py" "$dir/big" "$n" "$hot" > "$dir/big.pa.tmp"
    mv "$dir/big.pa.tmp" "$dir/big.pa"
  fi
}

# run NAME CMD...: best wall time (s) and peak RSS (KB) over $RUNS runs, into NAME.wall and
# NAME.rss; the last run's output in NAME.log. A failing command is reported, not fatal (the
# exit status goes to NAME.status).
run() {
  name=$1; shift
  best_wall=""; best_rss=""
  i=0
  while [ "$i" -lt "$RUNS" ]; do
    status=0
    /usr/bin/time -v -o "$name.time" "$@" > "$name.log" 2>&1 || status=$?
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(k=1;k<=n;k++) s=s*60+t[k]; print s}' "$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$name.time")
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [ -z "$best_rss" ] || [ "$rss" -lt "$best_rss" ]; then best_rss=$rss; fi
    i=$((i + 1))
  done
  echo "$best_wall" > "$name.wall"; echo "$best_rss" > "$name.rss"; echo "$status" > "$name.status"
  if [ "$status" != 0 ]; then
    echo "$name: exit status $status; last lines of its output:" >&2
    tail -5 "$name.log" >&2
  fi
}

# compare LABEL ORACLE PCMAP: one line with both tools' best wall time and peak RSS and the ratios.
compare() {
  label=$1; a=$2; b=$3
  aw=$(cat "$a.wall"); ar=$(cat "$a.rss"); bw=$(cat "$b.wall"); br=$(cat "$b.rss")
  awk -v l="$label" -v aw="$aw" -v ar="$ar" -v bw="$bw" -v br="$br" -v runs="$RUNS" 'BEGIN{
    printf "%s: perf2bolt-22 %.2f s %d MB | pcmap %.3f s %d MB | %.1fx faster, %.1fx less memory (best of %d)\n",
      l, aw, ar/1024, bw, br/1024, aw/bw, ar/br, runs }'
}

# same_file A B WHAT: fail loudly when the outputs differ.
same_file() {
  if cmp -s "$1" "$2"; then
    echo "$3: outputs identical ($(wc -l < "$1") lines)"
  else
    echo "$3: OUTPUTS DIFFER: $1 $2" >&2
    diff "$1" "$2" | head -5 >&2
    return 1
  fi
}

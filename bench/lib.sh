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
  # (Shell functions share the caller's variables: these are prefixed.)
  bp_dir=$1; bp_nfuncs=$2
  mkdir -p "$bp_dir"
  if [ ! -x "$bp_dir/big" ]; then
    echo "building a $bp_nfuncs-function program in $bp_dir (takes a few minutes)..." >&2
    bp_nfiles=$(( (bp_nfuncs + 1249) / 1250 ))
    python3 "$ROOT/bench/gen-bigprog.py" "$bp_dir/src" "$bp_nfuncs" "$bp_nfiles"
    ls "$bp_dir"/src/*.c | xargs -P "$(nproc)" -I{} "$LLVM/clang" -O2 -fno-pie -c {} -o {}.o
    "$LLVM/clang" -O2 -fno-pie -no-pie -fuse-ld=lld -Wl,--emit-relocs "$bp_dir"/src/*.o -o "$bp_dir/big.tmp"
    mv "$bp_dir/big.tmp" "$bp_dir/big"
    rm -f "$bp_dir"/src/*.o
  fi
}

# build_preagg DIR NRECORDS [HOT]: DIR/big.pa, a pre-aggregated profile of valid traces of
# DIR/big (HOT: only that many functions, picked at random, are profiled).
build_preagg() {
  pa_dir=$1; pa_n=$2; pa_hot=${3:-0}
  if [ ! -s "$pa_dir/big.pa" ]; then
    echo "generating the $pa_n-record profile of $pa_dir/big..." >&2
    python3 "$ROOT/bench/gen-preagg.py" "$pa_dir/big" "$pa_n" "$pa_hot" > "$pa_dir/big.pa.tmp"
    mv "$pa_dir/big.pa.tmp" "$pa_dir/big.pa"
  fi
}

# run NAME CMD...: best wall time (s) and peak RSS (KB) over $RUNS runs, into NAME.wall and
# NAME.rss; the last run's output in NAME.log. A failing command is reported, not fatal (the
# exit status goes to NAME.status).
run() {
  r_name=$1; shift
  r_wall=""; r_rss=""
  r_i=0
  while [ "$r_i" -lt "$RUNS" ]; do
    r_status=0
    /usr/bin/time -v -o "$r_name.time" "$@" > "$r_name.log" 2>&1 || r_status=$?
    r_w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(k=1;k<=n;k++) s=s*60+t[k]; print s}' "$r_name.time")
    r_r=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$r_name.time")
    if [ -z "$r_wall" ] || awk "BEGIN{exit !($r_w < $r_wall)}"; then r_wall=$r_w; fi
    if [ -z "$r_rss" ] || [ "$r_r" -lt "$r_rss" ]; then r_rss=$r_r; fi
    r_i=$((r_i + 1))
  done
  echo "$r_wall" > "$r_name.wall"; echo "$r_rss" > "$r_name.rss"; echo "$r_status" > "$r_name.status"
  if [ "$r_status" != 0 ]; then
    echo "$r_name: exit status $r_status; last lines of its output:" >&2
    tail -5 "$r_name.log" >&2
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

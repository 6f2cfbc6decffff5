#!/bin/sh
# How perf2bolt 22 and `pcmap perf2bolt` scale with the size of the binary (issue 15, row 4): the
# same profile size (RECORDS pre-aggregated records starting in HOT functions picked at random)
# on programs of 20,000, 100,000 and 200,000 functions, most of their code cold. Outputs must be
# byte-identical. pcmap runs twice: as a first run on the binary, and as a later run with
# `--scan-cache` (the cache made beforehand by one run that is not timed), which takes the
# findings of the decoding pass over every function from the cache.
#
# Usage: bench/scaling.sh   (environment: RUNS=1, OUT=target/bench-scaling,
#        SIZES="20000 100000 200000", RECORDS=300000, HOT=2000; PREPARE_ONLY=1 only builds the
#        programs and profiles)
set -eu
RUNS=${RUNS:-1}
. "$(dirname "$0")/lib.sh"

OUT=${OUT:-$ROOT/target/bench-scaling}
SIZES=${SIZES:-20000 100000 200000}
RECORDS=${RECORDS:-300000}
HOT=${HOT:-2000}
build_pcmap
for n in $SIZES; do
  dir=$OUT/f$n
  build_prog "$dir" "$n"
  build_preagg "$dir" "$RECORDS" "$HOT"
  [ -n "${PREPARE_ONLY:-}" ] && continue
  cd "$dir"
  run perf2bolt "$LLVM/perf2bolt" --pa -p big.pa -o perf2bolt.fdata big
  run pcmap "$PCMAP" perf2bolt big --pa -p big.pa -o pcmap.fdata
  same_file perf2bolt.fdata pcmap.fdata "$n functions"
  rm -rf scan-cache
  "$PCMAP" perf2bolt big --pa -p big.pa -o /dev/null --scan-cache scan-cache > /dev/null
  run pcmap-cached "$PCMAP" perf2bolt big --pa -p big.pa -o pcmap-cached.fdata --scan-cache scan-cache
  same_file perf2bolt.fdata pcmap-cached.fdata "$n functions, --scan-cache"
  text=$("$LLVM/llvm-size" -A big | awk '$1==".text"{printf "%.1f MB", $2/1048576}')
  compare "$n functions ($text of .text, $HOT profiled)" perf2bolt pcmap
  compare "$n functions, later run with --scan-cache" perf2bolt pcmap-cached
done

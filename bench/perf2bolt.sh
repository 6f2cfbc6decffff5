#!/bin/sh
# Benchmark `pcmap perf2bolt` against perf2bolt 22 on pre-aggregated profiles (issue 15, rows 1
# and 2): fdata and YAML, on two synthetic programs — 20,000 functions (about 8 MB of .text) and
# 40,000 functions — each with a 1.2-million-record profile of valid traces. Both tools run side
# by side on the same input; the outputs must be byte-identical (the script fails loudly if not).
#
# Usage: bench/perf2bolt.sh [fdata|yaml|both]   (environment: RUNS=3, OUT=target/bench-perf2bolt,
#        SIZES="20000 40000", RECORDS=1200000)
set -eu
. "$(dirname "$0")/lib.sh"
MODE=${1:-both}
OUT=${OUT:-$ROOT/target/bench-perf2bolt}
SIZES=${SIZES:-20000 40000}
RECORDS=${RECORDS:-1200000}
build_pcmap
for n in $SIZES; do
  # The 20,000-function program lives in $OUT itself (as before); others in $OUT/f$n.
  if [ "$n" = 20000 ]; then dir=$OUT; else dir=$OUT/f$n; fi
  build_prog "$dir" "$n"
  build_preagg "$dir" "$RECORDS"
  cd "$dir"
  if [ "$MODE" != yaml ]; then
    run perf2bolt "$LLVM/perf2bolt" --pa -p big.pa -o perf2bolt.fdata big
    run pcmap "$PCMAP" perf2bolt big --pa -p big.pa -o pcmap.fdata
    same_file perf2bolt.fdata pcmap.fdata "$n functions, fdata"
    compare "$n functions, fdata" perf2bolt pcmap
  fi
  if [ "$MODE" != fdata ]; then
    run perf2bolt-yaml "$LLVM/perf2bolt" --pa -p big.pa -o perf2bolt.yaml --profile-format=yaml big
    run pcmap-yaml "$PCMAP" perf2bolt big --pa -p big.pa -o pcmap.yaml --profile-format yaml
    same_file perf2bolt.yaml pcmap.yaml "$n functions, YAML"
    compare "$n functions, YAML" perf2bolt-yaml pcmap-yaml
  fi
done

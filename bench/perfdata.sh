#!/bin/sh
# Benchmark `pcmap perf2bolt` against perf2bolt 22 on a perf.data with branch stacks at gigabyte
# scale (issue 15, row 3). The file is written by pcmap's perf.data writer
# (crates/pcmap-perf2bolt/examples/gen-perfdata.rs): 32-entry stacks whose entries chain through
# the real code of the 20,000-function benchmark program, 8 processes with COMM/MMAP2/FORK/EXIT
# records and a build-id, and samples of another program mixed in. perf2bolt's time and memory
# are reported even if it fails. The fdata outputs must be byte-identical.
#
# Usage: bench/perfdata.sh [SIZE_MB]   (default 2200; environment: RUNS=1, OUT=target/bench-perf2bolt)
set -eu
RUNS=${RUNS:-1}
. "$(dirname "$0")/lib.sh"

SIZE_MB=${1:-2200}
OUT=${OUT:-$ROOT/target/bench-perf2bolt}
build_pcmap
(cd "$ROOT" && cargo build --release -q -p pcmap-perf2bolt --example gen-perfdata)
build_prog "$OUT" 20000
cd "$OUT"
data=lbr-$SIZE_MB.data
if [ ! -s "$data" ]; then
  "$ROOT/target/release/examples/gen-perfdata" big "$data" "$SIZE_MB"
  # The gigabytes just written are flushed before any tool runs: writeback during the first
  # run made it half as fast.
  sync
fi
bytes=$(stat -c %s "$data")
# Drop the file from the page cache between tools? No: both read it warm (best case for both).
cat "$data" > /dev/null
run perf2bolt-lbr "$LLVM/perf2bolt" -p "$data" -o perf2bolt-lbr.fdata big
run pcmap-lbr "$PCMAP" perf2bolt big -p "$data" -o pcmap-lbr.fdata
grep -h "PERF2BOLT: read" pcmap-lbr.log || true
if [ "$(cat perf2bolt-lbr.status)" = 0 ]; then
  same_file perf2bolt-lbr.fdata pcmap-lbr.fdata "perf.data $SIZE_MB MB, fdata"
else
  echo "perf2bolt failed (exit $(cat perf2bolt-lbr.status)); its time and memory until then:"
fi
compare "perf.data $SIZE_MB MB" perf2bolt-lbr pcmap-lbr
awk -v b="$bytes" -v w="$(cat pcmap-lbr.wall)" 'BEGIN{printf "pcmap throughput: %.2f GB/s (%.2f GB in %.2f s)\n", b/w/1e9, b/1e9, w}'

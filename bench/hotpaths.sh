#!/bin/sh
# The other hot paths of issue 15 (row 5), each beside its reference:
#  - basic-block map lookups, uniform random PCs (criterion: pcmap-bbmap `lookup/lookup_random_pcs`,
#    one core);
#  - inline-site encoding (`pcmap inline encode`, BTF 2026 layout) of a large optimised library with
#    DWARF against `pahole -J` on the same file (wall time and peak RSS; pcmap is given pahole's
#    base BTF so it does not run pahole itself);
#  - HTR ingest and the super-block pass (criterion: pcmap-trace `pcmtrace`).
#
# Usage: bench/hotpaths.sh [BINARY]   (BINARY: a library with DWARF; default pyenv's libpython3.11
#        when installed, else the generated library of bench/inline.sh; environment: RUNS=3)
set -eu
. "$(dirname "$0")/lib.sh"
work=$ROOT/target/pcmap-bench
mkdir -p "$work"
build_pcmap

echo "== basic-block map lookups (criterion) =="
(cd "$ROOT" && cargo bench -q -p pcmap-bbmap --bench bbmap -- lookup_random_pcs 2>/dev/null) |
  grep -E "lookup_random_pcs|thrpt" | head -3

echo "== inline-site encoding vs pahole -J =="
bin=${1:-}
if [ -z "$bin" ]; then
  for cand in "$HOME"/.pyenv/versions/3.11.*/lib/libpython3.11.so.1.0; do
    [ -f "$cand" ] && bin=$cand
  done
fi
if [ -z "$bin" ]; then
  "$ROOT/bench/inline.sh" > /dev/null  # builds the generated library
  bin=$work/geninline.so
fi
cd "$work"
run pahole pahole -J --btf_encode_detached="$work/base.btf" "$bin"
run pcmap-inline "$PCMAP" inline encode "$bin" --base "$work/base.btf" --format btf-2026 -o "$work/inline.btf"
echo "binary: $bin"
awk -v aw="$(cat pahole.wall)" -v ar="$(cat pahole.rss)" -v bw="$(cat pcmap-inline.wall)" -v br="$(cat pcmap-inline.rss)" 'BEGIN{
  printf "pahole -J %.2f s %d MB | pcmap inline encode %.2f s %d MB | %.1fx faster, %.2fx the memory\n",
    aw, ar/1024, bw, br/1024, aw/bw, br/ar }'

echo "== HTR ingest and super-block pass (criterion) =="
(cd "$ROOT" && cargo bench -q -p pcmap-trace --bench trace 2>/dev/null) | grep -E "pcmtrace|thrpt" | head -6

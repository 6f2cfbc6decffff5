#!/bin/sh
# The other hot paths of issue 15 (row 5), each beside its reference:
#  - basic-block map lookups, uniform random PCs (criterion: pcmap-bbmap `lookup/lookup_random_pcs`,
#    one core);
#  - inline-site encoding (`pcmap inline encode`, BTF 2026 layout) of a large optimised library with
#    DWARF against `pahole -J` on the same file (wall time and peak RSS; pcmap is given pahole's
#    base BTF so it does not run pahole itself);
#  - HTR ingest and the super-block pass (criterion: pcmap-trace `pcmtrace`).
#
# Usage: bench/hotpaths.sh [BINARY...]   (BINARY: an ELF with DWARF, e.g. a kernel image with debug
#        info; each is measured in turn. Default: pyenv's libpython3.11 when installed, else the
#        generated library of bench/inline.sh; environment: RUNS=3, ONLY=inline to skip the
#        criterion benchmarks)
#        Real inputs used in BENCHMARKS.md, from Debian 12 packages (`apt-get download`, then
#        `dpkg-deb --fsys-tarfile PKG.deb | tar x ./PATH`):
#          libpython3.11-dbg:  usr/lib/x86_64-linux-gnu/libpython3.11d.so.1.0
#          linux-image-6.1.0-53-cloud-amd64-dbg:  usr/lib/debug/boot/vmlinux-6.1.0-53-cloud-amd64
set -eu
. "$(dirname "$0")/lib.sh"
work=$ROOT/target/pcmap-bench
mkdir -p "$work"
build_pcmap

if [ "${ONLY:-}" != inline ]; then
  echo "== basic-block map lookups (criterion) =="
  (cd "$ROOT" && cargo bench -q -p pcmap-bbmap --bench bbmap -- lookup_random_pcs 2>/dev/null) |
    grep -E "lookup_random_pcs|thrpt" | head -3
fi

echo "== inline-site encoding vs pahole -J =="
if [ $# -eq 0 ]; then
  bin=""
  for cand in "$HOME"/.pyenv/versions/3.11.*/lib/libpython3.11.so.1.0; do
    [ -f "$cand" ] && bin=$cand
  done
  if [ -z "$bin" ]; then
    "$ROOT/bench/inline.sh" > /dev/null  # builds the generated library
    bin=$work/geninline.so
  fi
  set -- "$bin"
fi
cd "$work"
for bin in "$@"; do
  # pahole and pcmap back to back for each run, so both see the same machine load.
  run pahole pahole -J --btf_encode_detached="$work/base.btf" "$bin"
  run pcmap-inline "$PCMAP" inline encode "$bin" --base "$work/base.btf" --format btf-2026 -o "$work/inline.btf"
  info=$(readelf -SW "$bin" | awk '{for (i = 1; i < NF; i++) if ($i == ".debug_info") print $(i + 4)}')
  echo "binary: $bin (.debug_info $(( 0x${info:-0} / 1000 )) KB)"
  awk -v aw="$(cat pahole.wall)" -v ar="$(cat pahole.rss)" -v bw="$(cat pcmap-inline.wall)" -v br="$(cat pcmap-inline.rss)" -v runs="$RUNS" 'BEGIN{
    printf "pahole -J %.2f s %d MB | pcmap inline encode %.2f s %d MB | %.1fx faster, %.2fx the memory (best of %d)\n",
      aw, ar/1024, bw, br/1024, aw/bw, br/ar, runs }'
done

if [ "${ONLY:-}" != inline ]; then
  echo "== HTR ingest and super-block pass (criterion) =="
  (cd "$ROOT" && cargo bench -q -p pcmap-trace --bench trace 2>/dev/null) | grep -E "pcmtrace|thrpt" | head -6
fi

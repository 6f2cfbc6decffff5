#!/usr/bin/env bash
# Benchmark `pcmap inline stats` (the inline-site census) on an optimised library with ~10 MB of
# .debug_info, and compare with `pahole -J` (BTF encoding of the same binary) and the Python
# reference census (43 s on libpython3.11, shared/reference/btf-inline.md §3.2).
#
# Usage: bench/inline.sh [BINARY]
#   BINARY defaults to pyenv's CPython 3.11 libpython (gcc -O3 -g, 9.2 MB .debug_info) when it is
#   installed, else a generated C library (gcc -O2 -g, ~100 translation units of inline-heavy code,
#   about 10 MB of .debug_info) built under target/pcmap-bench/.
# Output: one line per tool with the best of 3 wall-clock runs, and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/target/pcmap-bench"
mkdir -p "$work"

bin="${1:-}"
if [[ -z "$bin" ]]; then
  for cand in "$HOME"/.pyenv/versions/3.11.*/lib/libpython3.11.so.1.0; do
    [[ -f "$cand" ]] && bin="$cand"
  done
fi
if [[ -z "$bin" ]]; then
  bin="$work/geninline.so"
  if [[ ! -f "$bin" ]]; then
    echo "generating an inline-heavy C library (gcc -O2 -g) ..." >&2
    python3 - "$work/gen" 100 <<'PY'
import os, random, sys
random.seed(7)
out, ntu = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
for t in range(ntu):
    L = ["#include <stdint.h>", "struct s%d { uint64_t a, b; int c, d; };" % t]
    for h in range(40):
        L.append(f"static inline uint64_t h{t}_{h}(uint64_t x, int y, const struct s{t} *p) {{ uint64_t r = x * {2*h+3}u + (uint64_t)y; if (p->c > y) r ^= p->a >> {h%13+1}; else r += p->b * {h+1}u; return r ^ (r >> {h%29+3}); }}")
    for f in range(60):
        body = [f"uint64_t f{t}_{f}(uint64_t x, int y, struct s{t} *p, uint64_t *v, int n) {{", "  uint64_t acc = x;"]
        for k in range(8):
            a, b = random.randrange(40), random.randrange(40)
            body.append(f"  for (int i = 0; i < n; i++) {{ acc += h{t}_{a}(v[i] + {k}, y + i, p); if (acc & {1<<k}) acc ^= h{t}_{b}(acc, i * {k+1}, p); }}")
        body.append(f"  p->c += (int)acc; p->a ^= acc; return acc + h{t}_{f%40}(acc, {f}, p);")
        body.append("}")
        L += body
    open(f"{out}/tu{t}.c", "w").write("\n".join(L) + "\n")
PY
    ls "$work"/gen/*.c | xargs -P "$(nproc)" -I{} gcc -O2 -g -fPIC -c {} -o {}.o
    gcc -shared "$work"/gen/*.o -o "$bin"
  fi
fi

cargo build --release -p pcmap >&2
pcmap="$root/target/release/pcmap"
debug_info=$(llvm-readelf-22 -SW "$bin" 2>/dev/null | awk '$2==".debug_info"{print $6}' || true)
echo "binary: $bin (.debug_info 0x${debug_info:-?} bytes)"

best() { # best-of-3 wall time in seconds of "$@"
  local best=""
  for _ in 1 2 3; do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    best=$(python3 -c "b='$best'; t=$e-$s; print(t if not b else min(float(b), t))")
  done
  echo "$best"
}

census=$(best "$pcmap" inline stats "$bin" --json)
echo "pcmap inline stats: ${census}s"
if command -v pahole >/dev/null; then
  pahole_t=$(best pahole -J --btf_encode_detached="$work/pahole.btf" "$bin")
  echo "pahole -J:          ${pahole_t}s"
  python3 -c "print(f'census / pahole -J = {$census/$pahole_t:.3f}')"
fi
python3 -c "print(f'Python reference (43 s on libpython3.11) / census = {43/$census:.0f}x')"

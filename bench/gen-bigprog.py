#!/usr/bin/env python3
"""Generate a large synthetic C program for the perf2bolt benchmark.

Usage: gen-bigprog.py OUTDIR [NFUNCS] [NFILES]
Writes NFILES translation units with NFUNCS functions in total: loops, switches lowered to jump
tables, conditionals, calls between functions, static (local) functions, and a main that calls
a few of them. Deterministic (fixed seed).
"""
import os
import random
import sys

out = sys.argv[1]
nfuncs = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
nfiles = int(sys.argv[3]) if len(sys.argv) > 3 else 16
rng = random.Random(12345)
os.makedirs(out, exist_ok=True)
per_file = (nfuncs + nfiles - 1) // nfiles


def body(i, callees):
    lines = [f"  unsigned s = x * {rng.randrange(3, 97)}u + {i}u;"]
    for _ in range(rng.randrange(2, 5)):
        construct(i, lines)
    for c in callees:
        cond = rng.choice(["s & 1u", "s % 3u == 0u", "x > 100u", "(s ^ x) & 4u"])
        lines.append(f"  if ({cond}) s += f{c}(s ^ {rng.randrange(1, 1 << 16)}u);")
    lines.append("  return s;")
    return "\n".join(lines)


def construct(i, lines):
    k = rng.randrange(6)
    if k in (0, 1):
        cases = rng.randrange(5, 12)
        lines.append(f"  switch ((x >> {rng.randrange(0, 5)}) % {cases}u) {{")
        for c in range(cases):
            op = rng.choice(["+", "^", "*", "-"])
            lines.append(f"  case {c}: s = s {op} {rng.randrange(1, 1000)}u; break;")
        lines.append("  default: s ^= 7u; }")
    if k in (1, 2, 3):
        lines.append(f"  for (unsigned j = 0; j < (x & {rng.choice([7, 15, 31])}u); j++) {{")
        lines.append(f"    s = (s << {rng.randrange(1, 7)}) ^ (s >> {rng.randrange(1, 9)}) ^ j;")
        lines.append(f"    if (s & {1 << rng.randrange(2, 12)}u) s += {rng.randrange(1, 50)}u;")
        lines.append("  }")
    if k == 4:
        lines.append(f"  while (s > {rng.randrange(1000, 100000)}u) s = (s >> 1) + (s & 3u);")
    if k == 5:
        lines.append(f"  s = s > {rng.randrange(1, 1 << 20)}u ? s * 3u : s + x;")


decls = "\n".join(f"unsigned f{i}(unsigned x);" for i in range(nfuncs))
for fi in range(nfiles):
    lo, hi = fi * per_file, min(nfuncs, (fi + 1) * per_file)
    # A static function with the same name in every file (local symbols: local_same/N).
    parts = [decls, f"__attribute__((noinline)) static unsigned local_same(unsigned x) {{ return x ^ {fi}u; }}"]
    for i in range(lo, hi):
        # Calls go to later functions only, so the call graph is acyclic.
        callees = [rng.randrange(i + 1, nfuncs) for _ in range(rng.randrange(0, 3))] if i + 1 < nfuncs else []
        static = rng.randrange(8) == 0
        attr = "__attribute__((noinline)) "
        if static:
            parts.append(f"{attr}static unsigned helper{i}(unsigned x) {{ return x * {i}u + 1u; }}")
            parts.append(f"{attr}unsigned f{i}(unsigned x) {{\n  x = helper{i}(x) + local_same(x);\n{body(i, callees)}\n}}")
        else:
            parts.append(f"{attr}unsigned f{i}(unsigned x) {{\n{body(i, callees)}\n}}")
    with open(os.path.join(out, f"big{fi}.c"), "w") as f:
        f.write("\n".join(parts) + "\n")
with open(os.path.join(out, "main.c"), "w") as f:
    f.write(f"{decls}\n#include <stdio.h>\nint main(int argc, char **argv) {{\n  unsigned s = 0;\n"
            f"  for (unsigned i = 0; i < 1000u; i++) s += f{0}(i) + f{nfuncs // 2}(i);\n"
            "  printf(\"%u\\n\", s);\n  return 0;\n}\n")

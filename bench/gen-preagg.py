#!/usr/bin/env python3
"""Generate a pre-aggregated perf2bolt profile of valid traces for a binary.

Usage: gen-preagg.py BINARY NRECORDS [HOT] > profile.pa
Reads `llvm-objdump -d` of BINARY and emits about NRECORDS records with the mix
T 55% / B 11% / F 11% / R 11% / S 11% (plus one `E cycles` line). Traces follow the
disassembly (taken branch to its target, fall-through to the next control-flow instruction),
so perf2bolt reports (almost) no mismatching traces. HOT > 0: records start only in that many
functions, picked at random (the rest of the binary stays cold). Deterministic (fixed seed).
"""
import bisect
import random
import subprocess
import sys

binary, n = sys.argv[1], int(sys.argv[2])
hot = int(sys.argv[3]) if len(sys.argv) > 3 else 0
rng = random.Random(4242)
objdump = "/usr/lib/llvm-22/bin/llvm-objdump"
text = subprocess.run([objdump, "-d", "--no-show-raw-insn", binary], check=True,
                      capture_output=True, text=True).stdout
funcs = []  # list of (start, [(addr, mnemonic, target)])
for line in text.splitlines():
    if line.endswith(">:") and not line.startswith(" "):
        funcs.append((int(line.split()[0], 16), []))
        continue
    t = line.strip()
    if ":" not in t or not funcs:
        continue
    a, _, rest = t.partition(":")
    try:
        addr = int(a, 16)
    except ValueError:
        continue
    parts = rest.split()
    if not parts:
        continue
    m = parts[0]
    target = None
    if (m.startswith("j") or m.startswith("call")) and len(parts) > 1 and parts[1].startswith("0x"):
        try:
            target = int(parts[1], 16)
        except ValueError:
            pass
    funcs[-1][1].append((addr, m, target))
funcs = [f for f in funcs if f[1]]
starts = [f[0] for f in funcs]


def is_cf(m):
    return m.startswith("j") or m.startswith("ret")


def ft_end(addr):
    fi = bisect.bisect_right(starts, addr) - 1
    insns = funcs[fi][1]
    i = bisect.bisect_left(insns, (addr,))
    while i < len(insns):
        if is_cf(insns[i][1]):
            return insns[i][0]
        i += 1
    return addr


profiled = funcs if hot <= 0 or hot >= len(funcs) else rng.sample(funcs, hot)
branches = [(a, t) for _, ins in profiled for (a, m, t) in ins if t is not None]
rets = [a for _, ins in profiled for (a, m, t) in ins if m.startswith("ret")]
after_calls = []
after_jcc = []
for _, ins in profiled:
    for k in range(len(ins) - 1):
        if ins[k][1].startswith("call"):
            after_calls.append(ins[k + 1][0])
        elif ins[k][1].startswith("j") and ins[k][1] != "jmp":
            after_jcc.append(ins[k + 1][0])
allins = [a for _, ins in profiled for (a, _, _) in ins]
out = sys.stdout
out.write("E cycles\n")
lines = []
for _ in range(n):
    r = rng.random()
    c = rng.randrange(1, 100)
    if r < 0.555:
        a, t = rng.choice(branches)
        lines.append(f"T {a:x} {t:x} {ft_end(t):x} {c}")
    elif r < 0.667:
        a, t = rng.choice(branches)
        lines.append(f"B {a:x} {t:x} {c} {rng.randrange(0, c)}")
    elif r < 0.778:
        f = rng.choice(after_jcc)
        lines.append(f"F {f:x} {ft_end(f):x} {c}")
    elif r < 0.889:
        f = rng.choice(after_calls)
        lines.append(f"R {rng.choice(rets):x} {f:x} {ft_end(f):x} {c}")
    else:
        lines.append(f"S {rng.choice(allins):x} {c}")
out.write("\n".join(lines) + "\n")

#!/usr/bin/env python3
"""Make examples/prog.preagg: a perf2bolt pre-aggregated branch profile of examples/prog, from a
control-flow trace recorded with qemu-user (this machine has no LBR).

    qemu-x86_64 -d in_asm,exec,nochain -D prog.qemu.log examples/prog 20000
    python3 examples/make-profile.py prog.qemu.log 0x201840 0x201bd0 > examples/prog.preagg

Every executed translation block ends at a branch or continues at the next address; a taken
branch is (last instruction of a block -> start of the next block) when the next block does not
start where the previous one ended. Consecutive taken branches give `T src dst ft_end count`
records (the fall-through runs from dst to the next branch source), perf2bolt's trace record.
Only branches with both ends inside [lo, hi) (the executable's code) are kept.
"""
import collections
import re
import sys

log, lo, hi = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16)
blocks = {}  # start -> (last instruction address, end address)
current = None
insns = []
trace = []
for line in open(log, errors="replace"):
    if line.startswith("IN:"):
        insns = []
        current = True
        continue
    m = re.match(r"0x([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)", line)
    if current and m:
        addr = int(m.group(1), 16)
        size = len(m.group(2).split())
        insns.append((addr, size))
        continue
    if current and insns and not line.strip():
        blocks[insns[0][0]] = (insns[-1][0], insns[-1][0] + insns[-1][1])
        current = None
        continue
    m = re.match(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", line)
    if m:
        trace.append(int(m.group(1), 16))

inside = lambda a: lo <= a < hi
branches = []  # (src, dst) of taken branches in execution order
for a, b in zip(trace, trace[1:]):
    if a not in blocks:
        continue
    last, end = blocks[a]
    if b != end:
        branches.append((last, b))
counts = collections.Counter()
for (s1, d1), (s2, _) in zip(branches, branches[1:]):
    if inside(s1) and inside(d1) and inside(s2) and d1 <= s2:
        counts[(s1, d1, s2)] += 1
for (s, d, e), n in sorted(counts.items()):
    print(f"T {s:x} {d:x} {e:x} {n}")

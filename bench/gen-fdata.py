#!/usr/bin/env python3
"""Write N fdata files of R branch records each, as a fleet of hosts running one binary would
produce: functions and branch sites drawn from one shared code base (5 % of records enter from
unknown code), so shards overlap and the merge sums many duplicates.

Usage: gen-fdata.py OUTDIR N R [FUNCTIONS]"""
import os
import random
import sys

out, n, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
nfuncs = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
os.makedirs(out, exist_ok=True)
names = [f"func_{i:05d}" for i in range(nfuncs)]
for s in range(n):
    rnd = random.Random(s)
    recs = {}
    while len(recs) < r:
        f = rnd.randrange(nfuncs)
        # Hot functions are hotter: skew towards low indices.
        f = int(f * rnd.random())
        frm = rnd.randrange(0, 0x400, 2)
        if rnd.random() < 0.05:
            key = ("0 [unknown] 0", f"1 {names[f]} 0")
        else:
            g = f if rnd.random() < 0.8 else int(rnd.randrange(nfuncs) * rnd.random())
            key = (f"1 {names[f]} {frm:x}", f"1 {names[g]} {rnd.randrange(0, 0x400, 2):x}")
        recs[key] = (rnd.randrange(0, 3), rnd.randrange(1, 1000))
    with open(os.path.join(out, f"host{s:04d}.fdata"), "w") as fh:
        for (a, b), (m, c) in recs.items():
            fh.write(f"{a} {b} {m} {c}\n")

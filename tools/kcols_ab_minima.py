#!/usr/bin/env python3
"""Minima over alternated rounds of `kcols` runs, base against branch (docs/BENCHMARKS.md,
session 7). Input: lines `base|branch <kcols line>`, `#` lines ignored; prints a Markdown
table of us per call (n = 1, 4) and each side's n4/n1 from its own minima, and with a second
argument writes the same as JSON. Usage: kcols_ab_minima.py RAW.txt [OUT.json]"""
import re, sys, json, collections
best = collections.defaultdict(lambda: float("inf"))
for line in open(sys.argv[1]):
    if line.startswith("#"): continue
    parts = line.split("|"); h = parts[0].split()
    side, fmt, shape, thr = h[0], h[1], h[2], int(h[3])
    for p in parts[1:]:
        m = re.search(r"n=(\d+): min\s+([\d.]+)", p)
        if m:
            k = (side, fmt, shape, thr, int(m.group(1)))
            best[k] = min(best[k], float(m.group(2)))
order = ["ROCMFP2", "ROCMFP3", "TQ2_0", "PQ2_0", "Q4_0", "Q4_K", "Q6_K", "Q8_0"]
print("| format | shape | thr | base n=1 | branch n=1 | base n=4 | branch n=4 | base n4/n1 | branch n4/n1 |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
rows = []
for f in order:
    for s in ["4096x14336", "14336x4096"]:
        for t in [1, 2]:
            try:
                b1, b4 = best[("base", f, s, t, 1)], best[("base", f, s, t, 4)]
                n1, n4 = best[("branch", f, s, t, 1)], best[("branch", f, s, t, 4)]
            except KeyError:
                continue
            if b1 == float("inf") or n1 == float("inf"): continue
            mk = "**" if n4 / n1 <= 1.5 else ""
            print(f"| {f} | {s} | {t} | {b1:.0f} | {n1:.0f} | {b4:.0f} | {n4:.0f} | {b4/b1:.2f} | {mk}{n4/n1:.2f}{mk} |")
            rows.append(dict(format=f, shape=s, threads=t, base_us={"1": b1, "4": b4}, branch_us={"1": n1, "4": n4}))
if len(sys.argv) > 2:
    json.dump({"what": "kcols minima (us per call) over alternated rounds, base vs branch", "rows": rows}, open(sys.argv[2], "w"), indent=1)

#!/usr/bin/env python3
"""Minimum over rounds of `lowbit bench --json` reports, base against branch: us per call for
n = 1 and n = 4 and the n4/n1 ratio of each side (each side's minima). Usage:
tools/bench_ab_minima.py "BASE*.json" "BRANCH*.json" (docs/BENCHMARKS.md, session 7)"""
import glob, json, sys, collections

def minima(pattern):
    best = collections.defaultdict(lambda: float("inf"))
    files = sorted(glob.glob(pattern))
    for f in files:
        for m in json.load(open(f))["matmul"]:
            key = (m["format"], f'{m["rows"]}x{m["k"]}', m["threads"], m["n"])
            best[key] = min(best[key], m["us_per_call"])
    return best, len(files)

base, nb = minima(sys.argv[1])
new, nn = minima(sys.argv[2])
print(f"rounds: base {nb}, branch {nn}")
print("| format | shape | thr | base n=1 | branch n=1 | base n=4 | branch n=4 | base n4/n1 | branch n4/n1 |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
keys = sorted({k[:3] for k in base}, key=lambda k: (k[0], k[1], k[2]))
order = ["ROCMFP2", "ROCMFP3", "TQ2_0", "PQ2_0", "Q4_0", "Q4_K", "Q6_K", "Q8_0"]
keys.sort(key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1] != "4096x14336", k[2]))
for f, s, t in keys:
    b1, b4 = base[(f, s, t, 1)], base[(f, s, t, 4)]
    n1, n4 = new[(f, s, t, 1)], new[(f, s, t, 4)]
    mark = "**" if n4 / n1 <= 1.5 else ""
    print(f"| {f} | {s} | {t} | {b1:.0f} | {n1:.0f} | {b4:.0f} | {n4:.0f} | {b4/b1:.2f} | {mark}{n4/n1:.2f}{mark} |")

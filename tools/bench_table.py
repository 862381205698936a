#!/usr/bin/env python3
"""Markdown table of a `lowbit bench --json` report (one shape, n = 1 and 4, threads 1 and 2)
for docs/BENCHMARKS.md: per format the n = 1 time at 1 and 2 threads, the ratio to the read
bandwidth measured in the same run, n = 4 / n = 1 (2 threads), llama.cpp's issue-3 figure
(measured on the previous machine; n = 1, 2 threads) and whether ours is 1.25x faster, and
optionally the cache-resident compute rates from a kprobe log (n = 1: GB/s of weights per
core; n = 4: ns per KB of weights).

usage: tools/bench_table.py REPORT.json [KPROBE.txt]
"""

import json
import re
import sys

# Issue 3's llama.cpp figures: 2 threads, 4096x14336, n = 1, microseconds (Skylake-X VM).
LLAMA = {
    "F16": 2581, "Q8_0": 1283, "Q4_0": 1269, "Q4_1": 2003, "MXFP4": 1165, "IQ4_NL": 1236,
    "Q4_K": 818, "Q6_K": 1078, "Q2_K": 576, "TQ2_0": 420, "IQ2_XXS": 1578, "IQ2_S": 1485,
}
# Issue 3's formats with the >= 0.85 bandwidth target.
BW_TARGET = {"ROCMFP2", "ROCMFP3", "HFP4G32", "MFP4G32", "MFP4G32P", "TQ1_0", "TQ2_0",
             "PQ2_0", "PTQ1_0", "Q8_0", "Q4_0", "Q4_K", "Q6_K"}


nan = float("nan")


def main():
    rep = json.load(open(sys.argv[1]))
    probe = {}
    if len(sys.argv) > 2:
        for line in open(sys.argv[2]):
            m = re.match(r"(\S+)\s+n=\s*([0-9]+):.*marginal ([0-9.]+) GB/s \(([0-9.]+) ns/KB", line)
            if m:
                probe[(m.group(1), int(m.group(2)))] = (float(m.group(3)), float(m.group(4)))
    rows = {}
    for r in rep["matmul"]:
        rows[(r["format"], r["n"], r["threads"])] = r
    formats = []
    for r in rep["matmul"]:
        if r["format"] not in formats:
            formats.append(r["format"])
    print("| format | n=1 1 thr, us | n=1 2 thr, us | ratio (2 thr) | n=4/n=1 (2 thr) "
          "| llama.cpp, us | 1.25x faster | cached n=1 GB/s/core | cached n=4 ns/KB |")
    print("|---|--:|--:|--:|--:|--:|---|--:|--:|")
    for f in formats:
        a = rows.get((f, 1, 1))
        b = rows.get((f, 1, 2))
        c = rows.get((f, 4, 2))
        if not (a and b and c):
            continue
        ll = LLAMA.get(f)
        fast = "-" if ll is None else ("yes" if b["us_per_call"] * 1.25 <= ll else "no")
        mark = "**" if f in BW_TARGET else ""
        print(f"| {mark}{f}{mark} | {a['us_per_call']:.0f} | {b['us_per_call']:.0f} "
              f"| {b['ratio_to_bandwidth']:.2f} | {c['us_per_call'] / b['us_per_call']:.2f} "
              f"| {ll if ll else '-'} | {fast} | {probe.get((f, 1), (nan, nan))[0]:.1f} "
              f"| {probe.get((f, 4), (nan, nan))[1]:.0f} |")


if __name__ == "__main__":
    main()

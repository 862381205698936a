#!/usr/bin/env python3
"""Stall summary of one kernel's SASS from an Nsight Compute source page.

Input: the CSV of `ncu --import REPORT.ncu-rep --page source --print-source sass --csv`
(a report taken with `--section SourceCounters --section WarpStateStats`). Prints the warp
stall samples per reason over the whole kernel, then the instructions with the most samples
(address tail, samples, times executed, the instruction, its two largest reasons).

Usage: tools/ncu_sass_stalls.py SASS.csv [TOP]   (TOP = 25 by default)
Used for docs/BENCHMARKS.md, session 11 (hip); the CSVs are in
docs/bench/hip-h200-2026-12-02-s11-ncu-sass.tar.xz.
"""
import collections
import csv
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = list(csv.reader(open(path, newline="")))
    # Row 0 names the kernel, row 1 is the header.
    hdr, data = rows[1], rows[2:]
    ix = {h: i for i, h in enumerate(hdr)}
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, col):
        v = r[ix[col]]
        return int(v) if v.isdigit() else 0

    total = collections.Counter()
    for r in data:
        for s in reasons:
            total[s] += num(r, s)
    n = sum(total.values())
    print(f"{rows[0][1] if len(rows[0]) > 1 else path}: {n} stall samples")
    for s, v in total.most_common(8):
        print(f"  {s:28s} {v:7d} {100 * v / max(n, 1):5.1f}%")
    key = "Warp Stall Sampling (All Samples)"
    for r in sorted(data, key=lambda r: -num(r, key))[:top]:
        two = sorted(((num(r, s), s) for s in reasons), reverse=True)[:2]
        print(
            r[ix["Address"]][-4:],
            str(num(r, key)).rjust(6),
            r[ix["Instructions Executed"]].rjust(8),
            r[ix["Source"]].strip()[:60].ljust(60),
            two,
        )


if __name__ == "__main__":
    main()

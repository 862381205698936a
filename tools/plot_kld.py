#!/usr/bin/env python3
"""Plots mean KL divergence against bits per weight as a standalone SVG (no plotting library).

Usage: plot_kld.py RESULTS.json OUT.svg [TITLE]

RESULTS.json is a list of points: {"label": str, "bpw": float, "kld": float, "series": str}.
Points of one series share a colour and are joined in bpw order; the y axis is logarithmic
(KLD spans orders of magnitude). Deterministic output: the same input gives the same bytes.
"""
import json
import math
import sys
from xml.sax.saxutils import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
W, H = 760, 460
L, R, T, B = 70, 190, 40, 55


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        pts = [p for p in json.load(f) if p["kld"] > 0 and math.isfinite(p["kld"])]
    title = sys.argv[3] if len(sys.argv) == 4 else "Mean KL divergence against bits per weight"
    if not pts:
        print("no points with a positive finite KLD")
        return 1
    xs = [p["bpw"] for p in pts]
    ys = [math.log10(p["kld"]) for p in pts]
    x0, x1 = math.floor(min(xs)) - 0.25, math.ceil(max(xs)) + 0.25
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))
    if y1 == y0:
        y1 += 1

    def px(x):
        return L + (x - x0) / (x1 - x0) * (W - L - R)

    def py(ly):
        return T + (y1 - ly) / (y1 - y0) * (H - T - B)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2:.1f}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    # Grid and axes.
    for e in range(y0, y1 + 1):
        y = py(e)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
        if e < y1:
            for m in range(2, 10):
                ym = py(e + math.log10(m))
                out.append(
                    f'<line x1="{L}" y1="{ym:.1f}" x2="{L + 5}" y2="{ym:.1f}" stroke="#999"/>'
                )
    x = math.ceil(x0 * 2) / 2
    while x <= x1 + 1e-9:
        xx = px(x)
        out.append(f'<line x1="{xx:.1f}" y1="{T}" x2="{xx:.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{xx:.1f}" y="{H - B + 16}" text-anchor="middle">{x:g}</text>')
        x += 0.5
    out.append(
        f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" '
        f'stroke="#333"/>'
    )
    out.append(
        f'<text x="{(L + W - R) / 2:.1f}" y="{H - 12}" text-anchor="middle">bits per weight</text>'
    )
    out.append(
        f'<text transform="translate(18 {(T + H - B) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">mean KLD (nats, log scale)</text>'
    )
    # Series.
    series = []
    for p in pts:
        if p["series"] not in series:
            series.append(p["series"])
    for i, s in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        sp = sorted((p for p in pts if p["series"] == s), key=lambda p: p["bpw"])
        if len(sp) > 1:
            path = " ".join(f'{px(p["bpw"]):.1f},{py(math.log10(p["kld"])):.1f}' for p in sp)
            out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="1.5"/>')
        for p in sp:
            cx, cy = px(p["bpw"]), py(math.log10(p["kld"]))
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{c}"/>')
            out.append(
                f'<text x="{cx + 6:.1f}" y="{cy - 6:.1f}" font-size="10" fill="{c}">'
                f'{escape(p["label"])}</text>'
            )
        ly = T + 14 + 18 * i
        out.append(f'<circle cx="{W - R + 16}" cy="{ly - 4}" r="4" fill="{c}"/>')
        out.append(f'<text x="{W - R + 26}" y="{ly}">{escape(s)}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns tools/quality_sweep.sh's output into the docs' tables and the KLD-vs-bpw plot.

Usage: quality_table.py OUTDIR [SVG [FULL.json]]

Reads OUTDIR/kld.json (from `lowbit kld --json`) and OUTDIR/models.tsv (file, bytes, bpw) and
prints two Markdown tables: the built-in recipes (file size, bpw, perplexity, mean KLD against
the base, same-top-token %) and the ffn_down sweep (format, encoder, imatrix, bpw of ffn_down,
mean KLD). With SVG, also writes the plot (tools/plot_kld.py) of KLD against the whole file's
bpw, with llama.cpp's sweep figures from issue 5 as a second series for comparison (those are
plotted at their formats' nominal bpw, since only the format of ffn_down changes). FULL.json
(optional: `lowbit kld --json` over the whole text, models named as in OUTDIR) adds a table and a
series of those whole-text figures, the ones comparable with llama.cpp's.
"""
import json
import os
import subprocess
import sys

# Nominal bits per weight of each format (block bytes x 8 / block elements; HFP4/MFP4 add their
# 16-byte row header at K = 1536: 128 / 1536).
NOMINAL = {
    "ROCMFP2": 2.5, "ROCMFP3": 3.5, "HFP4G32": 4.25 + 128 / 1536, "MFP4G32": 4.25 + 128 / 1536,
    "PQ2_0": 2.125, "Q4_0": 4.5, "MXFP4": 4.25, "Q8_0": 8.5,
}
# llama.cpp's sweep on this model and text, from issue 5 (KLD against the F32 base, c = 512).
LLAMA_CPP = [
    ("IQ4_NL+imatrix", 4.5, 0.029), ("Q4_0+imatrix", 4.5, 0.068), ("MXFP4", 4.25, 0.187),
    ("IQ2_S+imatrix", 2.5625, 0.291), ("Q2_K+imatrix", 2.625, 0.303),
    ("IQ2_XS+imatrix", 2.3125, 0.368), ("IQ2_XXS+imatrix", 2.0625, 0.495), ("Q2_K", 2.625, 1.56),
]


def main():
    if len(sys.argv) not in (2, 3, 4):
        print(__doc__)
        return 2
    out = sys.argv[1]
    with open(os.path.join(out, "kld.json")) as f:
        klds = {os.path.basename(r["model"]): r for r in json.load(f)}
    sizes = {}
    with open(os.path.join(out, "models.tsv")) as f:
        for line in f:
            path, size, bpw = line.rstrip("\n").split("\t")
            sizes[os.path.basename(path)] = (int(size), float(bpw))
    any_r = next(iter(klds.values()))
    print(f"base PPL {any_r['ppl_base']:.4f}; {any_r['chunks']} chunks of {any_r['n_ctx']} tokens, "
          f"{any_r['positions']} positions scored\n")
    print("| recipe | file MiB | bpw | PPL | PPL ratio | mean KLD | same top % |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    points = []
    for name, r in sorted(klds.items()):
        if not name.startswith("recipe-"):
            continue
        size, bpw = sizes[name]
        label = name[len("recipe-"):-len(".gguf")]
        print(f"| `{label}` | {size / 2**20:.1f} | {bpw:.3f} | {r['ppl_model']:.4f} | "
              f"{r['ppl_ratio']:.4f} | {r['mean_kld']:.4f} ± {r['kld_stderr']:.4f} | "
              f"{r['same_top_percent']:.2f} |")
        points.append({"label": label, "bpw": bpw, "kld": r["mean_kld"],
                       "series": "lowbit built-in recipes (whole file)"})
    print()
    print("| ffn_down format | encoder | imatrix | ffn_down bpw | PPL | mean KLD | same top % |")
    print("|---|---|---|--:|--:|--:|--:|")
    rows = []
    for name, r in klds.items():
        if not name.startswith("sweep-"):
            continue
        parts = name[len("sweep-"):-len(".gguf")].split("-")
        fmt, enc, imat = parts[0], parts[1], len(parts) > 2
        rows.append((NOMINAL.get(fmt, 0), fmt, enc, imat, r))
    for bpw, fmt, enc, imat, r in sorted(rows, key=lambda t: (t[0], t[1], t[2], t[3])):
        print(f"| {fmt} | {enc} | {'yes' if imat else 'no'} | {bpw:.3f} | {r['ppl_model']:.4f} | "
              f"{r['mean_kld']:.4f} ± {r['kld_stderr']:.4f} | {r['same_top_percent']:.2f} |")
        if fmt != "Q8_0":
            label = fmt + ("+imat" if imat else "") + ("" if enc == "reference" else f" ({enc})")
            points.append({"label": label, "bpw": bpw, "kld": r["mean_kld"],
                           "series": "lowbit ffn_down sweep (format's bpw)"})
    if len(sys.argv) == 4:
        with open(sys.argv[3]) as f:
            full = json.load(f)
        r0 = full[0]
        print(f"\nwhole text: base PPL {r0['ppl_base']:.4f}; {r0['chunks']} chunks of "
              f"{r0['n_ctx']} tokens, {r0['positions']} positions scored\n")
        print("| model | bpw | PPL | mean KLD | same top % |")
        print("|---|--:|--:|--:|--:|")
        for r in full:
            name = os.path.basename(r["model"])[:-len(".gguf")]
            if name.startswith("recipe-"):
                bpw = sizes[name + ".gguf"][1]
                label = name[len("recipe-"):]
            else:
                parts = name[len("sweep-"):].split("-")
                bpw = NOMINAL.get(parts[0], 0)
                label = parts[0] + ("+imat" if len(parts) > 2 else "") + (
                    "" if parts[1] == "reference" else f" ({parts[1]})")
            print(f"| {label} | {bpw:.3f} | {r['ppl_model']:.4f} | "
                  f"{r['mean_kld']:.4f} ± {r['kld_stderr']:.4f} | {r['same_top_percent']:.2f} |")
            points.append({"label": label, "bpw": bpw, "kld": r["mean_kld"],
                           "series": "lowbit, whole text (27 chunks)"})
    for label, bpw, kld in LLAMA_CPP:
        points.append({"label": label, "bpw": bpw, "kld": kld,
                       "series": "llama.cpp ffn_down sweep (issue 5)"})
    if len(sys.argv) >= 3:
        pts = os.path.join(out, "points.json")
        with open(pts, "w") as f:
            json.dump(points, f, indent=1)
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "plot_kld.py"), pts, sys.argv[2],
                        "SmolLM2-135M-Instruct: mean KL divergence against bits per weight"],
                       check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# How much lowbit's improved encoders lower the tensor error against the public (hipfire- and
# Prism-compatible, and ggml) encoders of the same formats, on a real model's tensors.
#
#   tools/encoder_compare.sh MODEL.gguf [OUTDIR]
#
# For each (format, tensors) pair below, quantizes MODEL with a one-rule recipe (those tensors
# in that format, everything else left F32) once with encoder = "reference" and once with
# "improved", runs `lowbit eval-tensors --json`, and prints a Markdown table: over the tensors in
# the format, the element-weighted RMS of their NRMSE (sqrt(sum n_t NRMSE_t^2 / sum n_t)) for
# each encoder, and the change. Needs python3 (standard library only) for the table.
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
out="${2:-target/encoder-compare}"
mkdir -p "$out"
cargo build --release -q -p lowbit-runtime --bin lowbit
lowbit="$PWD/target/release/lowbit"

# name | format | tensor glob
variants=(
    "hfp4-all|HFP4G32|blk.*.weight"
    "mfp4-down|MFP4G32|blk.*.ffn_down.weight"
    "pq2_0-down|PQ2_0|blk.*.ffn_down.weight"
    "ptq1_0-down|PTQ1_0|blk.*.ffn_down.weight"
    "tq2_0-down|TQ2_0|blk.*.ffn_down.weight"
    "tq1_0-down|TQ1_0|blk.*.ffn_down.weight"
)
for v in "${variants[@]}"; do
    IFS='|' read -r name format glob <<<"$v"
    for enc in reference improved; do
        toml="$out/$name-$enc.toml"
        printf 'name = "%s-%s"\n[[rule]]\nmatch = "%s"\nformat = "%s"\nencoder = "%s"\n' \
            "$name" "$enc" "$glob" "$format" "$enc" >"$toml"
        start=$SECONDS
        "$lowbit" quantize "$model" "$out/$name-$enc.gguf" --recipe "$toml" >/dev/null
        "$lowbit" eval-tensors "$model" "$out/$name-$enc.gguf" --json "$out/$name-$enc.json" \
            >/dev/null
        echo "$name $enc: $((SECONDS - start)) s" >&2
        rm -f "$out/$name-$enc.gguf"
    done
done

python3 - "$out" "${variants[@]}" <<'PY'
import json, math, sys
out, variants = sys.argv[1], sys.argv[2:]
print("| format | tensors | elements | NRMSE reference | NRMSE improved | change |")
print("|---|---|--:|--:|--:|--:|")
for v in variants:
    name, fmt, glob = v.split("|")
    row = {}
    for enc in ("reference", "improved"):
        with open(f"{out}/{name}-{enc}.json") as f:
            r = json.load(f)
        ts = [t for t in r["tensors"] if t["format"] == fmt]
        n = sum(t["elements"] for t in ts)
        pooled = math.sqrt(sum(t["nrmse"] ** 2 * t["elements"] for t in ts) / n)
        row[enc] = (pooled, n, len(ts))
    (a, n, k), (b, _, _) = row["reference"], row["improved"]
    print(f"| {fmt} | `{glob}` ({k}) | {n:,} | {a:.5f} | {b:.5f} | {100 * (b - a) / a:+.1f}% |")
PY

#!/usr/bin/env bash
# End-to-end check on a real model: SmolLM2-135M-Instruct quantized with every built-in recipe.
#
#   tools/smollm2_e2e.sh MODEL.gguf PYTHON [OUTDIR]
#
# MODEL.gguf and PYTHON (a Python with gguf-py) come from tools/fetch_smollm2.sh. Builds the
# release `lowbit`, then for each built-in recipe:
#   1. `lowbit quantize MODEL OUT --recipe R` (the summary lists fallbacks and peak memory);
#   2. `lowbit inspect OUT`, which re-reads the file under its recorded dialect;
#   3. `lowbit dequantize OUT DEC` (every tensor decoded by lowbit to F32) and
#      `lowbit eval-tensors MODEL OUT` (per-tensor NRMSE against the source);
#   4. for recipes made only of ggml types (q4_0, q8_0), tools/check_gguf_decode.py: PyPI gguf's
#      GGUFReader reads OUT and its dequantize must equal lowbit's decode bit for bit.
# Exits non-zero at the first failure. OUTDIR defaults to target/smollm2-e2e.
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
python="$2"
out="${3:-target/smollm2-e2e}"
mkdir -p "$out"

cargo build --release -q -p lowbit-runtime --bin lowbit
lowbit=target/release/lowbit

for recipe in fpx-ifp2 hfp4 mfp4 ternary q4_0 q8_0; do
    printf '\n--- recipe %s\n' "$recipe"
    q="$out/smollm2.$recipe.gguf"
    d="$out/smollm2.$recipe.f32.gguf"
    start=$SECONDS
    "$lowbit" quantize "$model" "$q" --recipe "$recipe" | tail -n 20
    echo "quantize: $((SECONDS - start)) s"
    "$lowbit" inspect "$q" | tail -n 3
    "$lowbit" dequantize "$q" "$d"
    "$lowbit" eval-tensors "$model" "$q" | tail -n 4
    case "$recipe" in
        q4_0 | q8_0) "$python" tools/check_gguf_decode.py "$q" "$d" ;;
    esac
    rm -f "$d"
done
printf '\nSmolLM2 end to end: every built-in recipe quantized, read back and checked\n'

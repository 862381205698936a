#!/usr/bin/env bash
# Model-level quality on SmolLM2-135M-Instruct: perplexity and KL divergence against the F32
# base for every built-in recipe, and the controlled sweep of issue 5 (every tensor Q8_0 except
# ffn_down, which is in the format under test), with and without an importance matrix. The
# recipes fpx-ifp2, hfp4 and ternary run once more with the importance matrix (recipe-NAME-imat).
#
#   tools/quality_sweep.sh MODEL.gguf TEXT [CHUNKS] [OUTDIR]
#
# MODEL.gguf: the distributed SmolLM2 (Q4_1); the base is its exact F32 expansion
# (`lowbit dequantize`). TEXT: tools/eval_text.sh's license texts. CHUNKS: chunks of 512 tokens
# to score (default: all). The imatrix is computed by `lowbit imatrix` on the base over the same
# text and chunks, with the input covariance of every ffn_down (`--covariance`) for the gptq
# encoder's sweep entries. CALIB (environment, optional): compute the imatrix on this text
# instead (all of it, up to CALIB_CHUNKS chunks, default 36), so that no scored chunk is in the
# calibration set. Writes OUTDIR/kld.json (one object per model), OUTDIR/models.tsv (name, file,
# bytes, bpw of the weights) and prints both; tools/quality_table.py turns them into the docs'
# table and plot.
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
text="$2"
chunks="${3:-}"
out="${4:-target/quality}"
mkdir -p "$out"
cargo build --release -q -p lowbit-runtime --bin lowbit
lowbit="$PWD/target/release/lowbit"
chunk_args=()
[ -n "$chunks" ] && chunk_args=(--chunks "$chunks")

base="$out/base.f32.gguf"
[ -f "$base" ] || "$lowbit" dequantize "$model" "$base"
imat="$out/imatrix.gguf"
if ! [ -f "$imat" ]; then
    if [ -n "${CALIB:-}" ]; then
        "$lowbit" imatrix -m "$base" -f "$CALIB" -o "$imat" --chunks "${CALIB_CHUNKS:-36}" \
            --covariance 'blk.*.ffn_down.weight'
    else
        "$lowbit" imatrix -m "$base" -f "$text" -o "$imat" "${chunk_args[@]}" \
            --covariance 'blk.*.ffn_down.weight'
    fi
fi

sweep() { # name format encoder use_imatrix
    local toml="$out/$1.toml"
    printf 'name = "%s"\n[[rule]]\nmatch = "blk.*.ffn_down.weight"\nformat = "%s"\nencoder = "%s"\n[[rule]]\nmatch = "*"\nformat = "Q8_0"\n' \
        "$1" "$2" "$3" >"$toml"
    local extra=()
    [ "$4" = 1 ] && extra=(--imatrix "$imat")
    [ -f "$out/$1.gguf" ] || "$lowbit" quantize "$model" "$out/$1.gguf" --recipe "$toml" \
        "${extra[@]}" | tail -n 4
}
models=()
for r in fpx-ifp2 hfp4 mfp4 ternary q4_0 q8_0; do
    [ -f "$out/recipe-$r.gguf" ] || "$lowbit" quantize "$model" "$out/recipe-$r.gguf" --recipe "$r" \
        | tail -n 4
    models+=("$out/recipe-$r.gguf")
done
# The recipes whose encoders take the importance matrix, once more with it.
for r in fpx-ifp2 hfp4 ternary; do
    [ -f "$out/recipe-$r-imat.gguf" ] || "$lowbit" quantize "$model" "$out/recipe-$r-imat.gguf" \
        --recipe "$r" --imatrix "$imat" | tail -n 4
    models+=("$out/recipe-$r-imat.gguf")
done
for v in "ROCMFP2 reference" "ROCMFP3 reference" "HFP4G32 reference" "HFP4G32 improved" \
    "MFP4G32 improved" "PQ2_0 improved" "Q4_0 reference" "MXFP4 reference" "Q8_0 reference"; do
    read -r f e <<<"$v"
    sweep "sweep-$f-$e" "$f" "$e" 0
    models+=("$out/sweep-$f-$e.gguf")
done
for v in "ROCMFP2 reference" "ROCMFP3 reference" "HFP4G32 improved" "MFP4G32 improved" \
    "PQ2_0 improved" "ROCMFP2 gptq" "ROCMFP3 gptq" "HFP4G32 gptq" "MFP4G32 gptq"; do
    read -r f e <<<"$v"
    sweep "sweep-$f-$e-imat" "$f" "$e" 1
    models+=("$out/sweep-$f-$e-imat.gguf")
done

: >"$out/models.tsv"
for m in "${models[@]}"; do
    "$lowbit" inspect "$m" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
t = r.get("totals", r.get("total", {}))
print(sys.argv[1], t.get("bytes"), t.get("bpw"), sep="\t")' "$m" >>"$out/models.tsv"
done
cat "$out/models.tsv"
margs=()
for m in "${models[@]}"; do margs+=(-m "$m"); done
"$lowbit" kld --base "$base" "${margs[@]}" -f "$text" "${chunk_args[@]}" --json "$out/kld.json"

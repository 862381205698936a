#!/usr/bin/env bash
# Whole-model speed on SmolLM2-135M-Instruct, as issue 5 compares it with llama.cpp's
# llama-bench (pp128 / tg64, 2 threads): the distributed Q4_1 file and lowbit's requantizations
# of it to Q4_0 and Q8_0 (`lowbit quantize --recipe q4_0|q8_0`; llama.cpp's own requantized
# files put Q6_K on the tied embedding, which lowbit cannot encode yet, so the files differ in
# that one tensor: see docs/BENCHMARKS.md).
#
#   tools/speed_table.sh MODEL.gguf [THREADS] [OUTDIR]
#
# Writes OUTDIR/speed.json (lowbit speed's JSON) and prints the table and, per file, the decode
# breakdown (lowbit speed --profile).
set -euo pipefail
cd "$(dirname "$0")/.."
model="$1"
threads="${2:-2}"
out="${3:-target/speed}"
mkdir -p "$out"
cargo build --release -q -p lowbit-runtime --bin lowbit
lowbit="$PWD/target/release/lowbit"
for r in q4_0 q8_0; do
    f="$out/smollm2.$r.gguf"
    [ -f "$f" ] || "$lowbit" quantize "$model" "$f" --recipe "$r" >/dev/null
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$lowbit" speed -m "$model" -m "$out/smollm2.q4_0.gguf" -m "$out/smollm2.q8_0.gguf" \
    -t "$threads" -p 128 -n 64 -r 5 --profile --json "$out/speed.json"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

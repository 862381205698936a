#!/usr/bin/env bash
# Builds tools/lcpp_mulmat.c against a llama.cpp build and times llama.cpp's CPU mat-vec for
# issue 3's comparison formats, weights from memory (see the C file).
#
# Usage: tools/lcpp_mulmat.sh LLAMA_SRC LLAMA_BUILD [THREADS] [ROUNDS] [TYPES...]
#   LLAMA_SRC:   a llama.cpp source tree (e.g. the one vendored in llama-cpp-python's source
#                package: vendor/llama.cpp), for the ggml headers;
#   LLAMA_BUILD: its CMake build directory (bin/libggml*.so), built with -DGGML_NATIVE=ON.
# Prints one line per type (see tools/lcpp_mulmat.c).
set -euo pipefail
src=$1 build=$2 threads=${3:-2} rounds=${4:-3}
shift $(( $# < 4 ? $# : 4 ))
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(f16 q8_0 q4_0 q4_1 mxfp4 iq4_nl q4_K q6_K q2_K tq2_0 iq2_xxs iq2_s)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -O2 -o "$out/lcpp_mulmat" "$(dirname "$0")/lcpp_mulmat.c" \
  -I"$src/ggml/include" -L"$build/bin" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$build/bin"
for t in "${types[@]}"; do
  "$out/lcpp_mulmat" "$t" 4096 14336 "$threads" "$rounds"
done

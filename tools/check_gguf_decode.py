#!/usr/bin/env python3
"""Independent check of a quantized GGUF written by lowbit, with gguf-py as the oracle.

Usage: check_gguf_decode.py QUANTIZED.gguf DECODED.gguf

QUANTIZED.gguf is `lowbit quantize` output; DECODED.gguf is `lowbit dequantize QUANTIZED.gguf`
output (every tensor decoded by lowbit to F32, same names and shapes). For every tensor, gguf-py's
GGUFReader reads QUANTIZED.gguf and `gguf.quants.dequantize` decodes it; the result must equal
lowbit's F32 decode bit for bit (NaN == NaN). Also checks that both files list the same tensors
with the same shapes. Exits 1 with the first mismatches listed, 0 when every tensor agrees.

Only ggml's own types can be checked (gguf-py knows no fork types): a tensor of any other type is
an error here, so run it only on files made by recipes of ggml types.
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def tensors(path):
    r = GGUFReader(path)
    return {t.name: t for t in r.tensors}


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    q = tensors(sys.argv[1])
    d = tensors(sys.argv[2])
    bad = []
    if sorted(q) != sorted(d):
        bad.append(f"tensor names differ: {sorted(set(q) ^ set(d))[:8]}")
    checked = 0
    types = {}
    for name, tq in q.items():
        td = d.get(name)
        if td is None:
            continue
        if list(tq.shape) != list(td.shape):
            bad.append(f"{name}: shape {list(tq.shape)} vs {list(td.shape)}")
            continue
        ours = np.asarray(td.data, dtype=np.float32).reshape(-1)
        theirs = np.asarray(dequantize(tq.data, tq.tensor_type), dtype=np.float32).reshape(-1)
        if ours.shape != theirs.shape:
            bad.append(f"{name}: {ours.size} vs {theirs.size} values")
            continue
        same = (ours.view(np.uint32) == theirs.view(np.uint32)) | (np.isnan(ours) & np.isnan(theirs))
        if not same.all():
            i = int(np.argmin(same))
            bad.append(f"{name} ({tq.tensor_type.name}): element {i}: lowbit {ours[i]!r} gguf-py {theirs[i]!r}"
                       f" ({int((~same).sum())} of {same.size} differ)")
        checked += 1
        types[tq.tensor_type.name] = types.get(tq.tensor_type.name, 0) + 1
    for b in bad[:20]:
        print("MISMATCH", b)
    summary = ", ".join(f"{k} x{v}" for k, v in sorted(types.items()))
    print(f"{sys.argv[1]}: {checked} tensors checked ({summary}); {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

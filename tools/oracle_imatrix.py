#!/usr/bin/env python3
"""Oracle fixtures for llama.cpp importance matrices (legacy .dat and GGUF layouts).

Written from the layouts in the public sources (facts only):
  * ggml-org/llama.cpp tools/imatrix/imatrix.cpp: save_imatrix_legacy (int32 n_entries; per
    entry int32 name length, name bytes, int32 ncall, int32 nval, nval f32 values stored as
    (sum x^2 / count) * ncall; trailer int32 last chunk, int32 dataset length, dataset bytes) and
    save_imatrix (GGUF: general.type = "imatrix", imatrix.datasets [str], imatrix.chunk_count
    u32, imatrix.chunk_size u32; per weight W an F32 tensor W.in_sum2 of ggml dims
    [row length, n_mat] and W.counts of dims [1, n_mat]).
  * ggml-org/llama.cpp tools/quantize/quantize.cpp load_legacy_imatrix / load_imatrix (how the
    quantizer turns them into weights: legacy values / ncall when ncall > 0; GGUF in_sum2 / count
    per matrix, 1 where the count is 0).

The GGUF file is written with PyPI gguf's GGUFWriter and read back with its GGUFReader, which
also produces gguf_parts.json (tensor names, dims, values, metadata) so the Rust interpretation
can be tested without lowbit's GGUF reader.

Writes tests/fixtures/imatrix/:
  legacy.dat, legacy_expected.json      entries with ncall > 0 and = 0, a 4-expert entry, trailer
  legacy_notrailer.dat                  the oldest layout (no trailer), expected = first entry
  imatrix.gguf, gguf_parts.json, gguf_expected.json
Deterministic (fixed seed).

    /work/venv/bin/python tools/oracle_imatrix.py
"""
import json
import os
import struct

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "imatrix")
F32 = np.float32


def mean_sq(rng, n):
    """Plausible means of squared activations: log-normal, a few outlier channels."""
    v = np.exp(rng.normal(-2.0, 1.0, n)).astype(F32)
    v[rng.random(n) < 0.05] *= F32(50.0)
    return v.astype(F32)


def write_legacy(path, entries, trailer):
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for name, ncall, stored in entries:
            nb = name.encode()
            f.write(struct.pack("<i", len(nb)))
            f.write(nb)
            f.write(struct.pack("<ii", ncall, len(stored)))
            f.write(np.asarray(stored, dtype="<f4").tobytes())
        if trailer is not None:
            chunks, dataset = trailer
            db = dataset.encode()
            f.write(struct.pack("<ii", chunks, len(db)))
            f.write(db)


def legacy_weights(ncall, stored):
    stored = np.asarray(stored, dtype=F32)
    if ncall > 0:
        return (stored / F32(ncall)).astype(F32)
    return stored


def floats(a):
    return [float(x) for x in np.asarray(a, dtype=F32)]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(0x1A7819)

    # Legacy: (name, ncall, stored values).
    entries = []
    for name, k, n_mat, ncall in [
        ("blk.0.attn_q.weight", 64, 1, 10),
        ("blk.0.ffn_down.weight", 96, 1, 10),
        ("blk.0.ffn_up_exps.weight", 32, 4, 7),
        ("output.weight", 64, 1, 0),
    ]:
        entries.append((name, ncall, mean_sq(rng, k * n_mat) * F32(max(ncall, 1))))
    write_legacy(os.path.join(OUT, "legacy.dat"), entries, (10, "wiki.train.raw"))
    expected = {
        "datasets": ["wiki.train.raw"],
        "chunk_count": 10,
        "entries": {n: floats(legacy_weights(c, s)) for n, c, s in entries},
    }
    with open(os.path.join(OUT, "legacy_expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    write_legacy(os.path.join(OUT, "legacy_notrailer.dat"), entries[:1], None)

    # GGUF: sums of x^2 and token counts per matrix; expert 2 of the stacked tensor never routed.
    path = os.path.join(OUT, "imatrix.gguf")
    w = gguf.GGUFWriter(path, arch="imatrix")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["wiki.train.raw", "code.txt"])
    w.add_uint32("imatrix.chunk_count", 12)
    w.add_uint32("imatrix.chunk_size", 512)
    gexp = {}
    for name, k, counts in [
        ("blk.0.attn_k.weight", 64, [6144.0]),
        ("blk.1.ffn_gate_exps.weight", 32, [300.0, 41.0, 0.0, 5803.0]),
    ]:
        counts = np.asarray(counts, dtype=F32)
        sums = np.stack([mean_sq(rng, k) * max(c, 1.0) for c in counts]).astype(F32)
        # numpy shape (n_mat, k) is ggml dims [k, n_mat].
        w.add_tensor(name + ".in_sum2", sums)
        w.add_tensor(name + ".counts", counts.reshape(len(counts), 1))
        # Newer files also carry sums of x; the quantizer ignores them.
        w.add_tensor(name + ".in_sum", (sums * F32(-0.25)).astype(F32))
        weights = np.where(counts[:, None] > 0, sums / np.where(counts > 0, counts, 1)[:, None],
                           F32(1.0)).astype(F32)
        gexp[name] = floats(weights.reshape(-1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(path)
    parts = {"metadata": {}, "tensors": []}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        v = field.contents()
        parts["metadata"][key] = v
    for t in r.tensors:
        parts["tensors"].append({
            "name": t.name,
            "dims": [int(d) for d in t.shape],
            "data": floats(np.asarray(t.data, dtype=F32).reshape(-1)),
        })
    with open(os.path.join(OUT, "gguf_parts.json"), "w") as f:
        json.dump(parts, f, indent=1)
    with open(os.path.join(OUT, "gguf_expected.json"), "w") as f:
        json.dump({"datasets": ["wiki.train.raw", "code.txt"], "chunk_count": 12, "entries": gexp},
                  f, indent=1)


if __name__ == "__main__":
    main()

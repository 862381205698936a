#!/usr/bin/env python3
"""Oracle fixtures for ggml MXFP4, NVFP4, TQ1_0 and TQ2_0 (tests/fixtures/ggml_fp4_ternary/).

Oracles:
  * gguf-py (gguf.quants): quantize + dequantize for MXFP4, TQ1_0, TQ2_0; dequantize for NVFP4.
  * NVFP4 encode: gguf-py has no NVFP4 quantizer, so `nvfp4_quantize` below is an independent
    numpy implementation of ggml's published rule (ggml/src/ggml-quants.c
    `quantize_row_nvfp4_ref`): per 16 values, scale byte = ggml_fp32_to_ue4m3(amax / 6) (taken
    from gguf-py's port `NVFP4.fp32_to_ue4m3`), then for every value the first code minimising
    |kvalues_mxfp4[i] * d - x| in f32, d = ggml_ue4m3_to_fp32 (gguf-py `NVFP4.ue4m3_to_fp32`).
    Its output is checked to decode (gguf-py) to the nearest grid values.

Writes manifest.tsv in the format of tests/common/mod.rs plus the binary files it names.
Deterministic (fixed seed). Run: /work/venv/bin/python tools/oracle_ggml_fp4_ternary.py
"""

from __future__ import annotations

import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import NVFP4, dequantize, quantize

OUT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ggml_fp4_ternary"
)
F32 = np.float32
KV = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=F32)
E2M1_MIDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)

FMT = {"MXFP4": (T.MXFP4, 32, 17), "NVFP4": (T.NVFP4, 64, 36), "TQ1_0": (T.TQ1_0, 256, 54),
       "TQ2_0": (T.TQ2_0, 256, 66)}

manifest: list[str] = []


def write(name: str, data: np.ndarray) -> None:
    np.ascontiguousarray(data).tofile(os.path.join(OUT, name))


def nvfp4_quantize(x: np.ndarray) -> np.ndarray:
    """ggml quantize_row_nvfp4_ref, in numpy (f32 arithmetic throughout)."""
    x = np.asarray(x, dtype=F32).reshape(-1, 4, 16)
    nb = x.shape[0]
    amax = np.abs(x).max(axis=-1)  # (nb, 4)
    ue = NVFP4.fp32_to_ue4m3((amax / F32(6.0)).astype(F32)).astype(np.uint8)
    d = NVFP4.ue4m3_to_fp32(ue).astype(F32)  # halved scale, (nb, 4)
    err = np.abs(d[..., None, None] * KV[None, None, None, :] - x[..., None])  # (nb,4,16,16)
    assert err.dtype == np.float32
    idx = np.argmin(err, axis=-1).astype(np.uint8)  # first minimum, as ggml's strict '<'
    qs = idx[..., :8] | (idx[..., 8:] << 4)  # (nb, 4, 8)
    return np.concatenate([ue, qs.reshape(nb, 32)], axis=-1).astype(np.uint8).reshape(-1)


def encode_oracle(fmt: str, x: np.ndarray, k: int) -> np.ndarray:
    qt, _, _ = FMT[fmt]
    rows = x.reshape(-1, k)
    if fmt == "NVFP4":
        return nvfp4_quantize(rows)
    return quantize(rows, qt).reshape(-1)


def add_encode(fmt: str, name: str, x: np.ndarray, k: int) -> None:
    qt, _, _ = FMT[fmt]
    x = np.asarray(x, dtype=F32).reshape(-1, k)
    assert x.size <= 4096
    q = encode_oracle(fmt, x, k)
    # The decode of the oracle's bytes is a fixture too (and must be finite).
    dec = dequantize(q.reshape(x.shape[0], -1), qt).astype(F32).reshape(-1)
    assert np.isfinite(dec).all(), (fmt, name)
    if fmt in ("MXFP4", "NVFP4"):
        # Sanity of the NVFP4 port (and gguf-py): every value decodes to a nearest grid point.
        _, be, bb = FMT[fmt]
        blocks = q.reshape(-1, bb)
        if fmt == "MXFP4":
            d = NVFP4_like_mx_scales(blocks)
        else:
            d = np.repeat(NVFP4.ue4m3_to_fp32(blocks[:, :4]).astype(F32), 16, axis=1)
        grid = d.reshape(-1)[:, None] * KV[None, :]
        best = np.min(np.abs(grid - x.reshape(-1)[:, None]), axis=1)
        assert np.all(np.abs(dec - x.reshape(-1)) == best), (fmt, name)
    base = f"{name}.{fmt.lower()}"
    write(f"{base}.in.f32", x)
    write(f"{base}.bin", q)
    write(f"{base}.dec.f32", dec)
    manifest.append(f"encode\t{fmt}\t{k}\treference\t{base}.in.f32\t-\t{base}.bin")
    manifest.append(f"decode\t{fmt}\t{k}\t-\t{base}.bin\t-\t{base}.dec.f32")


def NVFP4_like_mx_scales(blocks: np.ndarray) -> np.ndarray:
    e = blocks[:, :1].astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << np.uint32(23)).astype(np.uint32)
    return np.repeat(bits.view(F32), 32, axis=1)


def add_decode(fmt: str, name: str, q: np.ndarray, k: int) -> None:
    qt, _, bb = FMT[fmt]
    q = np.asarray(q, dtype=np.uint8).reshape(-1, bb)
    dec = dequantize(q, qt).astype(F32).reshape(-1)
    base = f"{name}.{fmt.lower()}"
    write(f"{base}.bin", q)
    write(f"{base}.dec.f32", dec)
    manifest.append(f"decode\t{fmt}\t{k}\t-\t{base}.bin\t-\t{base}.dec.f32")


def add_reject(fmt: str, name: str, q: np.ndarray, k: int, tag: str) -> None:
    base = f"{name}.{fmt.lower()}"
    write(f"{base}.bin", np.asarray(q, dtype=np.uint8))
    manifest.append(f"reject\t{fmt}\t{k}\t-\t{base}.bin\t-\t{tag}")


def common_inputs(rng: np.random.Generator, block: int) -> dict[str, np.ndarray]:
    n = 1024
    t2 = rng.standard_t(2, size=n)
    cases = {
        "random": rng.standard_normal(n),
        "heavy_t2": t2,
        "heavy_cube": rng.standard_normal(n) ** 3 * 0.1,
        "zeros": np.zeros(n),
        "mixed_zero_blocks": np.where((np.arange(n) // block) % 2 == 0, rng.standard_normal(n), 0.0),
        "tiny": rng.standard_normal(n) * np.exp(rng.uniform(np.log(1e-6), np.log(1e-3), n)),
        "huge": np.clip(rng.standard_normal(n) * 2e4, -6e4, 6e4),
        "neg_zero": np.where(rng.random(n) < 0.5, -0.0, rng.standard_normal(n) * 1e-3),
    }
    return {k_: np.asarray(v, dtype=F32) for k_, v in cases.items()}


def mx_ties(rng: np.random.Generator, nblocks: int, group: int) -> np.ndarray:
    """Blocks whose values sit exactly on E2M1 midpoints after scaling (exact ties)."""
    out = []
    for b in range(nblocks):
        s = F32(2.0) ** int(rng.integers(-20, 20))  # E2M1 unit of the block
        blk = rng.choice(E2M1_MIDS, size=group) * rng.choice([-1.0, 1.0], size=group) * s
        blk[0] = 6.0 * s  # fixes amax, so the exponent makes the unit exactly s
        out.append(blk)
    return np.concatenate(out).astype(F32)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    np.seterr(all="ignore")
    rng = np.random.default_rng(20260403)

    # ---------------- MXFP4 ----------------
    k = 256
    for name, x in common_inputs(rng, 32).items():
        add_encode("MXFP4", name, x, k)
    add_encode("MXFP4", "ties", mx_ties(rng, 32, 32), k)
    # Subnormal-range blocks with a defined exponent (amax >= 2^-125), tiny f32 subnormals inside.
    sub = rng.standard_normal(512) * 1e-40
    sub[::32] = np.sign(rng.standard_normal(16)) * rng.uniform(2.4e-38, 1e-36, 16)
    add_encode("MXFP4", "subnormal", sub.astype(F32), k)
    # Near f32's limit and amax just below powers of two (log2f rounds up there).
    big = rng.standard_normal(256) * 1e37
    big[0] = 3.4e38
    add_encode("MXFP4", "near_f32_max", big.astype(F32), k)
    pw = []
    for e in range(-30, 30, 2):
        blk = rng.uniform(-1, 1, 32) * 2.0**e
        blk[0] = np.nextafter(F32(2.0**e), F32(0))
        pw.append(blk)
    add_encode("MXFP4", "below_pow2", np.concatenate(pw)[:960].astype(F32), 32 * 30)
    # Decode of arbitrary bytes (every code, every legal exponent), then a rejected 0xFF.
    q = rng.integers(0, 256, size=(255, 17), dtype=np.uint8)
    q[:, 0] = np.arange(255, dtype=np.uint8)
    add_decode("MXFP4", "bytes", q[:254], 32 * 254)
    bad = rng.integers(0, 255, size=(4, 17), dtype=np.uint8)
    bad[2, 0] = 0xFF
    add_reject("MXFP4", "nan_scale", bad, 128, f"IllegalByte@{2 * 17}")

    # ---------------- NVFP4 ----------------
    for name, x in common_inputs(rng, 16).items():
        add_encode("NVFP4", name, x, 256)
    # Ties: scale byte 0x38 (amax / 6 = 1 -> half scale 0.5, so E2M1 values are exact).
    ties = []
    for b in range(16):
        for s in range(4):
            sub_ = rng.choice(E2M1_MIDS, size=16) * rng.choice([-1.0, 1.0], size=16)
            sub_[s % 16] = 6.0
            ties.append(sub_ * 2.0 ** int(rng.integers(-6, 6)))
    add_encode("NVFP4", "ties", np.concatenate(ties).astype(F32), 256)
    # Scale rounding edges: amax / 6 on ggml's UE4M3 midpoints, its subnormal range and the
    # saturated top binade (>= 248 * 6).
    edges = []
    ue_vals = NVFP4.ue4m3_to_fp32(np.arange(0, 0x7F, dtype=np.uint8)).astype(np.float64) * 2
    mids = (ue_vals[1:] + ue_vals[:-1]) / 2
    for m in np.concatenate([mids, [240, 247.9, 248, 255, 256, 300, 448, 500, 1e6]]):
        blk = rng.uniform(-1, 1, 16) * m * 6
        blk[int(rng.integers(0, 16))] = F32(m * 6.0)
        edges.append(blk)
    edges = np.concatenate(edges)
    edges = edges[: len(edges) // 64 * 64]
    add_encode("NVFP4", "scale_edges", edges.astype(F32), 64)
    q = rng.integers(0, 256, size=(128, 36), dtype=np.uint8)
    d = rng.integers(0, 0x7F, size=(128, 4), dtype=np.uint8)
    d |= (rng.random((128, 4)) < 0.2).astype(np.uint8) << 7  # bit 7 set (ignored by ggml)
    d[d == 0xFF] = 0x80
    q[:, :4] = d
    q[0, :4] = [0x00, 0x01, 0x7E, 0xFE]
    add_decode("NVFP4", "bytes", q, 64 * 128)
    for byte, blk_i, s in [(0x7F, 1, 2), (0xFF, 3, 0)]:
        bad = rng.integers(0, 256, size=(4, 36), dtype=np.uint8)
        bad[:, :4] = 0x38
        bad[blk_i, s] = byte
        add_reject("NVFP4", f"nan_scale_{byte:02x}", bad, 256, f"IllegalByte@{blk_i * 36 + s}")

    # ---------------- TQ1_0 / TQ2_0 ----------------
    for fmt, bb, doff in [("TQ1_0", 54, 52), ("TQ2_0", 66, 64)]:
        for name, x in common_inputs(rng, 256).items():
            add_encode(fmt, name, x, 1024)
        # Ties: amax = 1 and values at exactly +-0.5 (lroundf rounds away from zero).
        t = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0, 0.49999997, -0.50000006], size=1024)
        t[::256] = 1.0
        add_encode(fmt, "ties", t.astype(F32), 1024)
        # Subnormal f16 scales, and scales that underflow f16 to zero.
        tiny = rng.standard_normal(1024) * np.repeat([1e-6, 3e-8, 1e-20, 1e-36], 256)
        add_encode(fmt, "subnormal", tiny.astype(F32), 1024)
        near = rng.uniform(-1, 1, 512) * 65504
        near[0] = 65504.0
        near[256] = -65519.0
        add_encode(fmt, "near_f16_max", near.astype(F32), 256)
        # Decode of arbitrary bytes with random finite scales.
        q = rng.integers(0, 256, size=(16, bb), dtype=np.uint8)
        dh = (rng.standard_normal(16) * 10.0 ** rng.integers(-6, 4, 16)).astype(np.float16)
        q[:, doff:] = dh.view(np.uint8).reshape(16, 2)
        add_decode(fmt, "bytes", q, 256 * 16)
        for tag, h in [("inf", 0x7C00), ("nan", 0x7E01)]:
            bad = rng.integers(0, 256, size=(3, bb), dtype=np.uint8)
            bad[:, doff:] = np.array([0x00, 0x3C], dtype=np.uint8)
            bad[1, doff:] = np.array([h & 0xFF, h >> 8], dtype=np.uint8)
            add_reject(fmt, f"{tag}_scale", bad, 768, f"NonFiniteScale@{bb + doff}")

    # MXFP4 exponent rule alone, on amax values within 40 ulps below and 2 above every power of
    # two with a defined exponent (tests/ggml_fp4_ternary.rs reads these two raw arrays):
    # gguf-py's expression floor(log2(amax)) - 2 + 127 in numpy float32.
    pw = np.exp2(np.arange(-125, 128, dtype=np.float64)).astype(F32)
    offs = np.arange(-40, 3, dtype=np.int64)
    amax = (pw.view(np.uint32)[:, None].astype(np.int64) + offs[None, :]).reshape(-1)
    amax = amax[(amax > 0) & (amax < 0x7F800000)].astype(np.uint32).view(F32)
    amax = amax[amax >= F32(2.0**-125)]
    e = (np.floor(np.log2(amax)) - 2 + 127).astype(np.int64)
    assert e.min() >= 0 and e.max() <= 253
    write("mx_exponent.in.f32", amax)
    write("mx_exponent.u8", e.astype(np.uint8))

    with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
        f.write("# Generated by tools/oracle_ggml_fp4_ternary.py (gguf-py 0.19.0 + NVFP4 port)\n")
        f.write("op\tformat\tk\trule\tinput\timportance\texpected\n")
        f.write("\n".join(manifest) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(manifest)} cases, {total} bytes in {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

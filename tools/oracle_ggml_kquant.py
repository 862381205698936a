#!/usr/bin/env python3
"""Oracle fixtures for the ggml K-quants Q2_K..Q6_K: decode, NaN/inf rejects, dots vs Q8_K.

Writes tests/fixtures/ggml_kquant/{manifest.tsv, *.bin, *.dec.f32} (decode/reject cases, run by
tests/fixtures.rs) and {dots.tsv, dot.*} (reference dot products, run by tests/ggml_kquant.rs). Deterministic (fixed
seeds); run with the venv in tools/requirements.txt:

    /work/venv/bin/python tools/oracle_ggml_kquant.py

The oracle is gguf-py's `gguf.quants.dequantize` (gguf 0.19.0). gguf-py has no K-quant
quantizer, so the blocks are random but *valid* bytes: every packed quant and scale bit is
random, and the f16 super-block scales `d`/`dmin` are overwritten with finite values drawn from
the distributions each case names. Reject cases put NaN/inf into `d` or `dmin` of one block and
name the byte offset the decoder must report.

Block layouts (ggml-org/llama.cpp ggml/src/ggml-common.h) give the field offsets below.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ggml_kquant"
QK_K = 256

# name -> (qtype, block bytes, d offset, dmin offset or None, scales field (start, end))
FORMATS = {
    "Q2_K": (T.Q2_K, 84, 80, 82, (0, 16)),
    "Q3_K": (T.Q3_K, 110, 108, None, (96, 108)),
    "Q4_K": (T.Q4_K, 144, 0, 2, (4, 16)),
    "Q5_K": (T.Q5_K, 176, 0, 2, (4, 16)),
    "Q6_K": (T.Q6_K, 210, 208, None, (192, 208)),
}

F16_MAX = 65504.0


def f16_bytes(vals: np.ndarray) -> np.ndarray:
    """f32/f64 values -> f16 (round to nearest even) -> (n, 2) little-endian bytes."""
    return np.asarray(vals, dtype=np.float16).astype("<f2").view(np.uint8).reshape(-1, 2)


def f16_from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype="<u2").view(np.uint8).reshape(-1, 2)


def set_f16(blocks: np.ndarray, off: int, vals_bytes: np.ndarray) -> None:
    blocks[:, off:off + 2] = vals_bytes


class Gen:
    def __init__(self) -> None:
        self.rows: list[str] = []
        self.total = 0

    def write(self, name: str, data: bytes) -> None:
        (OUT / name).write_bytes(data)
        self.total += len(data)

    def decode_case(self, fmt: str, case: str, blocks: np.ndarray, k: int) -> None:
        qt, bs = FORMATS[fmt][0], FORMATS[fmt][1]
        assert blocks.dtype == np.uint8 and blocks.shape[1] == bs
        nb = blocks.shape[0]
        assert (nb * QK_K) % k == 0 and nb * QK_K <= 4096
        rows = blocks.reshape(nb * QK_K // k, k // QK_K * bs)
        vals = dequantize(rows, qt).astype(np.float32)
        assert vals.shape == (nb * QK_K // k, k)
        stem = f"{case}.{fmt.lower()}"
        self.write(f"{stem}.bin", rows.tobytes())
        self.write(f"{stem}.dec.f32", vals.astype("<f4").tobytes())
        self.rows.append(f"decode\t{fmt}\t{k}\t-\t{stem}.bin\t-\t{stem}.dec.f32")

    def reject_case(self, fmt: str, case: str, blocks: np.ndarray, k: int, tag: str) -> None:
        stem = f"{case}.{fmt.lower()}"
        self.write(f"{stem}.bin", blocks.tobytes())
        self.rows.append(f"reject\t{fmt}\t{k}\t-\t{stem}.bin\t-\t{tag}")


def gen_format(g: Gen, fmt: str, seed: int) -> None:
    qt, bs, d_off, dmin_off, (s0, s1) = FORMATS[fmt]
    rng = np.random.default_rng(seed)

    def rand_blocks(nb: int) -> np.ndarray:
        return rng.integers(0, 256, size=(nb, bs), dtype=np.uint8)

    def with_scales(blocks: np.ndarray, d: np.ndarray, dmin: np.ndarray | None = None):
        set_f16(blocks, d_off, f16_bytes(d))
        if dmin_off is not None:
            if dmin is None:
                dmin = d
            set_f16(blocks, dmin_off, f16_bytes(dmin))
        return blocks

    # Random normal scales (typical trained-model magnitudes), 4 rows of 1024.
    nb = 16
    g.decode_case(fmt, "rand_normal", with_scales(
        rand_blocks(nb), rng.normal(0, 0.01, nb), rng.normal(0, 0.01, nb)), 1024)
    # Log-uniform magnitudes over the whole normal f16 range, random signs.
    mag = 2.0 ** rng.uniform(-14, 15.9, nb)
    mag2 = 2.0 ** rng.uniform(-14, 15.9, nb)
    g.decode_case(fmt, "rand_wide", with_scales(
        rand_blocks(nb), mag * rng.choice([-1, 1], nb), mag2 * rng.choice([-1, 1], nb)), 256)
    # Heavy-tailed: student-t (df = 2) scales, clipped to the finite f16 range.
    g.decode_case(fmt, "heavy_t2", with_scales(
        rand_blocks(nb), np.clip(rng.standard_t(2, nb) * 0.05, -F16_MAX, F16_MAX),
        np.clip(rng.standard_t(2, nb) * 0.05, -F16_MAX, F16_MAX)), 512)
    # Subnormal f16 scales: m * 2^-24 for m in 1..1023 (and the smallest, 2^-24).
    sub = rng.integers(1, 1024, nb)
    sub[0] = 1
    sub2 = rng.integers(1, 1024, nb)
    sub2[1] = 1
    g.decode_case(fmt, "subnormal", with_scales(
        rand_blocks(nb), sub * 2.0 ** -24, -sub2 * 2.0 ** -24), 256)
    # Huge scales up to the largest finite f16 (65504).
    big = rng.uniform(1e4, F16_MAX, nb)
    big[0] = F16_MAX
    big2 = rng.uniform(1e4, F16_MAX, nb)
    big2[1] = F16_MAX
    g.decode_case(fmt, "huge", with_scales(
        rand_blocks(nb), big * rng.choice([-1, 1], nb), big2 * rng.choice([-1, 1], nb)), 256)
    # All-zero blocks.
    g.decode_case(fmt, "zero", np.zeros((4, bs), dtype=np.uint8), 1024)
    # Signed zero scales with random quants (outputs keep IEEE signs of zero).
    zs = np.array([0.0, -0.0, 0.0, -0.0])
    zm = np.array([0.0, 0.0, -0.0, -0.0])
    zb = rand_blocks(4)
    set_f16(zb, d_off, f16_from_bits([0x0000 if not np.signbit(z) else 0x8000 for z in zs]))
    if dmin_off is not None:
        set_f16(zb, dmin_off,
                f16_from_bits([0x0000 if not np.signbit(z) else 0x8000 for z in zm]))
    g.decode_case(fmt, "signed_zero_scale", zb, 256)
    # Extreme packed scales: every scale/min field byte 0x00, 0xFF, or (Q6_K) 0x80 / 0x7F.
    extremes = [0x00, 0xFF] + ([0x80, 0x7F] if fmt == "Q6_K" else [])
    for x in extremes:
        b = with_scales(rand_blocks(4), rng.normal(0, 0.1, 4), rng.normal(0, 0.1, 4))
        b[:, s0:s1] = x
        g.decode_case(fmt, f"scales_{x:02x}", b, 256)
    # Mixed extreme patterns (6-bit fields 0 / 63 mixed, high-bit-only bytes).
    b = with_scales(rand_blocks(8), rng.normal(0, 0.1, 8), rng.normal(0, 0.1, 8))
    pats = np.array([0x00, 0xFF, 0xC0, 0x3F, 0x0F, 0xF0, 0x80, 0x7F], dtype=np.uint8)
    b[:, s0:s1] = rng.choice(pats, size=(8, s1 - s0))
    g.decode_case(fmt, "scales_mixed", b, 512)
    # Exact-value blocks: d = 1, dmin = 0.5 (every output exactly representable).
    b = with_scales(rand_blocks(2), np.ones(2), np.full(2, 0.5))
    g.decode_case(fmt, "unit_scale", b, 512)

    # Reject: NaN / inf in d (and dmin) of one block of a 3-block row.
    def bad(case, blk, field_off, bits, also=None):
        b = with_scales(rand_blocks(3), rng.normal(0, 0.1, 3), rng.normal(0, 0.1, 3))
        b[blk, field_off:field_off + 2] = f16_from_bits([bits])[0]
        if also is not None:
            b[blk, also[0]:also[0] + 2] = f16_from_bits([also[1]])[0]
        g.reject_case(fmt, case, b, 768, f"NonFiniteScale@{blk * bs + field_off}")

    bad("nan_d", 2, d_off, 0x7E00)
    bad("snan_d", 0, d_off, 0x7C01)
    bad("neg_nan_d", 1, d_off, 0xFE00)
    bad("inf_d", 1, d_off, 0x7C00)
    bad("neg_inf_d", 0, d_off, 0xFC00)
    if dmin_off is not None:
        bad("nan_dmin", 1, dmin_off, 0x7FFF)
        bad("inf_dmin", 2, dmin_off, 0x7C00)
        bad("neg_inf_dmin", 0, dmin_off, 0xFC00)
        # Both bad: d is reported (checked first).
        bad("nan_d_inf_dmin", 1, d_off, 0x7E00, also=(dmin_off, 0x7C00))


# ---------------------------------------------------------------------------------------------
# Dot-product fixtures against Q8_K (tests/ggml_kquant.rs reads dots.tsv; the shared manifest
# runner has no dot op). The expected f32 results follow the f32 operation order of ggml's
# generic C (ggml-org/llama.cpp ggml/src/ggml-cpu/quants.c, ggml_vec_dot_q{2..6}_K_q8_K_generic),
# written here in numpy float32 scalars. The integer quants are not unpacked here: gguf-py's
# dequantize of a copy of the block with d = 1, dmin = 0 gives the exact integers scale * q per
# element, and with d = 0, dmin = 1 gives -min per element.

Q8K = np.dtype([("d", "<f4"), ("qs", "i1", 256), ("bsums", "<i2", 16)])
assert Q8K.itemsize == 292
DOT_ROWS, DOT_NB = 48, 2


def int_parts(fmt: str, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scale*q, min) per element as int64, via gguf-py on blocks with d/dmin replaced."""
    qt, bs, d_off, dmin_off, _ = FORMATS[fmt]
    one, zero = f16_bytes([1.0])[0], f16_bytes([0.0])[0]
    b = blocks.copy()
    b[:, d_off:d_off + 2] = one
    if dmin_off is not None:
        b[:, dmin_off:dmin_off + 2] = zero
    sq = dequantize(b, qt).reshape(-1, QK_K)
    mins = np.zeros_like(sq)
    if dmin_off is not None:
        b[:, d_off:d_off + 2] = zero
        b[:, dmin_off:dmin_off + 2] = one
        mins = -dequantize(b, qt).reshape(-1, QK_K)
    assert np.all(sq == np.round(sq)) and np.all(mins == np.round(mins))
    return sq.astype(np.int64), mins.astype(np.int64)


def ggml_dot(fmt: str, blocks: np.ndarray, acts: np.ndarray) -> np.float32:
    """One row (blocks: (nb, bs) uint8, acts: (nb,) Q8K) in ggml's generic f32 order."""
    _, bs, d_off, dmin_off, _ = FORMATS[fmt]
    f32 = np.float32
    sq, mins = int_parts(fmt, blocks)
    d_w = blocks[:, d_off:d_off + 2].copy().view("<f2").astype(np.float32).ravel()
    m_w = (blocks[:, dmin_off:dmin_off + 2].copy().view("<f2").astype(np.float32).ravel()
           if dmin_off is not None else None)
    sums = [f32(0)] * 8
    sumf = f32(0)
    for i in range(blocks.shape[0]):
        q8 = acts["qs"][i].astype(np.int64)
        bsums = acts["bsums"][i].astype(np.int64)
        da = f32(acts["d"][i])
        if fmt == "Q2_K":
            isum = int(np.sum(sq[i] * q8))
            summs = int(np.sum(bsums * mins[i][::16]))
            dall = f32(da * d_w[i])
            dmin = f32(da * m_w[i])
            sumf = f32(sumf + f32(f32(dall * f32(isum)) - f32(dmin * f32(summs))))
            continue
        lanes = (sq[i] * q8).reshape(32, 8).sum(axis=0)
        d = f32(d_w[i] * da)
        for l in range(8):
            sums[l] = f32(sums[l] + f32(d * f32(int(lanes[l]))))
        if fmt in ("Q4_K", "Q5_K"):
            sumi = int(np.sum(bsums * np.repeat(mins[i][::32], 2)))
            dmin = f32(m_w[i] * da)
            sumf = f32(sumf - f32(dmin * f32(sumi)))
    if fmt != "Q2_K":
        for l in range(8):
            sumf = f32(sumf + sums[l])
    return sumf


def gen_dots(g: Gen) -> list[str]:
    rng = np.random.default_rng(0x51D07)
    n = DOT_ROWS * DOT_NB
    acts = np.zeros(n, Q8K)
    acts["qs"] = rng.integers(-128, 128, (n, 256))
    acts["d"] = (2.0 ** rng.uniform(-14, 4, n)).astype(np.float32)
    acts["bsums"] = acts["qs"].reshape(n, 16, 16).astype(np.int32).sum(axis=-1)
    g.write("dot.q8_k.bin", acts.tobytes())
    rows = []
    for fmt, (qt, bs, d_off, dmin_off, _) in FORMATS.items():
        w = rng.integers(0, 256, (n, bs), dtype=np.uint8)
        # Per row a scale regime: normal, wide log-uniform (incl. subnormal f16), huge.
        regime = np.repeat(np.arange(DOT_ROWS) % 3, DOT_NB)
        def draw():
            v = np.where(regime == 0, rng.normal(0, 0.02, n),
                         np.where(regime == 1, 2.0 ** rng.uniform(-24, 15.9, n),
                                  rng.uniform(1e4, F16_MAX, n)))
            return v * rng.choice([-1, 1], n)
        w[:, d_off:d_off + 2] = f16_bytes(draw())
        if dmin_off is not None:
            w[:, dmin_off:dmin_off + 2] = f16_bytes(draw())
        assert np.all(np.isfinite(dequantize(w, qt)))
        out = np.array([ggml_dot(fmt, w[r * DOT_NB:(r + 1) * DOT_NB],
                                 acts[r * DOT_NB:(r + 1) * DOT_NB]) for r in range(DOT_ROWS)],
                       dtype="<f4")
        stem = f"dot.{fmt.lower()}"
        g.write(f"{stem}.bin", w.tobytes())
        g.write(f"{stem}.f32", out.tobytes())
        rows.append(f"{fmt}\t{DOT_NB * QK_K}\t{stem}.bin\tdot.q8_k.bin\t{stem}.f32")
    return rows


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for p in OUT.iterdir():
        if p.is_file():
            p.unlink()
    g = Gen()
    for i, fmt in enumerate(FORMATS):
        gen_format(g, fmt, 0x4B51 + i)
    header = [
        "# ggml K-quant fixtures, written by tools/oracle_ggml_kquant.py (oracle: gguf-py 0.19.0",
        "# gguf.quants.dequantize). Random valid blocks with finite f16 d/dmin; rejects: NaN/inf.",
        "op\tformat\tk\trule\tinput\timportance\texpected",
    ]
    (OUT / "manifest.tsv").write_text("\n".join(header + g.rows) + "\n")
    dots = gen_dots(g)
    (OUT / "dots.tsv").write_text("\n".join([
        "# Reference dots against Q8_K (read by tests/ggml_kquant.rs), f32 order of ggml's",
        "# generic C; one f32 per row of k elements. format, k, weights, activations, expected",
    ] + dots) + "\n")
    print(f"{len(g.rows)} cases, {g.total} bytes of data", file=sys.stderr)
    assert g.total < 2 * 1024 * 1024
    return 0


if __name__ == "__main__":
    sys.exit(main())

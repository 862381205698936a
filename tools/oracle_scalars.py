#!/usr/bin/env python3
"""Oracle fixtures for lowbit's scalar conversions (tests/scalars.rs reads them).

Oracles: ml_dtypes (float8_e4m3fn, float8_e8m0fnu, float4_e2m1fn, bfloat16), numpy float16,
gguf-py's NVFP4.ue4m3_to_fp32 / fp32_to_ue4m3 (ggml's UE4M3 scale), and two small independent
numpy definitions written here from their specifications:
  * UE4M3-b8 (ROCmFPX scale, FORMATS.md section 1): E = b >> 3, M = b & 7;
    E = 0: M * 2^-10; else (8 + M) * 2^(E - 11); 0x7F.. illegal.
  * hipfire's truncating f32 -> f16 (github warpfront/hipfire
    crates/hipfire-quantize/src/float16.rs): round toward zero; an f32 whose exponent is beyond
    f16's (|x| >= 65536) gives +-inf. Computed here by searching the sorted table of all finite
    f16 values (no bit tricks), so it is independent of the Rust code.

Output, all little-endian, in tests/fixtures/scalars/ (raw arrays, no headers):
  decode_e4m3.f32      256 values, ml_dtypes float8_e4m3fn of each byte
  decode_e8m0.f32      256 values, ml_dtypes float8_e8m0fnu of each byte
  decode_e2m1.f32      16 values, ml_dtypes float4_e2m1fn of each code
  decode_ue4m3_b8.f32  127 values, bytes 0x00..0x7E
  decode_ue4m3_half.f32 256 values, gguf-py NVFP4.ue4m3_to_fp32 (value * 0.5, ggml convention)
  (bf16 decode is not stored: this script asserts that ml_dtypes decodes every bf16 pattern to
   the f32 whose top half it is, and tests/scalars.rs checks every pattern against that rule.)
  enc_in.f32           N f32 inputs (the same inputs for every encoder)
  enc_e4m3.u8          N bytes  ml_dtypes float8_e4m3fn
  enc_e2m1.u8          N bytes  ml_dtypes float4_e2m1fn (0xFF where the input is NaN)
  enc_e8m0.u8          N bytes  ml_dtypes float8_e8m0fnu
  enc_bf16.u16         N u16    ml_dtypes bfloat16
  enc_f16.u16          N u16    numpy float16
  enc_f16_trunc.u16    N u16    truncating f32 -> f16 (see above)
  enc_ue4m3.u8         N bytes  gguf-py NVFP4.fp32_to_ue4m3 (0xFF where the input is NaN)

Deterministic (fixed seed). Run: /work/venv/bin/python tools/oracle_scalars.py
"""

from __future__ import annotations

import os

import ml_dtypes as md
import numpy as np
from gguf.quants import NVFP4

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "scalars")
F32 = np.float32


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32).view(np.uint32)


def from_bits(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint32).view(F32)


def neighbours(v: np.ndarray) -> np.ndarray:
    """v, and the next f32 up and down from each, for both signs."""
    v = np.abs(np.asarray(v, dtype=F32))
    up = np.nextafter(v, F32(np.inf))
    dn = np.nextafter(v, F32(0))
    a = np.concatenate([v, up, dn])
    return np.concatenate([a, -a])


def grid_and_midpoints(values: np.ndarray) -> np.ndarray:
    """Every value of a sorted non-negative grid, every midpoint between neighbours, +-1 ulp."""
    g = np.unique(np.asarray(values, dtype=np.float64))
    mids = (g[1:] + g[:-1]) / 2
    pts = np.concatenate([g, mids])
    return neighbours(pts.astype(F32))


def ue4m3_b8_value(b: np.ndarray) -> np.ndarray:
    b = b.astype(np.int64)
    e, m = b >> 3, b & 7
    return np.where(e == 0, m * 2.0**-10, (8 + m) * np.exp2(e - 11.0)).astype(F32)


def f16_truncate_oracle(x: np.ndarray) -> np.ndarray:
    """Round toward zero onto f16 by table search; |x| >= 65536 -> inf; NaN -> 0x7E00|sign."""
    table_bits = np.arange(0, 0x7C00, dtype=np.uint16)  # every finite non-negative f16
    table = table_bits.view(np.float16).astype(np.float64)  # sorted ascending
    x = np.asarray(x, dtype=F32)
    a = np.abs(x.astype(np.float64))
    out = np.zeros(x.shape, dtype=np.uint16)
    finite = np.isfinite(a)
    idx = np.searchsorted(table, np.where(finite, a, 0), side="right") - 1  # largest <= a
    out = table_bits[np.clip(idx, 0, len(table_bits) - 1)].copy()
    out = np.where(a >= 65536.0, np.uint16(0x7C00), out)  # exponent overflow: inf
    out = np.where(np.isinf(a), np.uint16(0x7C00), out)
    sign = np.where(np.signbit(x), np.uint16(0x8000), np.uint16(0))
    out = (out | sign).astype(np.uint16)
    # NaN: keep the payload's top bits, force it non-zero (hipfire: (frac >> 13) | 1)
    xb = bits(x)
    nan_bits = (((xb >> 16) & 0x8000) | 0x7C00 | (((xb & 0x7FFFFF) >> 13) | 1)).astype(np.uint16)
    return np.where(np.isnan(x), nan_bits, out).astype(np.uint16)


def inputs(rng: np.random.Generator) -> np.ndarray:
    parts = []
    specials = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0], dtype=F32
    )
    parts.append(specials)
    parts.append(from_bits([0x7FC00001, 0xFFC00000, 0x7F800001, 0x7FBFFFFF]))  # NaN payloads
    parts.append(neighbours(from_bits([1, 0x007FFFFF, 0x00800000, 0x7F7FFFFF])))
    # E2M1 grid (and the overflow region)
    parts.append(grid_and_midpoints(np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 8], dtype=F32)))
    parts.append(neighbours(np.array([6.5, 7, 100, 1e30], dtype=F32)))
    # E4M3 grid: every finite code, plus the would-be next code 480 (overflow midpoint 464)
    e4 = np.arange(0, 0x7F, dtype=np.uint8).view(md.float8_e4m3fn).astype(np.float64)
    parts.append(grid_and_midpoints(np.append(e4, 480.0)))
    parts.append(neighbours(np.array([500, 1e4, 1e38, 2.0**-10, 2.0**-11, 2.0**-12], dtype=F32)))
    # E8M0: powers of two and the linear midpoints 1.5 * 2^k
    k = np.arange(-149, 128, dtype=np.float64)
    p = np.exp2(k)
    parts.append(neighbours(p.astype(F32)))
    parts.append(neighbours((1.5 * p[p * 1.5 < 3.4e38]).astype(F32)))
    # ggml UE4M3: every code value of the E4M3 grid ties (covered above), plus a dense sweep
    parts.append(np.linspace(0, 500, 4001, dtype=F32))
    parts.append(np.linspace(0, 2.0**-5, 2049, dtype=F32))
    # f16: every 13th finite f16 value, its midpoint to the next one, +-1 ulp (positive and negative)
    h = np.arange(0, 0x7C00, 13, dtype=np.uint16).view(np.float16).astype(np.float64)
    nxt = (np.arange(0, 0x7C00, 13, dtype=np.uint16) + 1).view(np.float16).astype(np.float64)
    parts.append(neighbours(h.astype(F32)))
    parts.append(neighbours(((h + nxt) / 2).astype(F32)))
    parts.append(neighbours(np.array([65504, 65519.99, 65520, 65535.99, 65536, 70000], dtype=F32)))
    # bf16 ties: low 16 bits exactly 0x8000, +-1
    hi = rng.integers(0, 0x7F80, size=2000, dtype=np.uint32) << 16
    parts.append(from_bits(np.concatenate([hi | 0x8000, hi | 0x7FFF, hi | 0x8001, hi | 0x18000])))
    # random bit patterns (all exponents, both signs, NaNs included) and random normals
    parts.append(from_bits(rng.integers(0, 2**32, size=6000, dtype=np.uint64).astype(np.uint32)))
    for scale in [1e-6, 1e-3, 1.0, 30.0, 1e3, 1e5]:
        parts.append((rng.standard_normal(1000) * scale).astype(F32))
    return np.concatenate([np.asarray(p_, dtype=F32).ravel() for p_ in parts])


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    np.seterr(all="ignore")  # overflow/invalid casts are exactly what is being recorded
    rng = np.random.default_rng(20260101)

    def w(name: str, arr: np.ndarray) -> None:
        arr.tofile(os.path.join(OUT, name))

    all8 = np.arange(256, dtype=np.uint8)
    w("decode_e4m3.f32", all8.view(md.float8_e4m3fn).astype(F32))
    w("decode_e8m0.f32", all8.view(md.float8_e8m0fnu).astype(F32))
    w("decode_e2m1.f32", np.arange(16, dtype=np.uint8).view(md.float4_e2m1fn).astype(F32))
    b8 = ue4m3_b8_value(np.arange(127))
    for byte, want in [(0x38, 0.5), (0x7E, 224.0), (0x01, 2.0**-10), (0x12, 0.01953125)]:
        assert b8[byte] == want, (byte, b8[byte], want)
    w("decode_ue4m3_b8.f32", b8)
    w("decode_ue4m3_half.f32", NVFP4.ue4m3_to_fp32(all8).astype(F32))

    # bf16 decode is "top half of an f32": check ml_dtypes agrees on every pattern (the Rust test
    # checks half's decode against the same definition).
    pat = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    via_md = pat.view(md.bfloat16).astype(F32)
    direct = from_bits(pat.astype(np.uint32) << 16)
    same = (bits(via_md) == bits(direct)) | (np.isnan(via_md) & np.isnan(direct))
    assert same.all()

    x = inputs(rng)
    nan = np.isnan(x)
    w("enc_in.f32", x)
    w("enc_e4m3.u8", x.astype(md.float8_e4m3fn).view(np.uint8))
    with np.errstate(invalid="ignore"):
        e2 = x.astype(md.float4_e2m1fn).view(np.uint8)
    w("enc_e2m1.u8", np.where(nan, np.uint8(0xFF), e2).astype(np.uint8))
    w("enc_e8m0.u8", x.astype(md.float8_e8m0fnu).view(np.uint8))
    w("enc_bf16.u16", x.astype(md.bfloat16).view(np.uint16))
    with np.errstate(over="ignore"):
        w("enc_f16.u16", x.astype(np.float16).view(np.uint16))
    w("enc_f16_trunc.u16", f16_truncate_oracle(x))
    with np.errstate(invalid="ignore", over="ignore"):
        ue = NVFP4.fp32_to_ue4m3(np.where(nan, F32(0), x).astype(F32)).astype(np.uint8)
    w("enc_ue4m3.u8", np.where(nan, np.uint8(0xFF), ue).astype(np.uint8))
    print(f"{len(x)} encode inputs written to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()

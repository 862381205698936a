#!/usr/bin/env python3
"""Oracle fixtures for the basic ggml block types and the plain float formats.

Writes tests/fixtures/ggml_basic/ (binary files + manifest.tsv, format documented in
tests/common/mod.rs). Deterministic: every random input comes from a fixed seed.

Oracles:
  * gguf-py 0.19.0 (`gguf.quants`): quantize + dequantize for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
    BF16; F16 is numpy's float16 cast (what gguf-py's `quantize(.., F16)` does).
  * gguf-py has no Q8_1 or Q8_K quantizer (and its size table gives Q8_1 as 40 bytes; the
    block is 36). For those two, this file holds an independent numpy port of ggml's C rules
    (ggml/src/ggml-quants.c quantize_row_q8_1_ref, quantize_row_q8_K_ref,
    dequantize_row_q8_K), written from the C source, not from lowbit's Rust. The Q8_1 port's
    d/qs are cross-checked against gguf-py's Q8_0 (same rule) on every input, and the Q8_0
    rule of the port against gguf-py Q8_0.

Run:  /work/venv/bin/python tools/oracle_ggml_basic.py
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType as T

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ggml_basic")

F32 = np.float32

# --------------------------------------------------------------------------------------------
# C semantics helpers (x86-64), used by the numpy ports


def c_f32_to_int(v: np.ndarray) -> np.ndarray:
    """C `(int)f` as cvttss2si executes it: truncation; NaN / outside int32 -> INT32_MIN."""
    v = np.asarray(v, dtype=np.float64)
    bad = ~np.isfinite(v) | (v >= 2.0**31) | (v < -(2.0**31))
    out = np.where(bad, 0.0, np.trunc(np.where(bad, 0.0, v))).astype(np.int64)
    return np.where(bad, -(2**31), out)


def to_int8_wrap(v: np.ndarray) -> np.ndarray:
    """C int -> int8_t conversion (keeps the low byte)."""
    return (np.asarray(v, dtype=np.int64) & 0xFF).astype(np.uint8).view(np.int8)


def roundf_away(v: np.ndarray) -> np.ndarray:
    """C roundf: nearest, ties away from zero. Done in f64, where |v| + 0.5 is exact."""
    v64 = np.asarray(v, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.sign(v64) * np.floor(np.abs(v64) + 0.5)


def ggml_nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: (bits(f + 1.5*2^23) & 0x7fffff) - 0x400000, evaluated in f32."""
    v = np.asarray(v, dtype=F32)
    with np.errstate(invalid="ignore", over="ignore"):
        s = (v + F32(12582912.0)).astype(F32)
    # quiet NaNs from IEEE hardware carry mantissa 0x400000
    s = np.where(np.isnan(s), np.uint32(0x7FC00000).view(F32), s).astype(F32)
    bits = s.view(np.uint32).astype(np.int64)
    return (bits & 0x007FFFFF) - 0x00400000


def f16_bytes(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=F32).astype(np.float16).view(np.uint8).reshape(-1, 2)


# --------------------------------------------------------------------------------------------
# Independent numpy ports of ggml's Q8_0 / Q8_1 / Q8_K reference rules


def port_q8_scale(blocks: np.ndarray):
    amax = np.abs(blocks).max(axis=1, keepdims=True).astype(F32)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        idv = np.where(d == 0, F32(0), (F32(1) / d)).astype(F32)
    with np.errstate(invalid="ignore", over="ignore"):
        v = (blocks * idv).astype(F32)
    q = to_int8_wrap(c_f32_to_int(roundf_away(v)))
    return d, q


def port_q8_0_quantize(x: np.ndarray) -> np.ndarray:
    blocks = x.reshape(-1, 32).astype(F32)
    d, q = port_q8_scale(blocks)
    return np.concatenate([f16_bytes(d.ravel()), q.view(np.uint8)], axis=1).ravel()


def port_q8_1_quantize(x: np.ndarray) -> np.ndarray:
    blocks = x.reshape(-1, 32).astype(F32)
    d, q = port_q8_scale(blocks)
    sums = q.astype(np.int64).sum(axis=1).astype(F32)
    s = (sums * d.ravel()).astype(F32)
    return np.concatenate([f16_bytes(d.ravel()), f16_bytes(s), q.view(np.uint8)], axis=1).ravel()


def port_q8_1_dequantize(b: np.ndarray) -> np.ndarray:
    blocks = b.reshape(-1, 36)
    d = blocks[:, 0:2].copy().view(np.float16).astype(F32)
    q = blocks[:, 4:].copy().view(np.int8).astype(F32)
    return (q * d).astype(F32).ravel()


def port_q8_k_quantize(x: np.ndarray) -> np.ndarray:
    out = []
    for blk in x.reshape(-1, 256).astype(F32):
        i = int(np.argmax(np.abs(blk)))  # first index of the largest |x| (C's strict '>')
        mx = blk[i]
        if np.abs(mx) == 0:
            d = F32(0)
            q = np.zeros(256, np.int8)
            bs = np.zeros(16, np.int16)  # ggml leaves bsums unwritten here; lowbit writes 0
        else:
            with np.errstate(over="ignore", divide="ignore"):
                iscale = F32(F32(-127.0) / mx)
            with np.errstate(invalid="ignore", over="ignore"):
                prod = (iscale * blk).astype(F32)
            v = ggml_nearest_int(prod)
            q = to_int8_wrap(np.minimum(127, v))
            bs = q.astype(np.int64).reshape(16, 16).sum(axis=1).astype(np.int16)
            with np.errstate(divide="ignore"):
                d = F32(F32(1.0) / iscale)
        out.append(np.concatenate([np.array([d], F32).view(np.uint8), q.view(np.uint8), bs.view(np.uint8)]))
    return np.concatenate(out)


def port_q8_k_dequantize(b: np.ndarray) -> np.ndarray:
    blocks = b.reshape(-1, 292)
    d = blocks[:, 0:4].copy().view(F32)
    q = blocks[:, 4:260].copy().view(np.int8).astype(F32)
    return (d * q).astype(F32).ravel()


# --------------------------------------------------------------------------------------------
# Oracle dispatch

GGUF = {"Q4_0": T.Q4_0, "Q4_1": T.Q4_1, "Q5_0": T.Q5_0, "Q5_1": T.Q5_1, "Q8_0": T.Q8_0, "BF16": T.BF16}
BLOCK = {"Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
         "Q8_1": (32, 36), "Q8_K": (256, 292), "F16": (1, 2), "BF16": (1, 2)}
# byte offsets of the f16/f32 scale fields, for the reject cases
SCALE_FIELDS = {"Q4_0": [(0, 2)], "Q4_1": [(0, 2), (2, 2)], "Q5_0": [(0, 2)], "Q5_1": [(0, 2), (2, 2)],
                "Q8_0": [(0, 2)], "Q8_1": [(0, 2), (2, 2)], "Q8_K": [(0, 4)]}


def oracle_quantize(fmt: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inf*0 in the tiny-scale blocks, as in the C code
        with np.errstate(all="ignore"):
            if fmt == "F16":
                return x.astype(np.float16).view(np.uint8).ravel()
            if fmt == "Q8_1":
                return port_q8_1_quantize(x)
            if fmt == "Q8_K":
                return port_q8_k_quantize(x)
            return np.asarray(quants.quantize(x.reshape(1, -1), GGUF[fmt]), dtype=np.uint8).ravel()


def oracle_dequantize(fmt: str, b: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(b, dtype=np.uint8)
    if fmt == "F16":
        return b.view(np.float16).astype(F32)
    if fmt == "Q8_1":
        return port_q8_1_dequantize(b)
    if fmt == "Q8_K":
        return port_q8_k_dequantize(b)
    return np.asarray(quants.dequantize(b.reshape(1, -1), GGUF[fmt]), dtype=F32).ravel()


def scales_finite(fmt: str, b: np.ndarray) -> bool:
    if fmt in ("F16", "BF16"):
        return True
    _, bb = BLOCK[fmt]
    blocks = b.reshape(-1, bb)
    for off, w in SCALE_FIELDS[fmt]:
        raw = blocks[:, off:off + w].copy().view(np.float16 if w == 2 else F32)
        if not np.all(np.isfinite(raw)):
            return False
    return True


# --------------------------------------------------------------------------------------------
# Inputs


def inputs_common(rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = 2048
    sub = rng.choice([-1, 1], 1024) * (10.0 ** rng.uniform(-40, -6, 1024))
    # one block-of-32 / block-of-256 group per decade so whole blocks are tiny
    sub = np.sort(np.abs(sub))[::-1] * rng.choice([-1, 1], 1024)
    mixed = rng.normal(size=1024) * np.repeat(10.0 ** rng.uniform(-3, 3, 4), 256)
    return {
        "normal": rng.normal(size=n),
        "heavy": rng.standard_t(2, size=n),
        "cubed": rng.normal(size=1024) ** 3 * 5,
        "zero": np.zeros(256),
        "subnormal": sub,
        "mixed": mixed,
        # whole blocks below ~3.7e-37 (f32 subnormals included): 1/d or -127/max overflows
        "tiny": rng.normal(size=1024) * np.repeat([1e-37, 1e-39, 1e-41, 3e-45], 256),
        "huge": rng.choice([-1, 1], 1024) * rng.uniform(1e4, 6e4, 1024),
        "posonly": np.abs(rng.normal(size=512)) + 3.0,
    }


def ties(fmt: str, rng: np.random.Generator) -> np.ndarray:
    """Values placed exactly on the format's rounding midpoints (with exact power-of-2 scales)."""
    out = []
    for s in [1.0, 0.25, 2.0**-10, 4.0]:
        if fmt in ("Q4_0", "Q5_0"):
            half = 8 if fmt == "Q4_0" else 16
            # max = -half*s -> d = s, id = 1/s; x*id + half + 0.5 lands on an integer
            k = rng.integers(-half + 1, half, 31)
            blk = np.concatenate([[-half * s], (k - 0.5) * s])
            out.append(rng.permutation(blk))
        elif fmt in ("Q4_1", "Q5_1"):
            top = 15 if fmt == "Q4_1" else 31
            # min = -s, max = (top-1)*s -> d = s; (x - min)*id + 0.5 lands on an integer
            k = rng.integers(0, top - 1, 30)
            blk = np.concatenate([[-s, (top - 1) * s], (k + 0.5 - 1) * s])
            out.append(rng.permutation(blk))
        elif fmt in ("Q8_0", "Q8_1"):
            # amax = 127*s -> d = s; x*id = k + 0.5 (roundf: away from zero)
            k = rng.integers(-126, 126, 31)
            blk = np.concatenate([[127 * s * rng.choice([-1, 1])], (k + 0.5) * s])
            out.append(rng.permutation(blk))
        elif fmt == "Q8_K":
            # max = -127*s -> iscale = 1/s; x*iscale = k + 0.5 (nearest_int: ties to even)
            k = rng.integers(-126, 126, 255)
            blk = np.concatenate([[-127 * s], (k + 0.5) * s])
            out.append(rng.permutation(blk))
            blk = np.concatenate([[127 * s], (k + 0.5) * s])  # iscale = -1/s
            out.append(rng.permutation(blk))
        elif fmt in ("F16", "BF16"):
            # midpoints between adjacent representable values (ties to even)
            if fmt == "F16":
                h = rng.integers(0x0001, 0x7BFF, 64).astype(np.uint16)
                a = h.view(np.float16).astype(np.float64)
                b = (h + 1).view(np.float16).astype(np.float64)
            else:
                h = rng.integers(0x0001, 0x7F7F, 64).astype(np.uint32)
                a = (h << 16).view(F32).astype(np.float64)
                b = ((h + 1) << 16).view(F32).astype(np.float64)
            mid = ((a + b) / 2) * rng.choice([-1, 1], 64)
            assert np.all(mid.astype(F32).astype(np.float64) == mid)
            out.append(mid)
    return np.concatenate(out).astype(F32)


def near_limit(fmt: str, rng: np.random.Generator) -> np.ndarray:
    """Blocks whose scale lands just inside the f16 range (encoders reject just beyond)."""
    n = 32 if fmt != "Q8_K" else 256
    g = rng.normal(size=(4, n)) * 0.3
    if fmt == "Q4_0":
        top = 65500.0 * 8
    elif fmt == "Q5_0":
        top = 65500.0 * 16
    elif fmt in ("Q8_0",):
        top = 65500.0 * 127
    elif fmt == "Q8_1":
        # s = d * sum(q) must stay finite too: balance signs so the sum is 0, plus one block
        # whose s = 4064 * 2000/127 = 64000 sits just inside f16's range
        top = 65500.0 * 127
        g = np.clip(g * top, -top, top)
        g[:, 0] = top * rng.choice([-1, 1], 4)
        g[:, n // 2:] = -g[:, : n // 2]
        g[3, :] = 2000.0
        return g.astype(F32).ravel()
    elif fmt in ("Q4_1", "Q5_1"):
        # m = min must fit f16, and d = (max-min)/15 or /31
        g = rng.uniform(-65000.0, 65000.0, size=(4, n))
        g[:, 0] = -65500.0
        g[:, 1] = 65500.0
        return g.astype(F32).ravel()
    elif fmt == "Q8_K":
        top = 3.0e38
    elif fmt == "F16":
        v = np.array([65504.0, 65519.0, 65520.0, 70000.0, 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, 3e38] * 4, F32)
        return v * np.repeat([1, -1], 20).astype(F32)
    elif fmt == "BF16":
        v = np.array([3.3895314e38, 3.39e38, 3.4028235e38, 1e-38, 1e-40, 1e-45, 9.2e-41, 1.0, 65504.0, 2.0**127] * 4, F32)
        return v * np.repeat([1, -1], 20).astype(F32)
    g[:, 0] = top * rng.choice([-1, 1], 4)
    return np.clip(g * top, -abs(top), abs(top)).astype(F32).ravel()


# --------------------------------------------------------------------------------------------
# Reject cases and random-byte decode cases


def random_blocks(fmt: str, rng: np.random.Generator, nblocks: int) -> np.ndarray:
    _, bb = BLOCK[fmt]
    b = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    for off, w in SCALE_FIELDS[fmt]:
        if w == 2:
            # random finite f16 including subnormals, ±0, ±65504
            h = rng.integers(0, 0x7C00, nblocks).astype(np.uint16) | (rng.integers(0, 2, nblocks).astype(np.uint16) << 15)
            h[:4] = [0x0000, 0x8000, 0x7BFF, 0x0001][: min(4, nblocks)]
            b[:, off:off + 2] = h.view(np.uint8).reshape(-1, 2)
        else:
            f = (rng.normal(size=nblocks) * 10.0 ** rng.uniform(-6, 3, nblocks)).astype(F32)
            f[:3] = [0.0, -0.0, 1e-42][: min(3, nblocks)]
            b[:, off:off + 4] = f.view(np.uint8).reshape(-1, 4)
    return b.ravel()


def reject_cases(fmt: str, rng: np.random.Generator):
    """Rows of 4 valid blocks with one bad scale field in block `bi`; yields (name, bytes, tag)."""
    _, bb = BLOCK[fmt]
    for off, w in SCALE_FIELDS[fmt]:
        bad_values = ([0x7E00, 0x7C00, 0xFC00, 0x7C01, 0xFE00] if w == 2
                      else [0x7FC00000, 0x7F800000, 0xFF800000, 0x7F800001])
        for n, bad in enumerate(bad_values):
            bi = n % 4
            b = random_blocks(fmt, rng, 4).reshape(4, bb)
            if w == 2:
                b[bi, off:off + 2] = np.array([bad], np.uint16).view(np.uint8)
            else:
                b[bi, off:off + 4] = np.array([bad], np.uint32).view(np.uint8)
            yield f"bad{off}_{n}", b.ravel(), f"NonFiniteScale@{bi * bb + off}"


# --------------------------------------------------------------------------------------------


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rng = np.random.default_rng(0x6767_6D6C)
    common = inputs_common(rng)
    manifest = ["op\tformat\tk\trule\tinput\timportance\texpected"]
    written: set[str] = set()

    def write(name: str, data: np.ndarray) -> str:
        assert name not in written, name
        written.add(name)
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(np.ascontiguousarray(data).tobytes())
        return name

    for name, x in common.items():
        write(f"in.{name}.f32", x.astype(F32))

    # cross-checks of the numpy ports against gguf-py where gguf-py has the rule
    warnings.simplefilter("ignore")  # inf*0 in the tiny-scale blocks, as in the C code
    for name, x in common.items():
        g = np.asarray(quants.quantize(x.astype(F32).reshape(1, -1), T.Q8_0), dtype=np.uint8).ravel()
        with np.errstate(all="ignore"):
            p0 = port_q8_0_quantize(x)
            p1 = port_q8_1_quantize(x).reshape(-1, 36)
        assert np.array_equal(g, p0), f"Q8_0 port disagrees with gguf-py on {name}"
        assert np.array_equal(g.reshape(-1, 34)[:, :2], p1[:, :2]) and np.array_equal(g.reshape(-1, 34)[:, 2:], p1[:, 4:])

    counts: dict[str, int] = {}
    for fmt in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q8_K", "F16", "BF16"]:
        lo = fmt.lower()
        be, bb = BLOCK[fmt]
        k_row = 256
        cases = dict(common)
        cases["ties"] = ties(fmt, rng)
        cases["limit"] = near_limit(fmt, rng)
        if fmt == "Q8_1":
            # s = f16(d * sum(q)) overflows for same-signed huge blocks (lowbit: OutOfRange);
            # keep the magnitudes but balance each block so the sum stays small
            h = common["huge"].reshape(-1, 32).copy()
            h[:, 16:] = -h[:, :16]
            cases["huge"] = h.ravel()
        for name, x in cases.items():
            shared = name in common and x is common[name]
            x = x.astype(F32)
            k = k_row if x.size % k_row == 0 else x.size
            assert x.size % be == 0 and x.size % k == 0, (fmt, name, x.size)
            inp = f"in.{name}.f32" if shared else write(f"in.{lo}.{name}.f32", x)
            enc = oracle_quantize(fmt, x)
            if not scales_finite(fmt, enc):
                raise SystemExit(f"{fmt} {name}: oracle produced a non-finite scale; adjust inputs")
            encf = write(f"{lo}.{name}.bin", enc)
            dec = write(f"{lo}.{name}.dec.f32", oracle_dequantize(fmt, enc))
            manifest.append(f"encode\t{fmt}\t{k}\treference\t{inp}\t-\t{encf}")
            manifest.append(f"decode\t{fmt}\t{k}\t-\t{encf}\t-\t{dec}")
            counts[fmt] = counts.get(fmt, 0) + 2
        # decode of arbitrary bytes (finite scales)
        if fmt in ("F16", "BF16"):
            bits = np.concatenate([
                np.arange(0, 0x10000, 17, dtype=np.uint32)[:3840],
                np.array([0, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7C01, 0x7E00,
                          0xFE00, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x3C00, 0xBC00] + list(range(0x7FF0, 0x7FF0 + 238)),
                         dtype=np.uint32),
            ]).astype(np.uint16)
            assert bits.size == 4096
            raw = bits.view(np.uint8)
        else:
            raw = random_blocks(fmt, rng, 4096 // be if be == 32 else 8)
        rf = write(f"{lo}.randbytes.bin", raw)
        df = write(f"{lo}.randbytes.dec.f32", oracle_dequantize(fmt, raw))
        kk = 256 if fmt not in ("F16", "BF16") else 4096
        manifest.append(f"decode\t{fmt}\t{kk}\t-\t{rf}\t-\t{df}")
        counts[fmt] += 1
        if fmt in SCALE_FIELDS:
            for name, raw, tag in reject_cases(fmt, rng):
                rf = write(f"{lo}.reject.{name}.bin", raw)
                manifest.append(f"reject\t{fmt}\t{4 * be}\t-\t{rf}\t-\t{tag}")
                counts[fmt] += 1

    with open(os.path.join(OUT, "manifest.tsv"), "w") as fh:
        fh.write("# Generated by tools/oracle_ggml_basic.py (gguf-py 0.19.0 + numpy ports of ggml's Q8_1/Q8_K).\n")
        fh.write("\n".join(manifest) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(manifest) - 1} cases, {total} bytes: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

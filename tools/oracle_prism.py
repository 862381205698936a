#!/usr/bin/env python3
"""Oracle fixtures for the Prism ternary formats (PQ2_0, PTQ1_0) and 1bit's Ternary68 repack.

An independent numpy implementation of the published rules, written from FORMATS.md sections 5-6
and the public sources (facts only):
  * github PrismML-Eng/llama.cpp branch prism, ggml/src/ggml-quants.c
    (quantize_row_pq2_0_ref, quantize_row_ptq1_0_ref, dequantize_row_pq2_0, dequantize_row_ptq1_0)
  * github 1bit-MONSTER/llama.cpp, ggml/src/ggml-hrx/runtime/host-memory-ternary.cpp (pack_block)
It is deliberately vectorised numpy (no per-block loops shared with the Rust code).

Writes tests/fixtures/prism/ and tests/fixtures/onebit/ (binary files + manifest.tsv, format in
tests/common/mod.rs) and tests/fixtures/onebit/repack.tsv (Q4_0 -> Ternary68 byte pairs and
refusals, read by tests/prism.rs). Deterministic (fixed seeds).

    /work/venv/bin/python tools/oracle_prism.py
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRISM = os.path.join(ROOT, "tests", "fixtures", "prism")
ONEBIT = os.path.join(ROOT, "tests", "fixtures", "onebit")
QK = 128
F32 = np.float32


# ----------------------------------------------------------------------------- Prism rule

def c_roundf(v):
    """C roundf (ties away from zero) of f32 values, computed exactly in f64."""
    v = v.astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def prism_trits(x):
    """(blocks, 128) f32 -> (f16 scales, int trits) under Prism's reference rule."""
    x = x.astype(F32).reshape(-1, QK)
    amax = np.max(np.abs(x), axis=1)
    d = amax.astype(np.float16)
    if not np.all(np.isfinite(d)):
        raise ValueError("amax beyond f16: the reference writes an infinite scale")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(amax > 0, F32(1.0) / np.where(amax > 0, amax, F32(1.0)), F32(0.0)).astype(F32)
        prod = (x * inv[:, None]).astype(F32)  # one f32 multiply, as C
        # lowbit's convention where 1/amax overflows f32 (C is undefined there): x / amax
        quot = (x / np.where(amax > 0, amax, F32(1.0))[:, None]).astype(F32)
    v = np.where(np.isfinite(inv)[:, None], prod, quot)
    t = np.clip(c_roundf(v), -1, 1).astype(np.int64)
    return d, t


def pq2_0_pack(d, t):
    codes = (t + 1).astype(np.uint8).reshape(-1, 32, 4)
    qs = codes[:, :, 0] | (codes[:, :, 1] << 2) | (codes[:, :, 2] << 4) | (codes[:, :, 3] << 6)
    db = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    return np.concatenate([db, qs.astype(np.uint8)], axis=1).tobytes()


def pq2_0_decode(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view("<f2").astype(F32)
    q = b[:, 2:]
    codes = np.stack([(q >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(-1, QK)
    return ((codes.astype(np.int32) - 1).astype(F32) * d).astype(F32).reshape(-1)


# PTQ1_0 digit placement: element -> (byte in the 26 code bytes, digit index, digits in byte)
def ptq1_0_layout():
    e = np.arange(QK)
    byte = np.where(e < 80, e % 16, np.where(e < 120, 16 + (e - 80) % 8, 24 + (e - 120) % 2))
    dig = np.where(e < 80, e // 16, np.where(e < 120, (e - 80) // 8, (e - 120) // 2))
    return byte, dig


def ptq1_0_pack(d, t):
    byte, dig = ptq1_0_layout()
    nb = t.shape[0]
    ndig = np.where(np.arange(26) < 24, 5, 4)
    v = np.zeros((nb, 26), np.int64)
    # weight of digit n in a byte with k digits: 3^(k-1-n); qh values are then multiplied by 3
    w = 3 ** (ndig[byte] - 1 - dig)
    np.add.at(v, (slice(None), byte), (t + 1) * w)
    v[:, 24:] *= 3
    q = ((v * 256 + 242) // 243).astype(np.uint8)
    db = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    return np.concatenate([q, db], axis=1).tobytes()


def ptq1_0_decode(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 28)
    d = b[:, 26:].copy().view("<f2").astype(F32)
    byte, dig = ptq1_0_layout()
    q = b[:, byte].astype(np.uint32)
    m = (q * (3 ** dig)) & 0xFF
    digit = (m * 3) >> 8
    return ((digit.astype(np.int32) - 1).astype(F32) * d).astype(F32).reshape(-1)


# ----------------------------------------------------------------------------- 1bit repack

def q4_0_from_trits(t, dbits):
    """(groups, 128) trits and per-group f16 bits -> Q4_0 bytes (nibble t+8, same d in 4 blocks)."""
    nib = (t + 8).astype(np.uint8).reshape(-1, 32)
    qs = nib[:, :16] | (nib[:, 16:] << 4)
    d = np.repeat(dbits.astype("<u2"), 4).view(np.uint8).reshape(-1, 2)
    return np.concatenate([d, qs], axis=1).astype(np.uint8).tobytes()


def repack(q4):
    """Q4_0 bytes (multiple of 144) -> (Ternary68 bytes, None) or (None, 'Kind@offset')."""
    b = np.frombuffer(q4, np.uint8).reshape(-1, 8, 18)
    dbits = b[:, :, :2].copy().view("<u2")[:, :, 0]  # (units, 8)
    qs = b[:, :, 2:]
    lo, hi = qs & 15, qs >> 4
    # error search in 1bit's traversal order: unit, group, block (scale then bytes)
    for u in range(b.shape[0]):
        for g in range(2):
            d0 = dbits[u, 4 * g]
            if not np.isfinite(np.array([d0], "<u2").view(np.float16)[0]):
                return None, f"NonFiniteScale@{u * 144 + g * 72}"
            for blk in range(4):
                k = 4 * g + blk
                off = u * 144 + k * 18
                if dbits[u, k] != d0:
                    return None, f"NotRepresentable@{off}"
                bad = (lo[u, k] < 7) | (lo[u, k] > 9) | (hi[u, k] < 7) | (hi[u, k] > 9)
                if bad.any():
                    return None, f"NotRepresentable@{off + 2 + int(np.argmax(bad))}"
    # values in Q4_0's element order (j, then j+16) are exactly the Ternary68 order
    vals = np.concatenate([lo, hi], axis=2).reshape(-1, 256).astype(np.uint8) - 7  # codes t+1
    c = vals.reshape(-1, 64, 4)
    codes = c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)
    scales = np.ascontiguousarray(dbits[:, [0, 4]].astype("<u2")).view(np.uint8).reshape(-1, 4)
    return np.concatenate([scales, codes], axis=1).astype(np.uint8).tobytes(), None


def t68_decode(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 68)
    d = b[:, :4].copy().view("<f2").astype(F32)  # (n, 2)
    c = b[:, 4:]
    codes = np.stack([(c >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(-1, 256)
    assert codes.max(initial=0) <= 2
    dd = np.repeat(d, 128, axis=1)
    return ((codes.astype(np.int32) - 1).astype(F32) * dd).astype(F32).reshape(-1)


# ----------------------------------------------------------------------------- inputs

def inputs(rng):
    """name -> f32 array (length a multiple of 128)."""
    cases = {}
    cases["normal"] = rng.standard_normal(512).astype(F32)
    cases["heavy"] = rng.standard_t(2, 512).astype(F32)
    cases["cubed"] = (rng.standard_normal(256) ** 3 * 0.1).astype(F32)
    cases["zero"] = np.zeros(256, F32)
    sub = []
    for amax in (1e-6, 3e-8, 1e-20, 1e-30, 3e-39, 1e-40, 1e-45):
        v = (rng.uniform(-1, 1, QK) * amax).astype(F32)
        v[rng.integers(QK)] = F32(amax)
        sub.append(v)
    cases["subnormal"] = np.concatenate(sub).astype(F32)
    huge = []
    for amax in (1e4, 3.3e4, 6e4, 65504.0, 65519.0):
        v = (rng.uniform(-1, 1, QK) * amax).astype(F32)
        v[rng.integers(QK)] = -F32(amax)
        huge.append(v)
    cases["huge"] = np.concatenate(huge).astype(F32)
    # ties: x exactly amax/2 (x/d = 0.5 exactly, but x * f32(1/amax) may fall just below 0.5)
    ties = []
    for amax in rng.uniform(0.1, 100.0, 16).astype(F32):
        v = np.zeros(QK, F32)
        v[0] = amax
        v[1:40] = amax * F32(0.5)
        v[40:80] = -amax * F32(0.5)
        v[80:] = (rng.uniform(-1, 1, 48) * amax).astype(F32)
        ties.append(v)
    cases["ties"] = np.concatenate(ties).astype(F32)
    # values on the f32 neighbours of the midpoint
    near = []
    for amax in (F32(1.0), F32(3.0), F32(0.7), F32(1000.0)):
        h = amax * F32(0.5)
        v = np.zeros(QK, F32)
        v[0] = amax
        v[1:6] = [np.nextafter(h, F32(0)), h, np.nextafter(h, F32(10 * amax)), -h, -np.nextafter(h, F32(0))]
        near.append(v)
    cases["midpoints"] = np.concatenate(near).astype(F32)
    return cases


def formats_md_examples():
    pq = np.zeros(QK, F32)
    pq[:4] = [0.5, -0.5, 0.0, 0.2]
    ptq = np.zeros(QK, F32)
    ptq[0], ptq[1], ptq[16], ptq[127] = 1.0, 0.6, -1.0, -0.9
    return pq, ptq


# ----------------------------------------------------------------------------- writing

def write(dirname, name, data):
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(data)


def f32bytes(a):
    return np.asarray(a, "<f4").tobytes()


def main():
    os.makedirs(PRISM, exist_ok=True)
    os.makedirs(ONEBIT, exist_ok=True)
    rng = np.random.default_rng(20260142)
    rows = []

    fmts = {
        "PQ2_0": ("pq2_0", pq2_0_pack, pq2_0_decode, 34),
        "PTQ1_0": ("ptq1_0", ptq1_0_pack, ptq1_0_decode, 28),
    }
    cases = inputs(rng)
    pq_ex, ptq_ex = formats_md_examples()
    for fmt, (ext, pack, decode, bb) in fmts.items():
        allcases = dict(cases)
        exname = f"example_{ext}"
        allcases[exname] = pq_ex if fmt == "PQ2_0" else ptq_ex
        for name, x in allcases.items():
            k = len(x)
            d, t = prism_trits(x)
            enc = pack(d, t)
            write(PRISM, f"{name}.f32", f32bytes(x))
            write(PRISM, f"{name}.{ext}.bin", enc)
            write(PRISM, f"{name}.{ext}.dec.f32", f32bytes(decode(enc)))
            rows.append(("encode", fmt, k, "reference", f"{name}.f32", "-", f"{name}.{ext}.bin"))
            rows.append(("decode", fmt, k, "-", f"{name}.{ext}.bin", "-", f"{name}.{ext}.dec.f32"))
        # FORMATS.md worked examples must come out exactly
        ex = pack(*prism_trits(allcases[exname]))
        if fmt == "PQ2_0":
            assert ex[:5] == bytes([0x00, 0x38, 0x52, 0x55, 0x55]), ex[:5].hex()
            assert ex[5:] == bytes([0x55] * 29)
        else:
            assert ex[:3] == bytes([0xB9, 0xD5, 0x80]) and ex[3:24] == bytes([0x80] * 21), ex.hex()
            assert ex[24:] == bytes([0x7F, 0x7C, 0x00, 0x3C]), ex.hex()

        # random bytes, every code value (PQ2_0 code 3 decodes as +2 d), finite scales of every kind
        nb = 16
        raw = bytearray(rng.integers(0, 256, nb * bb, dtype=np.uint8).tobytes())
        scales = [0x3C00, 0xBC00, 0x0000, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0xFBFF, 0x2E66, 0x5140,
                  0x0400, 0x3555, 0xC900, 0x1234, 0x6000, 0x3800]
        doff = 0 if fmt == "PQ2_0" else 26
        for i, s in enumerate(scales):
            raw[i * bb + doff:i * bb + doff + 2] = s.to_bytes(2, "little")
        raw = bytes(raw)
        write(PRISM, f"random.{ext}.bin", raw)
        write(PRISM, f"random.{ext}.dec.f32", f32bytes(decode(raw)))
        rows.append(("decode", fmt, nb * QK, "-", f"random.{ext}.bin", "-", f"random.{ext}.dec.f32"))

        # reject: NaN / inf scale in block 2 of 3
        for tag, bits in (("nan", 0x7E00), ("inf", 0x7C00), ("ninf", 0xFC00), ("nan2", 0xFE01)):
            bad = bytearray(raw[:3 * bb])
            bad[2 * bb + doff:2 * bb + doff + 2] = bits.to_bytes(2, "little")
            write(PRISM, f"bad_{tag}.{ext}.bin", bytes(bad))
            rows.append(("reject", fmt, 3 * QK, "-", f"bad_{tag}.{ext}.bin", "-",
                         f"NonFiniteScale@{2 * bb + doff}"))

    with open(os.path.join(PRISM, "manifest.tsv"), "w") as f:
        f.write("# generated by tools/oracle_prism.py (independent numpy oracle); do not edit\n")
        f.write("op\tformat\tk\trule\tinput\timportance\texpected\n")
        for r in rows:
            f.write("\t".join(str(c) for c in r) + "\n")

    # ------------------------------------------------------------------ onebit
    rows = []
    reps = []

    def q4_case(name, groups, dbits):
        t = rng.integers(-1, 2, (groups, QK))
        t[0, :5] = [-1, 0, 1, 1, -1]
        return name, q4_0_from_trits(t, np.asarray(dbits, np.uint16))

    dsets = {
        "basic": [0x3C00, 0x2E66, 0x3800, 0x4500],
        "signed": [0xBC00, 0x3C00, 0x8000, 0x0000, 0xC400, 0x1400],
        "extreme": [0x0001, 0x03FF, 0x7BFF, 0xFBFF],
        "mixed": list(rng.integers(0x0400, 0x7800, 16) | (rng.integers(0, 2, 16) << 15)),
    }
    try:
        from gguf import quants, GGMLQuantizationType as T  # second oracle for the values
    except Exception:  # pragma: no cover
        quants = None
    for name, dbits in dsets.items():
        nm, q4 = q4_case(name, len(dbits), dbits)
        t68, err = repack(q4)
        assert err is None, err
        write(ONEBIT, f"{nm}.q4_0.bin", q4)
        write(ONEBIT, f"{nm}.t68.bin", t68)
        dec = t68_decode(t68)
        if quants is not None:
            ref = quants.dequantize(np.frombuffer(q4, np.uint8), T.Q4_0).astype(F32).reshape(-1)
            assert np.array_equal(dec.view(np.uint32), ref.view(np.uint32)), name
        write(ONEBIT, f"{nm}.t68.dec.f32", f32bytes(dec))
        rows.append(("decode", "TERNARY68", len(dec), "-", f"{nm}.t68.bin", "-", f"{nm}.t68.dec.f32"))
        reps.append(("ok", f"{nm}.q4_0.bin", f"{nm}.t68.bin"))

    # refusals of the repack (source byte offsets)
    _, good = q4_case("src", 4, [0x3C00, 0x3800, 0x3000, 0x4000])

    def mutate(name, edits):
        b = bytearray(good)
        for off, val in edits:
            b[off] = val
        t68, err = repack(bytes(b))
        assert t68 is None
        write(ONEBIT, f"{name}.q4_0.bin", bytes(b))
        reps.append(("reject", f"{name}.q4_0.bin", err))
        return err

    assert mutate("nib6lo", [(144 + 72 + 18 + 2 + 5, (good[144 + 72 + 18 + 2 + 5] & 0xF0) | 6)]) \
        == f"NotRepresentable@{144 + 72 + 18 + 7}"
    assert mutate("nib10hi", [(2 + 15, (good[2 + 15] & 0x0F) | 0xA0)]) == "NotRepresentable@17"
    assert mutate("nib0", [(3 * 18 + 2, 0x00)]) == f"NotRepresentable@{3 * 18 + 2}"
    assert mutate("nibF", [(144 + 2, 0xF8)]) == "NotRepresentable@146"
    # block 2 of group 1 in unit 0 has a different scale (one ulp)
    off = 72 + 2 * 18
    assert mutate("scale", [(off, good[off] ^ 1)]) == f"NotRepresentable@{off}"
    # -0 vs +0 differ as bits
    zero = bytearray(good)
    for blk in range(4):
        zero[blk * 18:blk * 18 + 2] = b"\x00\x00"
    zero[18 * 3 + 1] = 0x80
    good_zero = bytes(zero)
    t68, err = repack(good_zero)
    assert err == f"NotRepresentable@{54}"
    write(ONEBIT, "negzero.q4_0.bin", good_zero)
    reps.append(("reject", "negzero.q4_0.bin", err))
    # non-finite group scale (lowbit refuses; 1bit would copy the bits)
    nan = bytearray(good)
    for blk in range(4):
        nan[144 + 72 + blk * 18:144 + 72 + blk * 18 + 2] = b"\x00\x7e"
    t68, err = repack(bytes(nan))
    assert err == f"NonFiniteScale@{144 + 72}"
    write(ONEBIT, "nanscale.q4_0.bin", bytes(nan))
    reps.append(("reject", "nanscale.q4_0.bin", err))

    # Ternary68 decode refusals: code 3, non-finite scales
    base = open(os.path.join(ONEBIT, "basic.t68.bin"), "rb").read()
    bad = bytearray(base)
    bad[68 + 4 + 10] |= 0xC0
    write(ONEBIT, "code3.t68.bin", bytes(bad))
    rows.append(("reject", "TERNARY68", 512, "-", "code3.t68.bin", "-", f"IllegalByte@{68 + 14}"))
    bad = bytearray(base)
    bad[68 + 2:68 + 4] = b"\x00\x7c"
    write(ONEBIT, "infd1.t68.bin", bytes(bad))
    rows.append(("reject", "TERNARY68", 512, "-", "infd1.t68.bin", "-", "NonFiniteScale@70"))
    bad = bytearray(base)
    bad[0:2] = b"\x01\xfe"
    write(ONEBIT, "nand0.t68.bin", bytes(bad))
    rows.append(("reject", "TERNARY68", 512, "-", "nand0.t68.bin", "-", "NonFiniteScale@0"))

    with open(os.path.join(ONEBIT, "manifest.tsv"), "w") as f:
        f.write("# generated by tools/oracle_prism.py (independent numpy oracle); do not edit\n")
        f.write("op\tformat\tk\trule\tinput\timportance\texpected\n")
        for r in rows:
            f.write("\t".join(str(c) for c in r) + "\n")
    with open(os.path.join(ONEBIT, "repack.tsv"), "w") as f:
        f.write("# Q4_0 -> Ternary68 repack cases: ok <src> <expected> | reject <src> <Error@offset>\n")
        for r in reps:
            f.write("\t".join(r) + "\n")
    total = sum(os.path.getsize(os.path.join(d, n)) for d in (PRISM, ONEBIT) for n in os.listdir(d))
    print(f"wrote fixtures: {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

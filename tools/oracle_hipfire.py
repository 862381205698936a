#!/usr/bin/env python3
"""Independent numpy oracle for hipfire's HFP4 family (HFP4G32, MFP4G32, MFP4G32P) and its
FWHT-256; writes tests/fixtures/hipfire/ (binary cases + manifest.tsv, format in
tests/common/mod.rs).

Written from FORMATS.md section 4 and hipfire's public code (github warpfront/hipfire,
crates/hipfire-quantize/src/quant_hfp4.rs, quant_fwht.rs, float16.rs; the CPU dequantizers),
vectorised with numpy; not a transliteration of lowbit's Rust. Every arithmetic step is done
in float32 in hipfire's order:

  rowmax = max|x|;  rs = rowmax/6 (1 for a zero row);  inv = 1/rs (0 for a zero row)
  header f16 = truncate(rs);  per block: bmn = bmax*inv
  UE8M0: e = clamp(ceil(log2f(bmn/6)) + 127, 0, 254) (0 if bmn <= 0 or NaN; +inf -> 0)
  E4M3 : byte = smallest code in 0..0x7E with value >= bmn/6 (0 if bmn <= 0; >= 448 -> 0x7E)
  code = first argmin over the 16-entry E2M1 table of |lut - (x*inv)*(1/factor)|
  decode: (f32(f16 rs) * factor) * lut;  MFP4: then inverse FWHT per 256 (signs2 first)

log2f: computed as float64 log2 rounded to float32 (a correctly rounded log2f); hipfire's
glibc log2f and lowbit's libm log2f agree with it except within ~0.25 ulp of an f32 rounding
midpoint, which none of the fixtures hits.

Run: /work/venv/bin/python tools/oracle_hipfire.py   (deterministic; fixed seeds)
"""

import os
import sys

import numpy as np
import ml_dtypes

F32 = np.float32
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hipfire")

LUT = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=F32)

FLAGS = {"HFP4G32": 0x00, "MFP4G32": 0x05, "MFP4G32P": 0x05}


# ---------------------------------------------------------------- FWHT-256
def lcg_signs(seed):
    st = seed
    out = np.empty(256, dtype=F32)
    for i in range(256):
        st = (st * 1103515245 + 12345) & 0xFFFFFFFF & 0x7FFFFFFF
        out[i] = 1.0 if (st >> 16) & 1 else -1.0
    return out


S1 = lcg_signs(42)
S2 = lcg_signs(1042)


def packed_hex(s):
    bits = (s > 0).astype(np.uint8)
    return np.packbits(bits, bitorder="little").tobytes().hex()


assert packed_hex(S1) == "6f431f7edba4cc7df732616531ea6134acf88f3f38308757889d933fa3258e40"
assert packed_hex(S2) == "61b35e61a484ab8e3bc0812461c61c51b819d43a93ecf3be71423aeee9af0f39"


def fwht_rows(x, first, last):
    """x: (n, 256) float32. Sign, butterflies stage by stage, then * (0.0625 * last)."""
    x = (x.astype(F32) * first).astype(F32)
    n = x.shape[0]
    h = 1
    while h < 256:
        v = x.reshape(n, 256 // (2 * h), 2, h)
        a = v[:, :, 0, :]
        b = v[:, :, 1, :]
        x = np.stack([a + b, a - b], axis=2).reshape(n, 256).astype(F32)
        h *= 2
    return (x * (F32(0.0625) * last).astype(F32)).astype(F32)


def rotate(rows):  # rows (m, k)
    m, k = rows.shape
    return fwht_rows(rows.reshape(-1, 256), S1, S2).reshape(m, k)


def unrotate(rows):
    m, k = rows.shape
    return fwht_rows(rows.reshape(-1, 256), S2, S1).reshape(m, k)


# ---------------------------------------------------------------- scalars
def f16_trunc_bits(v):
    """hipfire float16.rs: truncating f32 -> f16 (finite, non-negative inputs here)."""
    b = int(np.array(v, dtype=F32).view(np.uint32))
    sign = b >> 31
    exp = (b >> 23) & 0xFF
    frac = b & 0x7FFFFF
    if exp == 0xFF:
        return (sign << 15) | 0x7C00 | ((frac >> 13) | 1 if frac else 0)
    ne = exp - 127 + 15
    if ne >= 31:
        return (sign << 15) | 0x7C00
    if ne <= 0:
        if ne < -10:
            return sign << 15
        return (sign << 15) | ((frac | 0x800000) >> (1 - ne + 13))
    return (sign << 15) | (ne << 10) | (frac >> 13)


def f16_to_f32(bits):
    return F32(np.array(bits, dtype=np.uint16).view(np.float16))


E4M3_TABLE = np.arange(0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32)


def e4m3_roundup(s):
    s = F32(s)
    if not s > 0:
        return 0
    if s >= 448:
        return 0x7E
    return int(np.searchsorted(E4M3_TABLE, s, side="left"))


def ue8m0_exp(bmn):
    bmn = F32(bmn)
    if not bmn > 0:
        return 0
    if np.isinf(bmn):
        return 0  # hipfire: ceil(+inf) as i32 == i32::MAX, + 127 wraps (release) -> clamp 0
    r = F32(bmn / F32(6.0))
    if r == 0:
        return 0  # log2(0) = -inf -> i32::MIN + 127 -> clamp 0
    l = F32(np.log2(np.float64(r)))
    c = int(np.ceil(l))
    return min(max(c + 127, 0), 254)


def pow2(e):
    return F32(np.ldexp(F32(1.0), int(e) - 127))


def nearest_codes(v):
    """First argmin of |lut - v| in float32 (hipfire's strict-< table scan)."""
    v = np.asarray(v, dtype=F32)
    with np.errstate(invalid="ignore"):
        err = np.abs(LUT[None, :] - v[:, None]).astype(F32)
    err = np.where(np.isnan(err), np.inf, err)
    # all-inf rows (non-finite v): hipfire never updates -> code 0; argmin gives 0 as well.
    return np.argmin(err, axis=1).astype(np.uint8)


# ---------------------------------------------------------------- encode / decode
def encode_row(fmt, row):
    row = np.asarray(row, dtype=F32)
    k = row.size
    nb = k // 32
    rowmax = F32(np.max(np.abs(row))) if k else F32(0)
    if rowmax > 0:
        rs = F32(rowmax / F32(6.0))
        with np.errstate(divide="ignore", over="ignore"):
            inv = F32(F32(1.0) / rs)
    else:
        rs, inv = F32(1.0), F32(0.0)
    assert rs < 65536, "hipfire would write an infinite row scale"
    out = bytearray(16 + 17 * nb)
    out[0:2] = int(f16_trunc_bits(rs)).to_bytes(2, "little")
    out[4:6] = nb.to_bytes(2, "little")
    out[6] = FLAGS[fmt]
    for b in range(nb):
        blk = row[32 * b:32 * b + 32]
        bmax = F32(np.max(np.abs(blk)))
        with np.errstate(invalid="ignore", over="ignore"):
            bmn = F32(bmax * inv)
        if fmt == "MFP4G32P":
            s = F32(bmn / F32(6.0)) if bmn > 0 else F32(0.0)
            byte = e4m3_roundup(s)
            factor = E4M3_TABLE[byte]
        else:
            byte = ue8m0_exp(bmn)
            factor = pow2(byte)
        inv_b = F32(F32(1.0) / factor) if factor > 0 else F32(0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            v = ((blk * inv).astype(F32) * inv_b).astype(F32)
        q = nearest_codes(v)
        off = 16 + 17 * b
        out[off] = byte
        out[off + 1:off + 17] = (q[0::2] | (q[1::2] << 4)).astype(np.uint8).tobytes()
    return bytes(out)


def encode(fmt, rows):
    rows = np.asarray(rows, dtype=F32)
    if fmt != "HFP4G32":
        rows = rotate(rows)
    return b"".join(encode_row(fmt, r) for r in rows)


def decode(fmt, data, k):
    rb = 16 + 17 * (k // 32)
    m = len(data) // rb
    out = np.zeros((m, k), dtype=F32)
    for r in range(m):
        row = data[r * rb:(r + 1) * rb]
        rs = f16_to_f32(int.from_bytes(row[0:2], "little"))
        for b in range(k // 32):
            off = 16 + 17 * b
            byte = row[off]
            factor = E4M3_TABLE[byte] if fmt == "MFP4G32P" else pow2(byte)
            sc = F32(rs * factor)
            nib = np.frombuffer(row[off + 1:off + 17], dtype=np.uint8)
            q = np.empty(32, dtype=np.uint8)
            q[0::2] = nib & 15
            q[1::2] = nib >> 4
            out[r, 32 * b:32 * b + 32] = (sc * LUT[q]).astype(F32)
    if fmt != "HFP4G32":
        out = unrotate(out)
    return out


# ---------------------------------------------------------------- fixtures
manifest = []


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def case_encode(name, fmt, rows):
    rows = np.asarray(rows, dtype=F32)
    k = rows.shape[1]
    tag = fmt.lower()
    enc = encode(fmt, rows)
    write(f"{name}.{tag}.f32", rows.astype("<f4").tobytes())
    write(f"{name}.{tag}.bin", enc)
    manifest.append(("encode", fmt, k, "reference", f"{name}.{tag}.f32", "-", f"{name}.{tag}.bin"))
    case_decode(name, fmt, enc, k)
    return enc


def case_decode(name, fmt, enc, k):
    tag = fmt.lower()
    write(f"{name}.{tag}.bin", enc)
    dec = decode(fmt, enc, k)
    write(f"{name}.{tag}.dec.f32", dec.astype("<f4").tobytes())
    manifest.append(("decode", fmt, k, "-", f"{name}.{tag}.bin", "-", f"{name}.{tag}.dec.f32"))


def case_reject(name, fmt, data, k, tag):
    fn = f"bad_{name}.{fmt.lower()}.bin"
    write(fn, bytes(data))
    manifest.append(("reject", fmt, k, "-", fn, "-", tag))


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    rng = np.random.default_rng(20240602)

    # FORMATS.md worked example (K = 64).
    ex = np.zeros((1, 64), dtype=F32)
    ex[0, :4] = [0.05, -0.1, 0.2, 0.125]
    ex[0, 32:36] = [3.0, -1.5, 0.75, 0.6]
    enc = case_encode("worked", "HFP4G32", ex)
    assert enc[:16].hex() == "00380000020000000000000000000000", enc[:16].hex()
    assert enc[16:19].hex() == "7cb245" and enc[33:36].hex() == "7fd723"

    def heavy(m, k):
        return (rng.standard_t(2, size=(m, k)) * 0.02).astype(F32)

    def tiny(m, k):
        mag = 10.0 ** rng.uniform(-40, -6, size=(m, k))
        return (mag * rng.choice([-1, 1], size=(m, k))).astype(F32)

    def huge(m, k):
        x = rng.standard_normal((m, k)).astype(F32) * F32(3e4)
        x[:, 7] = F32(6 * 65504 * 0.999)  # row scale just under f16 max
        return x.astype(F32)

    def ties(m, k):
        # Row max 6 -> rs = 1 exactly, inv = 1; values on E2M1 midpoints at block scales 2^j.
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
        x = np.zeros((m, k), dtype=F32)
        for r in range(m):
            for b in range(k // 32):
                j = -(b % 5)
                blk = rng.choice(mids, size=32) * rng.choice([-1, 1], size=32)
                blk[0] = 6.0  # sets the block exponent to 127 + j
                x[r, 32 * b:32 * b + 32] = blk * F32(2.0 ** j)
            x[r, 0] = 6.0
        return x.astype(F32)

    for fmt in ["HFP4G32", "MFP4G32", "MFP4G32P"]:
        k = 512 if fmt == "HFP4G32" else 256
        case_encode("normal", fmt, rng.standard_normal((4, k)).astype(F32) * F32(0.05))
        case_encode("heavy", fmt, heavy(4, k))
        case_encode("cubed", fmt, (rng.standard_normal((2, k)) ** 3).astype(F32))
        z = np.zeros((2, k), dtype=F32)
        z[1, 40:60] = rng.standard_normal(20) * 0.1  # a row with zero blocks inside
        case_encode("zero", fmt, z)
        case_encode("tiny", fmt, tiny(2, k))
        # Rows so small that 1/rs overflows (degenerate path), with a zero block.
        d = np.zeros((1, k), dtype=F32)
        d[0, 32:64] = (10.0 ** rng.uniform(-45, -39, size=32)
                       * rng.choice([-1, 1], size=32)).astype(F32)
        d[0, 33] = F32(-1e-39)
        case_encode("degenerate", fmt, d)
        case_encode("huge", fmt, huge(2, k))
        case_encode("ties", fmt, ties(2, k))
        case_encode("k_long", fmt, rng.standard_normal((1, 2048)).astype(F32))

    # HFP4G32 with K not a multiple of 256 (byte format allows K % 32).
    case_encode("k96", "HFP4G32", rng.standard_normal((3, 96)).astype(F32))
    # log2 rounding: block max normalises to 6 * 2^-5 * (1 + 2^-23) -> f32 log2 = -5 exactly.
    lg = np.zeros((1, 64), dtype=F32)
    lg[0, 0] = 6.0
    lg[0, 32] = F32(6.0) * np.array(0x3D000001, dtype=np.uint32).view(F32)
    lg[0, 33] = F32(0.1)
    enc = case_encode("log2edge", "HFP4G32", lg)
    assert enc[16 + 17] == 122, enc[16 + 17]

    # Decode of arbitrary valid bytes (not encoder output): random e, codes, row scales.
    for fmt in ["HFP4G32", "MFP4G32", "MFP4G32P"]:
        k = 256
        rows = []
        for r in range(4):
            rs = rng.integers(0x0001, 0x7800)  # positive finite f16 (incl. subnormals)
            row = bytearray(16 + 17 * (k // 32))
            row[0:2] = int(rs).to_bytes(2, "little")
            row[4:6] = (k // 32).to_bytes(2, "little")
            row[6] = FLAGS[fmt]
            for b in range(k // 32):
                off = 16 + 17 * b
                if fmt == "MFP4G32P":
                    row[off] = int(rng.integers(0, 0x7F))
                else:
                    row[off] = int(rng.choice([0, 1, 2, rng.integers(60, 190), 120, 127, 128]))
                row[off + 1:off + 17] = rng.integers(0, 256, size=16, dtype=np.uint8).tobytes()
            rows.append(bytes(row))
        case_decode("bytes", fmt, b"".join(rows), k)

    # Rejects.
    k = 256
    good = {f: bytearray(encode(f, rng.standard_normal((2, k)).astype(F32))) for f in FLAGS}
    rb = 16 + 17 * (k // 32)

    def bad(name, fmt, mut, tag):
        d = bytearray(good[fmt])
        mut(d)
        case_reject(name, fmt, d, k, tag)

    bad("flags", "HFP4G32", lambda d: d.__setitem__(6, 0x05), "IllegalByte@6")
    bad("flags", "MFP4G32", lambda d: d.__setitem__(6, 0x00), "IllegalByte@6")
    bad("flags_row2", "MFP4G32P", lambda d: d.__setitem__(rb + 6, 0x01), f"IllegalByte@{rb + 6}")
    bad("count", "HFP4G32", lambda d: d.__setitem__(4, 7), "IllegalByte@4")
    bad("count_hi", "MFP4G32", lambda d: d.__setitem__(5, 1), "IllegalByte@5")
    bad("nan_scale", "HFP4G32", lambda d: d.__setitem__(slice(0, 2), b"\x00\x7e"), "NonFiniteScale@0")
    bad("inf_scale", "MFP4G32P", lambda d: d.__setitem__(slice(0, 2), b"\x00\x7c"), "NonFiniteScale@0")
    bad("neg_scale", "HFP4G32", lambda d: d.__setitem__(1, d[1] | 0x80), "IllegalByte@1")
    bad("scale_b", "HFP4G32", lambda d: d.__setitem__(3, 0x3c), "IllegalByte@3")
    bad("reserved", "MFP4G32", lambda d: d.__setitem__(12, 1), "IllegalByte@12")
    bad("e_ff", "HFP4G32", lambda d: d.__setitem__(16 + 17 * 3, 0xFF), f"IllegalByte@{16 + 17 * 3}")
    bad("e_ff_row2", "MFP4G32", lambda d: d.__setitem__(rb + 16, 0xFF), f"IllegalByte@{rb + 16}")
    bad("e4m3_nan", "MFP4G32P", lambda d: d.__setitem__(16 + 17 * 5, 0x7F), f"IllegalByte@{16 + 17 * 5}")
    bad("e4m3_sign", "MFP4G32P", lambda d: d.__setitem__(16, 0x80 | d[16]), "IllegalByte@16")

    def overflow(d):
        d[0:2] = (0x3C00).to_bytes(2, "little")  # row scale 1.0
        d[16 + 17 * 2] = 254  # 2^127 * 6 overflows f32
    bad("overflow", "HFP4G32", overflow, f"NonFiniteScale@{16 + 17 * 2}")

    with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
        f.write("# generated by tools/oracle_hipfire.py (independent numpy oracle of hipfire's rule)\n")
        f.write("op\tformat\tk\trule\tinput\timportance\texpected\n")
        for row in manifest:
            f.write("\t".join(str(c) for c in row) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(manifest)} cases, {total} bytes in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Independent numpy oracle for the ROCmFPX family (ROCmFP2, ROCmFP3).

Written from FORMATS.md section 3 and the published rule in github ciru-ai/ROCmFPX
(ggml/rocmfpx/rocmfp2_reference.c: exhaustive search over every legal UE4M3 scale byte
0x00..0x7E per 16-weight half, squared error in IEEE binary64 summed left to right, exact ties to
the lower byte; ggml/rocmfpx/rocmfpx.c: FP3 thresholds 0.5/1.5/3.0, FP3 bit packing, imatrix
weight qw * sqrt(sigma2 + x^2) with sigma2 the row mean of x^2).

The search is vectorised over the 127 candidate scales: for each element in order, the error
vector of all scales is accumulated (acc = acc + w_i * t_i), so every scale's sum has the
reference's left-to-right order. Weighted objective: w_i * (d_i * d_i), all in f64, with
sigma2 = (sum over the row of x^2, left to right in f64) / k and w_i = qw_i * sqrt(sigma2 + x_i^2).

Writes tests/fixtures/rocmfpx/ (binary files + manifest.tsv). Deterministic (fixed seeds).
Run: /work/venv/bin/python tools/oracle_rocmfpx.py
"""

import math
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "rocmfpx")


def ue4m3_value(b):
    """UE4M3-b8: E = b >> 3, M = b & 7; E == 0 -> M * 2^-10, else (8 + M) * 2^(E - 11)."""
    e, m = b >> 3, b & 7
    return math.ldexp(m, -10) if e == 0 else math.ldexp(8 + m, e - 11)


SCALES = np.array([ue4m3_value(b) for b in range(127)], dtype=np.float64)
assert SCALES[0x38] == 0.5 and SCALES[0x7E] == 224.0 and SCALES[0x12] == 0.01953125

FP2_LEVELS = np.array([-4, -1, 1, 4], dtype=np.float32)
FP3_LEVELS = np.array([0, 1, 2, 4, 0, -1, -2, -4], dtype=np.float32)
FP3_MAGS = np.array([0.0, 1.0, 2.0, 4.0])


# ---------------------------------------------------------------------------- error per scale

def fp2_terms(x, s):
    """Rounded squared error of one input at every scale in s (vector)."""
    m = abs(x)
    inner = (m - s) * (m - s)
    outer = (m - 4.0 * s) * (m - 4.0 * s)
    # The reference selector keeps the outer level only when its rounded square is smaller.
    return np.where(outer < inner, outer, inner)


def fp3_index(m, s):
    return np.where(m <= 0.5 * s, 0, np.where(m <= 1.5 * s, 1, np.where(m <= 3.0 * s, 2, 3)))


def fp3_terms(x, s):
    m = abs(x)
    c = FP3_MAGS[fp3_index(m, s)]
    c = np.where(s == 0.0, 0.0, c)
    d = m - c * s
    return d * d


def best_scale(fmt, xs, ws):
    """Exhaustive search: returns (byte, error vector over all 127 scales)."""
    acc = np.zeros(127, dtype=np.float64)
    terms = fp2_terms if fmt == "ROCMFP2" else fp3_terms
    for x, w in zip(xs, ws):
        acc = acc + w * terms(float(x), SCALES)
    return int(np.argmin(acc)), acc  # argmin: first (lowest byte) of equal minima


# ---------------------------------------------------------------------------- codes and packing

def fp2_code(x, s):
    if s == 0.0:
        return 0
    m = abs(x)
    od, idd = m - 4.0 * s, m - s
    outer = od * od < idd * idd
    neg = math.copysign(1.0, x) < 0
    return (0 if outer else 1) if neg else (3 if outer else 2)


def fp3_code(x, s):
    if s == 0.0:
        return 0
    idx = int(fp3_index(abs(x), s))
    if idx == 0:
        return 0
    return (4 | idx) if x < 0 else idx


def pack_fp2(codes, e):
    qs = []
    for j in range(8):
        b = 0
        for i in range(4):
            b |= codes[4 * j + i] << (2 * i)
        qs.append(b)
    return bytes(qs + list(e))


def pack_fp3(codes, e):
    out = []
    for g in range(4):
        c = codes[8 * g: 8 * g + 8]
        out.append((c[0] & 7) | ((c[1] & 7) << 3) | ((c[2] & 3) << 6))
        out.append(((c[2] >> 2) & 1) | ((c[3] & 7) << 1) | ((c[4] & 7) << 4) | ((c[5] & 1) << 7))
        out.append(((c[5] >> 1) & 3) | ((c[6] & 7) << 2) | ((c[7] & 7) << 5))
    return bytes(out + list(e))


def encode_row(fmt, row, qw=None):
    row = [float(v) for v in np.asarray(row, dtype=np.float32)]
    k = len(row)
    if qw is not None:
        s2 = 0.0
        for v in row:
            s2 += v * v
        sigma2 = s2 / k
        weights = [float(q) * math.sqrt(sigma2 + v * v) for q, v in zip(np.asarray(qw, dtype=np.float32), row)]
    else:
        weights = [1.0] * k
    out = b""
    for b in range(k // 32):
        codes, e = [], []
        for h in range(2):
            lo = 32 * b + 16 * h
            xs, ws = row[lo:lo + 16], weights[lo:lo + 16]
            byte, _ = best_scale(fmt, xs, ws)
            e.append(byte)
            s = float(SCALES[byte])
            codes += [fp2_code(x, s) if fmt == "ROCMFP2" else fp3_code(x, s) for x in xs]
        out += pack_fp2(codes, e) if fmt == "ROCMFP2" else pack_fp3(codes, e)
    return out


# ---------------------------------------------------------------------------- decode

def decode(fmt, data):
    bb = 10 if fmt == "ROCMFP2" else 14
    vals = []
    for off in range(0, len(data), bb):
        blk = data[off: off + bb]
        qs, e = blk[:-2], blk[-2:]
        assert all(v <= 0x7E for v in e)
        sc = [np.float32(SCALES[v]) for v in e]
        if fmt == "ROCMFP2":
            codes = [(qs[i // 4] >> (2 * (i % 4))) & 3 for i in range(32)]
            vals += [FP2_LEVELS[c] * sc[i // 16] for i, c in enumerate(codes)]
        else:
            bits = int.from_bytes(bytes(qs), "little")
            # 96 bits: group g of 8 codes in bytes 3g..3g+2, little-endian -> contiguous 3-bit fields.
            codes = [(bits >> (3 * i)) & 7 for i in range(32)]
            vals += [FP3_LEVELS[c] * sc[i // 16] for i, c in enumerate(codes)]
    return np.array(vals, dtype=np.float32)


# ---------------------------------------------------------------------------- inputs

def tie_halves(rng, fmt, want):
    """Halves whose smallest error is reached by two or more scale bytes (exact f64 ties)."""
    found = []
    tries = 0
    while len(found) < want and tries < 20000:
        tries += 1
        base = SCALES[rng.integers(40, 90)]
        if tries % 2:
            # all equal values halfway between two neighbouring reconstruction levels
            v = base * (1.0 + rng.integers(0, 8) / 8.0 + 1.0 / 16.0)
            xs = [v * (1 if rng.random() < 0.5 else -1) for _ in range(16)]
        else:
            grid = base * rng.integers(-40, 41, size=16) / 16.0
            xs = list(grid)
        xs = [float(np.float32(v)) for v in xs]
        _, acc = best_scale(fmt, xs, [1.0] * 16)
        if np.count_nonzero(acc == acc.min()) >= 2 and acc.min() > 0:
            found.append(xs)
    assert len(found) == want, (fmt, len(found))
    return found


def inputs(rng, fmt):
    cases = {}
    cases["normal"] = rng.standard_normal(256).astype(np.float32) * 0.02
    cases["heavy"] = (rng.standard_t(2, 256) * 0.05).astype(np.float32)
    cases["cubed"] = (rng.standard_normal(256) ** 3).astype(np.float32)
    cases["zero"] = np.zeros(64, dtype=np.float32)
    z = np.zeros(64, dtype=np.float32)
    z[3] = -0.0
    z[17:20] = [-0.0, 0.0, -0.0]
    cases["signed_zero"] = z
    tiny = rng.standard_normal(128) * np.exp(rng.uniform(np.log(1e-40), np.log(1e-6), 128))
    cases["subnormal"] = tiny.astype(np.float32)
    huge = rng.standard_normal(128) * np.exp(rng.uniform(np.log(1e2), np.log(6e4), 128))
    cases["huge"] = huge.astype(np.float32)
    near = rng.uniform(-1.0, 1.0, 64) * 896.0
    near[0], near[20], near[40] = 896.0, -896.0, 895.9
    cases["near_max"] = near.astype(np.float32)
    beyond = np.array([1e3, -2e3, 5e4, 1e7, -1e10, 1e13, 3e16, -1e20, 1e30, -3.4e38, 2.0**60, 2.0**63]
                      + [0.5] * 4 + [1.0, -1.0] * 8, dtype=np.float32)
    cases["beyond_range"] = beyond
    # exact thresholds: |x| = 2.5 s (FP2) and 0.5 s, 1.5 s, 3 s (FP3) for legal s
    ties = []
    for b in [0x10, 0x38, 0x40, 0x55, 0x7E, 0x07, 0x01]:
        s = SCALES[b]
        ties += [2.5 * s, -2.5 * s, 4 * s, s, 0.5 * s, -1.5 * s, 3.0 * s, -3.0 * s]
    ties += [1.25] * 8  # 2.5 * 0.5
    cases["code_ties"] = np.array(ties[:64], dtype=np.float32)
    th = tie_halves(rng, fmt, 8)
    cases["scale_ties"] = np.array(sum(th, []), dtype=np.float32)
    we = np.array([-1.8, -0.4, 0.7, 2.1] * 8, dtype=np.float32)
    cases["worked_example"] = we
    return cases


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    lines = ["# Generated by tools/oracle_rocmfpx.py (independent numpy oracle). Do not edit.",
             "op\tformat\tk\trule\tinput\timportance\texpected"]

    # Published checks, independent of the search.
    assert [fp2_code(x, 0.5) for x in np.array([-1.8, -0.4, 0.7, 2.1], dtype=np.float32).tolist()] == [0, 1, 2, 3]
    assert pack_fp2([0, 1, 2, 3] * 8, [0x38, 0x38])[0] == 0xE4

    for fi, fmt in enumerate(["ROCMFP2", "ROCMFP3"]):
        low = fmt.lower()
        rng = np.random.default_rng(20260731 + fi)
        for name, x in inputs(rng, fmt).items():
            k = 32 if name in ("worked_example",) else min(len(x), 128)
            assert len(x) % k == 0
            inp = f"{name}.{low}.f32"
            write(inp, x.astype("<f4").tobytes())
            enc = b"".join(encode_row(fmt, x[r:r + k]) for r in range(0, len(x), k))
            exp = f"{name}.{low}.bin"
            write(exp, enc)
            for rule in ("reference", "exhaustive"):
                lines.append(f"encode\t{fmt}\t{k}\t{rule}\t{inp}\t-\t{exp}")
            # with importance weights (one row: k = len(x)); some zero weights, wide range
            kk = len(x)
            qw = np.exp(rng.uniform(-4, 4, kk)).astype(np.float32)
            qw[rng.integers(0, kk, kk // 8)] = 0.0
            if name == "zero":
                qw[:] = 1.0
            imp = f"{name}.{low}.imp.f32"
            write(imp, qw.astype("<f4").tobytes())
            enc_w = encode_row(fmt, x, qw)
            expw = f"{name}.{low}.imp.bin"
            write(expw, enc_w)
            for rule in ("reference", "exhaustive"):
                lines.append(f"encode\t{fmt}\t{kk}\t{rule}\t{inp}\t{imp}\t{expw}")
            # decode of what was encoded
            dec = f"{name}.{low}.dec.f32"
            write(dec, decode(fmt, enc).astype("<f4").tobytes())
            lines.append(f"decode\t{fmt}\t{k}\t-\t{exp}\t-\t{dec}")

        # random legal blocks (every code, every scale byte), decode
        bb = 10 if fmt == "ROCMFP2" else 14
        nblk = 127
        raw = bytearray(rng.integers(0, 256, nblk * bb, dtype=np.uint8).tobytes())
        for i in range(nblk):
            raw[i * bb + bb - 2] = i  # every legal byte in e[0]
            raw[i * bb + bb - 1] = int(rng.integers(0, 127))
        write(f"random_blocks.{low}.bin", bytes(raw))
        write(f"random_blocks.{low}.dec.f32", decode(fmt, bytes(raw)).astype("<f4").tobytes())
        lines.append(f"decode\t{fmt}\t32\t-\trandom_blocks.{low}.bin\t-\trandom_blocks.{low}.dec.f32")

        if fmt == "ROCMFP2":
            # ROCmFPX test vector: codes 0,1,2,3 repeated, scales 0x12 and 0x7E -> e4 x8, 12, 7e.
            tv = bytes([0xE4] * 8 + [0x12, 0x7E])
            dv = decode(fmt, tv)
            assert dv[0] == np.float32(-4 * 0.01953125) and dv[31] == np.float32(896.0)
            write("test_vector.rocmfp2.bin", tv)
            write("test_vector.rocmfp2.dec.f32", dv.astype("<f4").tobytes())
            lines.append("decode\tROCMFP2\t32\t-\ttest_vector.rocmfp2.bin\t-\ttest_vector.rocmfp2.dec.f32")
            # Worked example block: scale 0x38, byte 0xE4 -> [-2, -0.5, 0.5, 2].
            wb = bytes([0xE4] * 8 + [0x38, 0x38])
            wv = decode(fmt, wb)
            assert list(wv[:4]) == [-2.0, -0.5, 0.5, 2.0]
            write("worked_block.rocmfp2.bin", wb)
            write("worked_block.rocmfp2.dec.f32", wv.astype("<f4").tobytes())
            lines.append("decode\tROCMFP2\t32\t-\tworked_block.rocmfp2.bin\t-\tworked_block.rocmfp2.dec.f32")
        else:
            # Every FP3 code including code 4 (-0), which decodes to +0.0.
            codes = list(range(8)) * 4
            blk = pack_fp3(codes, [0x38, 0x40])
            write("all_codes.rocmfp3.bin", blk)
            write("all_codes.rocmfp3.dec.f32", decode(fmt, blk).astype("<f4").tobytes())
            lines.append("decode\tROCMFP3\t32\t-\tall_codes.rocmfp3.bin\t-\tall_codes.rocmfp3.dec.f32")

        # Rejects: illegal scale bytes, with their offsets in the row.
        good = bytes([0x1B] * (bb - 2) + [0x38, 0x38])
        for tag, blocks, off in [
            ("e1_7f", [good[:-1] + bytes([0x7F])], bb - 1),
            ("e0_80", [good[:-2] + bytes([0x80, 0x00])], bb - 2),
            ("e0_ff", [good[:-2] + bytes([0xFF, 0x38])], bb - 2),
            ("blk1_e1_7f", [good, good[:-1] + bytes([0x7F])], 2 * bb - 1),
        ]:
            fn = f"reject_{tag}.{low}.bin"
            write(fn, b"".join(blocks))
            lines.append(f"reject\t{fmt}\t32\t-\t{fn}\t-\tIllegalByte@{off}")

    with open(os.path.join(OUT, "manifest.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(lines) - 2} cases, {total} bytes in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()

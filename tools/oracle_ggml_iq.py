#!/usr/bin/env python3
"""Oracle fixtures for the ggml IQ types (tests/fixtures/ggml_iq/).

Oracle: gguf-py `gguf.quants.dequantize` (PyPI `gguf` 0.19.0), which follows ggml
`dequantize_row_iq*`. lowbit has no IQ encoder, so every case is a decode or a reject:

* decode: random VALID blocks (every index, sign and sub-scale bit pattern is legal, so the
  payload is random bytes) with finite f16 scales drawn from several ranges: normal, heavy
  tailed (student-t, df=2), tiny / subnormal, huge (up to 65504), both signs and +-0; plus
  all-zero blocks and all-0xFF payloads. gguf-py decodes them; the f32 output is the fixture.
* reject: rows whose scale is NaN or +-inf; lowbit must answer NonFiniteScale at the byte
  offset of the scale field (IQ1_M: its `scales` field, offset 48 in the block, where the f16
  is assembled from the top nibbles of the four u16).

Also writes dots.tsv: weight rows and Q8_K / Q8_0 activation rows with the f32 result of an
independent numpy model of ggml's generic dot products (ggml-cpu/quants.c
`ggml_vec_dot_iq*_q8_K_generic`, `ggml_vec_dot_iq4_nl_q8_0_generic`), computed in the same
f32 operation order, so tests/ggml_iq.rs can check lowbit's dot bit for bit.

Deterministic (fixed seeds). Run: /work/venv/bin/python tools/oracle_ggml_iq.py
"""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants as gq

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "ggml_iq"

# name, ggml type, elems per block, bytes per block, offset of the f16 scale (None: IQ1_M)
FORMATS = [
    ("IQ2_XXS", T.IQ2_XXS, 256, 66, 0),
    ("IQ2_XS", T.IQ2_XS, 256, 74, 0),
    ("IQ3_XXS", T.IQ3_XXS, 256, 98, 0),
    ("IQ1_S", T.IQ1_S, 256, 50, 0),
    ("IQ4_NL", T.IQ4_NL, 32, 18, 0),
    ("IQ3_S", T.IQ3_S, 256, 110, 0),
    ("IQ2_S", T.IQ2_S, 256, 82, 0),
    ("IQ4_XS", T.IQ4_XS, 256, 136, 0),
    ("IQ1_M", T.IQ1_M, 256, 56, None),
]

IQ1M_SCALES = 48  # offset of block_iq1_m.scales


def f16_bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def set_scale(blocks: np.ndarray, off: int | None, bits: np.ndarray) -> None:
    """Stores f16 bit patterns (one per block) into the blocks' scale field."""
    bits = bits.astype(np.uint16)
    if off is not None:
        blocks[:, off] = bits & 0xFF
        blocks[:, off + 1] = bits >> 8
        return
    # IQ1_M: nibble k of the f16 goes to the top nibble of u16 scale word k.
    for k in range(4):
        nib = (bits >> (4 * k)) & 0xF
        hi = IQ1M_SCALES + 2 * k + 1
        blocks[:, hi] = (blocks[:, hi] & 0x0F) | (nib << 4).astype(np.uint8)


def scale_sets(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Named f16 bit patterns, n per set, all finite."""
    sign = rng.choice([-1.0, 1.0], n)
    sets = {
        "normal": f16_bits(rng.normal(0.0, 0.02, n)),
        "heavy_t2": f16_bits(np.clip(rng.standard_t(2, n) * 0.01, -60000, 60000)),
        "tiny": f16_bits(sign * 10.0 ** rng.uniform(-7.5, -4.5, n)),  # subnormal f16 scales
        "subnormal_bits": rng.integers(1, 0x400, n).astype(np.uint16)
        | (rng.integers(0, 2, n).astype(np.uint16) << 15),
        "huge": f16_bits(sign * rng.uniform(1e4, 65504.0, n)),
        "edges": np.array(
            [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]
            * ((n + 9) // 10),
            dtype=np.uint16,
        )[:n],
    }
    return sets


def write_case(man: list[str], name: str, fmt: str, k: int, data: bytes, dec: np.ndarray) -> None:
    stem = f"{name}.{fmt.lower()}"
    (OUT / f"{stem}.bin").write_bytes(data)
    (OUT / f"{stem}.dec.f32").write_bytes(dec.astype("<f4").tobytes())
    man.append(f"decode\t{fmt}\t{k}\t-\t{stem}.bin\t-\t{stem}.dec.f32")


def dequant(t, data: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(gq.dequantize(data.reshape(-1), t), dtype=np.float32).reshape(-1)


# ------------------------------------------------------------------------------------------
# Independent model of ggml's generic dot products (f32 order as in ggml-cpu/quants.c).
# Grids come from gguf-py's decoded float grids (values, not ggml's packed integers).

F32 = np.float32


def grid_rows(cls) -> np.ndarray:
    cls.init_grid()
    return np.asarray(cls.grid, dtype=np.float32).reshape(cls.grid_shape).astype(np.int64)


def ksign_bits(idx: int) -> list[int]:
    k = gq.IQ2_XXS.ksigns[idx]
    return [-1 if (k >> j) & 1 else 1 for j in range(8)]


def byte_signs(b: int) -> list[int]:
    return [-1 if (b >> j) & 1 else 1 for j in range(8)]


def f16(b: bytes, off: int) -> F32:
    return F32(np.frombuffer(b[off:off + 2], dtype=np.float16)[0])


def u16(b: bytes, off: int) -> int:
    return int.from_bytes(b[off:off + 2], "little")


def u32(b: bytes, off: int) -> int:
    return int.from_bytes(b[off:off + 4], "little")


def dot_ref(fmt: str, w: bytes, act: list[tuple[F32, np.ndarray, np.ndarray]]) -> F32:
    """act: per block (d8 as f32, q8 int array, bsums int array)."""
    sumf = F32(0)
    if fmt == "IQ4_NL":
        kv = gq.IQ4_NL.kvalues
        for i, (d8, q8, _) in enumerate(act):
            x = w[18 * i:18 * i + 18]
            d = F32(d8 * f16(x, 0))
            s = 0
            for j in range(16):
                s += int(q8[j]) * kv[x[2 + j] & 15] + int(q8[j + 16]) * kv[x[2 + j] >> 4]
            sumf = F32(sumf + F32(d * F32(s)))
        return sumf
    bb = {"IQ2_XXS": 66, "IQ2_XS": 74, "IQ2_S": 82, "IQ3_XXS": 98, "IQ3_S": 110,
          "IQ1_S": 50, "IQ1_M": 56, "IQ4_XS": 136}[fmt]
    for i, (d8, q8, bsums) in enumerate(act):
        x = w[bb * i:bb * (i + 1)]
        q8 = [int(v) for v in q8]
        if fmt == "IQ2_XXS":
            g = grid_rows(gq.IQ2_XXS)
            d = F32(f16(x, 0) * d8)
            bsum = 0
            for ib in range(8):
                a0, a1 = u32(x, 2 + 8 * ib), u32(x, 6 + 8 * ib)
                ls = 2 * (a1 >> 28) + 1
                s = 0
                for l in range(4):
                    gr, sg = g[(a0 >> 8 * l) & 255], ksign_bits((a1 >> 7 * l) & 127)
                    s += sum(int(gr[j]) * q8[32 * ib + 8 * l + j] * sg[j] for j in range(8))
                bsum += s * ls
            sumf = F32(sumf + F32(d * F32(bsum)))
        elif fmt in ("IQ2_XS", "IQ2_S"):
            d = F32(f16(x, 0) * d8)
            bsum = 0
            for h in range(16):
                sc = x[66 + h // 2] if fmt == "IQ2_XS" else x[74 + h // 2]
                ls = 2 * ((sc >> 4 * (h % 2)) & 15) + 1
                s = 0
                for kk in range(2):
                    gi = 2 * h + kk
                    if fmt == "IQ2_XS":
                        q = u16(x, 2 + 2 * gi)
                        gr, sg = grid_rows(gq.IQ2_XS)[q & 511], ksign_bits(q >> 9)
                    else:
                        idx = x[2 + gi] | (((x[66 + gi // 4] >> 2 * (gi % 4)) & 3) << 8)
                        gr, sg = grid_rows(gq.IQ2_S)[idx], byte_signs(x[34 + gi])
                    s += sum(int(gr[j]) * q8[8 * gi + j] * sg[j] for j in range(8))
                bsum += s * ls
            sumf = F32(sumf + F32(d * F32(bsum)))
        elif fmt == "IQ3_XXS":
            g = grid_rows(gq.IQ3_XXS)
            d = F32(f16(x, 0) * d8)
            bsum = 0
            for ib in range(8):
                aux = u32(x, 2 + 64 + 4 * ib)
                ls = 2 * (aux >> 28) + 1
                s = 0
                for l in range(4):
                    sg = ksign_bits((aux >> 7 * l) & 127)
                    vals = list(g[x[2 + 8 * ib + 2 * l]]) + list(g[x[2 + 8 * ib + 2 * l + 1]])
                    s += sum(int(vals[j]) * q8[32 * ib + 8 * l + j] * sg[j] for j in range(8))
                bsum += s * ls
            sumf = F32(sumf + F32(d * F32(bsum)))
        elif fmt == "IQ3_S":
            g = grid_rows(gq.IQ3_S)
            d = F32(f16(x, 0) * d8)
            bsum = 0
            for ib in range(8):
                ls = 2 * ((x[106 + ib // 2] >> 4 * (ib % 2)) & 15) + 1
                s = 0
                for l in range(4):
                    gi = 4 * ib + l
                    sg = byte_signs(x[74 + gi])
                    vals = []
                    for e in (2 * gi, 2 * gi + 1):
                        vals += list(g[x[2 + e] | (((x[66 + e // 8] >> (e % 8)) & 1) << 8)])
                    s += sum(int(vals[j]) * q8[8 * gi + j] * sg[j] for j in range(8))
                bsum += s * ls
            sumf = F32(sumf + F32(d * F32(bsum)))
        elif fmt == "IQ1_S":
            g = grid_rows(gq.IQ1_S)
            sumi = sumi1 = 0
            for ib in range(8):
                qh = u16(x, 34 + 2 * ib)
                ls = 2 * ((qh >> 12) & 7) + 1
                delta = -1 if qh & 0x8000 else 1
                lsum = 0
                for l in range(4):
                    gr = g[x[2 + 4 * ib + l] | (((qh >> 3 * l) & 7) << 8)]
                    lsum += sum(q8[32 * ib + 8 * l + j] * int(gr[j]) for j in range(8))
                sumi += ls * lsum
                sumi1 += ls * delta * (int(bsums[2 * ib]) + int(bsums[2 * ib + 1]))
            inner = F32(F32(sumi) + F32(F32(0.125) * F32(sumi1)))
            sumf = F32(sumf + F32(F32(f16(x, 0) * d8) * inner))
        elif fmt == "IQ1_M":
            g = grid_rows(gq.IQ1_M)
            sc = [u16(x, 48 + 2 * k) for k in range(4)]
            bits = (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)
            dx = F32(np.array([bits], dtype=np.uint16).view(np.float16)[0])
            sumi1 = sumi2 = 0
            for ib in range(8):
                s1 = [0, 0]
                s2 = [0, 0]
                for l in range(4):
                    gi = 4 * ib + l
                    nib = (x[32 + gi // 2] >> 4 * (gi % 2)) & 15
                    gr = g[x[gi] | ((nib & 7) << 8)]
                    dl = -1 if nib & 8 else 1
                    s1[l // 2] += sum(q8[8 * gi + j] * int(gr[j]) for j in range(8))
                    s2[l // 2] += sum(q8[8 * gi + j] for j in range(8)) * dl
                ls1 = 2 * ((sc[ib // 2] >> (6 * (ib % 2))) & 7) + 1
                ls2 = 2 * ((sc[ib // 2] >> (6 * (ib % 2) + 3)) & 7) + 1
                sumi1 += s1[0] * ls1 + s1[1] * ls2
                sumi2 += s2[0] * ls1 + s2[1] * ls2
            inner = F32(F32(sumi1) + F32(F32(0.125) * F32(sumi2)))
            sumf = F32(sumf + F32(F32(dx * d8) * inner))
        elif fmt == "IQ4_XS":
            kv = gq.IQ4_NL.kvalues
            d4d8 = F32(f16(x, 0) * d8)
            h = u16(x, 2)
            for ib in range(8):
                ls = ((x[4 + ib // 2] >> 4 * (ib % 2)) & 15) | (((h >> 2 * ib) & 3) << 4)
                dl = F32(d4d8 * F32(ls - 32))
                s = 0
                for j in range(16):
                    qb = x[8 + 16 * ib + j]
                    s += q8[32 * ib + j] * kv[qb & 15] + q8[32 * ib + 16 + j] * kv[qb >> 4]
                sumf = F32(sumf + F32(dl * F32(s)))
        else:
            raise ValueError(fmt)
    if fmt in ("IQ2_XXS", "IQ2_XS", "IQ2_S"):
        return F32(F32(0.125) * sumf)
    if fmt == "IQ3_XXS":
        return F32(F32(0.25) * sumf)
    return sumf


def random_act(rng: np.random.Generator, nblocks: int, q8_0: bool) -> tuple[bytes, list]:
    """Random activation blocks (Q8_0: f16 d + 32 i8; Q8_K: f32 d + 256 i8 + 16 i16 bsums)."""
    out = bytearray()
    blocks = []
    for _ in range(nblocks):
        if q8_0:
            d = np.float16(abs(rng.normal(0, 0.01)) + 1e-4)
            q = rng.integers(-127, 128, 32).astype(np.int8)
            out += d.tobytes() + q.tobytes()
            blocks.append((F32(d), q, None))
        else:
            d = np.float32(abs(rng.normal(0, 0.01)) + 1e-5)
            q = rng.integers(-128, 128, 256).astype(np.int8)
            if rng.random() < 0.2:
                q[:] = rng.choice([-128, 127], 256)
            bs = q.astype(np.int16).reshape(16, 16).sum(axis=1).astype("<i2")
            out += d.astype("<f4").tobytes() + q.tobytes() + bs.tobytes()
            blocks.append((F32(d), q, bs))
    return bytes(out), blocks


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    man = ["# ggml IQ fixtures: written by tools/oracle_ggml_iq.py (gguf-py 0.19.0 dequantize)",
           "op\tformat\tk\trule\tinput\timportance\texpected"]
    dots = ["# format\tk\tweights\tactivations\texpected f32 (ggml generic dot order)"]
    nblk = 8
    for fi, (fmt, t, elems, bsz, off) in enumerate(FORMATS):
        rng = np.random.default_rng(1000 + fi)
        k = elems * nblk if elems == 256 else 32 * 32
        nb = k // elems
        for name, bits in scale_sets(rng, nb).items():
            blocks = rng.integers(0, 256, (nb, bsz), dtype=np.uint8)
            set_scale(blocks, off, bits)
            dec = dequant(t, blocks)
            assert dec.size == k and np.all(np.isfinite(dec)), (fmt, name)
            write_case(man, name, fmt, k, blocks.tobytes(), dec)
        # all-zero blocks, and all-0xFF payloads with scale 1.0 / -2.0
        zero = np.zeros((nb, bsz), dtype=np.uint8)
        write_case(man, "allzero", fmt, k, zero.tobytes(), dequant(t, zero))
        ff = np.full((nb, bsz), 0xFF, dtype=np.uint8)
        set_scale(ff, off, np.array([0x3C00, 0xC000] * (nb // 2), dtype=np.uint16))
        write_case(man, "allff", fmt, k, ff.tobytes(), dequant(t, ff))
        # one block only
        one = rng.integers(0, 256, (1, bsz), dtype=np.uint8)
        set_scale(one, off, np.array([0x3555], dtype=np.uint16))
        write_case(man, "single", fmt, elems, one.tobytes(), dequant(t, one))
        # rejects: NaN / +inf / -inf scale in block 1 or 2 of 3
        for ri, (tag, bad) in enumerate([("nan", 0x7E00), ("inf", 0x7C00), ("ninf", 0xFC00),
                                          ("nan_payload", 0x7C01)]):
            rows = rng.integers(0, 256, (3, bsz), dtype=np.uint8)
            good = np.array([0x2E66, 0x2E66, 0x2E66], dtype=np.uint16)
            bi = 1 + ri % 2
            good[bi] = bad
            set_scale(rows, off, good)
            dec = dequant(t, rows)
            assert not np.all(np.isfinite(dec[bi * elems:(bi + 1) * elems])), (fmt, tag)
            stem = f"reject_{tag}.{fmt.lower()}"
            (OUT / f"{stem}.bin").write_bytes(rows.tobytes())
            where = bi * bsz + (off if off is not None else IQ1M_SCALES)
            man.append(f"reject\t{fmt}\t{3 * elems}\t-\t{stem}.bin\t-\tNonFiniteScale@{where}")
        # dot fixtures: weights with moderate scales, random activations
        dk = 4 * 256 if elems == 256 else 8 * 32
        dnb = dk // elems
        w = rng.integers(0, 256, (dnb, bsz), dtype=np.uint8)
        set_scale(w, off, f16_bits(rng.normal(0, 0.02, dnb)))
        act_bytes, act = random_act(rng, dk // (32 if fmt == "IQ4_NL" else 256), fmt == "IQ4_NL")
        y = dot_ref(fmt, w.tobytes(), act)
        stem = f"dot.{fmt.lower()}"
        (OUT / f"{stem}.bin").write_bytes(w.tobytes())
        (OUT / f"{stem}.act").write_bytes(act_bytes)
        # sanity: close to the f64 sum of decoded products
        wd = dequant(t, w).astype(np.float64)
        ad = np.concatenate([np.float64(d) * q.astype(np.float64) for d, q, _ in act])
        ref = float(np.dot(wd, ad))
        assert abs(float(y) - ref) <= 1e-4 * float(np.sum(np.abs(wd * ad))) + 1e-30, (fmt, y, ref)
        dots.append(f"{fmt}\t{dk}\t{stem}.bin\t{stem}.act\t{np.float32(y).view(np.uint32):08x}")
    (OUT / "manifest.tsv").write_text("\n".join(man) + "\n")
    (OUT / "dots.tsv").write_text("\n".join(dots) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"{len(man) - 2} manifest cases, {len(dots) - 1} dot cases, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()

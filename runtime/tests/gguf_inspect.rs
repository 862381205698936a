//! `lowbit inspect` end to end on the gguf-py fixtures, a safetensors file, and bad inputs.
//! Expected values come from tests/fixtures/gguf/oracle.json (gguf-py's reading) or are
//! computed here from first principles (sizes of F32/F16 data), not from lowbit's output.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value as Json;

fn lowbit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowbit")).args(args).output().expect("run lowbit")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/gguf")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn inspect_gguf_text_and_json_agree_with_the_oracle() {
    let oracle: Json =
        serde_json::from_str(&std::fs::read_to_string(fixture("oracle.json")).unwrap()).unwrap();
    let want = &oracle["quant_a64.gguf"];
    let out = lowbit(&["inspect", &fixture("quant_a64.gguf")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for t in want["tensors"].as_array().unwrap() {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(t["name"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("no line for {}: {text}", t["name"]));
        assert!(line.contains(&t["n_bytes"].to_string()), "{line}");
    }
    assert!(text.contains("general.name = \"oracle fixture\""), "{text}");
    assert!(text.contains("alignment: 64"), "{text}");

    let out = lowbit(&["inspect", "--json", &fixture("quant_a64.gguf")]);
    assert!(out.status.success());
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    let ts = j["tensors"].as_array().unwrap();
    assert_eq!(ts.len(), want["tensors"].as_array().unwrap().len());
    for (t, w) in ts.iter().zip(want["tensors"].as_array().unwrap()) {
        assert_eq!(t["name"], w["name"]);
        assert_eq!(t["dims"], w["dims"]);
        assert_eq!(t["type_id"], w["type"]);
        assert_eq!(t["bytes"], w["n_bytes"]);
    }
    let total: u64 =
        want["tensors"].as_array().unwrap().iter().map(|t| t["n_bytes"].as_u64().unwrap()).sum();
    assert_eq!(j["totals"]["bytes"], total);
    // q4_0 tensor: 4.5 bits per weight.
    let q4 = ts.iter().find(|t| t["format"] == "Q4_0").unwrap();
    assert_eq!(q4["bpw"], 4.5);
    // A 40-item array is abbreviated in JSON.
    let out = lowbit(&["inspect", "--json", &fixture("meta_all.gguf")]);
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    let toks = j["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["key"] == "tokenizer.ggml.tokens")
        .unwrap();
    assert_eq!(toks["value"]["len"], 40);
    assert_eq!(toks["value"]["items"].as_array().unwrap().len(), 16);
}

#[test]
fn inspect_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let json = r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[4],"data_offsets":[24,40]}}"#;
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend(json.as_bytes());
    bytes.extend([0u8; 40]);
    std::fs::write(&path, &bytes).unwrap();
    let out = lowbit(&["inspect", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["kind"], "safetensors");
    let w = &j["tensors"][0];
    assert_eq!((&w["name"], &w["format"], &w["bytes"]), (&"w".into(), &"BF16".into(), &24.into()));
    assert_eq!(w["dims"], serde_json::json!([4, 3]));
    assert_eq!(j["totals"]["bytes"], 40);
}

#[test]
fn inspect_errors_name_the_file_and_place() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cut.gguf");
    let full = std::fs::read(fixture("quant_a64.gguf")).unwrap();
    std::fs::write(&bad, &full[..100]).unwrap();
    let out = lowbit(&["inspect", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("cut.gguf") && e.contains("byte offset"), "{e}");
    let other = dir.path().join("x.bin");
    std::fs::write(&other, b"hello").unwrap();
    let out = lowbit(&["inspect", other.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither"));
    let out = lowbit(&["inspect", "--dialect", "nope", &fixture("quant_a64.gguf")]);
    assert!(!out.status.success());
    assert!(lowbit(&["inspect", "--dialect", "rocmfpx", &fixture("quant_a64.gguf")])
        .status
        .success());
}

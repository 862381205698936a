//! `lowbit tokenize`: ids of the SmolLM2 tokenizer fixture against HF `tokenizers`' ids
//! (tests/fixtures/tokenizer/bpe_cases.json), and a clear error for a file without a tokenizer.

use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tokenizer")
}

fn lowbit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lowbit")).args(args).output().unwrap()
}

#[test]
fn tokenize_prints_the_oracle_ids() {
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("bpe_cases.json")).unwrap())
            .unwrap();
    let model = dir().join("smollm2_tokenizer.gguf");
    for c in cases.as_array().unwrap().iter().take(12) {
        let text = c["text"].as_str().unwrap();
        let out = lowbit(&["tokenize", "-m", model.to_str().unwrap(), "-p", text]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let want: Vec<String> =
            c["ids"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{}\n", want.join(" ")));
    }
}

#[test]
fn tokenize_without_tokenizer_keys_fails_clearly() {
    let gguf =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/quant_a32.gguf");
    let out = lowbit(&["tokenize", "-m", gguf.to_str().unwrap(), "-p", "hi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tokenizer.ggml.model"), "{err}");
}

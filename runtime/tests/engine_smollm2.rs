//! The engine on the real SmolLM2-135M-Instruct model: greedy generation answers "Paris", and
//! the disk prompt cache restores a prefix to the same output, and falls back to a cold prefill
//! on a corrupt entry. Needs the model: set LOWBIT_SMOLLM2 to its path (`.ci/run` fetches it
//! with tools/fetch_smollm2.sh); without it the tests say so and skip.

use std::path::PathBuf;

use lowbit_runtime::engine::{Engine, GenerateParams, StopReason};
use lowbit_runtime::prompt_cache::DiskCache;

fn model() -> Option<PathBuf> {
    match std::env::var_os("LOWBIT_SMOLLM2") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!("LOWBIT_SMOLLM2 is not set: skipping (run tools/fetch_smollm2.sh)");
            None
        }
    }
}

fn greedy(n: usize) -> GenerateParams {
    GenerateParams { max_tokens: n, n_ctx: 256, ..GenerateParams::default() }
}

#[test]
fn capital_of_france_is_paris() {
    let Some(path) = model() else { return };
    let engine = Engine::load(&path, None).unwrap();
    let prompt = engine.tokenizer().encode("The capital of France is", true);
    let mut text = String::new();
    let stats = engine.generate(&prompt, &greedy(4), None, |t| text.push_str(t)).unwrap();
    assert!(text.trim_start().starts_with("Paris"), "greedy continuation: {text:?}");
    assert_eq!(stats.stop, StopReason::MaxTokens);
    assert_eq!(stats.generated.len(), 4);
    assert_eq!(engine.tokenizer().decode(&stats.generated), text);
}

#[test]
fn disk_cache_reuses_a_prefix_and_survives_corruption() {
    let Some(path) = model() else { return };
    let engine = Engine::load(&path, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(dir.path(), 64 << 20, true, engine.fingerprint()).unwrap();
    let prompt = engine.tokenizer().encode("Write one sentence about the sea and the sky.", true);
    let cold = engine.generate(&prompt, &greedy(6), None, |_| {}).unwrap();
    let first = engine.generate(&prompt, &greedy(6), Some(&cache), |_| {}).unwrap();
    assert_eq!(first.cached_tokens, 0);
    let warm = engine.generate(&prompt, &greedy(6), Some(&cache), |_| {}).unwrap();
    assert_eq!(warm.cached_tokens, prompt.len() - 1, "the stored prefix is reused");
    assert_eq!(warm.generated, cold.generated, "restored state gives the same tokens");
    // A longer prompt with the same start reuses the same entry.
    let mut longer = prompt.clone();
    longer.extend(engine.tokenizer().encode(" Then one about the wind.", false));
    let ext = engine.generate(&longer, &greedy(3), Some(&cache), |_| {}).unwrap();
    assert_eq!(ext.cached_tokens, prompt.len() - 1);
    // Corrupt every entry: a cold prefill with the reason, and the same tokens.
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        let mut b = std::fs::read(&p).unwrap();
        let i = b.len() / 2;
        b[i] ^= 0x40;
        std::fs::write(&p, b).unwrap();
    }
    let bad = engine.generate(&prompt, &greedy(6), Some(&cache), |_| {}).unwrap();
    assert_eq!(bad.cached_tokens, 0);
    assert!(bad.cache_rejected.as_deref().unwrap_or("").contains("checksum"), "{bad:?}");
    assert_eq!(bad.generated, cold.generated);
}

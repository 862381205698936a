//! lowbit's llama forward pass against the independent numpy reference (tools/ref_forward.py,
//! written from gguf-py's dequantized tensors; fixtures from tools/gen_model_fixture.py).
//!
//! Two references per sequence: `act_quant` emulates the backend's activation quantization
//! (Q8_0 / Q8_1 columns before each product with a Q4_0/Q4_1/Q8_0 matrix) and is otherwise
//! float64, so lowbit's f32 pass must match it up to f32 rounding; `exact` keeps every
//! activation in float64, so the gap to it measures what activation quantization costs
//! (reported as the KL divergence of the softmaxes).
//!
//! Tolerances. Against `act_quant` the only differences left are f32 rounding (sums of at most
//! 128 products, reordered by SIMD kernels: DESIGN.md's bound, about 1e-5 relative per
//! product at its loosest, and typically a few ulp), carried through two blocks. The generator
//! keeps only sequences whose quantized activations are clear of rounding ties by 3e-7 of the
//! block maximum (tools/gen_model_fixture.py), so f32 noise cannot flip a quantized value. The
//! bound: |diff| <= 2^-16 * max(1, max|logit|) (1.5e-5 relative; observed about 1e-7, one or
//! two ulp of the largest logit). Against `exact`: mean KL below 1e-2 nats per position (the
//! cost of Q8 activations on these small random models; observed up to 3.2e-3).
//!
//! SmolLM2-135M (env `LOWBIT_SMOLLM2` = path of SmolLM2-135M-Instruct.Q4_1.gguf; skipped
//! otherwise): logits at the reference's top-32 ids of the last 4 positions, the greedy answer
//! to "The capital of France is" (" Paris", id 7042), and a lower bound of the KL divergence
//! from the top-32 ids plus the remaining mass. Thirty Q8-quantized blocks are chaotic: the
//! `act_quant` reference itself moves its logits by 0.3 to 0.65 when its input embedding is
//! perturbed by 1e-7 relative (rounding flips compound), so no f32 implementation can match it
//! to f32 noise; lowbit sits at that noise floor (full-vocabulary KL against the `act_quant`
//! reference, mean/max over positions: 3.2e-3/3.8e-3 and 3.4e-3/2.5e-2 on the two sequences;
//! the reference against its perturbed self: 3.5e-3/5.8e-3 and 3.7e-3/2.7e-2). The bounds:
//! the reference's top token within 1 logit of ours, max |diff| at the top-32 ids below 2, KL
//! lower bound below 0.05 nats at each of the last 4 positions (observed up to 1.0e-2).
//!
use std::path::{Path, PathBuf};

use lowbit_core::backend::{Backend, ReferenceBackend};
use lowbit_cpu::CpuBackend;
use lowbit_runtime::gguf::GgufFile;
use lowbit_runtime::model::{KvCache, Llama, Logits, ModelError};
use serde_json::Value;

/// Relative tolerance against the `act_quant` reference (see the module doc).
const TOL: f32 = 1.0 / 65536.0;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/model")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(fixtures().join("model.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn sequences(model: &Value) -> Vec<Vec<u32>> {
    model["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect())
        .collect()
}

fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn log_softmax(l: &[f32]) -> Vec<f64> {
    let m = l.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)));
    let lse = m + l.iter().map(|&v| (f64::from(v) - m).exp()).sum::<f64>().ln();
    l.iter().map(|&v| f64::from(v) - lse).collect()
}

/// KL(P_ref || P_ours) of one position's logits.
fn kl(reference: &[f32], ours: &[f32]) -> f64 {
    let (p, q) = (log_softmax(reference), log_softmax(ours));
    p.iter().zip(&q).map(|(lp, lq)| lp.exp() * (lp - lq)).sum()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

struct Reference {
    act_quant: Vec<f32>,
    exact: Vec<f32>,
}

/// Splits a model's logits file into per-sequence references.
fn references(model: &Value, vocab: usize) -> Vec<Reference> {
    let all = read_f32(&fixtures().join(model["logits"].as_str().unwrap()));
    let mut at = 0;
    let mut out = Vec::new();
    for seq in sequences(model) {
        let len = seq.len() * vocab;
        let act_quant = all[at..at + len].to_vec();
        let exact = all[at + len..at + 2 * len].to_vec();
        at += 2 * len;
        out.push(Reference { act_quant, exact });
    }
    assert_eq!(at, all.len(), "logits file size");
    out
}

fn check_model<B: Backend>(backend: B, model: &Value, m: &Value) -> (f32, f64) {
    let vocab = m["vocab"].as_u64().unwrap() as usize;
    let name = model["gguf"].as_str().unwrap();
    let file = GgufFile::open(fixtures().join(name), None).unwrap();
    let llama = Llama::load(backend, &file).unwrap();
    assert_eq!(llama.config().n_vocab, vocab);
    assert_eq!(llama.tied_embeddings(), model["tied"].as_bool().unwrap());
    let refs = references(model, vocab);
    let (mut worst, mut worst_kl) = (0f32, 0f64);
    for (seq, r) in sequences(model).iter().zip(&refs) {
        let mut cache = llama.new_cache(64);
        let ours = llama.forward(&mut cache, seq, Logits::All).unwrap();
        assert_eq!(cache.len(), seq.len());
        assert_eq!(ours.len(), r.act_quant.len());
        let scale = r.act_quant.iter().fold(1f32, |a, v| a.max(v.abs()));
        let d = max_abs_diff(&ours, &r.act_quant);
        let kls: Vec<f64> = ours
            .chunks_exact(vocab)
            .zip(r.exact.chunks_exact(vocab))
            .map(|(o, e)| kl(e, o))
            .collect();
        let mean_kl = kls.iter().sum::<f64>() / kls.len() as f64;
        let dx = max_abs_diff(&ours, &r.exact);
        println!(
            "{name} [{}] {} tokens: max|diff| act_quant {d:.3e} (max|logit| {scale:.2}), \
             exact {dx:.3e}, KL vs exact mean {mean_kl:.3e} max {:.3e}",
            llama.backend().name(),
            seq.len(),
            kls.iter().cloned().fold(0.0, f64::max)
        );
        assert!(d <= TOL * scale, "{name} seq {seq:?}: max |diff| {d} vs act_quant reference");
        assert!(mean_kl < 1e-2, "{name}: mean KL {mean_kl} vs exact reference");
        worst = worst.max(d);
        worst_kl = worst_kl.max(mean_kl);

        // Prefill half, then decode one token at a time: the same logits (KV cache, positions).
        let half = seq.len() / 2;
        let mut cache = llama.new_cache(seq.len());
        let first = llama.forward(&mut cache, &seq[..half], Logits::Last).unwrap();
        let want = &r.act_quant[(half - 1) * vocab..half * vocab];
        assert!(max_abs_diff(&first, want) <= TOL * scale, "{name}: prefill-last logits");
        for (p, &t) in seq.iter().enumerate().skip(half) {
            let step = llama.forward(&mut cache, &[t], Logits::Last).unwrap();
            let want = &r.act_quant[p * vocab..(p + 1) * vocab];
            let dd = max_abs_diff(&step, want);
            assert!(dd <= TOL * scale, "{name}: decode at position {p}: max |diff| {dd}");
        }
        assert_eq!(cache.len(), seq.len());

        // Truncation: drop the last 3 positions and run them again.
        cache.truncate(seq.len() - 3);
        let again = llama.forward(&mut cache, &seq[seq.len() - 3..], Logits::All).unwrap();
        let want = &r.act_quant[(seq.len() - 3) * vocab..];
        assert!(max_abs_diff(&again, want) <= TOL * scale, "{name}: after truncate");
    }
    (worst, worst_kl)
}

#[test]
fn tiny_models_match_the_numpy_reference_on_cpu() {
    let m = manifest();
    for model in m["models"].as_array().unwrap() {
        let (d, k) = check_model(CpuBackend::new().unwrap(), model, &m);
        println!("{}: worst max|diff| {d:.3e}, worst mean KL {k:.3e}", model["gguf"]);
    }
}

#[test]
fn tiny_models_match_the_numpy_reference_on_the_reference_backend() {
    let m = manifest();
    for model in m["models"].as_array().unwrap() {
        check_model(ReferenceBackend, model, &m);
    }
}

fn tiny_bytes() -> Vec<u8> {
    std::fs::read(fixtures().join("tiny_llama.gguf")).unwrap()
}

/// Replaces the first occurrence of `from` after `after` with `to` (same length).
fn patch(bytes: &mut [u8], after: &[u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let start = match after {
        [] => 0,
        _ => bytes.windows(after.len()).position(|w| w == after).unwrap() + after.len(),
    };
    let at = start + bytes[start..].windows(from.len()).position(|w| w == from).unwrap();
    bytes[at..at + from.len()].copy_from_slice(to);
}

fn load_err(bytes: Vec<u8>) -> ModelError {
    let file = GgufFile::from_bytes(bytes, None).unwrap();
    Llama::load(CpuBackend::new().unwrap(), &file).unwrap_err()
}

#[test]
fn unknown_architecture_is_refused_by_name() {
    let mut b = tiny_bytes();
    patch(&mut b, b"general.architecture", b"llama", b"gemma");
    let e = load_err(b);
    assert!(matches!(&e, ModelError::UnknownArchitecture { name } if name == "gemma"), "{e}");
    assert!(e.to_string().contains("gemma"), "{e}");
}

#[test]
fn missing_key_and_tensor_are_named() {
    let mut b = tiny_bytes();
    patch(&mut b, b"", b"llama.block_count", b"llama.block_xount");
    let e = load_err(b);
    assert!(e.to_string().contains("llama.block_count"), "{e}");

    // head_count_kv (u32 value after the key and its u32 type code) = 3: does not divide 4.
    let mut b = tiny_bytes();
    let key = b"llama.attention.head_count_kv";
    let at = b.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    assert_eq!(&b[at..at + 8], &[4, 0, 0, 0, 2, 0, 0, 0]);
    b[at + 4] = 3;
    let e = load_err(b);
    assert!(matches!(&e, ModelError::BadKey { key, .. } if key == "llama.attention.head_count_kv"));

    let mut b = tiny_bytes();
    patch(&mut b, b"", b"blk.1.ffn_up.weight", b"blk.1.ffn_uq.weight");
    let e = load_err(b);
    assert!(matches!(&e, ModelError::MissingTensor { name } if name == "blk.1.ffn_up.weight"));
}

#[test]
fn bad_tokens_and_full_cache_are_errors_that_keep_the_cache() {
    let file = GgufFile::open(fixtures().join("tiny_llama.gguf"), None).unwrap();
    let llama = Llama::load(CpuBackend::new().unwrap(), &file).unwrap();
    let mut cache = llama.new_cache(4);
    llama.forward(&mut cache, &[1, 2], Logits::Last).unwrap();
    let e = llama.forward(&mut cache, &[3, 256], Logits::Last).unwrap_err();
    assert!(matches!(e, ModelError::Token { index: 1, token: 256, n_vocab: 256 }), "{e}");
    assert_eq!(cache.len(), 2);
    let e = llama.forward(&mut cache, &[3, 4, 5], Logits::Last).unwrap_err();
    assert!(matches!(e, ModelError::Context { pos: 2, n: 3, limit: 4 }), "{e}");
    assert!(matches!(llama.forward(&mut cache, &[], Logits::All), Err(ModelError::EmptyBatch)));
    let mut other = KvCache::new(3, 32, 8);
    let e = llama.forward(&mut other, &[1], Logits::Last).unwrap_err();
    assert!(matches!(e, ModelError::CacheShape { .. }), "{e}");
    assert_eq!(cache.len(), 2);
}

fn smollm2() -> Option<(GgufFile, Value)> {
    let Ok(path) = std::env::var("LOWBIT_SMOLLM2") else {
        println!("skipped: set LOWBIT_SMOLLM2 to the path of SmolLM2-135M-Instruct.Q4_1.gguf");
        return None;
    };
    let file = GgufFile::open(&path, None).unwrap();
    let text = std::fs::read_to_string(fixtures().join("smollm2_ref.json")).unwrap();
    Some((file, serde_json::from_str(&text).unwrap()))
}

#[test]
fn smollm2_matches_the_reference_and_answers_paris() {
    let Some((file, r)) = smollm2() else { return };
    let llama = Llama::load(CpuBackend::new().unwrap(), &file).unwrap();
    for (i, s) in r["sequences"].as_array().unwrap().iter().enumerate() {
        let tokens: Vec<u32> =
            s["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        let mut cache = llama.new_cache(tokens.len());
        let ours = llama.forward(&mut cache, &tokens, Logits::All).unwrap();
        let vocab = llama.config().n_vocab;
        if let Ok(dir) = std::env::var("LOWBIT_DUMP") {
            let bytes: Vec<u8> = ours.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(Path::new(&dir).join(format!("smollm2.{i}.f32")), bytes).unwrap();
        }
        for variant in ["act_quant", "exact"] {
            let (mut worst, mut worst_kl) = (0f64, 0f64);
            for row in s[variant].as_array().unwrap() {
                let p = row["position"].as_u64().unwrap() as usize;
                let lg = &ours[p * vocab..(p + 1) * vocab];
                let ids: Vec<usize> = row["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as usize)
                    .collect();
                let vals: Vec<f64> =
                    row["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
                let lse = row["logsumexp"].as_f64().unwrap();
                let ls = log_softmax(lg);
                let argmax = (0..vocab).max_by(|&a, &b| lg[a].total_cmp(&lg[b])).unwrap();
                // The reference's top token is ours, or within noise (1 logit) of ours.
                assert!(
                    lg[ids[0]] >= lg[argmax] - 1.0,
                    "seq {i} position {p} ({variant}): top token {argmax}, reference {}",
                    ids[0]
                );
                let mut kl_lb = 0.0;
                let (mut pm, mut qm) = (0.0, 0.0);
                for (&id, &v) in ids.iter().zip(&vals) {
                    worst = worst.max((f64::from(lg[id]) - v).abs());
                    let lp = v - lse;
                    kl_lb += lp.exp() * (lp - ls[id]);
                    pm += lp.exp();
                    qm += ls[id].exp();
                }
                let (pr, qr) = ((1.0f64 - pm).max(1e-300), (1.0f64 - qm).max(1e-300));
                kl_lb += pr * (pr / qr).ln();
                worst_kl = worst_kl.max(kl_lb);
            }
            println!(
                "SmolLM2 seq {i} ({} tokens) vs {variant}: max|diff| at top-32 of last 4 \
                 positions {worst:.3e}, KL lower bound (top-32 + rest) max {worst_kl:.3e}",
                tokens.len()
            );
            assert!(worst < 2.0, "seq {i}: max |diff| {worst} vs {variant}");
            assert!(worst_kl < 0.05, "seq {i}: KL {worst_kl} vs {variant}");
        }
    }
    // Greedy "The capital of France is" -> " Paris".
    let prompt = [504u32, 3575, 282, 4649, 314];
    let mut cache = llama.new_cache(16);
    let last = llama.forward(&mut cache, &prompt, Logits::Last).unwrap();
    let next = (0..last.len()).max_by(|&a, &b| last[a].total_cmp(&last[b])).unwrap();
    assert_eq!(next, 7042, "greedy next token after 'The capital of France is'");
}

/// A backend wrapper that times every matmul (the speed test's breakdown).
struct Timed<B> {
    inner: B,
    nanos: std::sync::atomic::AtomicU64,
}

impl<B: Backend> Backend for Timed<B> {
    type Matrix = B::Matrix;
    type Error = B::Error;
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn supports(&self, format: lowbit_core::FormatId) -> bool {
        self.inner.supports(format)
    }
    fn upload(
        &self,
        desc: lowbit_core::backend::MatrixDesc,
        bytes: &[u8],
    ) -> Result<B::Matrix, B::Error> {
        self.inner.upload(desc, bytes)
    }
    fn desc(&self, m: &B::Matrix) -> lowbit_core::backend::MatrixDesc {
        self.inner.desc(m)
    }
    fn matmul(&self, m: &B::Matrix, x: &[f32], n: usize, y: &mut [f32]) -> Result<(), B::Error> {
        let t = std::time::Instant::now();
        let r = self.inner.matmul(m, x, n, y);
        let ns = t.elapsed().as_nanos() as u64;
        self.nanos.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        r
    }
}

/// Prefill (64 tokens) and decode speed on SmolLM2 (best of 5), with the share of time spent
/// in backend matmuls: run with `LOWBIT_SMOLLM2=... RAYON_NUM_THREADS=2 cargo test --release
/// -p lowbit-runtime --test model_ref -- --ignored --nocapture smollm2_speed`.
#[test]
#[ignore]
fn smollm2_speed() {
    use std::sync::atomic::Ordering;
    let Some((file, _)) = smollm2() else { return };
    let backend = Timed { inner: CpuBackend::new().unwrap(), nanos: 0.into() };
    let llama = Llama::load(backend, &file).unwrap();
    let nanos = || llama.backend().nanos.load(Ordering::Relaxed) as f64 * 1e-9;
    let prompt: Vec<u32> = (0..64u32).map(|i| 300 + i * 37).collect();
    let (mut best_pp, mut pp_mm) = (f64::MAX, 0.0);
    let (mut best_tg, mut tg_mm) = (f64::MAX, 0.0);
    for _ in 0..5 {
        let mut cache = llama.new_cache(256);
        let (t, m0) = (std::time::Instant::now(), nanos());
        let last = llama.forward(&mut cache, &prompt, Logits::Last).unwrap();
        let (pp, mm) = (t.elapsed().as_secs_f64(), nanos() - m0);
        if pp < best_pp {
            (best_pp, pp_mm) = (pp, mm);
        }
        let mut tok = (0..last.len()).max_by(|&a, &b| last[a].total_cmp(&last[b])).unwrap() as u32;
        let (t, m0) = (std::time::Instant::now(), nanos());
        for _ in 0..32 {
            let l = llama.forward(&mut cache, &[tok], Logits::Last).unwrap();
            tok = (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap() as u32;
        }
        let (tg, mm) = (t.elapsed().as_secs_f64() / 32.0, (nanos() - m0) / 32.0);
        if tg < best_tg {
            (best_tg, tg_mm) = (tg, mm);
        }
    }
    println!(
        "SmolLM2 {} threads: prefill 64 tokens {:.1} tok/s ({:.0}% in matmul), decode {:.1} \
         tok/s ({:.0}% in matmul)",
        rayon::current_num_threads(),
        64.0 / best_pp,
        100.0 * pp_mm / best_pp,
        1.0 / best_tg,
        100.0 * tg_mm / best_tg
    );
}

/// A NaN in the MoE router's weights gives NaN router logits: the forward pass refuses with
/// an error naming the layer and token, never a route to an invented expert.
#[test]
fn moe_router_nan_is_an_error_naming_layer_and_token() {
    let bytes = std::fs::read(fixtures().join("tiny_llama_moe.gguf")).unwrap();
    let file = GgufFile::from_bytes(bytes.clone(), None).unwrap();
    let model = Llama::load(CpuBackend::new().unwrap(), &file).unwrap();
    assert_eq!((model.config().n_expert, model.config().n_expert_used), (4, 2));
    let mut cache = model.new_cache(16);
    model.forward(&mut cache, &[1, 2, 3], Logits::Last).unwrap();
    // Layer 1's router (F32): every weight NaN.
    let t = file.tensors().iter().find(|t| t.name == "blk.1.ffn_gate_inp.weight").unwrap();
    let data = file.tensor_data(t);
    let at = data.as_ptr() as usize - file_base(&file, &bytes);
    let mut bad = bytes.clone();
    for v in bad[at..at + data.len()].chunks_exact_mut(4) {
        v.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    let file = GgufFile::from_bytes(bad, None).unwrap();
    let model = Llama::load(CpuBackend::new().unwrap(), &file).unwrap();
    let mut cache = model.new_cache(16);
    match model.forward(&mut cache, &[1, 2, 3], Logits::Last) {
        Err(ModelError::Router { layer: 1, token: 0, message }) => {
            assert!(message.contains("NaN"), "{message}")
        }
        other => panic!("expected a router error, got {other:?}"),
    }
    assert_eq!(cache.len(), 0, "a failed pass keeps the cache as it was");
}

/// The address of the byte that `file`'s first tensor data offset counts from, found by
/// locating the first tensor's bytes in `bytes`.
fn file_base(file: &GgufFile, bytes: &[u8]) -> usize {
    let t = &file.tensors()[0];
    let d = file.tensor_data(t);
    let pos = bytes.windows(d.len().min(64)).position(|w| w == &d[..d.len().min(64)]).unwrap();
    d.as_ptr() as usize - pos
}

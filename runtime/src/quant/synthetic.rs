//! A deterministic synthetic model shaped like a small llama, so `lowbit quantize` has a
//! built-in input on a machine with no model file: tensors (llama.cpp GGUF names, ggml-order
//! dims, f32 data) and the llama metadata keys, as plain Rust values for the GGUF writer.
//!
//! Default shape ([`LlamaShape::default`]): vocab 512, embedding 256, 2 layers, FFN 704,
//! 4 attention heads and 2 KV heads (GQA, head dim 64). 704 = 22 x 32 is deliberately not a
//! multiple of 128 or 256, so `ffn_down` (rows of 704) exercises recipe fallbacks the way
//! SmolLM2's 576-wide rows do.
//!
//! Weights: Gaussian, standard deviation `gain / sqrt(fan_in)` with a per-row factor in
//! [0.5, 1.5); about 1% of the input columns of every matrix scaled by 8..32x (the outlier
//! channels of real LLMs) and a sparse Pareto(alpha = 2) tail on 1 element in 1000 (capped at
//! 64x). Norm weights are 1 + N(0, 0.05^2). Every tensor has its own PCG32 stream (seed, tensor
//! index), so one tensor's values do not depend on the others. The metadata follows the keys
//! llama.cpp reads for `general.architecture = "llama"` (gguf-py `gguf/constants.py`
//! `Keys.LLM` / `Keys.Attention` / `Keys.Rope` / `Keys.Tokenizer`); the tokenizer is a minimal
//! SentencePiece-style vocabulary (`<unk>`, `<s>`, `</s>`, the 256 byte tokens, then filler
//! pieces) so the file is structurally complete, not a usable tokenizer.
//! What must not live here: file writing.

use std::borrow::Cow;

use lowbit_core::FormatId;

use crate::demo::Pcg32;

use super::pipeline::SourceTensor;
use super::MetaValue;

/// The shape of the synthetic model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlamaShape {
    /// Vocabulary size (at least 259: three specials and 256 byte tokens).
    pub vocab: usize,
    /// Embedding length (a multiple of `heads`).
    pub dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// FFN hidden size.
    pub ffn: usize,
    /// Attention heads.
    pub heads: usize,
    /// KV heads (divides `heads`).
    pub kv_heads: usize,
    /// Context length recorded in the metadata.
    pub context: usize,
}

impl Default for LlamaShape {
    fn default() -> Self {
        LlamaShape {
            vocab: 512,
            dim: 256,
            layers: 2,
            ffn: 704,
            heads: 4,
            kv_heads: 2,
            context: 2048,
        }
    }
}

impl LlamaShape {
    /// SmolLM2-135M's shape (vocab 49152, dim 576, 30 layers, FFN 1536, 9 heads / 3 KV heads),
    /// for planning tests; generating its data takes ~540 MB of f32.
    pub fn smollm2_135m() -> Self {
        LlamaShape {
            vocab: 49152,
            dim: 576,
            layers: 30,
            ffn: 1536,
            heads: 9,
            kv_heads: 3,
            context: 8192,
        }
    }

    /// Head dimension.
    pub fn head_dim(&self) -> usize {
        self.dim / self.heads
    }

    /// Every tensor's name and dims (ggml order), in llama.cpp's conversion order.
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<u64>)> {
        let d = self.dim as u64;
        let kv = (self.head_dim() * self.kv_heads) as u64;
        let f = self.ffn as u64;
        let mut v = vec![("token_embd.weight".to_owned(), vec![d, self.vocab as u64])];
        for l in 0..self.layers {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            v.push((b("attn_norm"), vec![d]));
            v.push((b("attn_q"), vec![d, d]));
            v.push((b("attn_k"), vec![d, kv]));
            v.push((b("attn_v"), vec![d, kv]));
            v.push((b("attn_output"), vec![d, d]));
            v.push((b("ffn_norm"), vec![d]));
            v.push((b("ffn_gate"), vec![d, f]));
            v.push((b("ffn_up"), vec![d, f]));
            v.push((b("ffn_down"), vec![f, d]));
        }
        v.push(("output_norm.weight".to_owned(), vec![d]));
        v.push(("output.weight".to_owned(), vec![d, self.vocab as u64]));
        v
    }
}

/// One synthetic tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthTensor {
    /// llama.cpp GGUF name.
    pub name: String,
    /// Dims in ggml order (`dims[0]` = row length).
    pub dims: Vec<u64>,
    /// Row-major f32 values (`dims` multiplied).
    pub data: Vec<f32>,
}

/// The synthetic model: tensors in file order and metadata key/values in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticModel {
    /// Tensors.
    pub tensors: Vec<SynthTensor>,
    /// Metadata (GGUF keys).
    pub metadata: Vec<(String, MetaValue)>,
}

impl SyntheticModel {
    /// The tensors as F32 pipeline sources (little-endian bytes), converted one at a time as
    /// the iterator is consumed.
    pub fn sources(&self) -> impl Iterator<Item = SourceTensor<'static>> + '_ {
        self.tensors.iter().map(|t| SourceTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            format: FormatId::F32,
            data: Cow::Owned(t.data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        })
    }
}

/// The default seed of the built-in model.
pub const DEFAULT_SEED: u64 = 0x5eed_11a3a;

fn matrix(k: usize, rows: usize, gain: f64, rng_seed: u64, stream: u64) -> Vec<f32> {
    let mut col_rng = Pcg32::new(rng_seed, stream.wrapping_mul(2));
    let col_gain: Vec<f64> = (0..k)
        .map(|_| if col_rng.uniform() < 0.01 { 8.0 + 24.0 * col_rng.uniform() } else { 1.0 })
        .collect();
    let mut rng = Pcg32::new(rng_seed, stream.wrapping_mul(2) + 1);
    let base = gain / (k as f64).sqrt();
    let mut out = Vec::with_capacity(k * rows);
    for _ in 0..rows {
        let sigma = base * (0.5 + rng.uniform());
        for &g in &col_gain {
            let mut v = rng.normal() * sigma * g;
            if rng.uniform() < 1e-3 {
                v *= rng.uniform().powf(-0.5).min(64.0);
            }
            out.push(v as f32);
        }
    }
    out
}

fn norm(k: usize, rng_seed: u64, stream: u64) -> Vec<f32> {
    let mut rng = Pcg32::new(rng_seed, stream.wrapping_mul(2));
    (0..k).map(|_| (1.0 + 0.05 * rng.normal()) as f32).collect()
}

fn metadata(s: &LlamaShape) -> Vec<(String, MetaValue)> {
    let u32v = |x: usize| MetaValue::U32(u32::try_from(x).unwrap_or(u32::MAX));
    let mut tokens = vec!["<unk>".to_owned(), "<s>".to_owned(), "</s>".to_owned()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let n_fill = s.vocab.saturating_sub(tokens.len());
    tokens.extend((0..n_fill).map(|i| format!("\u{2581}t{i}")));
    tokens.truncate(s.vocab);
    let n = tokens.len();
    // token types (llama.cpp `llama_token_type`): 2 unknown, 3 control, 6 byte, 1 normal.
    let types: Vec<i32> = (0..n)
        .map(|i| {
            if i == 0 {
                2
            } else if i < 3 {
                3
            } else if i < 259 {
                6
            } else {
                1
            }
        })
        .collect();
    let scores: Vec<f32> =
        (0..n).map(|i| if i < 259 { 0.0 } else { -((i - 259) as f32) }).collect();
    let kv = |k: &str, v: MetaValue| (k.to_owned(), v);
    vec![
        kv("general.architecture", MetaValue::String("llama".into())),
        kv("general.name", MetaValue::String("lowbit synthetic llama".into())),
        kv("general.file_type", MetaValue::U32(0)),
        kv("llama.vocab_size", u32v(s.vocab)),
        kv("llama.context_length", u32v(s.context)),
        kv("llama.embedding_length", u32v(s.dim)),
        kv("llama.block_count", u32v(s.layers)),
        kv("llama.feed_forward_length", u32v(s.ffn)),
        kv("llama.rope.dimension_count", u32v(s.head_dim())),
        kv("llama.attention.head_count", u32v(s.heads)),
        kv("llama.attention.head_count_kv", u32v(s.kv_heads)),
        kv("llama.rope.freq_base", MetaValue::F32(10000.0)),
        kv("llama.attention.layer_norm_rms_epsilon", MetaValue::F32(1e-5)),
        kv("tokenizer.ggml.model", MetaValue::String("llama".into())),
        kv("tokenizer.ggml.tokens", MetaValue::StringArray(tokens)),
        kv("tokenizer.ggml.scores", MetaValue::F32Array(scores)),
        kv("tokenizer.ggml.token_type", MetaValue::I32Array(types)),
        kv("tokenizer.ggml.unknown_token_id", MetaValue::U32(0)),
        kv("tokenizer.ggml.bos_token_id", MetaValue::U32(1)),
        kv("tokenizer.ggml.eos_token_id", MetaValue::U32(2)),
    ]
}

/// Generates the synthetic model for `shape` and `seed` (deterministic: same inputs, same
/// bits, on every machine). Panics never; an inconsistent shape (`dim` not a multiple of
/// `heads`, `heads` not a multiple of `kv_heads`, `vocab` below 259) is an error string.
pub fn synthetic_llama(shape: &LlamaShape, seed: u64) -> Result<SyntheticModel, String> {
    if shape.heads == 0 || shape.kv_heads == 0 || shape.dim % shape.heads != 0 {
        return Err(format!("dim {} is not a multiple of heads {}", shape.dim, shape.heads));
    }
    if shape.heads % shape.kv_heads != 0 {
        return Err(format!("heads {} not a multiple of kv_heads {}", shape.heads, shape.kv_heads));
    }
    if shape.vocab < 259 || shape.layers == 0 || shape.ffn == 0 {
        return Err("vocab must be at least 259 and layers, ffn positive".into());
    }
    let tensors = shape
        .tensor_shapes()
        .into_iter()
        .enumerate()
        .map(|(i, (name, dims))| {
            let stream = i as u64 + 1;
            let k = dims[0] as usize;
            let data = if dims.len() == 1 {
                norm(k, seed, stream)
            } else {
                let rows = dims[1] as usize;
                // Embeddings are read row by row, not multiplied: unit-ish scale per element.
                let gain = if name == "token_embd.weight" { (k as f64).sqrt() * 0.02 } else { 1.0 };
                matrix(k, rows, gain, seed, stream)
            };
            SynthTensor { name, dims, data }
        })
        .collect();
    Ok(SyntheticModel { tensors, metadata: metadata(shape) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_names_and_sizes() {
        let s = LlamaShape::default();
        let m = synthetic_llama(&s, DEFAULT_SEED).unwrap();
        assert_eq!(m.tensors.len(), 2 + 9 * 2 + 1);
        assert_eq!(m.tensors[0].name, "token_embd.weight");
        assert_eq!(m.tensors[0].dims, vec![256, 512]);
        let k = m.tensors.iter().find(|t| t.name == "blk.1.attn_k.weight").unwrap();
        assert_eq!(k.dims, vec![256, 128]);
        let down = m.tensors.iter().find(|t| t.name == "blk.0.ffn_down.weight").unwrap();
        assert_eq!(down.dims, vec![704, 256]);
        for t in &m.tensors {
            let n: u64 = t.dims.iter().product();
            assert_eq!(t.data.len() as u64, n, "{}", t.name);
            assert!(t.data.iter().all(|x| x.is_finite()), "{}", t.name);
        }
        let get = |k: &str| m.metadata.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("llama.block_count"), Some(MetaValue::U32(2)));
        assert_eq!(get("llama.attention.head_count_kv"), Some(MetaValue::U32(2)));
        match get("tokenizer.ggml.tokens") {
            Some(MetaValue::StringArray(t)) => assert_eq!(t.len(), 512),
            other => panic!("{other:?}"),
        }
        assert!(synthetic_llama(&LlamaShape { heads: 5, ..s }, 1).is_err());
    }
}

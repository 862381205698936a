//! The hyperparameters of a llama-family model, read from GGUF metadata ([`LlamaConfig`]).
//!
//! Keys (llama.cpp `gguf-py/gguf/constants.py` `Keys.LLM` / `Keys.Attention` / `Keys.Rope`, with
//! `{arch}` = `llama`): `{arch}.block_count`, `{arch}.embedding_length`,
//! `{arch}.feed_forward_length`, `{arch}.attention.head_count`, `{arch}.attention.head_count_kv`
//! (default: head_count), `{arch}.attention.key_length` (default: embedding / heads),
//! `{arch}.attention.layer_norm_rms_epsilon`, `{arch}.rope.freq_base` (default 10000, llama.cpp
//! `src/llama-hparams` default), `{arch}.rope.dimension_count` (default: head size),
//! `{arch}.context_length`. The vocabulary size is the row count of `token_embd.weight`.
//!
//! What must not live here: tensors and their upload (`llama.rs`).

use crate::gguf::{GgufFile, Value};

use super::error::ModelError;

/// The architectures lowbit runs (the value of `general.architecture`).
pub const ARCHITECTURES: &[&str] = &["llama"];

/// The hyperparameters of a llama-family model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture` (`llama`).
    pub arch: String,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Embedding (residual stream) width.
    pub dim: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention: `n_head` is a multiple).
    pub n_head_kv: usize,
    /// Elements per head (queries, keys and values).
    pub head_dim: usize,
    /// Leading elements of each head that RoPE rotates (even, at most `head_dim`).
    pub n_rot: usize,
    /// Hidden width of the feed-forward network.
    pub ffn_dim: usize,
    /// Vocabulary size (rows of `token_embd.weight`).
    pub n_vocab: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE base frequency.
    pub rope_freq_base: f32,
    /// The training context length (0 when the file does not say).
    pub context_length: usize,
    /// Experts per MoE layer (`{arch}.expert_count`); 0 for a dense model.
    pub n_expert: usize,
    /// Experts each token is routed to (`{arch}.expert_used_count`); 0 for a dense model.
    pub n_expert_used: usize,
}

fn get<'a>(file: &'a GgufFile, key: &str) -> Option<&'a Value> {
    file.get(key)
}

fn uint(file: &GgufFile, key: &str) -> Result<Option<usize>, ModelError> {
    let Some(v) = get(file, key) else { return Ok(None) };
    let n = v.as_u64().ok_or_else(|| ModelError::BadKey {
        key: key.to_owned(),
        reason: format!("expected a non-negative integer, found {}", v.abbreviated(4)),
    })?;
    usize::try_from(n).map(Some).map_err(|_| ModelError::BadKey {
        key: key.to_owned(),
        reason: format!("{n} is too large"),
    })
}

fn req_uint(file: &GgufFile, key: &str) -> Result<usize, ModelError> {
    uint(file, key)?.ok_or_else(|| ModelError::MissingKey { key: key.to_owned() })
}

fn float(file: &GgufFile, key: &str) -> Result<Option<f32>, ModelError> {
    let Some(v) = get(file, key) else { return Ok(None) };
    let x = match *v {
        Value::F32(x) => x,
        Value::F64(x) => x as f32,
        _ => {
            return Err(ModelError::BadKey {
                key: key.to_owned(),
                reason: format!("expected a float, found {}", v.abbreviated(4)),
            })
        }
    };
    if !x.is_finite() {
        return Err(ModelError::BadKey {
            key: key.to_owned(),
            reason: format!("{x} is not finite"),
        });
    }
    Ok(Some(x))
}

fn bad(key: String, reason: impl Into<String>) -> ModelError {
    ModelError::BadKey { key, reason: reason.into() }
}

impl LlamaConfig {
    /// Reads and checks the hyperparameters of `file`. Errors name the missing or bad key; an
    /// architecture other than those in [`ARCHITECTURES`] is [`ModelError::UnknownArchitecture`];
    /// RoPE scaling is [`ModelError::Unsupported`] for now.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, ModelError> {
        let arch_key = "general.architecture";
        let arch = get(file, arch_key)
            .ok_or_else(|| ModelError::MissingKey { key: arch_key.to_owned() })?
            .as_str()
            .ok_or_else(|| bad(arch_key.to_owned(), "expected a string"))?
            .to_owned();
        if !ARCHITECTURES.contains(&arch.as_str()) {
            return Err(ModelError::UnknownArchitecture { name: arch });
        }
        let k = |s: &str| format!("{arch}.{s}");

        let n_expert = uint(file, &k("expert_count"))?.unwrap_or(0);
        let n_expert_used = if n_expert > 0 {
            let key = k("expert_used_count");
            let used = req_uint(file, &key)?;
            if used == 0 || used > n_expert {
                return Err(ModelError::BadKey {
                    key,
                    reason: format!("{used} experts per token, the layer has {n_expert}"),
                });
            }
            used
        } else {
            0
        };
        if let Some(v) = get(file, &k("rope.scaling.type")) {
            let t = v.as_str().unwrap_or("?");
            if t != "none" {
                return Err(ModelError::Unsupported {
                    what: format!("RoPE scaling ({} = {t})", k("rope.scaling.type")),
                });
            }
        }

        let n_layer = req_uint(file, &k("block_count"))?;
        let dim = req_uint(file, &k("embedding_length"))?;
        let ffn_dim = req_uint(file, &k("feed_forward_length"))?;
        let n_head = req_uint(file, &k("attention.head_count"))?;
        let n_head_kv = uint(file, &k("attention.head_count_kv"))?.unwrap_or(n_head);
        let rms_key = k("attention.layer_norm_rms_epsilon");
        let rms_eps = float(file, &rms_key)?
            .ok_or_else(|| ModelError::MissingKey { key: rms_key.clone() })?;
        let rope_freq_base = float(file, &k("rope.freq_base"))?.unwrap_or(10000.0);
        let context_length = uint(file, &k("context_length"))?.unwrap_or(0);

        if n_layer == 0 {
            return Err(bad(k("block_count"), "must be at least 1"));
        }
        if dim == 0 || ffn_dim == 0 {
            return Err(bad(k("embedding_length"), "widths must be at least 1"));
        }
        if n_head == 0 || (dim % n_head != 0 && get(file, &k("attention.key_length")).is_none()) {
            return Err(bad(
                k("attention.head_count"),
                format!("{n_head} heads do not divide the embedding width {dim}"),
            ));
        }
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(bad(
                k("attention.head_count_kv"),
                format!("{n_head_kv} kv heads do not divide {n_head} query heads"),
            ));
        }
        let head_dim = uint(file, &k("attention.key_length"))?.unwrap_or(dim / n_head);
        if let Some(vl) = uint(file, &k("attention.value_length"))? {
            if vl != head_dim {
                return Err(ModelError::Unsupported {
                    what: format!("value head size {vl} different from key head size {head_dim}"),
                });
            }
        }
        if head_dim == 0 {
            return Err(bad(k("attention.key_length"), "head size must be at least 1"));
        }
        if n_head.checked_mul(head_dim).and_then(|q| q.checked_mul(4)).is_none() {
            return Err(bad(k("attention.key_length"), format!("{n_head} x {head_dim} overflows")));
        }
        let n_rot = uint(file, &k("rope.dimension_count"))?.unwrap_or(head_dim);
        if n_rot % 2 != 0 || n_rot > head_dim {
            return Err(bad(
                k("rope.dimension_count"),
                format!("{n_rot} must be even and at most the head size {head_dim}"),
            ));
        }
        if rms_eps < 0.0 {
            return Err(bad(rms_key, "must not be negative"));
        }
        if rope_freq_base <= 0.0 {
            return Err(bad(k("rope.freq_base"), "must be positive"));
        }

        let embd = file
            .tensor("token_embd.weight")
            .ok_or_else(|| ModelError::MissingTensor { name: "token_embd.weight".into() })?;
        let n_vocab = usize::try_from(embd.rows()).map_err(|_| ModelError::TensorShape {
            name: embd.name.clone(),
            expected: vec![dim as u64],
            got: embd.dims.clone(),
        })?;
        if let Some(v) = uint(file, &k("vocab_size"))? {
            if v != n_vocab {
                return Err(bad(
                    k("vocab_size"),
                    format!("{v} differs from token_embd.weight's {n_vocab} rows"),
                ));
            }
        }
        if n_vocab == 0 {
            return Err(ModelError::TensorShape {
                name: embd.name.clone(),
                expected: vec![dim as u64, 1],
                got: embd.dims.clone(),
            });
        }
        Ok(LlamaConfig {
            arch,
            n_layer,
            dim,
            n_head,
            n_head_kv,
            head_dim,
            n_rot,
            ffn_dim,
            n_vocab,
            rms_eps,
            rope_freq_base,
            context_length,
            n_expert,
            n_expert_used,
        })
    }

    /// Width of the query projection (`n_head * head_dim`).
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of the key and value projections (`n_head_kv * head_dim`).
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}

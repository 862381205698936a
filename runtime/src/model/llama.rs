//! The llama architecture as GGUF stores it ([`Llama`]): weights loaded from a [`GgufFile`],
//! every matrix uploaded in its stored format through the backend trait and multiplied with its
//! matmul, and the forward pass of a batch of tokens at the KV cache's position.
//!
//! Tensor names and shapes (ggml order, row length first) follow llama.cpp
//! `src/llama-arch.cpp` (LLM_ARCH_LLAMA) and `src/llama-model.cpp` (load_tensors, build_llama):
//! `token_embd.weight` [dim, vocab], `output_norm.weight` [dim], `output.weight` [dim, vocab]
//! (absent: tied to token_embd), and per block `blk.N.`: `attn_norm` [dim], `attn_q` [dim,
//! n_head*hd], `attn_k` / `attn_v` [dim, n_head_kv*hd], `attn_output` [n_head*hd, dim],
//! `ffn_norm` [dim], `ffn_gate` / `ffn_up` [dim, ffn], `ffn_down` [ffn, dim].
//!
//! Activations travel as columns, one per token (`x[j * dim + i]`), the backend trait's
//! convention, so a prefill of n tokens is one matmul with n columns per matrix.
//! What must not live here: tokenization, sampling, the arithmetic of `ops.rs`.

use std::sync::Arc;
use std::time::Instant;

use lowbit_core::backend::{Backend, MatrixDesc};
use lowbit_core::codec;
use lowbit_core::FormatId;

use crate::gguf::{GgufFile, TensorInfo};

use super::config::LlamaConfig;
use super::error::ModelError;
use super::kv::KvCache;
use super::ops::{self, AttnShape};
use super::profile::{Profile, Stage};
use super::stack::Stack;

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token (generation).
    Last,
    /// Every token (perplexity, KL divergence).
    All,
}

/// A matrix on the backend, with its tensor name for errors.
pub(crate) struct Weight<M> {
    pub(crate) name: String,
    pub(crate) rows: usize,
    /// Bytes of the matrix in its stored format (what one matmul streams).
    pub(crate) bytes: u64,
    pub(crate) m: M,
}

/// One expert of an MoE layer: its slices of the stacked `ffn_{gate,up,down}_exps` tensors.
struct Expert<M> {
    gate: Weight<M>,
    up: Weight<M>,
    down: Weight<M>,
}

/// A block's feed-forward network.
enum Ffn<M> {
    /// SwiGLU: `down(silu(gate x) * up x)`; `gate_up` stacks `[gate, up]`.
    Dense { gate_up: Stack<M>, down: Weight<M> },
    /// Mixture of experts (llama.cpp's `build_moe_ffn` for llama: softmax router over
    /// `ffn_gate_inp`, the top `k` experts, weights renormalised to sum to 1, each expert a
    /// SwiGLU), routed by [`crate::moe_router::route`].
    Moe { router: Weight<M>, experts: Vec<Expert<M>>, k: usize },
}

/// One transformer block.
struct Layer<M> {
    attn_norm: Vec<f32>,
    /// `[attn_q, attn_k, attn_v]`.
    qkv: Stack<M>,
    wo: Weight<M>,
    ffn_norm: Vec<f32>,
    ffn: Ffn<M>,
}

/// A llama-family model on backend `B`.
pub struct Llama<B: Backend> {
    backend: B,
    config: LlamaConfig,
    embd_format: FormatId,
    embd_row_bytes: usize,
    /// `token_embd.weight` in its stored format; rows decoded per token.
    embd: Vec<u8>,
    output_norm: Vec<f32>,
    /// `output.weight`, or `token_embd.weight` uploaded again when the embeddings are tied.
    output: Weight<B::Matrix>,
    tied: bool,
    layers: Vec<Layer<B::Matrix>>,
    observer: Option<MatmulObserver>,
    profile: Option<Arc<Profile>>,
}

/// A callback that sees every weight matmul's input: the weight's tensor name, which matrix of
/// a stacked tensor it is (`(expert, n_expert)`, `(0, 1)` for a plain matrix), the `n`
/// activation columns (`x`, column after column) and `n`. Importance-matrix collection uses it.
pub type MatmulObserver = Box<dyn Fn(&str, (usize, usize), &[f32], usize) + Send + Sync>;

impl<B: Backend> std::fmt::Debug for Llama<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llama")
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .field("tied", &self.tied)
            .finish_non_exhaustive()
    }
}

fn tensor<'a>(file: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, ModelError> {
    file.tensor(name).ok_or_else(|| ModelError::MissingTensor { name: name.to_owned() })
}

fn check_dims(t: &TensorInfo, expected: &[usize]) -> Result<(), ModelError> {
    let want: Vec<u64> = expected.iter().map(|&d| d as u64).collect();
    if t.dims != want {
        return Err(ModelError::TensorShape {
            name: t.name.clone(),
            expected: want,
            got: t.dims.clone(),
        });
    }
    Ok(())
}

/// Decodes a vector tensor (norm weights) of `len` elements to f32.
fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let t = tensor(file, name)?;
    check_dims(t, &[len])?;
    let mut out = vec![0f32; len];
    codec::decode_row(t.format, file.tensor_data(t), &mut out)
        .map_err(|source| ModelError::Decode { tensor: name.to_owned(), source })?;
    Ok(out)
}

/// The matrix tensor `name`, checked to be `[cols, rows]` (ggml order) in a format `backend`
/// supports.
pub(crate) fn tensor_checked<'a, B: Backend>(
    backend: &B,
    file: &'a GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<&'a TensorInfo, ModelError> {
    let t = tensor(file, name)?;
    check_dims(t, &[cols, rows])?;
    if !backend.supports(t.format) {
        return Err(ModelError::TensorFormat {
            name: name.to_owned(),
            format: t.format,
            backend: backend.name().to_owned(),
        });
    }
    Ok(t)
}

pub(crate) fn upload<B: Backend>(
    backend: &B,
    file: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
) -> Result<Weight<B::Matrix>, ModelError> {
    let t = tensor_checked(backend, file, name, cols, rows)?;
    let desc = MatrixDesc { format: t.format, rows, cols };
    let m = backend
        .upload(desc, file.tensor_data(t))
        .map_err(|e| ModelError::Backend { tensor: name.to_owned(), message: e.to_string() })?;
    Ok(Weight { name: name.to_owned(), rows, bytes: file.tensor_data(t).len() as u64, m })
}

/// Uploads each expert's slice of the stacked tensor `name` (ggml dims `[cols, rows, n_expert]`)
/// as its own matrix, named `name#e` in errors.
fn upload_experts<B: Backend>(
    backend: &B,
    file: &GgufFile,
    name: &str,
    cols: usize,
    rows: usize,
    n_expert: usize,
) -> Result<Vec<Weight<B::Matrix>>, ModelError> {
    let t = tensor(file, name)?;
    check_dims(t, &[cols, rows, n_expert])?;
    if !backend.supports(t.format) {
        return Err(ModelError::TensorFormat {
            name: name.to_owned(),
            format: t.format,
            backend: backend.name().to_owned(),
        });
    }
    let row_bytes = t
        .format
        .row_bytes(cols)
        .map_err(|source| ModelError::Decode { tensor: name.to_owned(), source })?;
    let data = file.tensor_data(t);
    let per = row_bytes * rows;
    (0..n_expert)
        .map(|e| {
            let desc = MatrixDesc { format: t.format, rows, cols };
            let m = backend.upload(desc, &data[e * per..(e + 1) * per]).map_err(|err| {
                ModelError::Backend { tensor: format!("{name}#{e}"), message: err.to_string() }
            })?;
            Ok(Weight { name: name.to_owned(), rows, bytes: per as u64, m })
        })
        .collect()
}

impl<B: Backend> Llama<B> {
    /// Loads the model in `file` onto `backend`: reads the hyperparameters
    /// ([`LlamaConfig::from_gguf`]), checks every tensor's shape, uploads every matrix in its
    /// stored format, decodes the norm weights, and keeps a copy of `token_embd.weight`'s bytes
    /// for embedding lookups.
    pub fn load(backend: B, file: &GgufFile) -> Result<Self, ModelError> {
        let config = LlamaConfig::from_gguf(file)?;
        let c = &config;
        let embd_t = tensor(file, "token_embd.weight")?;
        check_dims(embd_t, &[c.dim, c.n_vocab])?;
        let embd_format = embd_t.format;
        let embd_row_bytes = embd_format
            .row_bytes(c.dim)
            .map_err(|source| ModelError::Decode { tensor: embd_t.name.clone(), source })?;
        let embd = file.tensor_data(embd_t).to_vec();
        if Some(embd.len()) != embd_row_bytes.checked_mul(c.n_vocab) {
            return Err(ModelError::Backend {
                tensor: embd_t.name.clone(),
                message: format!(
                    "{} bytes of data, expected {} rows of {embd_row_bytes}",
                    embd.len(),
                    c.n_vocab
                ),
            });
        }
        let tied = file.tensor("output.weight").is_none();
        let output_name = if tied { "token_embd.weight" } else { "output.weight" };
        let output = upload(&backend, file, output_name, c.dim, c.n_vocab)?;
        let output_norm = vector(file, "output_norm.weight", c.dim)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for l in 0..c.n_layer {
            let n = |s: &str| format!("blk.{l}.{s}.weight");
            let up = |s: &str, cols, rows| upload(&backend, file, &n(s), cols, rows);
            let ffn = if c.n_expert > 0 {
                let ex = |s: &str, cols, rows| {
                    upload_experts(&backend, file, &n(s), cols, rows, c.n_expert)
                };
                let gates = ex("ffn_gate_exps", c.dim, c.ffn_dim)?;
                let ups = ex("ffn_up_exps", c.dim, c.ffn_dim)?;
                let downs = ex("ffn_down_exps", c.ffn_dim, c.dim)?;
                let experts = gates
                    .into_iter()
                    .zip(ups)
                    .zip(downs)
                    .map(|((gate, up), down)| Expert { gate, up, down })
                    .collect();
                Ffn::Moe {
                    router: up("ffn_gate_inp", c.dim, c.n_expert)?,
                    experts,
                    k: c.n_expert_used,
                }
            } else {
                if file.tensor(&n("ffn_gate_inp")).is_some() {
                    return Err(ModelError::BadKey {
                        key: format!("{}.expert_count", c.arch),
                        reason: format!("absent or 0, but {} exists", n("ffn_gate_inp")),
                    });
                }
                Ffn::Dense {
                    gate_up: Stack::upload(
                        &backend,
                        file,
                        &[n("ffn_gate"), n("ffn_up")],
                        c.dim,
                        &[c.ffn_dim, c.ffn_dim],
                    )?,
                    down: up("ffn_down", c.ffn_dim, c.dim)?,
                }
            };
            layers.push(Layer {
                attn_norm: vector(file, &n("attn_norm"), c.dim)?,
                qkv: Stack::upload(
                    &backend,
                    file,
                    &[n("attn_q"), n("attn_k"), n("attn_v")],
                    c.dim,
                    &[c.q_dim(), c.kv_dim(), c.kv_dim()],
                )?,
                wo: up("attn_output", c.q_dim(), c.dim)?,
                ffn_norm: vector(file, &n("ffn_norm"), c.dim)?,
                ffn,
            });
        }
        Ok(Llama {
            observer: None,
            profile: None,
            backend,
            config,
            embd_format,
            embd_row_bytes,
            embd,
            output_norm,
            output,
            tied,
            layers,
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The backend the matrices live on.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Whether the output matrix is `token_embd.weight` (no `output.weight` in the file).
    pub fn tied_embeddings(&self) -> bool {
        self.tied
    }

    /// Sets (or clears) the callback that sees every weight matmul's input.
    pub fn set_observer(&mut self, observer: Option<MatmulObserver>) {
        self.observer = observer;
    }

    /// Attaches (or detaches) a profile that accumulates the time of every forward-pass stage.
    pub fn set_profile(&mut self, profile: Option<Arc<Profile>>) {
        self.profile = profile;
    }

    /// The attached profile.
    pub fn profile(&self) -> Option<&Arc<Profile>> {
        self.profile.as_ref()
    }

    /// Runs `f` as stage `stage` (streaming `bytes` weight bytes) of the attached profile.
    fn timed<R>(&self, stage: Stage, bytes: u64, f: impl FnOnce() -> R) -> R {
        match &self.profile {
            None => f(),
            Some(p) => {
                let t = Instant::now();
                let r = f();
                p.add(stage, t.elapsed(), bytes);
                r
            }
        }
    }

    /// An empty KV cache for this model holding `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> KvCache {
        KvCache::for_config(&self.config, capacity)
    }

    fn matmul(&self, w: &Weight<B::Matrix>, x: &[f32], n: usize) -> Result<Vec<f32>, ModelError> {
        self.matmul_expert(w, (0, 1), x, n)
    }

    /// [`Self::matmul`] for expert `expert.0` of `expert.1` stacked matrices (what the
    /// observer is told).
    fn matmul_expert(
        &self,
        w: &Weight<B::Matrix>,
        expert: (usize, usize),
        x: &[f32],
        n: usize,
    ) -> Result<Vec<f32>, ModelError> {
        if let Some(observe) = &self.observer {
            observe(&w.name, expert, x, n);
        }
        self.matmul_unobserved(w, x, n)
    }

    /// The backend matmul of `w` with `n` columns of `x`, the observer not told.
    fn matmul_unobserved(
        &self,
        w: &Weight<B::Matrix>,
        x: &[f32],
        n: usize,
    ) -> Result<Vec<f32>, ModelError> {
        let mut y = vec![0f32; w.rows * n];
        self.backend
            .matmul(&w.m, x, n, &mut y)
            .map_err(|e| ModelError::Backend { tensor: w.name.clone(), message: e.to_string() })?;
        Ok(y)
    }

    /// Every matrix of `stack` times `n` columns of `x` (one matmul when stacked); the observer
    /// is told each tensor's name.
    fn matmul_stack(
        &self,
        stack: &Stack<B::Matrix>,
        x: &[f32],
        n: usize,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        if let Some(observe) = &self.observer {
            for name in stack.names() {
                observe(name, (0, 1), x, n);
            }
        }
        stack.apply(x, n, |w, x, n| self.matmul_unobserved(w, x, n))
    }

    /// Runs `tokens` at positions `cache.len()..`, stores their keys and values in `cache`, and
    /// returns the logits: `n_vocab` floats for the last token ([`Logits::Last`]), or for every
    /// token one after another ([`Logits::All`]). On error the cache keeps its previous
    /// positions. Every matrix product is one backend matmul with `tokens.len()` columns.
    pub fn forward(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        logits: Logits,
    ) -> Result<Vec<f32>, ModelError> {
        let pos0 = cache.len();
        let res = self.forward_inner(cache, tokens, logits);
        if res.is_err() {
            cache.truncate(pos0);
        }
        res
    }

    fn forward_inner(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        logits: Logits,
    ) -> Result<Vec<f32>, ModelError> {
        let c = &self.config;
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::EmptyBatch);
        }
        cache.check(c, n)?;
        let pos0 = cache.len();
        let dim = c.dim;

        if let Some(p) = &self.profile {
            p.add_tokens(n as u64);
        }
        let mut x = vec![0f32; n * dim];
        self.timed(Stage::Embed, 0, || self.embed(tokens, &mut x))?;

        let angles: Vec<_> =
            (0..n).map(|j| ops::rope_angles(pos0 + j, c.n_rot, c.rope_freq_base)).collect();
        let shape = AttnShape { n_head: c.n_head, n_head_kv: c.n_head_kv, head_dim: c.head_dim };
        let mut xn = vec![0f32; n * dim];
        let mut att = vec![0f32; n * c.q_dim()];
        for (l, layer) in self.layers.iter().enumerate() {
            self.timed(Stage::Norm, 0, || norm_columns(&x, &layer.attn_norm, c.rms_eps, &mut xn));
            let qkv = self
                .timed(Stage::Qkv, layer.qkv.bytes(), || self.matmul_stack(&layer.qkv, &xn, n))?;
            let mut qkv = qkv.into_iter();
            let (Some(mut q), Some(mut k), Some(v)) = (qkv.next(), qkv.next(), qkv.next()) else {
                unreachable!("a stack of three matrices gives three outputs")
            };
            let (keys, values) = self.timed(Stage::Rope, 0, || {
                for (j, a) in angles.iter().enumerate() {
                    ops::rope(&mut q[j * c.q_dim()..][..c.q_dim()], c.head_dim, a);
                    ops::rope(&mut k[j * c.kv_dim()..][..c.kv_dim()], c.head_dim, a);
                }
                cache.store(l, &k, &v)
            });
            self.timed(Stage::Attention, 0, || {
                ops::attention(&shape, &q, keys, values, pos0, &mut att)
            });
            let o =
                self.timed(Stage::AttnOutput, layer.wo.bytes, || self.matmul(&layer.wo, &att, n))?;
            self.timed(Stage::Residual, 0, || add(&mut x, &o));

            self.timed(Stage::Norm, 0, || norm_columns(&x, &layer.ffn_norm, c.rms_eps, &mut xn));
            let f = match &layer.ffn {
                Ffn::Dense { gate_up, down } => {
                    let gu = self.timed(Stage::GateUp, gate_up.bytes(), || {
                        self.matmul_stack(gate_up, &xn, n)
                    })?;
                    let mut gu = gu.into_iter();
                    let (Some(mut g), Some(u)) = (gu.next(), gu.next()) else {
                        unreachable!("a stack of two matrices gives two outputs")
                    };
                    self.timed(Stage::Swiglu, 0, || ops::swiglu(&mut g, &u));
                    self.timed(Stage::Down, down.bytes, || self.matmul(down, &g, n))?
                }
                Ffn::Moe { router, experts, k } => {
                    self.timed(Stage::Moe, 0, || self.moe(l, router, experts, *k, &xn, n))?
                }
            };
            self.timed(Stage::Residual, 0, || add(&mut x, &f));
        }
        cache.advance(n);

        let (x_out, n_out) = match logits {
            Logits::Last => (&x[(n - 1) * dim..], 1),
            Logits::All => (&x[..], n),
        };
        self.timed(Stage::Output, self.output.bytes, || {
            let mut xo = vec![0f32; n_out * dim];
            norm_columns(x_out, &self.output_norm, c.rms_eps, &mut xo);
            self.matmul(&self.output, &xo, n_out)
        })
    }

    /// Decodes the embedding rows of `tokens` into the columns of `x`.
    fn embed(&self, tokens: &[u32], x: &mut [f32]) -> Result<(), ModelError> {
        let c = &self.config;
        for (j, (&t, col)) in tokens.iter().zip(x.chunks_exact_mut(c.dim)).enumerate() {
            let ti = t as usize;
            if ti >= c.n_vocab {
                return Err(ModelError::Token { index: j, token: t, n_vocab: c.n_vocab });
            }
            let row = &self.embd[ti * self.embd_row_bytes..][..self.embd_row_bytes];
            codec::decode_row(self.embd_format, row, col).map_err(|source| ModelError::Decode {
                tensor: "token_embd.weight".into(),
                source: source.at(ti * self.embd_row_bytes),
            })?;
        }
        Ok(())
    }
}

impl<B: Backend> Llama<B> {
    /// The MoE feed-forward of layer `layer` for `n` columns of `xn`: route every token, then
    /// run each expert once on the columns routed to it and add its output, weighted, to those
    /// columns.
    fn moe(
        &self,
        layer: usize,
        router: &Weight<B::Matrix>,
        experts: &[Expert<B::Matrix>],
        k: usize,
        xn: &[f32],
        n: usize,
    ) -> Result<Vec<f32>, ModelError> {
        let dim = self.config.dim;
        let n_expert = experts.len();
        let logits = self.matmul(router, xn, n)?;
        // Per expert: (token, weight) pairs, in token order.
        let mut assigned: Vec<Vec<(usize, f32)>> = vec![Vec::new(); n_expert];
        for (j, row) in logits.chunks_exact(n_expert).enumerate() {
            let r = crate::moe_router::route(row, k, true).map_err(|e| ModelError::Router {
                layer,
                token: j,
                message: e.to_string(),
            })?;
            for (&e, &w) in r.experts.iter().zip(&r.weights) {
                assigned[e].push((j, w));
            }
        }
        let mut out = vec![0f32; n * dim];
        for (e, (expert, tokens)) in experts.iter().zip(&assigned).enumerate() {
            if tokens.is_empty() {
                continue;
            }
            let m = tokens.len();
            let mut x = Vec::with_capacity(m * dim);
            for &(j, _) in tokens {
                x.extend_from_slice(&xn[j * dim..(j + 1) * dim]);
            }
            let mut g = self.matmul_expert(&expert.gate, (e, n_expert), &x, m)?;
            let u = self.matmul_expert(&expert.up, (e, n_expert), &x, m)?;
            ops::swiglu(&mut g, &u);
            let d = self.matmul_expert(&expert.down, (e, n_expert), &g, m)?;
            for (i, &(j, w)) in tokens.iter().enumerate() {
                for (o, &v) in
                    out[j * dim..(j + 1) * dim].iter_mut().zip(&d[i * dim..(i + 1) * dim])
                {
                    *o += w * v;
                }
            }
        }
        Ok(out)
    }
}

/// RMSNorm of every column of `x` (columns of `w.len()`) into `out`.
fn norm_columns(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let d = w.len();
    for (xc, oc) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        ops::rmsnorm(xc, w, eps, oc);
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

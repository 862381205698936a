//! An embeddable text engine: one GGUF model file with its tokenizer and chat template on the
//! CPU backend, generation with streamed output and an optional disk tier for prompt prefixes,
//! and the per-chunk logits that perplexity, KL divergence and importance matrices need.
//!
//! ```no_run
//! use lowbit_runtime::engine::{Engine, GenerateParams};
//!
//! let engine = Engine::load("SmolLM2-135M-Instruct.Q4_1.gguf".as_ref(), None)?;
//! let prompt = engine.tokenizer().encode("The capital of France is", true);
//! let params = GenerateParams { max_tokens: 8, ..GenerateParams::default() };
//! let stats = engine.generate(&prompt, &params, None, |piece| print!("{piece}"))?;
//! eprintln!("{:.1} tokens/s", stats.decode_tokens_per_s());
//! # Ok::<(), lowbit_runtime::engine::EngineError>(())
//! ```
//! What must not live here: the forward pass ([`crate::model`]), tokenization
//! ([`crate::tokenizer`]), command-line parsing.

use std::fmt;
use std::path::Path;
use std::time::Instant;

use lowbit_core::Dialect;
use lowbit_cpu::CpuBackend;

use crate::gguf::{GgufError, GgufFile};
use crate::model::{KvCache, Llama, Logits, ModelError, ProfileReport};
use crate::prompt_cache::{checksum, DiskCache, Miss};
use crate::sample::{SampleError, Sampler, SamplerConfig};
use crate::tokenizer::{ChatTemplate, StreamDecoder, Tokenizer, TokenizerError};

/// Why the engine failed.
#[derive(Debug)]
pub enum EngineError {
    /// Reading the GGUF file.
    Gguf(GgufError),
    /// Loading or running the model.
    Model(ModelError),
    /// Reading the tokenizer.
    Tokenizer(TokenizerError),
    /// Choosing a token.
    Sample(SampleError),
    /// The CPU backend could not start.
    Backend(String),
    /// Anything else, described.
    Other(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Gguf(e) => write!(f, "{e}"),
            EngineError::Model(e) => write!(f, "{e}"),
            EngineError::Tokenizer(e) => write!(f, "tokenizer: {e}"),
            EngineError::Sample(e) => write!(f, "{e}"),
            EngineError::Backend(e) => write!(f, "CPU backend: {e}"),
            EngineError::Other(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<GgufError> for EngineError {
    fn from(e: GgufError) -> Self {
        EngineError::Gguf(e)
    }
}
impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(e)
    }
}
impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(e)
    }
}
impl From<SampleError> for EngineError {
    fn from(e: SampleError) -> Self {
        EngineError::Sample(e)
    }
}

/// How to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateParams {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Sampling (greedy by default).
    pub sampler: SamplerConfig,
    /// Context size (prompt plus generated tokens); 0 means the model's trained context.
    pub n_ctx: usize,
    /// Stop at an end-of-generation token (EOS, `<|im_end|>`, ...).
    pub stop_at_eog: bool,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            max_tokens: 128,
            sampler: SamplerConfig::default(),
            n_ctx: 0,
            stop_at_eog: true,
        }
    }
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `max_tokens` reached.
    MaxTokens,
    /// An end-of-generation token was sampled (not printed).
    EndOfGeneration,
    /// The context is full.
    ContextFull,
}

/// What a generation did and how fast.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV state came from the disk cache.
    pub cached_tokens: usize,
    /// Why the disk cache gave nothing, when it was asked and a rejected entry was found.
    pub cache_rejected: Option<String>,
    /// Seconds spent on the prompt (including the cache lookup).
    pub prompt_secs: f64,
    /// Tokens generated.
    pub generated: Vec<u32>,
    /// Seconds spent generating (after the prompt).
    pub decode_secs: f64,
    /// Why it stopped.
    pub stop: StopReason,
    /// Where the prompt's time went, when the model has a profile attached
    /// ([`Llama::set_profile`]).
    pub prompt_profile: Option<ProfileReport>,
    /// Where the decode's time went (same condition).
    pub decode_profile: Option<ProfileReport>,
}

impl GenerateStats {
    /// Prompt tokens per second (evaluated tokens only: cached ones excluded).
    pub fn prompt_tokens_per_s(&self) -> f64 {
        (self.prompt_tokens - self.cached_tokens) as f64 / self.prompt_secs.max(1e-9)
    }

    /// Generated tokens per second. The first generated token comes from the prompt's logits,
    /// so the rate counts the forward passes after it.
    pub fn decode_tokens_per_s(&self) -> f64 {
        self.generated.len().saturating_sub(1) as f64 / self.decode_secs.max(1e-9)
    }
}

/// A loaded model with its tokenizer, on the CPU backend.
pub struct Engine {
    model: Llama<CpuBackend>,
    tokenizer: Tokenizer,
    template: Result<ChatTemplate, String>,
    fingerprint: u64,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine").field("config", self.model.config()).finish_non_exhaustive()
    }
}

/// A fingerprint of the model for disk-cache entries: the tensor table (names, formats, dims,
/// offsets) and a checksum of the first and last MiB of tensor data.
fn fingerprint(file: &GgufFile) -> u64 {
    let mut table = Vec::new();
    for t in file.tensors() {
        table.extend_from_slice(t.name.as_bytes());
        table.extend_from_slice(format!("{}{:?}", t.format, t.dims).as_bytes());
        let d = file.tensor_data(t);
        let head = &d[..d.len().min(1 << 20)];
        let tail = &d[d.len().saturating_sub(1 << 20)..];
        table.extend_from_slice(&checksum(1, head).to_le_bytes());
        table.extend_from_slice(&checksum(2, tail).to_le_bytes());
    }
    checksum(0x6c6f_7762_6974, &table)
}

impl Engine {
    /// Loads the GGUF model at `path` (read under `dialect`, or the one its metadata names) onto
    /// the CPU backend with every core.
    pub fn load(path: &Path, dialect: Option<Dialect>) -> Result<Engine, EngineError> {
        let backend = CpuBackend::new().map_err(|e| EngineError::Backend(e.to_string()))?;
        Self::load_on(path, dialect, backend)
    }

    /// Loads onto a given CPU backend (an instruction set or thread count chosen by the caller).
    pub fn load_on(
        path: &Path,
        dialect: Option<Dialect>,
        backend: CpuBackend,
    ) -> Result<Engine, EngineError> {
        let file = GgufFile::open(path, dialect)?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        let template = ChatTemplate::from_gguf(&file).map_err(|e| e.to_string());
        let model = Llama::load(backend, &file)?;
        if tokenizer.n_tokens() != model.config().n_vocab {
            return Err(EngineError::Other(format!(
                "{}: the tokenizer has {} tokens, the model's vocabulary {}",
                path.display(),
                tokenizer.n_tokens(),
                model.config().n_vocab
            )));
        }
        Ok(Engine { fingerprint: fingerprint(&file), model, tokenizer, template })
    }

    /// The model.
    pub fn model(&self) -> &Llama<CpuBackend> {
        &self.model
    }

    /// The model, mutably (to set a matmul observer).
    pub fn model_mut(&mut self) -> &mut Llama<CpuBackend> {
        &mut self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The chat template the file names, or why it cannot be used.
    pub fn chat_template(&self) -> Result<&ChatTemplate, EngineError> {
        self.template.as_ref().map_err(|e| EngineError::Other(e.clone()))
    }

    /// A fingerprint of the weights, for keying disk-cache entries.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// [`Llama::forward`] on a worker of the backend's pool ([`CpuBackend::install`]), so the
    /// matmuls of the pass do not hand work between threads on every call.
    pub fn forward(
        &self,
        cache: &mut KvCache,
        tokens: &[u32],
        logits: Logits,
    ) -> Result<Vec<f32>, ModelError> {
        let model = &self.model;
        model.backend().install(|| model.forward(cache, tokens, logits))
    }

    fn context(&self, asked: usize) -> usize {
        let trained = self.model.config().context_length;
        if asked == 0 {
            trained.max(1)
        } else {
            asked
        }
    }

    /// Generates from `prompt`, calling `on_text` with each piece of text as soon as it forms
    /// whole UTF-8 characters. With `disk`, the longest cached prefix of the prompt (all but its
    /// last token) is restored first, and the prompt's state is stored after the prefill; a
    /// rejected entry means a cold prefill and is reported in the stats.
    pub fn generate(
        &self,
        prompt: &[u32],
        params: &GenerateParams,
        disk: Option<&DiskCache>,
        mut on_text: impl FnMut(&str),
    ) -> Result<GenerateStats, EngineError> {
        if prompt.is_empty() {
            return Err(EngineError::Other("the prompt has no tokens".into()));
        }
        let n_ctx = self.context(params.n_ctx);
        if prompt.len() > n_ctx {
            return Err(EngineError::Other(format!(
                "the prompt has {} tokens, the context holds {n_ctx}",
                prompt.len()
            )));
        }
        let mut sampler = Sampler::new(params.sampler.clone())?;
        let mut cache = self.model.new_cache(n_ctx);
        let profile = self.model.profile();
        if let Some(p) = profile {
            p.take();
        }
        let t0 = Instant::now();
        let prefix = &prompt[..prompt.len() - 1];
        let (mut cached_tokens, mut cache_rejected) = (0, None);
        if let Some(d) = disk.filter(|_| !prefix.is_empty()) {
            match d.get(prefix).map_err(|e| EngineError::Other(format!("prompt cache: {e}")))? {
                Ok(hit) => match cache.restore(&hit.payload, hit.tokens) {
                    Ok(()) => cached_tokens = hit.tokens,
                    Err(e) => cache_rejected = Some(format!("entry does not fit the model: {e}")),
                },
                Err(Miss::Rejected(why)) => cache_rejected = Some(why),
                Err(Miss::None) => {}
            }
        }
        let mut logits = match disk {
            // Store the state of all but the last prompt token, then run the last one.
            Some(d) if cached_tokens < prefix.len() => {
                self.forward(&mut cache, &prompt[cached_tokens..prefix.len()], Logits::Last)?;
                d.put(prefix, &cache.to_bytes())
                    .map_err(|e| EngineError::Other(format!("prompt cache: {e}")))?;
                self.forward(&mut cache, &prompt[prefix.len()..], Logits::Last)?
            }
            _ => self.forward(&mut cache, &prompt[cached_tokens..], Logits::Last)?,
        };
        let prompt_secs = t0.elapsed().as_secs_f64();
        let prompt_profile = profile.map(|p| p.take());

        let t1 = Instant::now();
        let mut decoder = StreamDecoder::new(&self.tokenizer, true);
        let mut generated = Vec::new();
        let stop = loop {
            if generated.len() >= params.max_tokens {
                break StopReason::MaxTokens;
            }
            let token = sampler.sample(&logits)? as u32;
            if params.stop_at_eog && self.tokenizer.is_eog(token) {
                break StopReason::EndOfGeneration;
            }
            generated.push(token);
            let text = decoder.push(token);
            if !text.is_empty() {
                on_text(&text);
            }
            if generated.len() >= params.max_tokens {
                break StopReason::MaxTokens;
            }
            if cache.len() >= n_ctx {
                break StopReason::ContextFull;
            }
            logits = self.forward(&mut cache, &[token], Logits::Last)?;
        };
        let rest = decoder.finish();
        if !rest.is_empty() {
            on_text(&rest);
        }
        Ok(GenerateStats {
            prompt_tokens: prompt.len(),
            cached_tokens,
            cache_rejected,
            prompt_secs,
            generated,
            decode_secs: t1.elapsed().as_secs_f64(),
            stop,
            prompt_profile,
            decode_profile: profile.map(|p| p.take()),
        })
    }

    /// Runs `chunk` from an empty cache and returns the logits of positions `first..len - 1`
    /// (`n_vocab` each), the rows llama-perplexity scores.
    pub fn chunk_logits(&self, chunk: &[u32], first: usize) -> Result<Vec<f32>, EngineError> {
        if first + 1 >= chunk.len() {
            return Err(EngineError::Other(format!(
                "a chunk of {} tokens has nothing to score from position {first}",
                chunk.len()
            )));
        }
        let mut cache: KvCache = self.model.new_cache(chunk.len());
        let all = self.forward(&mut cache, chunk, Logits::All)?;
        let v = self.model.config().n_vocab;
        Ok(all[first * v..(chunk.len() - 1) * v].to_vec())
    }
}

//! Perplexity and KL divergence over a token stream, by llama-perplexity's protocol, so that
//! figures from the two tools compare.
//!
//! The protocol (ggml-org/llama.cpp, `tools/perplexity/perplexity.cpp`, `perplexity()` and
//! `kl_divergence()`):
//! * the whole text is tokenized once, with BOS only if the vocabulary says to add it
//!   (`tokenizer.ggml.add_bos_token`), and must give at least `2 n_ctx` tokens;
//! * it is cut into `floor(tokens / n_ctx)` chunks of `n_ctx` tokens (the tail is dropped); each
//!   chunk is evaluated from an empty KV cache, with its first token replaced by BOS when the
//!   vocabulary adds BOS;
//! * in each chunk, the logits at positions `first = n_ctx / 2` to `n_ctx - 2` score the tokens
//!   at positions `first + 1` to `n_ctx - 1`: `n_ctx - 1 - first` tokens per chunk;
//! * perplexity is `exp(mean NLL)` over all scored tokens, its uncertainty
//!   `ppl * sqrt(var(NLL) / (count - 1))`; KL divergence is `sum p_base (ln p_base - ln p_q)`
//!   per scored position, "same top" is the share of positions whose argmax agrees, and the
//!   perplexity ratio is `exp(mean(NLL_q - NLL_base))`.
//!
//! One difference: llama-perplexity stores the base model's log-probabilities as 16-bit
//! fixed-point values in a file and compares against those; here both models run in the same
//! process and the base log-probabilities are exact (f64 from the f32 logits). Log-softmax sums
//! run in f64.
//! What must not live here: the forward pass (callers hand in logits) and tokenization.

use std::fmt;

/// Why a text cannot be scored.
#[derive(Clone, Debug, PartialEq)]
pub enum ScoreError {
    /// Fewer than `2 n_ctx` tokens.
    TooFewTokens {
        /// Tokens in the text.
        tokens: usize,
        /// The context size asked for.
        n_ctx: usize,
    },
    /// A context size below 4 (nothing would be scored).
    BadContext(usize),
    /// A NaN or +inf logit at a scored position.
    BadLogit {
        /// Which model's logits ("base", "model").
        which: &'static str,
        /// The position within its chunk.
        position: usize,
        /// The token id whose logit is bad.
        token: usize,
    },
    /// Logit rows of the wrong length, or a target token outside the vocabulary.
    Shape(String),
}

impl fmt::Display for ScoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScoreError::TooFewTokens { tokens, n_ctx } => write!(
                f,
                "the text tokenizes to {tokens} tokens; a context of {n_ctx} needs at least {}",
                2 * n_ctx
            ),
            ScoreError::BadContext(n) => write!(f, "context size {n} is too small (at least 4)"),
            ScoreError::BadLogit { which, position, token } => write!(
                f,
                "{which} logits at chunk position {position}: token {token} has a NaN or +inf logit"
            ),
            ScoreError::Shape(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ScoreError {}

/// How a token stream is cut into scored chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Tokens per chunk.
    pub n_ctx: usize,
    /// Chunks evaluated.
    pub n_chunks: usize,
    /// First position whose logits are scored (`n_ctx / 2`).
    pub first: usize,
}

impl ChunkPlan {
    /// The plan for `n_tokens` tokens, at most `max_chunks` chunks when given.
    pub fn new(
        n_tokens: usize,
        n_ctx: usize,
        max_chunks: Option<usize>,
    ) -> Result<ChunkPlan, ScoreError> {
        if n_ctx < 4 {
            return Err(ScoreError::BadContext(n_ctx));
        }
        if n_tokens < 2 * n_ctx {
            return Err(ScoreError::TooFewTokens { tokens: n_tokens, n_ctx });
        }
        let all = n_tokens / n_ctx;
        let n_chunks = max_chunks.map_or(all, |m| m.clamp(1, all));
        Ok(ChunkPlan { n_ctx, n_chunks, first: n_ctx / 2 })
    }

    /// Tokens scored per chunk.
    pub fn scored_per_chunk(&self) -> usize {
        self.n_ctx - 1 - self.first
    }

    /// The tokens of chunk `i` as evaluated: the first replaced by `bos` when given.
    pub fn chunk(&self, tokens: &[u32], i: usize, bos: Option<u32>) -> Vec<u32> {
        let start = i * self.n_ctx;
        let mut c = tokens[start..start + self.n_ctx].to_vec();
        if let Some(b) = bos {
            c[0] = b;
        }
        c
    }
}

/// Log-softmax facts of one logit row, in f64.
#[derive(Clone, Copy, Debug)]
struct RowStats {
    max: f64,
    log_sum: f64,
    argmax: usize,
}

fn row_stats(row: &[f32], which: &'static str, position: usize) -> Result<RowStats, ScoreError> {
    let mut max = f64::NEG_INFINITY;
    let mut argmax = 0;
    for (t, &l) in row.iter().enumerate() {
        if l.is_nan() || l == f32::INFINITY {
            return Err(ScoreError::BadLogit { which, position, token: t });
        }
        if f64::from(l) > max {
            max = f64::from(l);
            argmax = t;
        }
    }
    if max == f64::NEG_INFINITY {
        return Err(ScoreError::BadLogit { which, position, token: 0 });
    }
    let sum: f64 = row.iter().map(|&l| (f64::from(l) - max).exp()).sum();
    Ok(RowStats { max, log_sum: sum.ln(), argmax })
}

impl RowStats {
    fn log_prob(&self, logit: f32) -> f64 {
        f64::from(logit) - self.max - self.log_sum
    }
}

fn target_logit(row: &[f32], target: u32) -> Result<f32, ScoreError> {
    row.get(target as usize).copied().ok_or_else(|| {
        ScoreError::Shape(format!("target token {target} outside a vocabulary of {}", row.len()))
    })
}

/// Running perplexity.
#[derive(Clone, Debug, Default)]
pub struct Perplexity {
    nll: f64,
    nll2: f64,
    count: u64,
}

impl Perplexity {
    /// Adds the scored positions of one chunk: `logits` holds one row of `n_vocab` per position
    /// of the chunk from `plan.first` to `n_ctx - 2` (that is, `plan.scored_per_chunk()` rows),
    /// `chunk` the chunk's tokens as evaluated.
    pub fn add_chunk(
        &mut self,
        plan: &ChunkPlan,
        chunk: &[u32],
        logits: &[f32],
        n_vocab: usize,
    ) -> Result<(), ScoreError> {
        check_rows(plan, chunk, logits, n_vocab)?;
        for (j, row) in logits.chunks_exact(n_vocab).enumerate() {
            let pos = plan.first + j;
            let s = row_stats(row, "model", pos)?;
            let nll = -s.log_prob(target_logit(row, chunk[pos + 1])?);
            self.nll += nll;
            self.nll2 += nll * nll;
            self.count += 1;
        }
        Ok(())
    }

    /// Tokens scored so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean negative log-likelihood (nats per token).
    pub fn mean_nll(&self) -> f64 {
        self.nll / self.count.max(1) as f64
    }

    /// `exp(mean NLL)`.
    pub fn ppl(&self) -> f64 {
        self.mean_nll().exp()
    }

    /// The perplexity's standard error, as llama-perplexity prints it (`+/-`).
    pub fn ppl_stderr(&self) -> f64 {
        if self.count < 2 {
            return f64::NAN;
        }
        let n = self.count as f64;
        let mean = self.nll / n;
        let var = (self.nll2 / n - mean * mean).max(0.0);
        (var / (n - 1.0)).sqrt() * self.ppl()
    }
}

fn check_rows(
    plan: &ChunkPlan,
    chunk: &[u32],
    logits: &[f32],
    n_vocab: usize,
) -> Result<(), ScoreError> {
    if chunk.len() != plan.n_ctx {
        return Err(ScoreError::Shape(format!(
            "chunk of {} tokens, the plan says {}",
            chunk.len(),
            plan.n_ctx
        )));
    }
    let rows = plan.scored_per_chunk();
    if n_vocab == 0 || logits.len() != rows * n_vocab {
        return Err(ScoreError::Shape(format!(
            "{} logits for {rows} scored positions of {n_vocab} tokens",
            logits.len()
        )));
    }
    Ok(())
}

/// Running KL divergence of a model against a base model on the same tokens.
#[derive(Clone, Debug, Default)]
pub struct KlDivergence {
    kld: f64,
    kld2: f64,
    same_top: u64,
    base: Perplexity,
    model: Perplexity,
    max_kld: f64,
}

impl KlDivergence {
    /// Adds one chunk: `base` and `model` hold the same rows as [`Perplexity::add_chunk`].
    pub fn add_chunk(
        &mut self,
        plan: &ChunkPlan,
        chunk: &[u32],
        base: &[f32],
        model: &[f32],
        n_vocab: usize,
    ) -> Result<(), ScoreError> {
        check_rows(plan, chunk, base, n_vocab)?;
        check_rows(plan, chunk, model, n_vocab)?;
        for (j, (b, m)) in base.chunks_exact(n_vocab).zip(model.chunks_exact(n_vocab)).enumerate() {
            let pos = plan.first + j;
            let sb = row_stats(b, "base", pos)?;
            let sm = row_stats(m, "model", pos)?;
            let mut kld = 0.0;
            for (&lb, &lm) in b.iter().zip(m) {
                let lpb = sb.log_prob(lb);
                let pb = lpb.exp();
                if pb > 0.0 {
                    kld += pb * (lpb - sm.log_prob(lm));
                }
            }
            self.kld += kld;
            self.kld2 += kld * kld;
            self.max_kld = self.max_kld.max(kld);
            self.same_top += u64::from(sb.argmax == sm.argmax);
        }
        self.base.add_chunk(plan, chunk, base, n_vocab)?;
        self.model.add_chunk(plan, chunk, model, n_vocab)?;
        Ok(())
    }

    /// Positions scored so far.
    pub fn count(&self) -> u64 {
        self.model.count()
    }

    /// Mean KL divergence (nats).
    pub fn mean_kld(&self) -> f64 {
        self.kld / self.count().max(1) as f64
    }

    /// Standard error of the mean KL divergence.
    pub fn kld_stderr(&self) -> f64 {
        let n = self.count() as f64;
        if n < 2.0 {
            return f64::NAN;
        }
        let mean = self.kld / n;
        ((self.kld2 / n - mean * mean).max(0.0) / (n - 1.0)).sqrt()
    }

    /// The largest KL divergence at one position.
    pub fn max_kld(&self) -> f64 {
        self.max_kld
    }

    /// Share of positions where both models' most likely token agrees, in percent.
    pub fn same_top_percent(&self) -> f64 {
        100.0 * self.same_top as f64 / self.count().max(1) as f64
    }

    /// The base model's perplexity on the scored tokens.
    pub fn base(&self) -> &Perplexity {
        &self.base
    }

    /// The model's perplexity on the scored tokens.
    pub fn model(&self) -> &Perplexity {
        &self.model
    }

    /// `PPL(model) / PPL(base)` = `exp(mean(NLL_model - NLL_base))`.
    pub fn ppl_ratio(&self) -> f64 {
        (self.model.mean_nll() - self.base.mean_nll()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_follows_llama_perplexity() {
        assert_eq!(
            ChunkPlan::new(1023, 512, None),
            Err(ScoreError::TooFewTokens { tokens: 1023, n_ctx: 512 })
        );
        let p = ChunkPlan::new(1700, 512, None).unwrap();
        assert_eq!((p.n_chunks, p.first, p.scored_per_chunk()), (3, 256, 255));
        assert_eq!(ChunkPlan::new(1700, 512, Some(2)).unwrap().n_chunks, 2);
        let toks: Vec<u32> = (0..1700).collect();
        let c = p.chunk(&toks, 1, Some(9999));
        assert_eq!((c[0], c[1], c.len()), (9999, 513, 512));
        assert_eq!(p.chunk(&toks, 2, None)[0], 1024);
    }

    /// Naive probabilities, written independently of the module's log-softmax.
    fn probs(row: &[f32]) -> Vec<f64> {
        let e: Vec<f64> = row.iter().map(|&l| f64::from(l).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect()
    }

    #[test]
    fn perplexity_and_kld_match_a_direct_computation() {
        let (n_ctx, vocab) = (8usize, 5usize);
        let plan = ChunkPlan::new(16, n_ctx, None).unwrap();
        let chunk: Vec<u32> = vec![0, 1, 2, 3, 4, 0, 1, 2];
        let rows = plan.scored_per_chunk();
        let base: Vec<f32> = (0..rows * vocab).map(|i| ((i * 7 % 11) as f32) * 0.3).collect();
        let model: Vec<f32> =
            base.iter().enumerate().map(|(i, &b)| b + (i as f32).sin() * 0.2).collect();
        let mut ppl = Perplexity::default();
        ppl.add_chunk(&plan, &chunk, &model, vocab).unwrap();
        let mut kl = KlDivergence::default();
        kl.add_chunk(&plan, &chunk, &base, &model, vocab).unwrap();
        let (mut nll, mut kld, mut same) = (0.0, 0.0, 0);
        for j in 0..rows {
            let pb = probs(&base[j * vocab..(j + 1) * vocab]);
            let pm = probs(&model[j * vocab..(j + 1) * vocab]);
            nll -= pm[chunk[plan.first + j + 1] as usize].ln();
            kld += pb.iter().zip(&pm).map(|(b, m)| b * (b / m).ln()).sum::<f64>();
            let am = |p: &[f64]| (0..vocab).fold(0, |a, i| if p[i] > p[a] { i } else { a });
            same += usize::from(am(&pb) == am(&pm));
        }
        let n = rows as f64;
        assert_eq!(ppl.count(), rows as u64);
        assert!((ppl.ppl() - (nll / n).exp()).abs() < 1e-12);
        assert!((kl.mean_kld() - kld / n).abs() < 1e-12);
        assert!((kl.same_top_percent() - 100.0 * same as f64 / n).abs() < 1e-12);
        assert!((kl.model().ppl() - ppl.ppl()).abs() < 1e-12);
        // Against itself: zero divergence, ratio 1, every top token the same.
        let mut same_model = KlDivergence::default();
        same_model.add_chunk(&plan, &chunk, &base, &base, vocab).unwrap();
        assert!(same_model.mean_kld().abs() < 1e-15);
        assert_eq!(same_model.same_top_percent(), 100.0);
        assert!((same_model.ppl_ratio() - 1.0).abs() < 1e-15);
    }

    #[test]
    fn bad_logits_and_shapes_are_errors() {
        let plan = ChunkPlan::new(8, 4, None).unwrap();
        let chunk = [0u32, 1, 2, 1];
        let mut p = Perplexity::default();
        let row = [0.0f32, f32::NAN, 1.0];
        assert_eq!(
            p.add_chunk(&plan, &chunk, &row, 3),
            Err(ScoreError::BadLogit { which: "model", position: 2, token: 1 })
        );
        assert!(matches!(p.add_chunk(&plan, &chunk, &[0.0; 4], 3), Err(ScoreError::Shape(_))));
        let far = [0u32, 1, 2, 7];
        assert!(matches!(p.add_chunk(&plan, &far, &[0.0; 3], 3), Err(ScoreError::Shape(_))));
        assert_eq!(p.count(), 0);
    }
}

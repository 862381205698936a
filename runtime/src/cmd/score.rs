//! `lowbit perplexity` and `lowbit kld`: a model (and a base model) over a text, chunk by
//! chunk, by llama-perplexity's protocol ([`crate::score`]).
//!
//! The text is tokenized once as llama-perplexity does (`common_tokenize(ctx, text, true)`:
//! BOS where the vocabulary adds it, special-token text left as plain text).
//! What must not live here: the protocol's arithmetic ([`crate::score`]) and the forward pass.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::CmdError;
use crate::engine::Engine;
use crate::score::{ChunkPlan, KlDivergence, Perplexity};

/// What to score and how.
#[derive(Clone, Debug)]
pub struct ScoreOptions {
    /// Tokens per chunk (`-c`; llama-perplexity's default is 512).
    pub n_ctx: usize,
    /// At most this many chunks (all when `None`).
    pub chunks: Option<usize>,
}

fn tokens(
    engine: &Engine,
    text_path: &Path,
    opts: &ScoreOptions,
) -> Result<(Vec<u32>, ChunkPlan), CmdError> {
    let text = std::fs::read_to_string(text_path)
        .map_err(|e| CmdError::new(format!("{}: {e}", text_path.display())))?;
    let toks = engine.tokenizer().encode_with(&text, true, false);
    let plan = ChunkPlan::new(toks.len(), opts.n_ctx, opts.chunks)
        .map_err(|e| CmdError::new(format!("{}: {e}", text_path.display())))?;
    Ok((toks, plan))
}

/// The token that replaces each chunk's first token: BOS where the vocabulary adds it.
pub(crate) fn bos(engine: &Engine) -> Option<u32> {
    let t = engine.tokenizer();
    if t.add_bos() {
        t.bos()
    } else {
        None
    }
}

/// A finished perplexity run.
#[derive(Clone, Debug)]
pub struct PerplexityReport {
    /// The chunk plan.
    pub plan: ChunkPlan,
    /// Tokens in the text.
    pub text_tokens: usize,
    /// The accumulated scores.
    pub ppl: Perplexity,
    /// Seconds spent.
    pub secs: f64,
}

/// Perplexity of `engine` on the text at `text_path`. `progress(chunk, running_ppl)` is called
/// after each chunk.
pub fn perplexity(
    engine: &Engine,
    text_path: &Path,
    opts: &ScoreOptions,
    mut progress: impl FnMut(usize, f64),
) -> Result<PerplexityReport, CmdError> {
    let (toks, plan) = tokens(engine, text_path, opts)?;
    let n_vocab = engine.model().config().n_vocab;
    let t0 = Instant::now();
    let mut ppl = Perplexity::default();
    for i in 0..plan.n_chunks {
        let chunk = plan.chunk(&toks, i, bos(engine));
        let logits = engine.chunk_logits(&chunk, plan.first).map_err(CmdError::new)?;
        ppl.add_chunk(&plan, &chunk, &logits, n_vocab)
            .map_err(|e| CmdError::new(format!("chunk {i}: {e}")))?;
        progress(i, ppl.ppl());
    }
    Ok(PerplexityReport { plan, text_tokens: toks.len(), ppl, secs: t0.elapsed().as_secs_f64() })
}

/// A finished KL-divergence run.
#[derive(Clone, Debug)]
pub struct KldReport {
    /// The chunk plan.
    pub plan: ChunkPlan,
    /// The accumulated scores.
    pub kld: KlDivergence,
    /// Seconds spent on this model's forward passes.
    pub secs: f64,
}

/// KL divergence of each of `models` against `base` on the text at `text_path`, chunk by
/// chunk (the base's logits are computed once per chunk and shared). Every model must tokenize
/// the text as the base does. `progress(chunk, running_mean_kld_of_the_first_model)` is called
/// after each chunk.
pub fn kld(
    base: &Engine,
    models: &[&Engine],
    text_path: &Path,
    opts: &ScoreOptions,
    mut progress: impl FnMut(usize, f64),
) -> Result<Vec<KldReport>, CmdError> {
    let (toks, plan) = tokens(base, text_path, opts)?;
    let n_vocab = base.model().config().n_vocab;
    for (i, m) in models.iter().enumerate() {
        let (mt, _) = tokens(m, text_path, opts)?;
        if mt != toks {
            return Err(CmdError::new(format!(
                "model {}: its tokenizer splits the text differently from the base's: KL \
                 divergence needs one vocabulary",
                i + 1
            )));
        }
        if m.model().config().n_vocab != n_vocab {
            return Err(CmdError::new(format!(
                "model {}: vocabulary of {}, the base's is {n_vocab}",
                i + 1,
                m.model().config().n_vocab
            )));
        }
    }
    let mut klds = vec![KlDivergence::default(); models.len()];
    let mut secs = vec![0f64; models.len()];
    for i in 0..plan.n_chunks {
        let chunk = plan.chunk(&toks, i, bos(base));
        let b = base.chunk_logits(&chunk, plan.first).map_err(CmdError::new)?;
        for ((m, kld), s) in models.iter().zip(&mut klds).zip(&mut secs) {
            let t = Instant::now();
            let l = m.chunk_logits(&chunk, plan.first).map_err(CmdError::new)?;
            *s += t.elapsed().as_secs_f64();
            kld.add_chunk(&plan, &chunk, &b, &l, n_vocab)
                .map_err(|e| CmdError::new(format!("chunk {i}: {e}")))?;
        }
        progress(i, klds.first().map_or(0.0, |k| k.mean_kld()));
    }
    Ok(klds.into_iter().zip(secs).map(|(kld, secs)| KldReport { plan, kld, secs }).collect())
}

/// The perplexity report as text, in llama-perplexity's terms.
pub fn render_perplexity(r: &PerplexityReport) -> String {
    format!(
        "text: {} tokens; {} chunks of {} tokens, {} scored per chunk ({} in all)\n\
         Final estimate: PPL = {:.4} +/- {:.5}\n{:.1} s, {:.1} tokens/s\n",
        r.text_tokens,
        r.plan.n_chunks,
        r.plan.n_ctx,
        r.plan.scored_per_chunk(),
        r.ppl.count(),
        r.ppl.ppl(),
        r.ppl.ppl_stderr(),
        r.secs,
        (r.plan.n_chunks * r.plan.n_ctx) as f64 / r.secs.max(1e-9)
    )
}

/// The KL-divergence report as text.
pub fn render_kld(r: &KldReport) -> String {
    let k = &r.kld;
    format!(
        "{} chunks of {} tokens, {} positions scored\n\
         Mean PPL(base)       : {:.4} +/- {:.5}\n\
         Mean PPL(model)      : {:.4} +/- {:.5}\n\
         PPL(model)/PPL(base) : {:.4}\n\
         Mean KLD             : {:.6} +/- {:.6}\n\
         Maximum KLD          : {:.6}\n\
         Same top token       : {:.3} %\n{:.1} s\n",
        r.plan.n_chunks,
        r.plan.n_ctx,
        k.count(),
        k.base().ppl(),
        k.base().ppl_stderr(),
        k.model().ppl(),
        k.model().ppl_stderr(),
        k.ppl_ratio(),
        k.mean_kld(),
        k.kld_stderr(),
        k.max_kld(),
        k.same_top_percent(),
        r.secs
    )
}

/// The KL-divergence report as JSON.
pub fn kld_json(r: &KldReport, base: &Path, model: &Path, text: &Path) -> String {
    let k = &r.kld;
    let v = json!({
        "base": base.display().to_string(),
        "model": model.display().to_string(),
        "text": text.display().to_string(),
        "n_ctx": r.plan.n_ctx,
        "chunks": r.plan.n_chunks,
        "positions": k.count(),
        "ppl_base": k.base().ppl(),
        "ppl_model": k.model().ppl(),
        "ppl_ratio": k.ppl_ratio(),
        "mean_kld": k.mean_kld(),
        "kld_stderr": k.kld_stderr(),
        "max_kld": k.max_kld(),
        "same_top_percent": k.same_top_percent(),
        "seconds": r.secs,
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

//! `lowbit imatrix`: an importance matrix computed by running a model over calibration text,
//! written in llama.cpp's GGUF imatrix layout (see [`crate::quant::imatrix_collect`]).
//!
//! The protocol follows llama.cpp's `llama-imatrix` (ggml-org/llama.cpp `tools/imatrix/
//! imatrix.cpp`): the text is tokenized once (BOS where the vocabulary adds it), cut into
//! chunks of `n_ctx` tokens, each chunk evaluated from an empty cache with its first token
//! replaced by BOS when the vocabulary adds one; every matmul input of a `blk.*` weight adds
//! its squared activations (`output.weight` only when asked, as `--process-output` does).
//! The perplexity of the same chunks is reported along the way.
//! With `covariance` globs, the matched weights also get their input covariance sums
//! (`W.in_cov`, lowbit's extension that llama.cpp's readers skip), which the GPTQ encoders use.
//! What must not live here: the sums and the file layout ([`crate::quant::imatrix_collect`]).

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::CmdError;
use crate::engine::Engine;
use crate::quant::imatrix_collect::ImatrixCollector;
use crate::score::{ChunkPlan, Perplexity};

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct ImatrixReport {
    /// Chunks evaluated.
    pub chunks: usize,
    /// Weight tensors in the file.
    pub tensors: usize,
    /// Perplexity over the same chunks (second halves).
    pub ppl: f64,
    /// Seconds spent.
    pub secs: f64,
}

/// What to collect.
#[derive(Clone, Debug, Default)]
pub struct ImatrixOptions {
    /// Tokens per chunk.
    pub n_ctx: usize,
    /// At most this many chunks (`None`: all).
    pub chunks: Option<usize>,
    /// Also collect `output.weight`.
    pub process_output: bool,
    /// Globs of the weights whose input covariance is also summed (`W.in_cov`).
    pub covariance: Vec<String>,
}

/// Runs `engine` over the text at `text` in chunks of `opts.n_ctx` tokens (at most
/// `opts.chunks`) and writes the importance matrix to `out`. `progress(chunk)` after each chunk.
pub fn run(
    engine: &mut Engine,
    text: &Path,
    out: &Path,
    opts: &ImatrixOptions,
    mut progress: impl FnMut(usize, f64),
) -> Result<ImatrixReport, CmdError> {
    let (n_ctx, chunks, process_output) = (opts.n_ctx, opts.chunks, opts.process_output);
    let t0 = std::time::Instant::now();
    let body = std::fs::read_to_string(text)
        .map_err(|e| CmdError::new(format!("{}: {e}", text.display())))?;
    let toks = engine.tokenizer().encode_with(&body, true, false);
    // llama-imatrix needs one chunk, not two as perplexity does.
    if toks.len() < n_ctx || n_ctx < 4 {
        return Err(CmdError::new(format!(
            "{}: {} tokens, a context of {n_ctx} needs at least that many (and at least 4)",
            text.display(),
            toks.len()
        )));
    }
    let all = toks.len() / n_ctx;
    let plan =
        ChunkPlan { n_ctx, n_chunks: chunks.map_or(all, |c| c.clamp(1, all)), first: n_ctx / 2 };
    let bos = super::score::bos(engine);
    let collector = Arc::new(Mutex::new(ImatrixCollector::with_covariance(&opts.covariance)));
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    {
        let (c, f) = (Arc::clone(&collector), Arc::clone(&failure));
        engine.model_mut().set_observer(Some(Box::new(
            move |name: &str, (expert, n_mat): (usize, usize), x: &[f32], n: usize| {
                if !(name.starts_with("blk.") || (process_output && name == "output.weight")) {
                    return;
                }
                let k = x.len() / n.max(1);
                let Ok(mut c) = c.lock() else { return };
                if let Err(e) = c.add(name, k, n_mat, expert, x, n) {
                    if let Ok(mut f) = f.lock() {
                        f.get_or_insert(e.to_string());
                    }
                }
            },
        )));
    }
    let n_vocab = engine.model().config().n_vocab;
    let mut ppl = Perplexity::default();
    let result = (|| {
        for i in 0..plan.n_chunks {
            let chunk = plan.chunk(&toks, i, bos);
            let logits = engine.chunk_logits(&chunk, plan.first).map_err(CmdError::new)?;
            ppl.add_chunk(&plan, &chunk, &logits, n_vocab)
                .map_err(|e| CmdError::new(format!("chunk {i}: {e}")))?;
            if let Ok(mut c) = collector.lock() {
                c.end_chunk();
            }
            progress(i, ppl.ppl());
        }
        Ok(())
    })();
    engine.model_mut().set_observer(None);
    result?;
    if let Some(e) = failure.lock().ok().and_then(|f| f.clone()) {
        return Err(CmdError::new(e));
    }
    let c = collector.lock().map_err(|_| CmdError::new("imatrix collector poisoned"))?;
    let name = text
        .file_name()
        .map_or_else(|| text.display().to_string(), |n| n.to_string_lossy().into_owned());
    c.write_gguf(out, &[name], n_ctx as u32)
        .map_err(|e| CmdError::new(format!("{}: {e}", out.display())))?;
    Ok(ImatrixReport {
        chunks: plan.n_chunks,
        tensors: c.len(),
        ppl: ppl.ppl(),
        secs: t0.elapsed().as_secs_f64(),
    })
}

//! `lowbit speed`: prompt and generation throughput of whole models, measured the way
//! llama-bench measures them, so the figures compare with llama.cpp's.
//!
//! Protocol (llama.cpp `tools/llama-bench/llama-bench.cpp`, `test_prompt` / `test_gen`):
//! * `pp N`: N pseudo-random token ids run as one batch from an empty cache, logits for the
//!   last position only; tokens/s = N / seconds.
//! * `tg N`: N single-token forward passes from an empty cache, each a pseudo-random token;
//!   tokens/s = N / seconds.
//! * One untimed warm-up run of each test, then `reps` timed runs; the report gives the mean
//!   and the standard deviation of the per-run rates, and every sample.
//!
//! Token ids come from a fixed-seed generator, so runs are repeatable. Sampling and
//! detokenizing are not part of either test (as in llama-bench).
//! What must not live here: the forward pass (`crate::model`), argument parsing.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::CmdError;
use crate::engine::Engine;
use crate::model::{Logits, ProfileReport};

/// What to measure.
#[derive(Clone, Debug)]
pub struct SpeedOptions {
    /// Prompt tokens of the `pp` test (0: skip it).
    pub pp: usize,
    /// Generated tokens of the `tg` test (0: skip it).
    pub tg: usize,
    /// Timed repetitions of each test.
    pub reps: usize,
}

/// One test on one model.
#[derive(Clone, Debug)]
pub struct SpeedResult {
    /// `"pp128"`, `"tg64"`, ...
    pub test: String,
    /// Threads the backend ran on.
    pub threads: usize,
    /// Tokens per second of every timed run.
    pub samples: Vec<f64>,
    /// Where the time of the timed runs went, when the model has a profile attached.
    pub profile: Option<ProfileReport>,
}

impl SpeedResult {
    /// Mean tokens per second.
    pub fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len().max(1) as f64
    }

    /// Sample standard deviation of the tokens per second (0 for one sample).
    pub fn stddev(&self) -> f64 {
        let n = self.samples.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.samples.iter().map(|s| (s - m) * (s - m)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
}

/// Pseudo-random token ids below `n_vocab` (a 64-bit LCG, fixed seed per test and run).
fn tokens(n: usize, n_vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 33) % n_vocab.max(1) as u64) as u32
        })
        .collect()
}

/// Seconds of one `pp` run.
fn run_pp(engine: &Engine, n: usize, seed: u64) -> Result<f64, CmdError> {
    let toks = tokens(n, engine.model().config().n_vocab, seed);
    let mut cache = engine.model().new_cache(n);
    let t = Instant::now();
    engine.forward(&mut cache, &toks, Logits::Last).map_err(CmdError::new)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Seconds of one `tg` run.
fn run_tg(engine: &Engine, n: usize, seed: u64) -> Result<f64, CmdError> {
    let toks = tokens(n, engine.model().config().n_vocab, seed);
    let mut cache = engine.model().new_cache(n);
    let t = Instant::now();
    for tok in toks {
        engine.forward(&mut cache, &[tok], Logits::Last).map_err(CmdError::new)?;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// One timed run of a test: `(engine, tokens, seed)` to seconds.
type RunFn = fn(&Engine, usize, u64) -> Result<f64, CmdError>;

/// Runs the tests of `opts` on `engine`.
pub fn measure(engine: &Engine, opts: &SpeedOptions) -> Result<Vec<SpeedResult>, CmdError> {
    if opts.reps == 0 {
        return Err(CmdError::new("--reps must be at least 1"));
    }
    let ctx = engine.model().config().context_length;
    let mut out = Vec::new();
    let tests: [(&str, usize, RunFn); 2] = [("pp", opts.pp, run_pp), ("tg", opts.tg, run_tg)];
    for (name, n, run) in tests {
        if n == 0 {
            continue;
        }
        if ctx > 0 && n > ctx {
            return Err(CmdError::new(format!(
                "{name}{n}: the model's context holds {ctx} tokens"
            )));
        }
        run(engine, n, 0)?;
        if let Some(p) = engine.model().profile() {
            p.take();
        }
        let mut samples = Vec::with_capacity(opts.reps);
        for rep in 0..opts.reps {
            let secs = run(engine, n, rep as u64 + 1)?;
            samples.push(n as f64 / secs.max(1e-9));
        }
        out.push(SpeedResult {
            test: format!("{name}{n}"),
            threads: engine.model().backend().threads(),
            samples,
            profile: engine.model().profile().map(|p| p.take()),
        });
    }
    Ok(out)
}

/// One table row per result, llama-bench style.
pub fn render(model: &Path, file_bytes: u64, backend: &str, results: &[SpeedResult]) -> String {
    let mut s = String::new();
    for r in results {
        s.push_str(&format!(
            "| {} | {:.1} MiB | {backend} | {} | {} | {:.1} ± {:.1} |\n",
            model.file_name().map(|f| f.to_string_lossy()).unwrap_or_default(),
            file_bytes as f64 / (1 << 20) as f64,
            r.threads,
            r.test,
            r.mean(),
            r.stddev()
        ));
        if let Some(p) = &r.profile {
            s.push_str(&format!("{} breakdown ({} tokens):\n{p}\n", r.test, p.tokens));
        }
    }
    s
}

/// The results as JSON (one object per test).
pub fn to_json(
    model: &Path,
    file_bytes: u64,
    backend: &str,
    results: &[SpeedResult],
) -> serde_json::Value {
    let rows: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "model": model.display().to_string(),
                "file_bytes": file_bytes,
                "backend": backend,
                "threads": r.threads,
                "test": r.test,
                "tokens_per_s_mean": r.mean(),
                "tokens_per_s_stddev": r.stddev(),
                "samples": r.samples,
            })
        })
        .collect();
    json!(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_in_range_and_repeatable() {
        let a = tokens(1000, 17, 3);
        assert!(a.iter().all(|&t| t < 17));
        assert_eq!(a, tokens(1000, 17, 3));
        assert_ne!(a, tokens(1000, 17, 4));
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert_eq!(distinct.len(), 17, "every id shows up in 1000 draws");
    }

    #[test]
    fn mean_and_stddev() {
        let r = SpeedResult {
            test: "tg4".into(),
            threads: 1,
            samples: vec![2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
            profile: None,
        };
        assert_eq!(r.mean(), 5.0);
        assert!((r.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }
}

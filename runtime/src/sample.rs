//! Choosing the next token from a row of logits: greedy, or temperature with top-k and top-p
//! (nucleus) truncation, driven by a seeded generator so that a run repeats exactly.
//!
//! Logits are checked before anything else: a NaN logit is an error naming the token id (a NaN
//! means the forward pass went wrong, and sampling it would publish garbage), and so is a row
//! whose every logit is -inf. A -inf logit alone is legal and means "never this token".
//! What must not live here: the forward pass and the tokenizer.

use std::fmt;

use crate::demo::Pcg32;

/// Why no token could be chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleError {
    /// A logit is NaN.
    NanLogit {
        /// The token whose logit is NaN (the first one found).
        token: usize,
    },
    /// A logit is +inf, so the distribution is undefined.
    InfiniteLogit {
        /// The token whose logit is +inf.
        token: usize,
    },
    /// Every logit is -inf (or the row is empty): no token is possible.
    NoCandidate,
    /// A sampling parameter is out of range.
    BadParameter(String),
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::NanLogit { token } => {
                write!(f, "the logit of token {token} is NaN: refusing to sample")
            }
            SampleError::InfiniteLogit { token } => {
                write!(f, "the logit of token {token} is +inf: refusing to sample")
            }
            SampleError::NoCandidate => write!(f, "every logit is -inf: no token can be sampled"),
            SampleError::BadParameter(m) => write!(f, "bad sampling parameter: {m}"),
        }
    }
}

impl std::error::Error for SampleError {}

/// Checks a row of logits: `Err` on the first NaN or +inf, or when no logit is finite.
pub fn check_logits(logits: &[f32]) -> Result<(), SampleError> {
    let mut any = false;
    for (token, &l) in logits.iter().enumerate() {
        if l.is_nan() {
            return Err(SampleError::NanLogit { token });
        }
        if l == f32::INFINITY {
            return Err(SampleError::InfiniteLogit { token });
        }
        any |= l != f32::NEG_INFINITY;
    }
    if any {
        Ok(())
    } else {
        Err(SampleError::NoCandidate)
    }
}

/// The index of the largest logit, the lowest index on ties, after [`check_logits`].
pub fn argmax(logits: &[f32]) -> Result<usize, SampleError> {
    check_logits(logits)?;
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    Ok(best)
}

/// Sampling settings. The default is greedy.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; `0` means greedy (argmax). Must be finite and `>= 0`.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; `0` keeps all.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`, in
    /// `(0, 1]`; `1` keeps all.
    pub top_p: f32,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

/// A seeded sampler. The same config and the same logits give the same tokens.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: Pcg32,
    candidates: Vec<(f32, usize)>,
}

impl Sampler {
    /// A sampler for `cfg`; errors on a temperature below 0 or not finite, or `top_p` outside
    /// `(0, 1]`.
    pub fn new(cfg: SamplerConfig) -> Result<Sampler, SampleError> {
        if !(cfg.temperature.is_finite() && cfg.temperature >= 0.0) {
            return Err(SampleError::BadParameter(format!(
                "temperature {} (must be finite and >= 0)",
                cfg.temperature
            )));
        }
        if !(cfg.top_p > 0.0 && cfg.top_p <= 1.0) {
            return Err(SampleError::BadParameter(format!(
                "top-p {} (must be in (0, 1])",
                cfg.top_p
            )));
        }
        let rng = Pcg32::new(cfg.seed, 0x5a3_91e);
        Ok(Sampler { cfg, rng, candidates: Vec::new() })
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Chooses a token from `logits`.
    ///
    /// Greedy when the temperature is 0 (or `top_k == 1`). Otherwise: candidates sorted by logit
    /// (descending, ties by lower id), cut to `top_k`, softmax of `logit / temperature` in f64,
    /// cut to the smallest prefix whose probability reaches `top_p` (at least one token), then one
    /// draw from the renormalised prefix.
    pub fn sample(&mut self, logits: &[f32]) -> Result<usize, SampleError> {
        if self.cfg.temperature == 0.0 || self.cfg.top_k == 1 {
            return argmax(logits);
        }
        check_logits(logits)?;
        let c = &mut self.candidates;
        c.clear();
        c.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, &l)| l != f32::NEG_INFINITY)
                .map(|(i, &l)| (l, i)),
        );
        let by_logit = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let k = if self.cfg.top_k == 0 { c.len() } else { self.cfg.top_k.min(c.len()) };
        if k < c.len() {
            c.select_nth_unstable_by(k - 1, by_logit);
            c.truncate(k);
        }
        c.sort_unstable_by(by_logit);
        let inv_t = 1.0 / f64::from(self.cfg.temperature);
        let top = f64::from(c[0].0);
        let weights: Vec<f64> =
            c.iter().map(|&(l, _)| ((f64::from(l) - top) * inv_t).exp()).collect();
        let total: f64 = weights.iter().sum();
        let mut keep = weights.len();
        if self.cfg.top_p < 1.0 {
            let goal = f64::from(self.cfg.top_p) * total;
            let mut acc = 0.0;
            for (i, w) in weights.iter().enumerate() {
                acc += w;
                if acc >= goal {
                    keep = i + 1;
                    break;
                }
            }
        }
        let kept_total: f64 = weights[..keep].iter().sum();
        let mut u = self.rng.uniform() * kept_total;
        for (i, w) in weights[..keep].iter().enumerate() {
            u -= w;
            if u <= 0.0 {
                return Ok(c[i].1);
            }
        }
        Ok(c[keep - 1].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_and_inf_are_refused_with_the_token() {
        assert_eq!(argmax(&[0.0, f32::NAN, 1.0]), Err(SampleError::NanLogit { token: 1 }));
        assert_eq!(
            argmax(&[0.0, 2.0, f32::INFINITY]),
            Err(SampleError::InfiniteLogit { token: 2 })
        );
        assert_eq!(argmax(&[f32::NEG_INFINITY; 3]), Err(SampleError::NoCandidate));
        assert_eq!(argmax(&[]), Err(SampleError::NoCandidate));
        let mut s = Sampler::new(SamplerConfig { temperature: 0.8, ..Default::default() }).unwrap();
        assert_eq!(s.sample(&[f32::NAN]), Err(SampleError::NanLogit { token: 0 }));
    }

    #[test]
    fn greedy_takes_the_first_maximum_and_skips_neg_inf() {
        assert_eq!(argmax(&[f32::NEG_INFINITY, 3.0, 5.0, 5.0, -1.0]), Ok(2));
        let mut s = Sampler::new(SamplerConfig::default()).unwrap();
        assert_eq!(s.sample(&[1.0, 9.0, 2.0]), Ok(1));
    }

    #[test]
    fn top_k_and_top_p_never_leave_their_set() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let mut order: Vec<usize> = (0..50).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        let cfg = SamplerConfig { temperature: 1.5, top_k: 5, top_p: 1.0, seed: 7 };
        let mut s = Sampler::new(cfg).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let t = s.sample(&logits).unwrap();
            assert!(order[..5].contains(&t), "token {t} outside the top 5");
            seen.insert(t);
        }
        assert_eq!(seen.len(), 5, "temperature 1.5 should reach all of the top 5");
        // top-p tiny: only the most likely token survives.
        let cfg = SamplerConfig { temperature: 1.0, top_k: 0, top_p: 1e-6, seed: 7 };
        let mut s = Sampler::new(cfg).unwrap();
        for _ in 0..100 {
            assert_eq!(s.sample(&logits).unwrap(), order[0]);
        }
    }

    #[test]
    fn frequencies_follow_the_softmax() {
        // Two tokens, logits differ by ln 3: probabilities 3/4 and 1/4 at temperature 1.
        let logits = [0.0f32, 3f32.ln()];
        let mut s = Sampler::new(SamplerConfig { temperature: 1.0, seed: 1, ..Default::default() })
            .unwrap();
        let n = 40_000;
        let ones = (0..n).filter(|_| s.sample(&logits).unwrap() == 1).count();
        let p = ones as f64 / n as f64;
        assert!((p - 0.75).abs() < 0.01, "p = {p}");
    }

    #[test]
    fn same_seed_same_tokens_and_bad_parameters_are_errors() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32).collect();
        let cfg = SamplerConfig { temperature: 0.9, top_k: 40, top_p: 0.95, seed: 42 };
        let a: Vec<usize> = {
            let mut s = Sampler::new(cfg.clone()).unwrap();
            (0..64).map(|_| s.sample(&logits).unwrap()).collect()
        };
        let mut s = Sampler::new(cfg).unwrap();
        let b: Vec<usize> = (0..64).map(|_| s.sample(&logits).unwrap()).collect();
        assert_eq!(a, b);
        for bad in [
            SamplerConfig { temperature: -1.0, ..Default::default() },
            SamplerConfig { temperature: f32::NAN, ..Default::default() },
            SamplerConfig { top_p: 0.0, ..Default::default() },
            SamplerConfig { top_p: 1.5, ..Default::default() },
        ] {
            assert!(matches!(Sampler::new(bad), Err(SampleError::BadParameter(_))));
        }
    }
}

//! The top-k expert router of mixture-of-experts layers: which experts a token goes to, and
//! with what weights.
//!
//! The rule is llama.cpp's for llama-family MoE (Mixtral): softmax over all router logits,
//! the `k` most probable experts, their probabilities as weights, renormalised to sum to 1 when
//! the model asks (`norm_w`) (ggml-org/llama.cpp, `src/llama-graph.cpp`, `build_moe_ffn`).
//!
//! What it guarantees, where the HRX notes in the seeds describe a router that broke it (an
//! argmax seeded with a sentinel id published that id when every candidate logit was NaN or
//! below -FLT_MAX, and the expert offset walked off the weights buffer):
//! * every published id is `< n_expert`, always: candidates are only ever taken from the row;
//! * a NaN or +inf logit is an error naming the expert, never a route;
//! * -inf logits are legal ("never this expert") but an expert with probability 0 is never
//!   chosen: fewer than `k` experts with a finite logit is an error, not a silent pick;
//! * ties go to the lower expert id, so routing is deterministic.
//!
//! What must not live here: the expert matmuls (the model applies the route).

use std::fmt;

/// Why a token could not be routed.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteError {
    /// A NaN or +inf router logit.
    BadLogit {
        /// The expert whose logit is bad.
        expert: usize,
        /// The logit.
        value: f32,
    },
    /// Fewer than `k` experts have a finite logit.
    TooFewCandidates {
        /// Experts with a finite logit.
        finite: usize,
        /// Experts asked for.
        k: usize,
    },
    /// `k` is 0 or above the expert count.
    BadK {
        /// Experts asked for.
        k: usize,
        /// Experts in the layer.
        n_expert: usize,
    },
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::BadLogit { expert, value } => {
                write!(f, "router logit of expert {expert} is {value}: refusing to route")
            }
            RouteError::TooFewCandidates { finite, k } => write!(
                f,
                "only {finite} experts have a finite router logit, {k} are needed: refusing to route"
            ),
            RouteError::BadK { k, n_expert } => {
                write!(f, "top-{k} routing over {n_expert} experts is not possible")
            }
        }
    }
}

impl std::error::Error for RouteError {}

/// One token's route: `k` distinct expert ids (most probable first) and their weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Expert ids, each `< n_expert`, distinct, in descending probability.
    pub experts: Vec<usize>,
    /// The weight of each expert's output.
    pub weights: Vec<f32>,
}

/// Routes one token from its router logits (one per expert).
pub fn route(logits: &[f32], k: usize, normalize: bool) -> Result<Route, RouteError> {
    let n_expert = logits.len();
    if k == 0 || k > n_expert {
        return Err(RouteError::BadK { k, n_expert });
    }
    let mut max = f32::NEG_INFINITY;
    let mut finite = 0;
    for (expert, &value) in logits.iter().enumerate() {
        if value.is_nan() || value == f32::INFINITY {
            return Err(RouteError::BadLogit { expert, value });
        }
        if value != f32::NEG_INFINITY {
            finite += 1;
            max = max.max(value);
        }
    }
    if finite < k {
        return Err(RouteError::TooFewCandidates { finite, k });
    }
    // Softmax in f64 over all experts (-inf contributes 0).
    let e: Vec<f64> = logits.iter().map(|&l| (f64::from(l) - f64::from(max)).exp()).collect();
    let total: f64 = e.iter().sum();
    let mut order: Vec<usize> = (0..n_expert).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    order.truncate(k);
    let probs: Vec<f64> = order.iter().map(|&i| e[i] / total).collect();
    let scale = if normalize { probs.iter().sum::<f64>() } else { 1.0 };
    Ok(Route { experts: order, weights: probs.iter().map(|p| (p / scale) as f32).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_most_probable_with_softmax_weights() {
        let logits = [0.5f32, 2.0, -1.0, 2.0, 1.0];
        let r = route(&logits, 2, false).unwrap();
        assert_eq!(r.experts, vec![1, 3], "tie goes to the lower id first");
        let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let p = (2.0f64.exp() / z) as f32;
        assert_eq!(r.weights, vec![p, p]);
        let r = route(&logits, 3, true).unwrap();
        assert_eq!(r.experts, vec![1, 3, 4]);
        let s: f32 = r.weights.iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
    }

    #[test]
    fn nan_inf_and_empty_rows_never_publish_an_id() {
        assert!(matches!(
            route(&[0.0, f32::NAN, 1.0], 1, true),
            Err(RouteError::BadLogit { expert: 1, .. })
        ));
        assert!(matches!(
            route(&[f32::INFINITY, 0.0], 1, true),
            Err(RouteError::BadLogit { expert: 0, .. })
        ));
        let all_neg_inf = [f32::NEG_INFINITY; 8];
        assert_eq!(
            route(&all_neg_inf, 2, true),
            Err(RouteError::TooFewCandidates { finite: 0, k: 2 })
        );
        let mut one = all_neg_inf;
        one[5] = -3.0e38;
        assert_eq!(route(&one, 1, true).unwrap().experts, vec![5]);
        assert_eq!(route(&one, 2, true), Err(RouteError::TooFewCandidates { finite: 1, k: 2 }));
        assert_eq!(route(&[1.0], 0, true), Err(RouteError::BadK { k: 0, n_expert: 1 }));
        assert_eq!(route(&[1.0], 2, true), Err(RouteError::BadK { k: 2, n_expert: 1 }));
    }

    #[test]
    fn ids_are_always_in_range_and_distinct() {
        // Deterministic pseudo-random rows mixing huge, tiny and -inf logits.
        let mut s = 0x1234_5678_u64;
        for _ in 0..2000 {
            let n = 2 + (s % 63) as usize;
            let row: Vec<f32> = (0..n)
                .map(|_| {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    match (s >> 60) as u8 {
                        0 => f32::NEG_INFINITY,
                        1 => -f32::MAX,
                        2 => f32::MAX,
                        _ => ((s >> 20) as u32 as f32 / 4.0e9 - 0.5) * 20.0,
                    }
                })
                .collect();
            let k = 1 + (s as usize >> 7) % n.min(8);
            if let Ok(r) = route(&row, k, true) {
                assert_eq!(r.experts.len(), k);
                let mut ids = r.experts.clone();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), k);
                assert!(r.experts.iter().all(|&e| e < n && row[e] != f32::NEG_INFINITY));
                assert!(r.weights.iter().all(|w| w.is_finite() && *w >= 0.0));
            }
        }
    }
}

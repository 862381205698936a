//! ROCmFP3's fast scale search (`Rule::Reference`): the byte the exhaustive search
//! ([`super::scale_search::search_exhaustive`]) returns, found with the window driver of
//! `fast_fp2.rs` ([`super::fast_fp2::search_window`]) and FP3's own estimates and tail bounds.
//! Only the FP3 model (terms, tails, start) lives here; it never allocates and never panics.
//!
//! # Why it returns the exhaustive search's byte, on every input
//!
//! Notation as in `fast_fp2.rs`: `a_i = |x_i|`, `w_i >= 0`, `⊕ ⊖ ⊗` rounded f64 operations. The
//! exhaustive search's term for scale `s` is `t_i(s) = w_i ⊗ (d_i ⊗ d_i)`, `d_i = a_i ⊖ c_i s`,
//! with `c_i ∈ {0, 1, 2, 4}` from the exact thresholds `0.5 s`, `1.5 s`, `3 s` (ties to the
//! smaller level; `c_i s` is exact), summed left to right into `S(s)`; lowest byte of the
//! smallest `S` wins.
//!
//! 1. **Estimates.** [`Fp3Prep`]'s `eval2` computes the same `t_i(s)` bit for bit (the same
//!    comparisons give the same `c_i`, the same rounded operations follow) and sums them in the
//!    four-lane order of `sum16`: `Ŝ (1 - 2^-44) <= S <= Ŝ (1 + 2^-44)`, as for ROCmFP2.
//! 2. **Tail below.** `τ_i = w_i ⊗ (e_i ⊗ e_i)`, `e_i = max(a_i ⊖ 4s, 0)`. For every `s' <= s`
//!    and every level `c ∈ {0, 1, 2, 4}`, `c s' <= 4s`; if `e_i > 0` then `a_i > 4s` (rounding
//!    keeps signs), so the exact `a_i - c_i s' >= a_i - 4s > 0` whichever level the thresholds
//!    pick, and by monotone rounding `d_i >= e_i > 0`, hence `t_i(s') >= τ_i` (squaring
//!    non-negatives and multiplying by `w_i >= 0` are monotone). Rounded sums are monotone in
//!    each term, so `S(s') >=` the left-to-right sum of the `τ_i` `>=` the computed tail times
//!    `1 - 2^-44`.
//! 3. **Tail above.** `τ_i = w_i ⊗ (e_i ⊗ e_i)`, `e_i = min(a_i, max(s ⊖ a_i, 0))`. For
//!    `s' >= s`: if `c_i = 0` then `d_i = a_i >= e_i`. Otherwise `c_i s' >= s' >= s`; when
//!    `a_i >= c_i s'`, `a_i >= s` and `e_i = 0 <= |d_i|`; when `a_i < c_i s'`,
//!    `|d_i| = (c_i s' - a_i)` rounded `>= (s - a_i)` rounded `>= e_i` (monotone rounding).
//!    So `|d_i| >= e_i >= 0` and `t_i(s') >= τ_i`; the sum is bounded as in 2.
//! 4. **Ties with byte 0.** Byte 0 (`s = 0`) gives `c_i = 4` for `a_i > 0` (and `c_i = 0` for
//!    `a_i = 0`), so `d_i = a_i` and `t_i(0) = w_i ⊗ (a_i ⊗ a_i)`. For `s' >= 2M`, `M` the
//!    largest `a_i` with `w_i > 0`, every such `a_i <= 0.5 s'` gets `c_i = 0` and the same term;
//!    elements with `w_i = 0` add `+0` (finite `t_i`) at every scale. So `S(s') = S(0)` bit for
//!    bit: such a byte loses the tie to byte 0, which the low side has either evaluated (and the
//!    decision keeps the lowest minimiser) or excluded with `S(0) > ub*` (then `S(s') > ub*`
//!    too). The driver stops growing the window upward at the first such scale.
//! 5. **Search and decision:** exactly `fast_fp2.rs` steps 3 and 4 (window of 8 around a
//!    start near `0.46 max(weighted RMS, M / 2)`, grown two bytes at a time until both tails
//!    exceed the best upper bound `ub*`; a single live byte is the answer, several are decided
//!    by the exhaustive search's own `objective`, ties to the lower byte; a window that would
//!    outgrow 40 bytes falls back to the exhaustive search).
//!
//! Degenerate halves: no element with `w_i > 0` and `a_i > 0` means every `S = 0`: byte 0.

use super::fast_fp2::{nearest_byte, search_window, sum16, tail_below, Model, NB, SHRINK};
use super::scale_search::{Codebook, Half};

/// One half: magnitudes, weights and the largest active magnitude `M`.
struct Fp3Prep {
    a: [f64; 16],
    w: [f64; 16],
    big_m: f64,
}

impl Model for Fp3Prep {
    const CB: Codebook = Codebook::Fp3;

    /// The exhaustive search's FP3 terms (bit for bit) at two scales, summed by `sum16`.
    #[inline(always)]
    fn eval2(&self, s0: f64, s1: f64) -> (f64, f64) {
        let (mut t0, mut t1) = ([0f64; 16], [0f64; 16]);
        let lv = |m: f64, s: f64| {
            let c = f64::from(u8::from(m > 0.5 * s))
                + f64::from(u8::from(m > 1.5 * s))
                + 2.0 * f64::from(u8::from(m > 3.0 * s));
            let d = m - c * s;
            d * d
        };
        for i in 0..16 {
            let a = self.a[i];
            t0[i] = self.w[i] * lv(a, s0);
            t1[i] = self.w[i] * lv(a, s1);
        }
        (sum16(&t0), sum16(&t1))
    }

    /// `Σ w max(a - 4s, 0)^2` times `1 - 2^-44` (module docs, step 2), shared with FP2.
    #[inline(always)]
    fn tail_below(&self, s: f64) -> f64 {
        tail_below(&self.a, &self.w, s)
    }

    /// `Σ w min(a, max(s - a, 0))^2` times `1 - 2^-44` (module docs, step 3).
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn tail_above(&self, s: f64) -> f64 {
        let mut t = [0f64; 16];
        for i in 0..16 {
            let a = self.a[i];
            let d = s - a;
            let d = if d > 0.0 { d } else { 0.0 };
            let d = if a < d { a } else { d };
            t[i] = self.w[i] * (d * d);
        }
        sum16(&t) * SHRINK
    }

    /// `s >= 2M` (module docs, step 4).
    #[inline(always)]
    fn ties_byte0_from(&self, s: f64) -> bool {
        s >= 2.0 * self.big_m
    }
}

/// The fast ROCmFP3 search: the same byte as the exhaustive search on every half (module docs).
#[allow(clippy::needless_range_loop)]
pub(crate) fn search_fp3(h: &Half, table: &[f64; NB]) -> u8 {
    let mut p = Fp3Prep { a: [0.0; 16], w: h.w, big_m: 0.0 };
    let mut x2 = [0f64; 16];
    for i in 0..16 {
        let a = h.x[i].abs();
        p.a[i] = a;
        x2[i] = p.w[i] * (a * a);
        if p.w[i] > 0.0 && a > p.big_m {
            p.big_m = a;
        }
    }
    if p.big_m == 0.0 {
        return 0;
    }
    let (sa, sc) = (sum16(&x2), sum16(&p.w));
    // Start near START * max(weighted RMS, M / 2) (any start is correct; a good one is faster).
    let r = libm::sqrt(sa / sc);
    let c = nearest_byte(START * if r > 0.5 * p.big_m { r } else { 0.5 * p.big_m });
    search_window(&p, h, table, c)
}

/// Start of the window relative to `max(weighted RMS, M / 2)`: the exhaustive optimum of
/// Gaussian and Student-t (df 2) halves is within a byte of it for about 3 halves in 4.
const START: f64 = 0.46;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rocmfpx::scale_search::{lcg, scale_table_f64, search_exhaustive};

    #[test]
    fn matches_exhaustive() {
        let table = scale_table_f64();
        let mut st = 13u64;
        for iter in 0..20000 {
            let scale = [1e-4, 1e-2, 0.3, 1.0, 50.0, 900.0, 1e6, 1e-40, 1e30][iter % 9];
            let mut h = Half { x: [0.0; 16], w: [1.0; 16] };
            for i in 0..16 {
                let v = lcg(&mut st) * scale;
                h.x[i] = f64::from(v as f32);
                if iter % 3 == 0 {
                    h.w[i] = (lcg(&mut st) + 0.5) * 3.0;
                }
                if iter % 11 == 0 && i % 3 == 0 {
                    h.w[i] = 0.0;
                }
                if iter % 7 == 0 && i % 2 == 0 {
                    // exactly on a threshold or a level
                    let b = (lcg(&mut st) + 0.5) * 126.0;
                    let k = [0.5, 1.5, 3.0, 1.0, 2.0, 4.0][i % 6];
                    h.x[i] = k * table[b as usize];
                }
                if iter % 13 == 0 {
                    h.x[i] = h.x[i % 4];
                }
                if iter % 17 == 0 && i > 0 {
                    h.x[i] = 0.0;
                }
            }
            let e = search_exhaustive(Codebook::Fp3, &h, &table);
            assert_eq!(search_fp3(&h, &table), e, "{h:?}");
        }
    }
}

//! Least-squares ternary fit shared by the improved encoders of PQ2_0, PTQ1_0 (Prism) and
//! TQ1_0, TQ2_0 (ggml).
//!
//! What lives here: [`fit_ternary`], which picks an f16 scale `d` and trits `t_i ∈ {-1, 0, +1}`
//! minimising the (importance-weighted) squared error of one group. Nothing format-specific
//! (packing, block layout) belongs here.
//!
//! ## The algorithm
//!
//! For a fixed support `S` (the elements with `t_i ≠ 0`, which take `t_i = sign(x_i)`), the
//! error `Σ w_i (x_i - d t_i)²` is minimised by `d = Σ_S w|x| / Σ_S w`, and the error drops below
//! `Σ w x²` by `(Σ_S w|x|)² / Σ_S w`. For a fixed `d > 0` the best trits threshold:
//! `t_i = sign(x_i)` iff `|x_i| > d/2`. So the optimal support is a prefix of the elements sorted
//! by `|x|` descending, and scanning every prefix finds the exact real-valued optimum
//! `(d*, S*)` in `O(n log n)`.
//!
//! `d*` must then become an f16. The candidates are `d*` rounded to nearest (ties to even), its two
//! f16 neighbours, and the reference rule's `f16(amax)`; each candidate's trits are recomputed by
//! thresholding at `d/2` (optimal for that rounded scale) and its error evaluated in f64. The best
//! candidate's support then gives a refined `d'` whose f16 neighbourhood is tried once more. The
//! winner has the smallest error among all candidates (the first one wins on an exact tie), so
//! its error is never above that of the reference rule's `(f16(amax), round(x/amax))` choice.
//!
//! ## Limits
//!
//! * Groups of up to [`MAX_EXACT_GROUP`] = 256 elements (TQ1_0/TQ2_0 use 256, Prism 128) get the
//!   exact prefix scan, using fixed-size stack arrays (no allocation). Longer inputs are still
//!   handled, without error or panic: their starting `d*` comes from a few alternating
//!   (scale, support) iterations from `d = amax` (a local optimum), then the same f16 candidates.
//! * Scales are clamped to the largest finite f16 (65504): the fit never returns an infinite or
//!   NaN scale, whatever the input magnitude.
//! * An all-zero group (or one whose nonzero values all have zero weight) gives `d = +0` and
//!   all-zero trits.

use half::f16;

/// Largest group for which [`fit_ternary`] runs the exact prefix scan.
pub const MAX_EXACT_GROUP: usize = 256;

/// The largest finite f16 bit pattern (65504).
const F16_MAX_BITS: u16 = 0x7BFF;

/// Fits `x ≈ d * t` with `t[i] ∈ {-1, 0, +1}` and `d` a finite, non-negative f16, minimising
/// `sum_i w_i (x_i - d t_i)^2` (`w_i` = importance, 1 if `None`). Writes the codes to `codes`
/// (same length as `x`) and returns the f16 scale; the codes are optimal for the returned
/// (rounded) scale. An all-zero group gives d = 0 and all-zero codes.
///
/// Contract (checked by [`crate::codec::encode_row`] for the encoders that call this):
/// `codes.len() == x.len()`, values finite, weights finite and `>= 0` with
/// `importance.len() == x.len()`. Violations never panic in release builds: only the first
/// `min(x.len(), codes.len())` elements are fitted, a non-finite value counts as 0, a missing,
/// negative or non-finite weight counts as 0, and if every weight is 0 the weights are ignored
/// (uniform). Exact for `x.len() <= 256` (see the module documentation).
pub fn fit_ternary(x: &[f32], importance: Option<&[f32]>, codes: &mut [i8]) -> f16 {
    debug_assert_eq!(x.len(), codes.len(), "fit_ternary: codes must match x");
    let n = x.len().min(codes.len());
    let x = &x[..n];
    let codes = &mut codes[..n];
    let mut g = Group { x, w: importance };
    if g.total_weight() <= 0.0 {
        g.w = None;
    }

    let start = if n <= MAX_EXACT_GROUP { g.prefix_optimum() } else { g.lloyd_start() };
    let amax = (0..n).fold(0f64, |m, i| m.max(g.ax(i)));

    let mut best = Best { d: f16::ZERO, err: g.err(f16::ZERO) };
    best.try_all(&g, neighbourhood(start));
    best.try_all(&g, [to_f16_clamped(amax), f16::ZERO, f16::ZERO]);
    // One refinement: the optimal real scale for the winner's support, and its neighbours.
    let refined = g.support_mean(best.d);
    best.try_all(&g, neighbourhood(refined));

    let d = best.d;
    let half = d.to_f64() * 0.5;
    for (i, c) in codes.iter_mut().enumerate() {
        let v = g.v(i);
        *c = if d.to_f64() > 0.0 && v.abs() > half {
            if v > 0.0 {
                1
            } else {
                -1
            }
        } else {
            0
        };
    }
    d
}

/// One group's values and weights, with the sanitising rules of [`fit_ternary`].
struct Group<'a> {
    x: &'a [f32],
    w: Option<&'a [f32]>,
}

impl Group<'_> {
    /// Value `i` in f64 (non-finite counts as 0).
    fn v(&self, i: usize) -> f64 {
        let v = self.x[i];
        if v.is_finite() {
            f64::from(v)
        } else {
            0.0
        }
    }

    fn ax(&self, i: usize) -> f64 {
        self.v(i).abs()
    }

    /// Weight `i` (missing, negative or non-finite counts as 0).
    fn wt(&self, i: usize) -> f64 {
        match self.w {
            None => 1.0,
            Some(w) => match w.get(i) {
                Some(&v) if v.is_finite() && v >= 0.0 => f64::from(v),
                _ => 0.0,
            },
        }
    }

    fn total_weight(&self) -> f64 {
        (0..self.x.len()).map(|i| self.wt(i)).sum()
    }

    /// Weighted squared error of the best trits for scale `d` (thresholding at `d/2`).
    fn err(&self, d: f16) -> f64 {
        let df = d.to_f64();
        let half = df * 0.5;
        let mut e = 0.0;
        for i in 0..self.x.len() {
            let a = self.ax(i);
            let r = if df > 0.0 && a > half { a - df } else { a };
            e += self.wt(i) * r * r;
        }
        e
    }

    /// The least-squares scale for the support that scale `d` selects (`|x| > d/2`).
    fn support_mean(&self, d: f16) -> f64 {
        let df = d.to_f64();
        if df <= 0.0 {
            return 0.0;
        }
        let (mut a, mut w) = (0.0, 0.0);
        for i in 0..self.x.len() {
            if self.ax(i) > df * 0.5 {
                a += self.wt(i) * self.ax(i);
                w += self.wt(i);
            }
        }
        if w > 0.0 {
            a / w
        } else {
            0.0
        }
    }

    /// Exact real-valued optimum by scanning every prefix of the |x|-descending order
    /// (`x.len() <= 256`).
    fn prefix_optimum(&self) -> f64 {
        let n = self.x.len();
        let mut order = [0u8; MAX_EXACT_GROUP];
        for (i, o) in order.iter_mut().enumerate().take(n) {
            *o = i as u8; // n <= 256, so i <= 255
        }
        let order = &mut order[..n];
        order.sort_unstable_by(|&a, &b| self.ax(b as usize).total_cmp(&self.ax(a as usize)));
        let (mut a, mut w) = (0.0f64, 0.0f64);
        let (mut best_gain, mut best_d) = (0.0f64, 0.0f64);
        for &i in order.iter() {
            let i = i as usize;
            a += self.wt(i) * self.ax(i);
            w += self.wt(i);
            if w > 0.0 {
                let gain = a * a / w;
                if gain > best_gain {
                    best_gain = gain;
                    best_d = a / w;
                }
            }
        }
        best_d
    }

    /// Starting scale for long groups: alternate support and scale from `d = amax`.
    fn lloyd_start(&self) -> f64 {
        let mut d = (0..self.x.len()).fold(0f64, |m, i| m.max(self.ax(i)));
        for _ in 0..16 {
            let (mut a, mut w) = (0.0, 0.0);
            for i in 0..self.x.len() {
                if self.ax(i) > d * 0.5 {
                    a += self.wt(i) * self.ax(i);
                    w += self.wt(i);
                }
            }
            if w <= 0.0 {
                break;
            }
            let next = a / w;
            if next == d {
                break;
            }
            d = next;
        }
        d
    }
}

/// The running best candidate.
struct Best {
    d: f16,
    err: f64,
}

impl Best {
    fn try_all<const N: usize>(&mut self, g: &Group<'_>, cands: [f16; N]) {
        for d in cands {
            let e = g.err(d);
            if e < self.err {
                self.d = d;
                self.err = e;
            }
        }
    }
}

/// `d` rounded to the nearest f16 (ties to even), clamped to [0, 65504].
fn to_f16_clamped(d: f64) -> f16 {
    if d.is_nan() || d <= 0.0 {
        return f16::ZERO;
    }
    let h = f16::from_f64(d);
    if h.is_infinite() {
        f16::from_bits(F16_MAX_BITS)
    } else {
        h
    }
}

/// `d` rounded to f16 and its two neighbours (each clamped to [0, 65504]).
fn neighbourhood(d: f64) -> [f16; 3] {
    let h = to_f16_clamped(d);
    let b = h.to_bits();
    let down = f16::from_bits(b.saturating_sub(1));
    let up = f16::from_bits(if b >= F16_MAX_BITS { F16_MAX_BITS } else { b + 1 });
    [h, down, up]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_of(x: &[f32], w: Option<&[f32]>, d: f16, t: &[i8]) -> f64 {
        let df = d.to_f64();
        x.iter()
            .zip(t)
            .enumerate()
            .map(|(i, (&v, &c))| {
                let wi = w.map_or(1.0, |w| f64::from(w[i]));
                let r = f64::from(v) - df * f64::from(c);
                wi * r * r
            })
            .sum()
    }

    /// Brute force over every f16 scale from 0 to a bound, with optimal trits per scale.
    fn brute(x: &[f32], w: Option<&[f32]>) -> f64 {
        let g = Group { x, w };
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let top = f16::from_f32(amax * 1.01).to_bits().min(F16_MAX_BITS);
        (0..=top).map(|b| g.err(f16::from_bits(b))).fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn zero_group() {
        let x = [0f32; 16];
        let mut t = [5i8; 16];
        assert_eq!(fit_ternary(&x, None, &mut t), f16::ZERO);
        assert!(t.iter().all(|&c| c == 0));
    }

    #[test]
    fn simple_optimum() {
        // Values ±1 and small noise: the scale is the mean of the large magnitudes.
        let x = [1.0f32, -1.0, 1.0, 0.01, -0.02, 0.0, 1.0, -1.0];
        let mut t = [0i8; 8];
        let d = fit_ternary(&x, None, &mut t);
        assert_eq!(d, f16::ONE);
        assert_eq!(t, [1, -1, 1, 0, 0, 0, 1, -1]);
    }

    #[test]
    fn matches_brute_force_on_small_groups() {
        let mut s = 0x1234_5678u32;
        let mut rnd = || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        for case in 0..40 {
            let n = 8 + case % 24;
            let x: [f32; 32] = core::array::from_fn(|_| {
                let v = rnd();
                v * v * v * 3.0
            });
            let w: [f32; 32] = core::array::from_fn(|_| rnd().abs());
            let x = &x[..n];
            let w = &w[..n];
            for imp in [None, Some(w)] {
                let mut t = [0i8; 32];
                let d = fit_ternary(x, imp, &mut t[..n]);
                let e = err_of(x, imp, d, &t[..n]);
                let b = brute(x, imp);
                // Optimal up to f64 rounding of the error sums.
                assert!(e <= b * (1.0 + 1e-12) + 1e-30, "case {case}: fit {e} > brute {b}");
            }
        }
    }

    #[test]
    fn huge_values_clamp() {
        let x = [1e9f32, -1e9, 0.0, 5.0];
        let mut t = [0i8; 4];
        let d = fit_ternary(&x, None, &mut t);
        assert_eq!(d.to_bits(), F16_MAX_BITS);
        assert_eq!(t, [1, -1, 0, 0]);
    }

    #[test]
    fn long_group_fallback() {
        let x: [f32; 300] = core::array::from_fn(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0);
        let mut t = [0i8; 300];
        let d = fit_ternary(&x, None, &mut t);
        assert!(d.to_f32() > 0.0 && d.to_f32() <= 1.0);
        let amax = f16::from_f32(1.0);
        let g = Group { x: &x, w: None };
        assert!(err_of(&x, None, d, &t) <= g.err(amax));
    }
}

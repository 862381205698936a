//! ROCmFP2's window search (formerly `Rule::Reference`, now the fallback of `quad_fp2.rs`)
//! and the window driver shared with ROCmFP3: the byte the exhaustive search
//! ([`super::scale_search::search_exhaustive`]) returns, found by evaluating a small window of
//! bytes with rigorous floating-point bounds. The FP2 model and the window driver
//! ([`search_window`], generic over a [`Model`]: steps 3 and 4 below, shared with ROCmFP3's
//! `fast_fp3.rs`) live here; nothing here allocates or panics.
//!
//! # Why it returns the exhaustive search's byte, on every input
//!
//! Notation: `a_i = |x_i|`, `w_i` the weights, `⊕ ⊖ ⊗` rounded f64 operations, `u = 2^-53`. The
//! exhaustive search computes, for each legal scale `s`, the terms
//! `t_i(s) = w_i ⊗ min((a_i ⊖ s)⊗(a_i ⊖ s), (a_i ⊖ 4s)⊗(a_i ⊖ 4s))` and sums them left to right
//! into `S(s)`; it returns the lowest byte with the smallest `S`.
//!
//! 1. **Estimates.** [`Prep::eval2`] computes the same terms `t_i(s)` bit for bit (same
//!    operations in the same order; Rust never fuses them) and sums them in another order
//!    (four interleaved lanes, then pairwise) into `Ŝ(s)`. For 16 non-negative terms every
//!    summation order is within `γ_15 < 2^-48.9` relative of the exact sum (additions of
//!    non-negative numbers, subnormal results included, err by at most `u` relative), so
//!    `lb = Ŝ ⊗ (1 - 2^-44) <= S(s) <= Ŝ ⊗ (1 + 2^-44) = ub`.
//! 2. **Tails.** [`Prep::tail_below`]`(s)` sums `τ_i = w_i ⊗ (d_i ⊗ d_i)`, `d_i = max(a_i ⊖ 4s,
//!    0)`. For every scale `s' <= s` each `t_i(s') >= τ_i`: if `d_i > 0` then `a_i > 4s >= c s'`
//!    for both levels `c ∈ {1, 4}`, so `a_i - c s' >= a_i - 4s > 0`, and rounding, squaring,
//!    taking the minimum and multiplying by `w_i >= 0` are all monotone. Rounded sums are
//!    monotone in every term, so `S(s') >=` the left-to-right sum of the `τ_i`, which is at least
//!    the computed tail times `1 - 2^-44`. [`Prep::tail_above`] is the mirror image with
//!    `d_i = max(s ⊖ a_i, 0)` (levels `c s' >= s' >= s` for `s' >= s`).
//! 3. **Search.** Bytes `[lo, hi]` are evaluated (first a window of 8 around `0.45` times the
//!    weighted RMS of the half, then two at a time outward) until `tail_below(s_{lo-1})` and
//!    `tail_above(s_{hi+1})` both exceed the best upper bound `ub*` found (the window is
//!    complete at byte 0 / 126). Every byte outside the window then has `S > ub* >= S(b_ub)`,
//!    `b_ub` the byte whose `ub` is `ub*` (bounds only fall as bytes are added, so an exclusion
//!    made earlier still holds).
//! 4. **Decision.** Every evaluated byte with `lb > ub*` has `S > S(b_ub)`: it can neither win
//!    nor tie. The others (always including `b_ub`) are *live*. One live byte: it has the
//!    strictly smallest `S`, so it is the exhaustive answer, returned without any exact
//!    evaluation (the common case). Several (an exact or near tie): their exact `S`, computed
//!    with the exhaustive search's own code, decide, ties to the lower byte.
//!
//! Degenerate halves are answered directly, as the exhaustive search would: all weights 0
//! (every `S = +0`) or all weighted magnitudes 0 (`S(0) = 0 <= S(s)`): byte 0. A half whose
//! window would grow past [`WIN`] bytes (flat error curves: values beyond ~2^60, where every `S`
//! rounds alike) is handed to the exhaustive search itself.

use super::scale_search::{objective, search_exhaustive, Codebook, Half};

/// Legal bytes 0x00..=0x7E.
pub(super) const NB: usize = 127;

/// The UE4M3-b8 value of byte `b` (`b <= 126`) as f64 (exact).
const fn ue4m3_b8(b: usize) -> f64 {
    let e = b >> 3;
    let m = (b & 7) as f64;
    if e == 0 {
        m / 1024.0
    } else {
        // 2^(e - 11), e in 1..=15
        (8.0 + m) * f64::from_bits(((1023 + e - 11) as u64) << 52)
    }
}

/// Scale of every byte; entry 127 (illegal) is never used as a scale.
pub(crate) const SCALE: [f64; 128] = {
    let mut t = [0f64; 128];
    let mut b = 0;
    while b < NB {
        t[b] = ue4m3_b8(b);
        b += 1;
    }
    t[127] = f64::INFINITY;
    t
};

/// Every legal scale as f64, indexed by byte (the first 127 entries of [`SCALE`]; the same
/// values as the tests' `scale_search::scale_table_f64`, without computing them per row).
pub(crate) const SCALE_TABLE: [f64; NB] = {
    let mut t = [0f64; NB];
    let mut b = 0;
    while b < NB {
        t[b] = SCALE[b];
        b += 1;
    }
    t
};

/// The largest byte `b <= 126` with `SCALE[b] <= t'` for `t >= 0`, where `t' = t` when
/// `t >= 2^-7` (exact: the grid there is the numbers with 3 fraction bits, whose byte is read off
/// the f64 bits) and `t' = fl(t + 2^-7) - 2^-7` otherwise (the linear range `b / 1024`, read the
/// same way after the shift; `|t' - t| <= 2^-60`). Branch-free.
#[inline(always)]
pub(super) fn floor_byte(t: f64) -> usize {
    // For x in [2^-7, 2^8): bits >> 49 = 8 * biased exponent + top 3 fraction bits, and the byte
    // is 8 * (exponent + 8) + fraction bits = (bits >> 49) - 8 * 1015.
    let normal = (t.to_bits() >> 49) as i64 - 8120;
    let linear = ((t + 1.0 / 128.0).to_bits() >> 49) as i64 - 8128;
    let b = if t < 1.0 / 128.0 { linear } else { normal };
    b.min(126) as usize
}

/// `1 ∓ 2^-44`: relative slack between any two summation orders of 16 non-negative terms
/// (`2 γ_15 < 2^-47`) plus the rounding of the product itself.
pub(super) const SHRINK: f64 = 1.0 - 1.0 / 17_592_186_044_416.0;
const GROW: f64 = 1.0 + 1.0 / 17_592_186_044_416.0;

/// The nearest byte to `t >= 0` (ties either way; only a starting point).
#[inline(always)]
pub(super) fn nearest_byte(t: f64) -> usize {
    let f = floor_byte(t);
    let up = usize::from(f < 126 && SCALE[(f + 1).min(126)] - t < t - SCALE[f]);
    f + up
}

/// Four-lane sum of 16 values: a summation order other than the exhaustive search's.
#[inline(always)]
pub(super) fn sum16(v: &[f64; 16]) -> f64 {
    let mut l = [0f64; 4];
    for k in 0..4 {
        for j in 0..4 {
            l[j] += v[4 * k + j];
        }
    }
    (l[0] + l[1]) + (l[2] + l[3])
}

/// `Σ w max(a - 4s, 0)^2` times `1 - 2^-44`: the tail bound below of FP2 and FP3 alike (the
/// largest level of both codebooks is `4s`; see [`Prep::tail_below`] and `fast_fp3.rs`, step 2).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // indexed form: one vectorized pass
pub(super) fn tail_below(a: &[f64; 16], w: &[f64; 16], s: f64) -> f64 {
    let f = 4.0 * s;
    let mut t = [0f64; 16];
    for i in 0..16 {
        let d = a[i] - f;
        let d = if d > 0.0 { d } else { 0.0 };
        t[i] = w[i] * (d * d);
    }
    sum16(&t) * SHRINK
}

/// One half: magnitudes and weights.
struct Prep {
    a: [f64; 16],
    w: [f64; 16],
}

impl Prep {
    /// `Ŝ` of two bytes: the exhaustive search's own terms `w * min((a-4s)^2, (a-s)^2)` (bit
    /// for bit), summed in another order, so `Ŝ (1 - 2^-44) < S < Ŝ (1 + 2^-44)`.
    #[inline(always)]
    fn eval2(&self, s0: f64, s1: f64) -> (f64, f64) {
        let (f0, f1) = (4.0 * s0, 4.0 * s1);
        let (mut t0, mut t1) = ([0f64; 16], [0f64; 16]);
        for i in 0..16 {
            let a = self.a[i];
            let (d, e) = (a - s0, a - f0);
            let (d, e) = (d * d, e * e);
            t0[i] = self.w[i] * if e < d { e } else { d };
            let (d, e) = (a - s1, a - f1);
            let (d, e) = (d * d, e * e);
            t1[i] = self.w[i] * if e < d { e } else { d };
        }
        (sum16(&t0), sum16(&t1))
    }

    /// Tail bound below: every byte with scale `s' <= s` has `S(s') >` the result. Each term
    /// `w * max(a - 4s, 0)^2` is at most the exhaustive search's term at `s'` (the levels `c s'`
    /// are `<= 4s`; rounding is monotone).
    #[inline(always)]
    fn tail_below(&self, s: f64) -> f64 {
        tail_below(&self.a, &self.w, s)
    }

    /// Tail bound above: every byte with scale `s' >= s` has `S(s') >` the result (terms
    /// `w * max(s - a, 0)^2`, the levels `c s'` being `>= s`).
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn tail_above(&self, s: f64) -> f64 {
        let mut t = [0f64; 16];
        for i in 0..16 {
            let d = s - self.a[i];
            let d = if d > 0.0 { d } else { 0.0 };
            t[i] = self.w[i] * (d * d);
        }
        sum16(&t) * SHRINK
    }
}

/// Width of the window of evaluated bytes; a half that needs more (flat error curves, e.g.
/// values beyond ~2^60 where every `S` rounds alike) is handed to the exhaustive search.
const WIN: usize = 40;

/// What the window driver needs of a codebook: estimates of two bytes, the two tail bounds
/// (each `<=` the exhaustive `S` of every byte beyond it, slack included) and, optionally, a
/// scale from which on every byte ties bit for bit with byte 0 (so it can never win).
pub(super) trait Model {
    /// The codebook, for the exhaustive search's own evaluation of ties and the fallback.
    const CB: Codebook;
    /// `Ŝ` of two scales: the exhaustive terms bit for bit, summed by [`sum16`].
    fn eval2(&self, s0: f64, s1: f64) -> (f64, f64);
    /// A lower bound (slack applied) on `S(s')` for every scale `s' <= s`.
    fn tail_below(&self, s: f64) -> f64;
    /// A lower bound (slack applied) on `S(s')` for every scale `s' >= s`.
    fn tail_above(&self, s: f64) -> f64;
    /// True when every scale `s' >= s` gives `S(s') == S(0)` bit for bit.
    fn ties_byte0_from(&self, s: f64) -> bool;
}

impl Model for Prep {
    const CB: Codebook = Codebook::Fp2;
    #[inline(always)]
    fn eval2(&self, s0: f64, s1: f64) -> (f64, f64) {
        Prep::eval2(self, s0, s1)
    }
    #[inline(always)]
    fn tail_below(&self, s: f64) -> f64 {
        Prep::tail_below(self, s)
    }
    #[inline(always)]
    fn tail_above(&self, s: f64) -> f64 {
        Prep::tail_above(self, s)
    }
    #[inline(always)]
    fn ties_byte0_from(&self, _s: f64) -> bool {
        false
    }
}

/// ROCmFP2's window search: the same byte as the exhaustive search on every half (module docs).
/// `Rule::Reference` uses the faster envelope search of `quad_fp2.rs`, which hands over to this
/// one only for halves whose values are not widened f32 (never from the codec).
#[allow(clippy::needless_range_loop)]
pub(crate) fn search_fp2_window(h: &Half, table: &[f64; NB]) -> u8 {
    let mut p = Prep { a: [0.0; 16], w: h.w };
    let mut x2 = [0f64; 16];
    for i in 0..16 {
        p.a[i] = h.x[i].abs();
        x2[i] = p.w[i] * (p.a[i] * p.a[i]);
    }
    let (sa, sc) = (sum16(&x2), sum16(&p.w));
    if !(0..16).any(|i| p.w[i] > 0.0 && p.a[i] > 0.0) {
        return 0;
    }
    // Start window around 0.45 * weighted RMS (any start is correct; a good one is faster).
    let c = nearest_byte(0.45 * libm::sqrt(sa / sc));
    search_window(&p, h, table, c)
}

/// The window driver (module docs, steps 3 and 4), starting with 8 bytes around byte `c`.
pub(super) fn search_window<M: Model>(p: &M, h: &Half, table: &[f64; NB], c: usize) -> u8 {
    let mut lo = c.saturating_sub(3).min(NB - 8);
    let mut hi = lo + 7;
    let base = lo.saturating_sub(WIN / 2 - 4).min(NB - WIN);
    // est[b - base]: Ŝ of byte b, +inf where not evaluated.
    let mut est = [f64::INFINITY; WIN];
    let eval = |b: usize, est: &mut [f64; WIN]| {
        let (e0, e1) = p.eval2(SCALE[b], SCALE[b + 1]);
        est[b - base] = e0;
        est[b + 1 - base] = e1;
        if e0 < e1 {
            e0
        } else {
            e1
        }
    };
    let mut best = f64::INFINITY;
    for b in [lo, lo + 2, lo + 4, lo + 6] {
        let e = eval(b, &mut est);
        best = if e < best { e } else { best };
    }
    // Extend the window, two bytes at a time, until the tails beyond it exceed the best bound.
    let mut ub = best * GROW;
    while lo > 0 && p.tail_below(SCALE[lo - 1]) <= ub {
        let b = lo.saturating_sub(2);
        if b < base {
            return search_exhaustive(M::CB, h, table);
        }
        let e = eval(b, &mut est);
        ub = if e * GROW < ub { e * GROW } else { ub };
        lo = b;
    }
    while hi < NB - 1 && !p.ties_byte0_from(SCALE[hi + 1]) && p.tail_above(SCALE[hi + 1]) <= ub {
        let b = (hi + 1).min(NB - 2);
        if b + 2 > base + WIN {
            return search_exhaustive(M::CB, h, table);
        }
        let e = eval(b, &mut est);
        ub = if e * GROW < ub { e * GROW } else { ub };
        hi = b + 1;
    }
    // Bytes that can still win: Ŝ (1 - 2^-44) <= ub. One: it is the answer. Several (a near or
    // exact tie): the exhaustive search's exact S decides, ties to the lower byte.
    let live = &est[lo - base..=hi - base];
    let mut n = 0;
    let mut first = 0;
    for (i, &e) in live.iter().enumerate().rev() {
        let is = e * SHRINK <= ub;
        n += usize::from(is);
        first = if is { i } else { first };
    }
    if n == 1 {
        return (lo + first) as u8;
    }
    let (mut bs, mut bb) = (f64::INFINITY, 0);
    for (i, &e) in live.iter().enumerate() {
        if e * SHRINK <= ub {
            let v = objective(M::CB, h, SCALE[lo + i]);
            if v < bs {
                bs = v;
                bb = lo + i;
            }
        }
    }
    bb as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rocmfpx::scale_search::{lcg, scale_table_f64};

    #[test]
    fn tables_and_floor_byte() {
        let t = scale_table_f64();
        for b in 0..NB {
            assert_eq!(SCALE[b], t[b]);
            assert_eq!(SCALE_TABLE[b].to_bits(), t[b].to_bits());
            assert_eq!(floor_byte(t[b]), b);
            if b + 1 < NB {
                let mid = 0.5 * (t[b] + t[b + 1]);
                assert_eq!(floor_byte(mid), b);
                if t[b] >= 1.0 / 128.0 {
                    assert_eq!(floor_byte(f64::from_bits(t[b + 1].to_bits() - 1)), b);
                }
            }
        }
        assert_eq!(floor_byte(1e300), 126);
        assert_eq!(floor_byte(239.9), 126);
    }

    #[test]
    fn matches_exhaustive() {
        let table = scale_table_f64();
        let mut st = 11u64;
        for iter in 0..20000 {
            let scale = [1e-4, 1e-2, 0.3, 1.0, 50.0, 900.0, 1e6, 1e-40][iter % 8];
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
                    let k = [2.5, 1.0, 4.0, 1.75][i % 4];
                    h.x[i] = k * table[b as usize];
                }
                if iter % 13 == 0 {
                    h.x[i] = h.x[i % 4];
                }
            }
            assert_eq!(
                search_fp2_window(&h, &table),
                search_exhaustive(Codebook::Fp2, &h, &table),
                "{h:?}"
            );
        }
    }
}

//! ROCmFP2's fast scale search (`Rule::Reference`): the byte the exhaustive search
//! ([`super::scale_search::search_exhaustive`]) returns, found from the lower envelope of 17
//! quadratics built from the half's sorted magnitudes. Only this search lives here (codes and
//! packing are in `fp2.rs`); it never allocates and never panics. The CPU backend
//! (`lowbit-cpu`, `x86/fp2_search512.rs`) runs the unit-weight search's operations lane by lane
//! on 8 halves at once: a change to the operations or their order here must be made there too
//! (its tests compare the bytes with this search and the exhaustive one).
//!
//! # Why it returns the exhaustive search's byte, on every input
//!
//! Notation: `a_i = |x_i|` (f32 values widened), `w_i >= 0`, `u = 2^-53`. For scale `s` the
//! exhaustive search sums the rounded terms `w_i (min((a_i-s)^2, (a_i-4s)^2))` left to right
//! into `S(s)` and keeps the lowest byte of the smallest `S`. Let `E(s)` be the same sum in exact
//! arithmetic.
//!
//! 1. **Rounding.** Every term is `w (a - c s)^2` up to three roundings (`c s` is exact), the
//!    minimum of two such values is within the same factor of the exact minimum, and the sum of
//!    16 non-negative terms adds 15 more: `S = E (1 ± 19u)`, `19u < 2^-48`. No term is subnormal
//!    (inputs are f32, scales multiples of 2^-13, so every nonzero `|a - c s| >= 2^-149`; weights
//!    are 0 or `>= 2^-310`) and nothing overflows.
//! 2. **Envelope.** Sort the keys `a_i` descending (ties by index; the index is stored in the
//!    four low bits of the f64, which are zero for widened f32 values — a half without them is
//!    handed to the window search of `fast_fp2.rs`). For `k = 0..=16` let `q_k(s)` be the exact
//!    error when the first `k` sorted elements take the outer level 4 and the rest level 1:
//!    `q_k(s) = A - 2 s B_k + s^2 C_k`, `A = Σ w a^2`, `B_k = Σ w a + 3 P_k`,
//!    `C_k = Σ w + 15 Q_k` (`P_k`, `Q_k` the prefix sums of `w a` and `w`). Each `q_k` is an
//!    assignment's error, so `q_k >= E`; and at every `s` the per-element optimum (outer iff
//!    `a > 2.5 s`) is such a prefix, so `E(s) = min_k q_k(s)` exactly.
//! 3. **Model error.** `A`, `B_k`, `C_k` are sums of non-negative terms (relative error
//!    `< 25u` whatever the order of the additions: `A` is summed in four lanes and `P_k`, `Q_k`
//!    in four blocks of four plus block offsets, to shorten the dependency chains), so the
//!    computed `q_k(s)` is within `2^-45 D_k(s)` of the exact one, `D_k = A + 2 s B_k + s^2 C_k`.
//!    The vertex `v_k = B_k / C_k` is computed as one rounded division, or, when every weight is
//!    1 (then `C_k = 16 + 15 k` exactly), as `B_k` times the rounded reciprocal of `C_k`
//!    (relative error `<= 2u` instead of `u`). The computed minimum `m_k = A - B_k v_k` is then
//!    within `2^-44 A` of `min_s q_k(s)`: `B_k v_k` is within `(1 + 25u)^2 / (1 - 25u)` times
//!    `(1 + 2u)(1 + u)` of the exact `B_k^2 / C_k <= A` (Cauchy-Schwarz), about `78u A`, and `A`
//!    and the subtraction add `26u A`: `104u < 2^-46`.
//! 4. **Threshold.** `T_E` = the smallest `q_k + 2^-45 D_k` over the two bytes around the vertex
//!    `B_k / C_k` of the quadratic with the smallest `m_k` (found by a tree of comparisons; any
//!    `k` would do, as every `q_k >= E`): `E(b_T) <= T_E` for one of them.
//!    `T' = T_E (1 + 2^-46)`: any byte with `E > T'` has `S > S(b_T)` (step 1), so it can
//!    neither win nor tie.
//! 5. **Candidates.** A quadratic with `m_k - 2^-44 A > T'` is above `T'` everywhere. For the
//!    others (usually one), the bytes with `q_k - 2^-45 D_k <= T'` are marked, walking down and
//!    up from the vertex; by convexity a walk stops at the first byte above `T'` that lies
//!    safely beyond the vertex (`s < v (1 - 2^-30)` or `s > v (1 + 2^-30)`, far wider than the
//!    vertex's rounding error). Every unmarked byte has `E > T'`. (The four bytes nearest the
//!    vertex are tested without branches and the walk resumes past them only where it would not
//!    have stopped, so a byte the walk would not reach may be marked as well, but only when it
//!    passes the same test; step 6 holds for any marked set of bytes that pass the test and
//!    that contains every byte the walks mark.)
//! 6. **Decision.** One marked byte: the answer. Several: each gets `lb`/`ub` = the smallest
//!    `q_k ∓ 2^-45 D_k` over the surviving quadratics (`E >= lb` because every other quadratic is
//!    above `T' >= lb`). If only the byte with the smallest `ub` has `lb <= ub_min (1 + 2^-47)`,
//!    its `S` is strictly the smallest; otherwise the live bytes' exact `S`, computed by the
//!    exhaustive search's own `objective`, decide, ties to the lower byte.
//!
//! Degenerate halves: `A = 0` (every element has `w = 0` or `a = 0`) means `S(0) = 0 <= S(s)`:
//! byte 0, as the exhaustive search returns.

use super::fast_fp2::{floor_byte, sum16, NB, SCALE};
use super::scale_search::{objective, Codebook, Half};

/// Sorts 16 keys (positive f64 bit patterns, so integer order is numeric order) in descending order (Batcher's odd-even merge sort, 63 comparators).
#[inline(always)]
fn sort16_desc(k: &mut [u64; 16]) {
    macro_rules! cx {
        ($($i:literal $j:literal),*) => {$(
            let (x, y) = (k[$i], k[$j]);
            k[$i] = x.max(y);
            k[$j] = x.min(y);
        )*};
    }
    cx!(0 1, 2 3, 0 2, 1 3, 1 2, 4 5, 6 7, 4 6, 5 7, 5 6, 0 4, 2 6, 2 4, 1 5, 3 7, 3 5, 1 2, 3 4,
        5 6, 8 9, 10 11, 8 10, 9 11, 9 10, 12 13, 14 15, 12 14, 13 15, 13 14, 8 12, 10 14, 10 12,
        9 13, 11 15, 11 13, 9 10, 11 12, 13 14, 0 8, 4 12, 4 8, 2 10, 6 14, 6 10, 2 4, 6 8, 10 12,
        1 9, 5 13, 5 9, 3 11, 7 15, 7 11, 3 5, 7 9, 11 13, 1 2, 3 4, 5 6, 7 8, 9 10, 11 12, 13 14);
}

/// Inclusive prefix sums of 16 values in four blocks of four, then the block offsets: 6
/// dependent adds instead of 15. Entry `j` is the sum of `x[0..=j]` in some order.
#[inline(always)]
fn scan16(x: [f64; 16]) -> [f64; 16] {
    let mut y = [0f64; 16];
    // four blocks of four, each a serial chain (independent), then the block offsets
    for b in 0..4 {
        let mut acc = x[4 * b];
        y[4 * b] = acc;
        for j in 1..4 {
            acc += x[4 * b + j];
            y[4 * b + j] = acc;
        }
    }
    let o1 = y[3];
    let o2 = o1 + y[7];
    let o3 = o2 + y[11];
    for j in 0..4 {
        y[4 + j] += o1;
        y[8 + j] += o2;
        y[12 + j] += o3;
    }
    y
}

/// An index of a smallest of 17 values, by a tree of comparisons (log depth). Which of several
/// equal minima it returns does not matter: any `k0` gives a valid `T_E` (module docs, step 4).
#[inline(always)]
fn argmin17(m: &[f64; 17]) -> usize {
    let mut v = [0f64; 16];
    let mut ix = [0usize; 16];
    for i in 0..8 {
        let lt = m[2 * i + 1] < m[2 * i];
        v[i] = if lt { m[2 * i + 1] } else { m[2 * i] };
        ix[i] = if lt { 2 * i + 1 } else { 2 * i };
    }
    let mut n = 8;
    while n > 1 {
        n /= 2;
        for i in 0..n {
            let lt = v[2 * i + 1] < v[2 * i];
            let (a, b) = (v[2 * i], v[2 * i + 1]);
            let (ia, ib) = (ix[2 * i], ix[2 * i + 1]);
            v[i] = if lt { b } else { a };
            ix[i] = if lt { ib } else { ia };
        }
    }
    if m[16] < v[0] {
        16
    } else {
        ix[0]
    }
}

/// `1 / C_k = 1 / (16 + 15 k)`, rounded, for halves whose weights are all 1 (module docs, step
/// 3: the vertex is `B_k` times this instead of a division).
pub const RC: [f64; 17] = {
    let mut r = [0f64; 17];
    let mut k = 0;
    while k < 17 {
        r[k] = 1.0 / (16.0 + 15.0 * k as f64);
        k += 1;
    }
    r
};

/// `2^-45`: error bound of a computed `q_k(s)` relative to `D_k(s)` (module docs, step 3).
pub const EPS_Q: f64 = 1.0 / 35_184_372_088_832.0; // 2^-45
/// `2^-44`: error bound of a computed `m_k` relative to `A`.
pub const EPS_M: f64 = 1.0 / 17_592_186_044_416.0; // 2^-44
/// Slack between `E` and `S` of two bytes (`(1 + 2^-48) / (1 - 2^-48)`, rounded up).
pub const GROW46: f64 = 1.0 + 1.0 / 70_368_744_177_664.0; // 1 + 2^-46
/// The same slack for the final comparison.
pub const GROW47: f64 = 1.0 + 1.0 / 140_737_488_355_328.0; // 1 + 2^-47
/// A walk may stop only beyond `v (1 ∓ 2^-30)` (module docs, step 5).
pub const VLO: f64 = 1.0 - 1.0 / 1_073_741_824.0; // 1 - 2^-30
/// The upper side of [`VLO`]'s bracket: `1 + 2^-30`.
pub const VHI: f64 = 1.0 + 1.0 / 1_073_741_824.0;

/// `(q, D)`: the quadratic `A - 2sB + s^2 C` and its error scale `A + 2sB + s^2 C`.
#[inline(always)]
fn quad(a: f64, b: f64, c: f64, s: f64) -> (f64, f64) {
    let x = a + s * s * c;
    let y = 2.0 * s * b;
    (x - y, x + y)
}

/// The four bytes `w0..w0 + 4` around a vertex `v` (they lie in `0..NB` and hold
/// `floor_byte(v)` and, when it is not 126, the byte above it) and the quadratic `(aa, b, c)`'s
/// computed `(q, D)` at each of them.
struct Window {
    w0: usize,
    q: [f64; 4],
    d: [f64; 4],
}

#[inline(always)]
fn window(aa: f64, b: f64, c: f64, v: f64) -> Window {
    let w0 = floor_byte(v).clamp(1, NB - 3) - 1;
    let mut q = [0f64; 4];
    let mut d = [0f64; 4];
    for i in 0..4 {
        (q[i], d[i]) = quad(aa, b, c, SCALE[w0 + i]);
    }
    Window { w0, q, d }
}

/// Marks in `mask` the bytes whose computed `q - 2^-45 D` of the quadratic `(aa, b, c)`
/// (vertex `v`, its [`window`] `win`) is at most `tp` (module docs, step 5): the window's four
/// bytes are tested without branches; below and above the window the walk goes on, byte by
/// byte, only where it would not yet have stopped (the window's edge byte marked, or not safely
/// beyond the vertex). Every byte a walk from the vertex would mark is marked; a window byte
/// such a walk would not have reached is marked only if it passes the same test, which step 6
/// tolerates.
#[inline(always)]
fn mark_bytes(aa: f64, b: f64, c: f64, v: f64, win: &Window, tp: f64, mask: &mut u128) {
    let w0 = win.w0;
    let mut bits = 0u32;
    for i in 0..4 {
        bits |= u32::from(win.q[i] - EPS_Q * win.d[i] <= tp) << i;
    }
    *mask |= u128::from(bits) << w0;
    if w0 > 0 && (bits & 1 != 0 || SCALE[w0] >= v * VLO) {
        let mut bb = w0 as isize - 1;
        while bb >= 0 {
            let s = SCALE[bb as usize];
            let (qq, d) = quad(aa, b, c, s);
            if qq - EPS_Q * d <= tp {
                *mask |= 1u128 << bb;
            } else if s < v * VLO {
                break;
            }
            bb -= 1;
        }
    }
    if w0 + 4 < NB && (bits & 8 != 0 || SCALE[w0 + 3] <= v * VHI) {
        let mut bb = w0 + 4;
        while bb < NB {
            let s = SCALE[bb];
            let (qq, d) = quad(aa, b, c, s);
            if qq - EPS_Q * d <= tp {
                *mask |= 1u128 << bb;
            } else if s > v * VHI {
                break;
            }
            bb += 1;
        }
    }
}

/// The fast ROCmFP2 search: the same byte as the exhaustive search on every half (module docs).
pub(crate) fn search_fp2(h: &Half, table: &[f64; NB]) -> u8 {
    search_fp2_w::<false>(h, table)
}

/// [`search_fp2`] for a half whose weights are all 1 (no importance weights): the same
/// operations on the same values (every `w` is the constant 1, so products with it and sums of
/// it are the values the general path computes, bit for bit), which the compiler folds.
pub(crate) fn search_fp2_unweighted(h: &Half, table: &[f64; NB]) -> u8 {
    debug_assert!(h.w.iter().all(|&w| w == 1.0));
    search_fp2_w::<true>(h, table)
}

#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn search_fp2_w<const UNIT: bool>(h: &Half, table: &[f64; NB]) -> u8 {
    let mut key = [0u64; 16];
    let mut low = 0u64;
    for i in 0..16 {
        let bits = h.x[i].abs().to_bits();
        low |= bits & 15;
        key[i] = bits | i as u64;
    }
    if low != 0 {
        return super::fast_fp2::search_fp2_window(h, table);
    }
    sort16_desc(&mut key);
    // Prefix sums over the descending order, in blocks (any summation order of non-negative
    // terms keeps the bounds of step 3; one serial chain would be the latency).
    let mut wa = [0f64; 16];
    let mut ww = [0f64; 16];
    let mut wa2 = [0f64; 16];
    for j in 0..16 {
        let bits = key[j];
        let a = f64::from_bits(bits & !15);
        let w = if UNIT { 1.0 } else { h.w[(bits & 15) as usize] };
        wa[j] = w * a;
        ww[j] = w;
        wa2[j] = w * (a * a);
    }
    let aa = sum16(&wa2);
    if aa == 0.0 {
        return 0;
    }
    let (p, q) = (scan16(wa), scan16(ww));
    let (pt, wt) = (p[15], q[15]);
    let mut bk = [0f64; 17];
    let mut ck = [0f64; 17];
    let mut vk = [0f64; 17];
    let mut mk = [0f64; 17];
    // No loop-carried state: two quadratics per packed division.
    for k in 0..17 {
        let (pk, qk) = if k == 0 { (0.0, 0.0) } else { (p[k - 1], q[k - 1]) };
        let b = pt + 3.0 * pk;
        let c = wt + 15.0 * qk;
        let v = if UNIT { b * RC[k] } else { b / c };
        bk[k] = b;
        ck[k] = c;
        vk[k] = v;
        mk[k] = aa - b * v;
    }
    let k0 = argmin17(&mk);
    // Upper bound T_E from the best quadratic's two bytes around its vertex, both in its window.
    let f = floor_byte(vk[k0]);
    let win0 = window(aa, bk[k0], ck[k0], vk[k0]);
    let mut te = f64::INFINITY;
    for b in [f, (f + 1).min(NB - 1)] {
        let i = b - win0.w0; // 0..4 (see [`Window`])
        let u = win0.q[i & 3] + EPS_Q * win0.d[i & 3];
        te = if u < te { u } else { te };
    }
    let tp = te * GROW46;
    let mcut = tp + EPS_M * aa;
    // Survivors (in increasing k; `m_k` is finite: `A > 0` and `C_k > 0` here) and their
    // candidate bytes.
    let mut live_k = 0u32;
    for k in 0..17 {
        live_k |= u32::from(mk[k] <= mcut) << k;
    }
    let mut surv = [0usize; 17];
    let mut ns = 0;
    let mut mask = 0u128;
    while live_k != 0 {
        let k = live_k.trailing_zeros() as usize;
        live_k &= live_k - 1;
        surv[ns] = k;
        ns += 1;
        if k == k0 {
            mark_bytes(aa, bk[k], ck[k], vk[k], &win0, tp, &mut mask);
        } else {
            let win = window(aa, bk[k], ck[k], vk[k]);
            mark_bytes(aa, bk[k], ck[k], vk[k], &win, tp, &mut mask);
        }
    }
    if mask.count_ones() == 1 {
        return mask.trailing_zeros() as u8;
    }
    decide(h, table, aa, &bk, &ck, &surv[..ns], mask)
}

/// Step 6 with several candidate bytes (`mask`): `lb`/`ub` of each from the surviving
/// quadratics `surv`, then, if they do not single out one byte, the exhaustive search's own
/// objective. The bounds are recomputed in each pass (the same operations, so the same values)
/// rather than stored per byte.
#[inline(never)]
fn decide(
    h: &Half,
    table: &[f64; NB],
    aa: f64,
    bk: &[f64; 17],
    ck: &[f64; 17],
    surv: &[usize],
    mask: u128,
) -> u8 {
    let bounds = |b: usize| -> (f64, f64) {
        let s = SCALE[b];
        let (mut lb, mut ub) = (f64::INFINITY, f64::INFINITY);
        for &k in surv {
            let (qq, d) = quad(aa, bk[k], ck[k], s);
            let (l, u) = (qq - EPS_Q * d, qq + EPS_Q * d);
            lb = if l < lb { l } else { lb };
            ub = if u < ub { u } else { ub };
        }
        (lb, ub)
    };
    let mut best_ub = f64::INFINITY;
    let mut best_b = 0usize;
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        let ub = bounds(b).1;
        if ub < best_ub {
            best_ub = ub;
            best_b = b;
        }
    }
    let cut = best_ub * GROW47;
    let mut live = 0;
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        live += usize::from(bounds(b).0 <= cut);
    }
    if live == 1 {
        return best_b as u8;
    }
    let (mut bs, mut bb) = (f64::INFINITY, 0);
    let mut m = mask;
    while m != 0 {
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        if bounds(b).0 <= cut {
            let v = objective(Codebook::Fp2, h, table[b]);
            if v < bs {
                bs = v;
                bb = b;
            }
        }
    }
    bb as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rocmfpx::scale_search::{scale_table_f64, search_exhaustive};

    #[test]
    fn scan16_is_the_prefix_sum() {
        // integers: every summation order is exact, so the result must equal the serial sum
        let x: [f64; 16] = core::array::from_fn(|i| ((i * 7 + 3) % 11) as f64);
        let y = scan16(x);
        let mut acc = 0.0;
        for j in 0..16 {
            acc += x[j];
            assert_eq!(y[j], acc, "entry {j}");
        }
    }

    #[test]
    fn argmin17_finds_a_minimum() {
        for at in 0..17 {
            let mut m: [f64; 17] = core::array::from_fn(|i| 10.0 + ((i * 5) % 17) as f64);
            m[at] = 1.0;
            assert_eq!(argmin17(&m), at);
        }
        let m = [3.0; 17];
        assert_eq!(m[argmin17(&m)], 3.0);
    }

    #[test]
    fn matches_exhaustive_on_gaussian_like_halves() {
        // sums of uniforms (bench-like bell-shaped halves), some with repeated magnitudes
        let table = scale_table_f64();
        let mut st = 0x5eed_u64;
        let mut uni = || {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((st >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
        };
        for iter in 0..4000 {
            let sigma = [0.02, 0.3, 1.0, 7.0][iter % 4];
            let mut h = Half { x: [0.0; 16], w: [1.0; 16] };
            for i in 0..16 {
                let g = uni() + uni() + uni() + uni();
                h.x[i] = f64::from((g * sigma) as f32);
                if iter % 5 == 0 {
                    h.w[i] = uni() + 0.5;
                }
                if iter % 9 == 0 && i >= 8 {
                    h.x[i] = -h.x[i - 8];
                }
            }
            assert_eq!(
                search_fp2(&h, &table),
                search_exhaustive(Codebook::Fp2, &h, &table),
                "{h:?}"
            );
        }
    }

    /// Edge and random halves (f32 values widened): zeros, equal magnitudes, f32 subnormals,
    /// huge values, values on the code threshold and on the levels of some scale, mixtures.
    fn edge_halves() -> impl Iterator<Item = [f64; 16]> {
        let table = scale_table_f64();
        let mut st = 0x0dd_ba11_u64;
        let mut uni = move || {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((st >> 11) as f64) / ((1u64 << 53) as f64)
        };
        (0..6000).map(move |iter| {
            let kind = iter % 12;
            let mag = [1e-3, 0.02, 1.0, 300.0][(iter / 12) % 4];
            core::array::from_fn(|i| {
                let r = uni();
                let sign = if uni() < 0.5 { -1.0 } else { 1.0 };
                let b = ((uni() * 127.0) as usize).min(126);
                let v = match kind {
                    0 => 0.0,
                    1 => mag,                                                   // all equal
                    2 => (r - 0.5) * mag,                                       // uniform
                    3 => f64::from(f32::from_bits((r * 8388607.0) as u32 + 1)), // subnormals
                    4 => [1e30, 3.0e38, 1e20, 0.0][i % 4] * r,                  // huge
                    5 => [2.5, 1.0, 4.0, 1.75][i % 4] * table[b], // thresholds and levels
                    6 => {
                        if i < 3 {
                            mag * r
                        } else {
                            0.0
                        }
                    } // mostly zeros
                    7 => {
                        if i % 2 == 0 {
                            mag
                        } else {
                            4.0 * mag
                        }
                    } // two exact levels
                    8 => mag * (i / 4) as f64,                    // four groups of equals
                    9 => (r - 0.5) * mag * libm::pow(2.0, (uni() * 40.0) - 20.0), // wide range
                    10 => f64::from(f32::MIN_POSITIVE) * (1.0 + r), // smallest normals
                    _ => {
                        if i == 5 {
                            896.0 * (1.0 + r)
                        } else {
                            (r - 0.5) * 0.01
                        }
                    } // one outlier
                };
                sign * f64::from(v as f32)
            })
        })
    }

    #[test]
    fn unit_weight_search_matches_exhaustive_on_edge_halves() {
        let table = scale_table_f64();
        for x in edge_halves() {
            let h = Half { x, w: [1.0; 16] };
            let want = search_exhaustive(Codebook::Fp2, &h, &table);
            assert_eq!(search_fp2_unweighted(&h, &table), want, "{h:?}");
            assert_eq!(search_fp2(&h, &table), want, "{h:?}");
        }
    }

    #[test]
    fn weighted_search_matches_exhaustive_on_edge_halves() {
        // weights in [0, 3), exact zeros (some halves all zero), tiny and huge weights
        let table = scale_table_f64();
        let mut st = 0xfeed_u64;
        let mut uni = move || {
            st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((st >> 11) as f64) / ((1u64 << 53) as f64)
        };
        for (n, x) in edge_halves().enumerate() {
            let w = core::array::from_fn(|i| match (n + i) % 7 {
                0 => 0.0,
                1 => 1e-30 * uni(),
                2 => 1e30 * uni(),
                _ => 3.0 * uni(),
            });
            let h = Half { x, w: if n % 13 == 0 { [0.0; 16] } else { w } };
            assert_eq!(
                search_fp2(&h, &table),
                search_exhaustive(Codebook::Fp2, &h, &table),
                "{h:?}"
            );
        }
    }
}

//! The per-half scale search of ROCmFP2 and ROCmFP3: the exhaustive reference
//! ([`search_exhaustive`], `Rule::Exhaustive`) and lowbit's pruned search ([`search_fast`],
//! `Rule::Reference` for ROCmFP3; ROCmFP2 uses the faster `fast_fp2.rs`) that provably returns
//! the same byte. Only the choice of the scale byte lives here; codes and packing are in
//! `fp2.rs` / `fp3.rs`.
//!
//! # The rule (the objective both searches minimise)
//!
//! Source: github ciru-ai/ROCmFPX `ggml/rocmfpx/rocmfp2_reference.c`
//! (`rocmfp2_p1_quantize_block_impl`): every legal UE4M3-b8 byte 0x00..=0x7E is tried for each
//! 16-weight half, the error is summed in IEEE binary64, and exact ties keep the lower byte. For
//! scale `s` (the byte's exact value as f64) and the half's inputs `x_i` (f32 widened to f64):
//!
//! ```text
//! S(s) = (((0 + w_0 * t_0) + w_1 * t_1) + ...) + w_15 * t_15        (f64, left to right)
//! t_i  = d_i * d_i,  d_i = |x_i| - c_i * s                            (f64)
//! ```
//!
//! where `c_i` is the stored code's magnitude. ROCmFP2: `s = 0` gives `t_i = x_i^2`; otherwise
//! `t_i = min((|x|-4s)^2, (|x|-s)^2)` rounded as written (the reference's selector keeps the
//! smaller rounded square, ties inner, and then recomputes the same rounded square). ROCmFP3 (no
//! f64 reference upstream; lowbit applies the same definition): `c_i` from the exact thresholds
//! 0.5 s, 1.5 s, 3 s (ties to the smaller level), `s = 0` gives code 0.
//!
//! Without importance `w_i = 1` (multiplying by 1 is exact, so this is the reference's plain
//! SSE). With importance weights `qw` (ROCmFPX's imatrix objective, `rocmfpx_prepare_mse_weights`):
//! `w_i = qw_i * sqrt(sigma2 + x_i^2)` in f64 with `sigma2 = (sum over the whole row of x^2,
//! left to right in f64) / k`. ROCmFPX's production encoder evaluates the same objective in f32
//! and skips byte 0; lowbit's rule is the f64 one above (see docs/FORMAT-NOTES.md).
//!
//! # Why the fast search returns the same byte
//!
//! Let `E(s) = sum w_i * min_c (m_i - c s)^2` in exact arithmetic (`m_i = |x_i|`, `c` over the
//! codebook's magnitudes: {1, 4} or {0, 1, 2, 4}). The code rules above pick an exact minimiser
//! (ROCmFP2: the smaller rounded square is the rounding of the smaller exact square, rounding
//! being monotone), and no intermediate underflows or overflows (f32 inputs: nonzero
//! `d_i^2 >= 2^-298`, every term below 2^520). So each rounded term is within `(1 ± u)^4` of its
//! exact value (`u = 2^-53`) and the 15 additions of non-negative terms add `(1 ± u)^15`:
//! `S(s) >= E(s) (1 - 20u)`.
//!
//! 1. Elements with `w_i = 0` add exactly `+0.0` to every `S`; if no element is left, or all
//!    left are 0, every `S` is 0 (ROCmFP3) or `S(0) = 0 < S(s > 0)` (ROCmFP2): byte 0, as the
//!    exhaustive search returns.
//! 2. A window of 8 bytes around a heuristic centre (one least-squares refinement of `M/4`,
//!    `M` the largest active magnitude) is evaluated exactly, with the very operations of the
//!    exhaustive search (`S` bit for bit), four scales per pass. `best` = the smallest `S` seen
//!    (ties to the lower byte).
//! 3. The bytes outside the window are then, side by side, either discarded or evaluated: a
//!    range of scales `[sa, sb]` is discarded when the *interval bound*
//!    `(1 - 2^-44) * sum w_i dist(m_i, R)^2 > best`, where `R = {c s : s in [sa, sb]}` over the
//!    levels `c` (for ROCmFP3 including 0). Every reconstruction magnitude any scale of the range
//!    can produce lies in `R`, so `sum w dist^2 <= E(s)` for each such `s`; the computed sum (a
//!    max/min of rounded differences, squared, weighted, summed: within `(1 + u)^19`) times
//!    `1 - 2^-44` is below `E(s)(1 - 20u) <= S(s)`. Hence a discarded byte has `S > best >=`
//!    the final minimum and cannot be the answer, not even by a tie. The tries, per side: the
//!    whole remaining tail (`[0, s]` below, `[s, inf)` above), else the next 8 bytes, else the
//!    next 4 bytes are evaluated exactly.
//! 4. ROCmFP3 only: from `s >= 2M` up, every code is 0 and each term is `x_i^2`, the very term
//!    byte 0 computes, so those bytes tie with byte 0 bit for bit and lose the tie (or exceed
//!    `best` together with byte 0, which the low side has evaluated or discarded).
//! 5. The answer is the lowest byte with the smallest exact `S` among the evaluated bytes: the
//!    exhaustive winner is never discarded (3, 4), so it is evaluated, and it is that byte.
//!
//! Cost on Gaussian-like halves: about 11 exact scale evaluations (in passes of four) and 4 to
//! 5 interval bounds, against 127 exact evaluations. Adversarial inputs (values beyond ~2^60,
//! where every `S` rounds to the same number) defeat the bounds and fall back to evaluating
//! every byte: slower, never wrong. lowbit's measured speed ratio is in docs/FORMAT-NOTES.md.

use super::fp2::fp2_code;

/// Number of legal scale bytes (0x00..=0x7E).
pub(crate) const NSCALES: usize = 127;

/// Margin `2^-44` used by every bound (see the module docs).
const MARGIN: f64 = 1.0 / 17_592_186_044_416.0;

/// Which codebook a half is coded with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codebook {
    /// ROCmFP2: magnitudes {1, 4}, no zero.
    Fp2,
    /// ROCmFP3: magnitudes {0, 1, 2, 4}.
    Fp3,
}

/// One 16-value half: the inputs (f32 widened) and their objective weights (1 when unweighted,
/// `>= 0` and finite otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Half {
    pub x: [f64; 16],
    pub w: [f64; 16],
}

/// Every legal scale as f64, indexed by byte (exact: UE4M3-b8 values are exact in f32).
pub(crate) fn scale_table_f64() -> [f64; NSCALES] {
    let t = crate::scalar::ue4m3_b8_table();
    let mut out = [0f64; NSCALES];
    for (o, &v) in out.iter_mut().zip(t.iter()) {
        *o = f64::from(v);
    }
    out
}

/// The rounded error term `d * d` of one input under scale `s` (module docs). No branch on
/// `s = 0` is needed: there ROCmFP2's two candidates are both `|x|`, and ROCmFP3's level is 4
/// (or 0 for `x = 0`) times 0, so the term is `x^2` as the reference computes it.
#[inline(always)]
fn term<const FP3: bool>(x: f64, s: f64) -> f64 {
    let m = x.abs();
    if FP3 {
        // level 0, 1, 2 or 4 from the thresholds of `fp3_index`, without branches
        let c = f64::from(u8::from(m > 0.5 * s))
            + f64::from(u8::from(m > 1.5 * s))
            + 2.0 * f64::from(u8::from(m > 3.0 * s));
        let d = m - c * s;
        d * d
    } else {
        let id = m - s;
        let od = m - 4.0 * s;
        // min of the two rounded squares (equal squares: the same value either way)
        (od * od).min(id * id)
    }
}

/// `S(s)`: the reference's f64 objective of one half under scale `s`, summed left to right.
#[inline]
pub(crate) fn objective(cb: Codebook, h: &Half, s: f64) -> f64 {
    fn go<const FP3: bool>(h: &Half, s: f64) -> f64 {
        let mut acc = 0.0f64;
        for (&x, &w) in h.x.iter().zip(h.w.iter()) {
            acc += w * term::<FP3>(x, s);
        }
        acc
    }
    match cb {
        Codebook::Fp2 => go::<false>(h, s),
        Codebook::Fp3 => go::<true>(h, s),
    }
}

/// The exhaustive reference: every byte 0x00..=0x7E, the smallest `S`, ties to the lower byte.
pub(crate) fn search_exhaustive(cb: Codebook, h: &Half, table: &[f64; NSCALES]) -> u8 {
    let mut best = f64::INFINITY;
    let mut best_b = 0u8;
    for (b, &s) in table.iter().enumerate() {
        let e = objective(cb, h, s);
        if e < best {
            best = e;
            best_b = b as u8;
        }
    }
    best_b
}

/// The exact objective at four scales in one pass (the same operations, in the same order, per
/// lane as [`objective`], so each lane is bit-identical to it; four independent chains).
#[inline]
fn objective4(cb: Codebook, h: &Half, s: [f64; 4]) -> [f64; 4] {
    fn go<const FP3: bool>(h: &Half, s: [f64; 4]) -> [f64; 4] {
        let mut acc = [0f64; 4];
        for (&x, &w) in h.x.iter().zip(h.w.iter()) {
            for (a, &sc) in acc.iter_mut().zip(s.iter()) {
                *a += w * term::<FP3>(x, sc);
            }
        }
        acc
    }
    match cb {
        Codebook::Fp2 => go::<false>(h, s),
        Codebook::Fp3 => go::<true>(h, s),
    }
}

/// A lower bound on `S(s')` for every scale `s'` in `[sa, sb]` (`0 <= sa <= sb`, `sb` may be
/// infinite): each element's distance to the reconstruction magnitudes reachable from that
/// interval (`{0}` for ROCmFP3, and `[c sa, c sb]` for each level `c`), squared and weighted,
/// summed, and scaled by `1 - 2^-44` (module docs, step 3).
fn interval_bound(cb: Codebook, h: &Half, sa: f64, sb: f64) -> f64 {
    let mut acc = 0f64;
    for (&x, &w) in h.x.iter().zip(h.w.iter()) {
        let m = x.abs();
        let dist = |c: f64| (c * sa - m).max(m - c * sb).max(0.0);
        let d = match cb {
            Codebook::Fp2 => dist(1.0).min(dist(4.0)),
            Codebook::Fp3 => m.min(dist(1.0)).min(dist(2.0)).min(dist(4.0)),
        };
        acc += w * (d * d);
    }
    acc * (1.0 - MARGIN)
}

/// A start byte near `t > 0` (any byte is correct; near the optimum is faster): the UE4M3-b8
/// byte of `t` with its mantissa truncated, read from the f64 bits.
#[inline]
fn start_byte(t: f64) -> usize {
    let bits = t.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023; // t = 1.f * 2^e
    let byte = (e + 8) * 8 + ((bits >> 49) & 7) as i64;
    byte.clamp(0, NSCALES as i64 - 1) as usize
}

/// Chunk of bytes a single interval bound tries to discard.
const CHUNK: usize = 8;

/// The pruned search: the same byte as [`search_exhaustive`] on every input (module docs).
pub(crate) fn search_fast(cb: Codebook, h: &Half, table: &[f64; NSCALES]) -> u8 {
    // Largest active magnitude (elements with w = 0 add exactly +0.0 to every S).
    let mut big_m = 0f64;
    let mut any = false;
    for (&x, &w) in h.x.iter().zip(h.w.iter()) {
        if w > 0.0 {
            any = true;
            big_m = big_m.max(x.abs());
        }
    }
    if !any || big_m == 0.0 {
        return 0;
    }
    // One least-squares refinement of s = M/4 with the codes of s (a heuristic centre only).
    let s0 = 0.25 * big_m;
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &w) in h.x.iter().zip(h.w.iter()) {
        let m = x.abs();
        let c = match cb {
            Codebook::Fp2 => {
                if m > 2.5 * s0 {
                    4.0
                } else {
                    1.0
                }
            }
            Codebook::Fp3 => {
                f64::from(u8::from(m > 0.5 * s0))
                    + f64::from(u8::from(m > 1.5 * s0))
                    + 2.0 * f64::from(u8::from(m > 3.0 * s0))
            }
        };
        num += w * c * m;
        den += w * c * c;
    }
    let centre = start_byte(if den > 0.0 { num / den } else { s0 });

    // Exact evaluation of a window of 8 bytes.
    let mut lo_b = centre.saturating_sub(3).min(NSCALES - 8);
    let mut hi_b = lo_b + 7;
    let mut best = f64::INFINITY;
    let mut best_b = lo_b;
    let eval4 = |first: usize, best: &mut f64, best_b: &mut usize| {
        let bytes: [usize; 4] = core::array::from_fn(|i| (first + i).min(NSCALES - 1));
        let e = objective4(cb, h, bytes.map(|b| table[b]));
        for (&b, &v) in bytes.iter().zip(e.iter()) {
            if v < *best || (v == *best && b < *best_b) {
                *best = v;
                *best_b = b;
            }
        }
    };
    eval4(lo_b, &mut best, &mut best_b);
    eval4(lo_b + 4, &mut best, &mut best_b);

    // Discard or evaluate the bytes below lo_b and above hi_b until none is left. A byte is
    // discarded only when a lower bound on its S exceeds the best S found (module docs).
    let mut low_done = lo_b == 0;
    let mut high_done = hi_b == NSCALES - 1;
    while !low_done || !high_done {
        if !low_done {
            if interval_bound(cb, h, 0.0, table[lo_b - 1]) > best {
                low_done = true;
            } else {
                let a = lo_b.saturating_sub(CHUNK);
                if a > 0 && interval_bound(cb, h, table[a], table[lo_b - 1]) > best {
                    lo_b = a;
                } else {
                    let a = lo_b.saturating_sub(4);
                    eval4(a, &mut best, &mut best_b);
                    lo_b = a;
                    low_done = lo_b == 0;
                }
            }
        }
        if !high_done {
            let s = table[hi_b + 1];
            // ROCmFP3: from s >= 2M on, every code is 0 and S equals S(byte 0) bit for bit, so
            // those bytes lose the tie to byte 0 (or exceed best along with it).
            if (cb == Codebook::Fp3 && s >= 2.0 * big_m)
                || interval_bound(cb, h, s, f64::INFINITY) > best
            {
                high_done = true;
            } else {
                let b = (hi_b + CHUNK).min(NSCALES - 1);
                if b < NSCALES - 1 && interval_bound(cb, h, s, table[b]) > best {
                    hi_b = b;
                } else {
                    eval4(hi_b + 1, &mut best, &mut best_b);
                    hi_b = (hi_b + 4).min(NSCALES - 1);
                    high_done = hi_b == NSCALES - 1;
                }
            }
        }
    }
    best_b as u8
}

/// The codes of one half under the chosen scale.
pub(crate) fn half_codes(cb: Codebook, h: &Half, s: f64) -> [u8; 16] {
    let mut c = [0u8; 16];
    for (o, &x) in c.iter_mut().zip(h.x.iter()) {
        *o = match cb {
            Codebook::Fp2 => fp2_code(x, s),
            Codebook::Fp3 => super::fp3::fp3_code(x, s),
        };
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(state: &mut u64) -> f64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*state >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
    }

    #[test]
    fn fast_matches_exhaustive_on_random_halves() {
        let table = scale_table_f64();
        let mut st = 7u64;
        for iter in 0..3000 {
            let scale = [1e-4, 1e-2, 0.3, 1.0, 50.0, 900.0, 1e6][iter % 7];
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
            }
            for cb in [Codebook::Fp2, Codebook::Fp3] {
                assert_eq!(
                    search_fast(cb, &h, &table),
                    search_exhaustive(cb, &h, &table),
                    "{cb:?} {h:?}"
                );
            }
        }
    }

    #[test]
    fn zero_and_representable_halves() {
        let table = scale_table_f64();
        let z = Half { x: [0.0; 16], w: [1.0; 16] };
        for cb in [Codebook::Fp2, Codebook::Fp3] {
            assert_eq!(search_exhaustive(cb, &z, &table), 0);
            assert_eq!(search_fast(cb, &z, &table), 0);
        }
        // All values 2.0: exact at s = 0.5 (outer) and s = 2 (inner); the lower byte wins.
        let h = Half { x: [2.0; 16], w: [1.0; 16] };
        let b = search_exhaustive(Codebook::Fp2, &h, &table);
        assert_eq!(table[b as usize], 0.5);
        assert_eq!(search_fast(Codebook::Fp2, &h, &table), b);
    }
}

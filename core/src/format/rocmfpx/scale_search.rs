//! The per-half scale search of ROCmFP2 and ROCmFP3: the exhaustive reference
//! ([`search_exhaustive`], `Rule::Exhaustive`) and lowbit's pruned search ([`search_fast`],
//! `Rule::Reference`) that provably returns the same byte. Only the choice of the scale byte
//! lives here; codes and packing are in `fp2.rs` / `fp3.rs`.
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
//! codebook's magnitudes). The code rules above pick an exact minimiser (ROCmFP2: the smaller
//! rounded square is the rounding of the smaller exact square, rounding being monotone), and no
//! intermediate can underflow or overflow (f32 inputs: nonzero `d_i^2 >= 2^-298`, every term
//! below 2^520). Hence each rounded term lies within a factor `(1 ± u)^4` of its exact value
//! (`u = 2^-53`) and the 15 additions of non-negative terms add `(1 ± u)^15`:
//! `S(s) ∈ E(s) · [1 - 20u, 1 + 20u]`.
//!
//! The fast search works on the elements with `w_i > 0` (the others add exactly `+0.0` to `S`):
//!
//! 1. If none is left, or all of them are 0, every `S` is 0 (ROCmFP3) or `S(0) = 0 < S(s > 0)`
//!    (ROCmFP2): byte 0, as the exhaustive search.
//! 2. `best = S(b0)` for the byte `b0` nearest `M/4` (`M` the largest active magnitude), an upper
//!    bound on the minimum.
//! 3. Bytes below `b0` are walked down while `w_M (M - 4s)^2` (the error of the largest element
//!    alone, which no level can reach when `4s < M`; `w_M` its largest weight), scaled down by
//!    `1 - 2^-44`, is not above `best`. The bound grows as `s` falls (to `w_M M^2 <= E(0)` at
//!    byte 0), so every byte below the stop has `S > best` and cannot win.
//! 4. Bytes above `b0` are walked up until, for ROCmFP2, `s >= M` and `W (s - M)^2 (1 - 2^-44)`
//!    exceeds `best` (`W = sum w_i`: for `s >= M` every element is inner with error at least
//!    `(s - M)^2`, and the bound grows with `s`); for ROCmFP3, until `s >= 2M`: there every code
//!    is 0, each `t_i = x_i^2` is the very term byte 0 computes, so those bytes tie with byte 0
//!    and lose the tie.
//! 5. For each remaining byte, `E(s)` is evaluated in O(1) from the magnitudes sorted once with
//!    prefix sums of `w` and `w m`: the codes are monotone in `m / s`, so each level takes a
//!    contiguous run of the sorted magnitudes and `E(s) = A - 2s sum_l l B_l + s^2 sum_l l^2 W_l`
//!    (`A = sum w m^2`). The f64 value `Ê` of this expression has an absolute error below
//!    `100u (A + 8 s B + 16 s^2 W)` (16-term sums, one subtraction per run, a few products; `B`
//!    and `W` the totals); lowbit uses `2^-44 = 512u` times that envelope. With the relative
//!    factor `1 ± 2^-44` for `S` versus `E`, `lo = (Ê - err)(1 - 2^-44) <= S(s) <=
//!    (Ê + err)(1 + 2^-44) = hi`.
//! 6. Every byte with `lo <= min(hi over all bytes, best)` is then evaluated exactly (the f64
//!    sum `S` itself), in ascending order, keeping the first minimum. The winner `b*` of the
//!    exhaustive search has `lo(b*) <= S(b*) <= S(b) <= hi(b)` for every `b`, and
//!    `S(b*) <= best`, so it is always evaluated exactly, and being the lowest byte with the
//!    smallest `S`, it is the one kept.
//!
//! Typical inputs leave 20-30 O(1) estimates and one to three exact sums, against 127 exact sums
//! for the exhaustive search. Adversarial inputs (all values beyond ~2^60, where every `S`
//! rounds to the same number) fall back to evaluating every byte exactly: slower, never wrong.

use super::fp2::fp2_code;
use super::fp3::fp3_index;

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

/// The rounded error term `d * d` of one input under scale `s` (module docs).
#[inline]
fn term(cb: Codebook, x: f64, s: f64) -> f64 {
    if s == 0.0 {
        return x * x;
    }
    let m = x.abs();
    match cb {
        Codebook::Fp2 => {
            let id = m - s;
            let od = m - 4.0 * s;
            let (i2, o2) = (id * id, od * od);
            if o2 < i2 {
                o2
            } else {
                i2
            }
        }
        Codebook::Fp3 => {
            let c = [0.0, 1.0, 2.0, 4.0][fp3_index(m, s) as usize];
            let d = m - c * s;
            d * d
        }
    }
}

/// `S(s)`: the reference's f64 objective of one half under scale `s`, summed left to right.
#[inline]
pub(crate) fn objective(cb: Codebook, h: &Half, s: f64) -> f64 {
    let mut acc = 0.0f64;
    for (&x, &w) in h.x.iter().zip(h.w.iter()) {
        acc += w * term(cb, x, s);
    }
    acc
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

/// Index of the table entry nearest `t` (ties to the lower byte); `t >= 0`.
fn nearest_byte(table: &[f64; NSCALES], t: f64) -> usize {
    let hi = table.partition_point(|&s| s < t);
    if hi == 0 {
        return 0;
    }
    if hi >= NSCALES {
        return NSCALES - 1;
    }
    if t - table[hi - 1] <= table[hi] - t {
        hi - 1
    } else {
        hi
    }
}

/// The pruned search: the same byte as [`search_exhaustive`] on every input (module docs).
pub(crate) fn search_fast(cb: Codebook, h: &Half, table: &[f64; NSCALES]) -> u8 {
    // Active elements (w > 0), their largest magnitude and its largest weight.
    let mut ms = [0f64; 16];
    let mut ws = [0f64; 16];
    let mut n = 0usize;
    let mut big_m = 0f64;
    let mut w_m = 0f64;
    for (&x, &w) in h.x.iter().zip(h.w.iter()) {
        if w > 0.0 {
            let m = x.abs();
            ms[n] = m;
            ws[n] = w;
            n += 1;
            if m > big_m {
                big_m = m;
                w_m = w;
            } else if m == big_m && w > w_m {
                w_m = w;
            }
        }
    }
    if n == 0 || big_m == 0.0 {
        return 0;
    }

    // Sort the active magnitudes (with their weights) ascending; prefix sums of w and w*m.
    for i in 1..n {
        let (m, w) = (ms[i], ws[i]);
        let mut j = i;
        while j > 0 && ms[j - 1] > m {
            ms[j] = ms[j - 1];
            ws[j] = ws[j - 1];
            j -= 1;
        }
        ms[j] = m;
        ws[j] = w;
    }
    let mut pw = [0f64; 17];
    let mut pb = [0f64; 17];
    let mut a = 0f64;
    for i in 0..n {
        pw[i + 1] = pw[i] + ws[i];
        pb[i + 1] = pb[i] + ws[i] * ms[i];
        a += ws[i] * (ms[i] * ms[i]);
    }
    let (w_tot, b_tot) = (pw[n], pb[n]);

    // Start near M/4 with one exact evaluation.
    let b0 = nearest_byte(table, big_m * 0.25);
    let best0 = objective(cb, h, table[b0]);

    // Lower tail: the largest element's clipping error, monotone in s.
    let mut bl = b0;
    while bl > 0 {
        let s = table[bl - 1];
        let c = big_m - 4.0 * s;
        if c > 0.0 && w_m * c * c * (1.0 - MARGIN) > best0 {
            break;
        }
        bl -= 1;
    }
    // Upper tail.
    let mut bh = b0;
    while bh + 1 < NSCALES {
        let s = table[bh + 1];
        match cb {
            Codebook::Fp2 => {
                if s >= big_m {
                    let c = s - big_m;
                    if w_tot * c * c * (1.0 - MARGIN) > best0 {
                        break;
                    }
                }
            }
            Codebook::Fp3 => {
                if s >= 2.0 * big_m {
                    break;
                }
            }
        }
        bh += 1;
    }

    // O(1) interval estimates for every byte in [bl, bh].
    let mut lo = [0f64; NSCALES];
    let mut min_hi = best0;
    let (mut k0, mut k1, mut k2) = (0usize, 0usize, 0usize);
    for b in bl..=bh {
        let s = table[b];
        let (lin, quad) = match cb {
            Codebook::Fp2 => {
                // [0, k0) inner (m <= 2.5 s), [k0, n) outer.
                let t = 2.5 * s;
                while k0 < n && ms[k0] <= t {
                    k0 += 1;
                }
                let lin = pb[k0] + 4.0 * (b_tot - pb[k0]);
                let quad = pw[k0] + 16.0 * (w_tot - pw[k0]);
                (lin, quad)
            }
            Codebook::Fp3 => {
                // [0, k0) zero, [k0, k1) one, [k1, k2) two, [k2, n) four.
                let (t0, t1, t2) = (0.5 * s, 1.5 * s, 3.0 * s);
                while k0 < n && ms[k0] <= t0 {
                    k0 += 1;
                }
                k1 = k1.max(k0);
                while k1 < n && ms[k1] <= t1 {
                    k1 += 1;
                }
                k2 = k2.max(k1);
                while k2 < n && ms[k2] <= t2 {
                    k2 += 1;
                }
                let lin = (pb[k1] - pb[k0]) + 2.0 * (pb[k2] - pb[k1]) + 4.0 * (b_tot - pb[k2]);
                let quad = (pw[k1] - pw[k0]) + 4.0 * (pw[k2] - pw[k1]) + 16.0 * (w_tot - pw[k2]);
                (lin, quad)
            }
        };
        let est = a - 2.0 * s * lin + s * s * quad;
        let err = MARGIN * (a + 8.0 * s * b_tot + 16.0 * s * s * w_tot);
        lo[b] = (est - err) * (1.0 - MARGIN);
        let hi = (est + err) * (1.0 + MARGIN);
        if hi < min_hi {
            min_hi = hi;
        }
    }

    // Exact evaluation of every byte that could still be the minimum, ascending.
    let mut best = f64::INFINITY;
    let mut best_b = b0;
    for b in bl..=bh {
        let e = if b == b0 {
            best0
        } else if lo[b] <= min_hi {
            objective(cb, h, table[b])
        } else {
            continue;
        };
        if e < best {
            best = e;
            best_b = b;
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

//! The per-half objective of ROCmFP2 and ROCmFP3 and the exhaustive reference search
//! ([`search_exhaustive`], `Rule::Exhaustive`). The fast searches of `Rule::Reference`, which
//! provably return the same byte, are in `quad_fp2.rs` and `fast_fp3.rs`. Only the choice of
//! the scale byte lives here; codes and packing are in `fp2.rs` / `fp3.rs`.
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

use super::fp2::fp2_code;

/// Number of legal scale bytes (0x00..=0x7E).
pub(crate) const NSCALES: usize = 127;

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
#[cfg(test)]
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

/// The search tests' random numbers: a 64-bit LCG (Knuth's MMIX constants), uniform in
/// `[-0.5, 0.5)`.
#[cfg(test)]
pub(super) fn lcg(state: &mut u64) -> f64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*state >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rocmfpx::{fast_fp3::search_fp3, quad_fp2::search_fp2};

    fn search_fast(cb: Codebook, h: &Half, table: &[f64; NSCALES]) -> u8 {
        match cb {
            Codebook::Fp2 => search_fp2(h, table),
            Codebook::Fp3 => search_fp3(h, table),
        }
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

//! lowbit's lower-error encoder for HFP4G32 and MFP4G32 (`Rule::Improved`, optional importance
//! weights): valid rows of the same format, chosen by a (weighted) squared-error search
//! instead of hipfire's fixed formulas.
//!
//! The search, per row (MFP4G32: on the FWHT-256-rotated row):
//!
//! 1. Row-scale candidates, all f16 values rounded to nearest (not truncated): with
//!    `base = rowmax / 6` written as `m * 2^p` (`m` in [1, 2), `p` clamped to [-120, 120] so the
//!    block exponents keep room both ways), the eight values `f16(m * 2^(-t/8))`, t = 0..7
//!    (the UE8M0 block exponents absorb the power of two, so one octave of mantissas covers
//!    every grid), plus hipfire's own truncated `f16(base)` when it is finite and non-zero.
//!    A candidate `r` decodes blocks as `r * 2^(e - 127) * E2M1`.
//! 2. For each candidate and block: the exponents `e0 - 2 ..= e0 + 1` (clamped to 0..=254, and
//!    only those whose block scale times 6 stays finite), where
//!    `e0 = clamp(ceil(log2(bmax / (6 r))) + 127)`; for each, codes are the nearest E2M1 of `x / scale` (`scale` the decoded f32
//!    block scale `r * 2^(e-127)`, ties toward the smaller magnitude, +0 for zero), and the
//!    block error is `sum w_i (x_i - scale * E2M1[c_i])^2` in f32; the smallest error wins
//!    (the lower exponent on a tie).
//! 3. The candidate with the smallest row error (sum of its blocks' best errors, f64) wins;
//!    the first on a tie. Its header (flags as the format's) and blocks are written.
//!
//! Importance weights: HFP4G32 uses `w_i` per element. For MFP4G32 the error of the original
//! row is `e^T R^T W R e` for the rotated-domain error `e`; its diagonal is the mean of `w`
//! over the 256-segment (every entry of R is ±1/16), so each rotated element is weighted by
//! its segment's mean weight.
//!
//! Because hipfire's own choice (truncated row scale, its exponent, which lies in the searched
//! window) is one of the candidates and codes are then nearest on the actual decoded grid, the
//! row error is never larger than `Rule::Reference`'s (up to f32 rounding of the error sums).
//! A zero row is written as the reference writes it. Rows whose largest magnitude is beyond
//! what f16 `* 2^127 * 6` holds do not occur in f32 (`base <= 2^126`), so the improved rule
//! encodes every finite row, including those the reference refuses (row scale >= 65536).

use crate::error::Result;
use crate::registry::FormatId;
use crate::scalar::{f16, f32_to_f16_truncate, E2M1_VALUES};

use super::block::{e2m1_round, ue8m0, QK};
use super::header::{RowHeader, HEADER_BYTES};
use super::reference::{self, block_count, for_each_block, row_max, write_block};

const N_CAND: usize = 9;

/// The block's best exponent and codes for the decoded row scale `r`, and its weighted error.
fn best_block(r: f32, x: &[f32; QK], w: &[f32; QK]) -> (u8, [u8; QK], f32) {
    let bmax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut best = (0u8, [0u8; QK], f32::INFINITY);
    if bmax == 0.0 {
        best.2 = 0.0;
        return best;
    }
    let e0 = reference::ue8m0_ceil(bmax / r) as i32;
    for e in (e0 - 2).max(0)..=(e0 + 1).min(254) {
        let sc = r * ue8m0(e as u8).unwrap_or(f32::NAN);
        if !(sc * 6.0).is_finite() || sc == 0.0 {
            continue;
        }
        let mut codes = [0u8; QK];
        let mut err = 0f32;
        for i in 0..QK {
            let c = e2m1_round(x[i] / sc);
            codes[i] = c;
            let d = x[i] - sc * E2M1_VALUES[c as usize];
            err += w[i] * d * d;
        }
        if err < best.2 {
            best = (e as u8, codes, err);
        }
    }
    if best.2 == f32::INFINITY {
        // No exponent gives a usable scale (cannot happen for r in f16's normal range):
        // an all-zero block with e = 0.
        let err = x.iter().zip(w).map(|(a, b)| b * a * a).sum();
        best = (0, [0u8; QK], err);
    }
    best
}

/// Fills the weights of block `b` (rotated formats: the segment mean).
fn block_weights(importance: Option<&[f32]>, rotated: bool, b: usize, out: &mut [f32; QK]) {
    let Some(imp) = importance else {
        *out = [1.0; QK];
        return;
    };
    if rotated {
        let seg = &imp[(b / 8) * 256..(b / 8) * 256 + 256];
        let mean = seg.iter().map(|v| *v as f64).sum::<f64>() / 256.0;
        *out = [mean as f32; QK];
    } else {
        out.copy_from_slice(&imp[b * QK..b * QK + QK]);
    }
}

/// floor(log2(x)) of a positive finite f32, read from the bits (subnormals included).
fn floor_log2(x: f32) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff;
    let exp = (bits >> 23) as i32;
    if exp == 0 {
        (31 - bits.leading_zeros() as i32) - 149
    } else {
        exp - 127
    }
}

fn candidates(base: f32) -> [Option<f16>; N_CAND] {
    let mut out = [None; N_CAND];
    let p = floor_log2(base).clamp(-120, 120);
    // 2^-p from its bits (exponent field 127 - p is in 7..=247: a normal f32, exact).
    let m = base * f32::from_bits(((127 - p) as u32) << 23);
    for (t, o) in out.iter_mut().take(8).enumerate() {
        let v = f16::from_f32(m * libm::exp2f(-(t as f32) / 8.0));
        if v.is_finite() && v.to_f32() > 0.0 {
            *o = Some(v);
        }
    }
    let tr = f32_to_f16_truncate(base);
    if base < 65536.0 && tr.to_f32() > 0.0 {
        out[8] = Some(tr);
    }
    out
}

/// The improved encoder for one row of HFP4G32 or MFP4G32 (see the module doc).
pub fn encode_row(
    format: FormatId,
    src: &[f32],
    importance: Option<&[f32]>,
    dst: &mut [u8],
) -> Result<()> {
    let rotated = format != FormatId::Hfp4G32;
    let blocks = block_count(format, src.len())?;
    let (rowmax, _) = row_max(src, rotated);
    if rowmax == 0.0 {
        return reference::encode_row(format, src, dst);
    }
    let cands = candidates(rowmax / 6.0);
    let mut totals = [0f64; N_CAND];
    for_each_block(src, rotated, |b, x| {
        let mut w = [0f32; QK];
        block_weights(importance, rotated, b, &mut w);
        for (c, t) in cands.iter().zip(totals.iter_mut()) {
            match c {
                Some(r) => *t += best_block(r.to_f32(), x, &w).2 as f64,
                None => *t = f64::INFINITY,
            }
        }
        Ok(())
    })?;
    let mut pick = None;
    let mut best = f64::INFINITY;
    for (c, t) in cands.iter().zip(totals) {
        if c.is_some() && (pick.is_none() || t < best) {
            pick = *c;
            best = t;
        }
    }
    let Some(r16) = pick else {
        // Only rows of f32 subnormals this small have no usable candidate.
        return reference::encode_row(format, src, dst);
    };
    let header = RowHeader::new(format, r16, blocks);
    dst[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&header));
    let r = r16.to_f32();
    for_each_block(src, rotated, |b, x| {
        let mut w = [0f32; QK];
        block_weights(importance, rotated, b, &mut w);
        let (e, codes, _) = best_block(r, x, &w);
        write_block(dst, b, e, &codes);
        Ok(())
    })
}

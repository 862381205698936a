//! hipfire's own encoders (`Rule::Reference`), byte-exact: HFP4G32, MFP4G32 (the same on
//! FWHT-256-rotated rows) and MFP4G32P (E4M3 block scale rounded up). Also the row walker that
//! feeds a row's 32-element blocks, rotated or not, without allocating.
//!
//! Source: github warpfront/hipfire `crates/hipfire-quantize/src/quant_hfp4.rs`
//! (`quantize_hfp4g32_row`, `quantize_mfp4g32_2d`, `quantize_mfp4g32_p_row`) and
//! `crates/hipfire-quantize/src/float16.rs` (`f32_to_f16`, truncating). The rule, step by step
//! (every step an f32 operation, in this order):
//!
//! 1. `rowmax = max |x|` (MFP4: of the rotated row). `rowmax > 0`: `rs = rowmax / 6`,
//!    `inv = 1 / rs`; a zero row: `rs = 1`, `inv = 0` (so its header holds f16 1.0 = 0x3C00).
//! 2. Header: `row_scale_a = f16` of `rs` by truncation (toward zero); flags 0x00 (HFP4) or
//!    0x05 (MFP4, MFP4P). hipfire would write +inf for `rs >= 65536`; lowbit refuses such a row
//!    with [`Error::OutOfRange`] (naming the largest element, rotated index for MFP4).
//! 3. Per block: `bmn = bmax * inv`.
//!    * UE8M0: `e = clamp(ceil(log2f(bmn / 6)) + 127, 0, 254)` for `bmn > 0`, else 0. The log2 is
//!      an f32 `log2f` (libm's, the same algorithm as glibc's), so for ratios within a few ulps
//!      above a power of two the f32 log2 can round to the integer and `ceil` keeps it: such a
//!      block's largest value normalises to slightly above 6 and saturates to ±6, as in hipfire.
//!      Block factor `2^(e - 127)` (exact; e = 0 gives the subnormal 2^-127).
//!    * E4M3 (MFP4G32P): `s = bmn / 6` (0 if `bmn <= 0`), byte = the smallest E4M3 code with value
//!      `>= s` (`s >= 448` gives 0x7E); block factor = its value.
//! 4. `inv_b = 1 / factor` (0 when the factor is 0); code of `x` = hipfire's nearest E2M1 of
//!    `(x * inv) * inv_b`, ties toward the smaller magnitude, +0 for values that round to zero
//!    ([`super::block::e2m1_round`]).
//!
//! Degenerate rows follow hipfire's arithmetic: when `rs` is so small that `inv` is infinite,
//! every code is 0 (non-finite normalised values give code 0); a UE8M0 block then gets e = 0
//! (hipfire's `ceil(+inf) as i32 + 127` wraps in a release build), an E4M3 block 0x7E.

use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::rotate::fwht256;
use crate::scalar::{e4m3_to_f32, f32_to_f16_truncate};

use super::block::{e2m1_round, e4m3_roundup, pack_codes, ue8m0, QK};
use super::header::{RowHeader, HEADER_BYTES};

/// Bytes per block.
pub const BLOCK_BYTES: usize = 17;

/// Calls `f(block_index, values)` for every 32-element block of `src` in order; with `rotated`
/// the values are those of the FWHT-256-rotated row (each 256-segment rotated on the stack;
/// `src.len() % 256 == 0`, checked by the registry).
pub fn for_each_block(
    src: &[f32],
    rotated: bool,
    mut f: impl FnMut(usize, &[f32; QK]) -> Result<()>,
) -> Result<()> {
    if rotated {
        for (s, seg) in src.chunks_exact(256).enumerate() {
            let mut buf = [0f32; 256];
            buf.copy_from_slice(seg);
            fwht256(&mut buf);
            for (j, blk) in buf.chunks_exact(QK).enumerate() {
                let mut a = [0f32; QK];
                a.copy_from_slice(blk);
                f(s * 8 + j, &a)?;
            }
        }
    } else {
        for (b, blk) in src.chunks_exact(QK).enumerate() {
            let mut a = [0f32; QK];
            a.copy_from_slice(blk);
            f(b, &a)?;
        }
    }
    Ok(())
}

/// The row's largest magnitude (f32 `max` fold from 0, as hipfire) and its element index.
pub fn row_max(src: &[f32], rotated: bool) -> (f32, usize) {
    let (mut m, mut at) = (0f32, 0usize);
    let _ = for_each_block(src, rotated, |b, blk| {
        for (j, v) in blk.iter().enumerate() {
            if v.abs() > m {
                m = v.abs();
                at = b * QK + j;
            }
        }
        Ok(())
    });
    (m, at)
}

/// The block count as the header's u16, or an error for rows of more than 65535 blocks.
pub fn block_count(format: FormatId, k: usize) -> Result<u16> {
    u16::try_from(k / QK).map_err(|_| Error::Unsupported {
        format,
        op: "rows of more than 65535 blocks (the header's u16 block_count)",
    })
}

/// hipfire's UE8M0 block exponent for a block whose max normalised magnitude is `bmn`.
pub fn ue8m0_ceil(bmn: f32) -> u8 {
    if bmn > 0.0 {
        let c = libm::ceilf(libm::log2f(bmn / 6.0));
        // `as` saturates (+inf -> i32::MAX); hipfire's `+ 127` then wraps in release builds.
        (c as i32).wrapping_add(127).clamp(0, 254) as u8
    } else {
        0
    }
}

/// Writes block `b` (scale byte + packed codes) into the row buffer `dst`.
pub fn write_block(dst: &mut [u8], b: usize, scale_byte: u8, codes: &[u8; QK]) {
    let off = HEADER_BYTES + b * BLOCK_BYTES;
    dst[off] = scale_byte;
    dst[off + 1..off + BLOCK_BYTES].copy_from_slice(&pack_codes(codes));
}

/// hipfire's encoder for one row (see the module doc). `dst` has the row's exact length.
pub fn encode_row(format: FormatId, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let rotated = format != FormatId::Hfp4G32;
    let blocks = block_count(format, src.len())?;
    let (rowmax, at) = row_max(src, rotated);
    let (rs, inv) = if rowmax > 0.0 {
        let rs = rowmax / 6.0;
        (rs, 1.0 / rs)
    } else {
        (1.0f32, 0.0f32)
    };
    if rs >= 65536.0 {
        return Err(Error::OutOfRange { format, index: at });
    }
    let header = RowHeader::new(format, f32_to_f16_truncate(rs), blocks);
    dst[..HEADER_BYTES].copy_from_slice(bytemuck::bytes_of(&header));
    for_each_block(src, rotated, |b, blk| {
        let bmax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let bmn = bmax * inv;
        let (byte, factor) = if format == FormatId::Mfp4G32P {
            let s = if bmn > 0.0 { bmn / 6.0 } else { 0.0 };
            let c = e4m3_roundup(s);
            (c, e4m3_to_f32(c))
        } else {
            let e = ue8m0_ceil(bmn);
            (e, ue8m0(e).unwrap_or(f32::NAN))
        };
        let inv_b = if factor > 0.0 { 1.0 / factor } else { 0.0 };
        let mut codes = [0u8; QK];
        for (c, x) in codes.iter_mut().zip(blk) {
            *c = e2m1_round(*x * inv * inv_b);
        }
        write_block(dst, b, byte, &codes);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_md_worked_example() {
        let mut x = [0f32; 64];
        x[..4].copy_from_slice(&[0.05, -0.1, 0.2, 0.125]);
        x[32..36].copy_from_slice(&[3.0, -1.5, 0.75, 0.6]);
        let mut out = [0u8; 16 + 2 * 17];
        encode_row(FormatId::Hfp4G32, &x, &mut out).unwrap();
        assert_eq!(&out[..16], &[0x00, 0x38, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&out[16..19], &[0x7c, 0xb2, 0x45]);
        assert!(out[19..33].iter().all(|&b| b == 0));
        assert_eq!(&out[33..36], &[0x7f, 0xd7, 0x23]);
        assert!(out[36..].iter().all(|&b| b == 0));
    }

    #[test]
    fn zero_row_has_unit_row_scale() {
        let x = [0f32; 32];
        let mut out = [0xAAu8; 33];
        encode_row(FormatId::Hfp4G32, &x, &mut out).unwrap();
        assert_eq!(&out[..7], &[0x00, 0x3c, 0, 0, 1, 0, 0]);
        assert!(out[7..].iter().all(|&b| b == 0));
    }

    #[test]
    fn ue8m0_of_exact_powers_and_just_above() {
        assert_eq!(ue8m0_ceil(6.0), 127);
        assert_eq!(ue8m0_ceil(3.0), 126);
        assert_eq!(ue8m0_ceil(3.0000002), 127);
        // 6 * 2^-5 * (1 + 2^-23): log2f rounds to exactly -5, ceil keeps it.
        assert_eq!(ue8m0_ceil(6.0 * f32::from_bits(0x3d00_0001)), 122);
        assert_eq!(ue8m0_ceil(f32::INFINITY), 0);
        assert_eq!(ue8m0_ceil(1e-45), 0);
        assert_eq!(ue8m0_ceil(0.0), 0);
    }

    #[test]
    fn ue8m0_zero_is_subnormal_exact() {
        assert_eq!(ue8m0(0), Some(f32::from_bits(1 << 22)));
        assert_eq!(ue8m0(254), Some(f32::from_bits(254 << 23)));
    }

    #[test]
    fn truncating_f16_matches_hipfire_bits() {
        // hipfire's float16.rs f32_to_f16 restated (finite, |x| < 65536 inputs).
        fn hip(x: f32) -> u16 {
            let bits = x.to_bits();
            let sign = (bits >> 31) & 1;
            let exp = ((bits >> 23) & 0xff) as i32;
            let frac = bits & 0x7f_ffff;
            let ne = exp - 112;
            if ne <= 0 {
                if ne < -10 {
                    return (sign << 15) as u16;
                }
                return ((sign << 15) | ((frac | 0x80_0000) >> (14 - ne) as u32)) as u16;
            }
            ((sign << 15) | ((ne as u32) << 10) | (frac >> 13)) as u16
        }
        let mut s = 0x2f00_0000u32; // ~1e-10
        while f32::from_bits(s) < 65536.0 {
            let x = f32::from_bits(s);
            assert_eq!(f32_to_f16_truncate(x).to_bits(), hip(x), "x = {x:e}");
            s += 0x1357;
        }
    }
}

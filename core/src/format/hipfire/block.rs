//! The 17-byte blocks of the HFP4 family (one scale byte + 16 bytes of E2M1 nibbles), their
//! block-scale decoding and validation, and hipfire's E2M1 code rounding.
//!
//! Source: github warpfront/hipfire `crates/hipfire-quantize/src/quant_hfp4.rs`
//! (`E2M1_LUT`, `e2m1_round`, `e4m3_scale_decode`, `e4m3_scale_encode_roundup`,
//! `dequant_mfp4g32_p`), `kernels/src/gemv_hfp4g32.hip`, and the CPU dequantizer
//! `dequant_hfp4g32_row`. Byte `b` of the nibbles holds element `2b` (low nibble) and `2b + 1`
//! (high nibble).
//!
//! What must not live here: the row header (`header.rs`) and row-level encoders.

use bytemuck::{Pod, Zeroable};

use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::scalar::{e2m1_index_ties_down, e4m3_to_f32, try_ue8m0_to_f32, E2M1_VALUES};

/// Elements per block.
pub const QK: usize = 32;

/// An HFP4G32 / MFP4G32 block: UE8M0 block exponent and 32 E2M1 codes.
/// Element `i` is `row_scale * 2^(e - 127) * E2M1[code_i]` (MFP4G32: in the rotated domain).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockHfp4G32 {
    /// UE8M0 block exponent: scale `2^(e - 127)`; 0xFF (NaN) is illegal.
    pub e: u8,
    /// E2M1 codes, low nibble = even element.
    pub qs: [u8; 16],
}

/// An MFP4G32P block: an unsigned OCP E4M3 block scale and 32 E2M1 codes (rotated domain).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockMfp4G32P {
    /// E4M3 block scale, 0x00..=0x7E (positive; 0x7F is NaN, sign bit illegal).
    pub scale: u8,
    /// E2M1 codes, low nibble = even element.
    pub qs: [u8; 16],
}

crate::assert_block_size!(BlockHfp4G32, FormatId::Hfp4G32);
crate::assert_block_size!(BlockHfp4G32, FormatId::Mfp4G32);
crate::assert_block_size!(BlockMfp4G32P, FormatId::Mfp4G32P);

/// `2^(e - 127)` as an exact f32 (e = 0 gives the subnormal 2^-127), `None` for 0xFF.
#[inline]
pub fn ue8m0(e: u8) -> Option<f32> {
    try_ue8m0_to_f32(e)
}

/// The E2M1 code of element `i` (< 32) of a block's nibbles.
#[inline]
pub(crate) fn nibble(qs: &[u8; 16], i: usize) -> u8 {
    (qs[i / 2] >> (4 * (i % 2))) & 15
}

/// The block factor a scale byte stands for: `2^(e - 127)` (HFP4G32, MFP4G32) or the E4M3
/// value (MFP4G32P), with the illegal bytes of [`block_scale`] rejected (offset 0).
pub fn block_factor(format: FormatId, byte: u8) -> Result<f32> {
    let ill = |field| Error::IllegalByte { format, field, offset: 0, byte };
    match format {
        FormatId::Mfp4G32P if byte >= 0x7f => Err(ill("block_scale")),
        FormatId::Mfp4G32P => Ok(e4m3_to_f32(byte)),
        _ => ue8m0(byte).ok_or(ill("block_e")),
    }
}

/// A block's combined scale `row_scale * block_scale` (f32 product, as hipfire's dequantizer
/// and kernels compute it), checked: the block scale byte must be legal for the format and the
/// block's largest value `scale * 6` finite.
///
/// * HFP4G32 / MFP4G32: `block_scale = 2^(e - 127)`; e = 0xFF is [`Error::IllegalByte`];
///   `scale * 6` overflowing f32 is [`Error::NonFiniteScale`] (for the rotated formats
///   `scale * 6 * 256`, so that the inverse FWHT cannot overflow either). hipfire's encoder
///   writes e <= 128 and row scales <= 65504, so no row it writes is refused; e.g. e = 254 with
///   a row scale >= 2^-6 would be.
/// * MFP4G32P: `block_scale = E4M3(byte)`; 0x7F (NaN; hipfire's decoder would read it as 448)
///   and bytes with the sign bit set (hipfire's decoder ignores the bit, its encoder never sets
///   it) are [`Error::IllegalByte`].
///
/// Offsets are relative to the block (the scale byte is at 0).
pub fn block_scale(format: FormatId, row_scale: f32, byte: u8) -> Result<f32> {
    let sc = row_scale * block_factor(format, byte)?;
    // Rotated formats: the inverse FWHT sums up to 256 values before its 1/16.
    let headroom = if format == FormatId::Hfp4G32 { 6.0 } else { 6.0 * 256.0 };
    if !(sc * headroom).is_finite() {
        return Err(Error::NonFiniteScale { format, field: "block_e", offset: 0 });
    }
    Ok(sc)
}

/// Decodes the 32 codes with the combined scale `sc`: `out[i] = sc * E2M1[code_i]` (one f32
/// multiply, as hipfire's dequantizer does).
#[inline]
pub fn decode_codes(qs: &[u8; 16], sc: f32, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate().take(QK) {
        *o = sc * E2M1_VALUES[nibble(qs, i) as usize];
    }
}

impl Block for BlockHfp4G32 {
    const FORMAT: FormatId = FormatId::Hfp4G32;
    const ELEMS: usize = QK;

    /// Decodes with a row scale of 1: `2^(e - 127) * E2M1[code]` (the row decoder multiplies
    /// the row scale into the block scale first, as hipfire does).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let sc = block_scale(Self::FORMAT, 1.0, self.e)?;
        decode_codes(&self.qs, sc, out);
        Ok(())
    }
}

impl Block for BlockMfp4G32P {
    const FORMAT: FormatId = FormatId::Mfp4G32P;
    const ELEMS: usize = QK;

    /// Decodes with a row scale of 1 and without the inverse rotation:
    /// `E4M3(scale) * E2M1[code]`.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let sc = block_scale(Self::FORMAT, 1.0, self.scale)?;
        decode_codes(&self.qs, sc, out);
        Ok(())
    }
}

/// hipfire's `e2m1_round` on a normalised value `v`: the nearest of the 16 E2M1 values, ties
/// to the smaller magnitude (hipfire scans the table in code order and keeps the first strict
/// minimum of `|code - v|`), and a value that rounds to zero gives +0 (code 0, never 8).
/// Above 6 saturates to ±6. Non-finite `v` gives code 0 (every distance is infinite or NaN,
/// so hipfire's scan never moves off code 0).
#[inline]
pub fn e2m1_round(v: f32) -> u8 {
    if !v.is_finite() {
        return 0;
    }
    if v.abs() >= 8.0 {
        // Far outside the lattice hipfire's f32 distances can round equal (|v - 6| == |v|
        // from about 2^26 on) and its scan then keeps the first code: do the scan.
        return scan_nearest(v);
    }
    let idx = e2m1_index_ties_down(v);
    if idx != 0 && v < 0.0 {
        idx | 8
    } else {
        idx
    }
}

/// The first code (in table order) with the smallest f32 distance `|E2M1[c] - v|`.
fn scan_nearest(v: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = f32::INFINITY;
    for (c, q) in E2M1_VALUES.iter().zip(0u8..) {
        let err = (c - v).abs();
        if err < best_err {
            best_err = err;
            best = q;
        }
    }
    best
}

/// hipfire's `e4m3_scale_encode_roundup`: the smallest code in 0x00..=0x7E whose E4M3 value is
/// `>= s`; `s <= 0` or NaN gives 0x00, `s >= 448` gives 0x7E.
pub fn e4m3_roundup(s: f32) -> u8 {
    if s.is_nan() || s <= 0.0 {
        return 0;
    }
    if s >= 448.0 {
        return 0x7e;
    }
    // Codes are monotonic in value: binary search for the first code with value >= s.
    let (mut lo, mut hi) = (0u8, 0x7eu8);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if e4m3_to_f32(mid) >= s {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Packs 32 codes (0..=15) into the 16 nibble bytes.
#[inline]
pub fn pack_codes(codes: &[u8; QK]) -> [u8; 16] {
    let mut qs = [0u8; 16];
    for (b, q) in qs.iter_mut().enumerate() {
        *q = (codes[2 * b] & 15) | ((codes[2 * b + 1] & 15) << 4);
    }
    qs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(v: f32) -> u8 {
        scan_nearest(v)
    }

    #[test]
    fn e2m1_round_matches_table_scan() {
        let mut v = -7.0f32;
        while v <= 7.0 {
            for w in [v, f32::from_bits(v.to_bits() + 1), f32::from_bits(v.to_bits().max(1) - 1)] {
                assert_eq!(e2m1_round(w), scan(w), "v = {w}");
            }
            v += 0.125;
        }
        for v in [
            0.0, -0.0, 1e-40, -1e-40, 0.25, -0.25, 5.0, -5.0, 6.0000005, 7.9, 9.0, 1e7, 1e30, -1e30,
        ] {
            assert_eq!(e2m1_round(v), scan(v), "v = {v}");
        }
        assert_eq!(e2m1_round(f32::INFINITY), scan(f32::INFINITY));
        assert_eq!(e2m1_round(f32::NAN), scan(f32::NAN));
    }

    #[test]
    fn e4m3_roundup_is_the_smallest_cover() {
        let mut s = 1e-4f32;
        while s < 460.0 {
            let c = e4m3_roundup(s);
            if s < 448.0 {
                assert!(e4m3_to_f32(c) >= s);
                if c > 0 {
                    assert!(e4m3_to_f32(c - 1) < s);
                }
            } else {
                assert_eq!(c, 0x7e);
            }
            s *= 1.0137;
        }
        assert_eq!(e4m3_roundup(0.0), 0);
        assert_eq!(e4m3_roundup(1e-30), 1);
        assert_eq!(e4m3_roundup(1.0), 0x38);
    }

    #[test]
    fn block_decode_and_illegal_scales() {
        let b = BlockHfp4G32 { e: 126, qs: [0x97; 16] };
        let mut out = [0f32; 32];
        b.decode(&mut out).unwrap();
        assert_eq!(out[0], 3.0);
        assert_eq!(out[1], -0.25);
        let bad = BlockHfp4G32 { e: 0xff, qs: [0; 16] };
        assert!(matches!(bad.decode(&mut out), Err(Error::IllegalByte { offset: 0, .. })));
        let p = BlockMfp4G32P { scale: 0x7f, qs: [0; 16] };
        assert!(matches!(p.decode(&mut out), Err(Error::IllegalByte { offset: 0, .. })));
        let p = BlockMfp4G32P { scale: 0x38, qs: [0x21; 16] };
        p.decode(&mut out).unwrap();
        assert_eq!((out[0], out[1]), (0.5, 1.0));
        assert!(matches!(
            block_scale(FormatId::Hfp4G32, 65504.0, 254),
            Err(Error::NonFiniteScale { .. })
        ));
    }
}

//! The 16-byte row header every hipfire HFP4-family row starts with, its validation on decode
//! and its construction on encode. Block layouts live in `block.rs`.
//!
//! Source: github warpfront/hipfire `crates/hipfire-quantize/src/quant_hfp4.rs`
//! (`quantize_hfp4g32_row`, `quantize_mfp4g32_2d`, `quantize_mfp4g32_p_row`) and
//! `docs/quant-formats/hfp4.md`:
//!
//! ```text
//! +0  f16 row_scale_a      (the encoder: truncating f32 -> f16 of rowmax/6; 1.0 for a zero row)
//! +2  f16 row_scale_b      (reserved; the encoder writes 0, kernels ignore it)
//! +4  u16 block_count      (K / 32)
//! +6  u8  format_flags     (bit0 rotated, bit1 row_scale_b used, bits2-3 rotation kind)
//! +7  u8  reserved, +8 u32 reserved, +12 u32 reserved   (zero)
//! ```
//!
//! lowbit's decoder is strict where hipfire's readers ignore fields: every byte hipfire's
//! encoders never write differently is checked (see [`RowHeader::validate`]).

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::scalar::f16;

/// `format_flags` of HFP4G32 rows: no rotation.
pub const FLAGS_HFP4: u8 = 0x00;
/// `format_flags` of MFP4G32 and MFP4G32P rows: bit 0 (rotation present) and rotation kind 01
/// (offline FWHT) in bits 2-3. hipfire stamps 0x05 on both (`quantize_mfp4g32_2d`,
/// `quantize_mfp4g32_p_row`); the block-scale type is told by the quant-type id, not the flags.
pub const FLAGS_MFP4: u8 = 0x05;

/// The row header, `#[repr(C)]`, 16 bytes, no padding (all fields are byte arrays so the type
/// has alignment 1 and can be read from any offset).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RowHeader {
    /// f16 row scale (LE bits).
    pub row_scale_a: [u8; 2],
    /// f16 second row scale, reserved (LE bits; must be 0).
    pub row_scale_b: [u8; 2],
    /// Number of 32-element blocks in the row (LE u16).
    pub block_count: [u8; 2],
    /// Format flags ([`FLAGS_HFP4`] or [`FLAGS_MFP4`]).
    pub flags: u8,
    /// Reserved bytes 7..16 (must be 0).
    pub reserved: [u8; 9],
}

const _: () = assert!(core::mem::size_of::<RowHeader>() == 16);

/// Bytes of the row header.
pub const HEADER_BYTES: usize = 16;

/// The flags a row of `format` must carry.
pub const fn expected_flags(format: FormatId) -> u8 {
    match format {
        FormatId::Hfp4G32 => FLAGS_HFP4,
        _ => FLAGS_MFP4,
    }
}

impl RowHeader {
    /// A header for a row of `blocks` blocks with the given f16 row scale (row_scale_b and the
    /// reserved bytes zero). `blocks` must fit a u16 (checked by the encoders).
    pub fn new(format: FormatId, row_scale: f16, blocks: u16) -> Self {
        RowHeader {
            row_scale_a: row_scale.to_bits().to_le_bytes(),
            row_scale_b: [0; 2],
            block_count: blocks.to_le_bytes(),
            flags: expected_flags(format),
            reserved: [0; 9],
        }
    }

    /// Copies the header out of the first 16 bytes of `src`; an all-zero header (which no
    /// format accepts: its block count is 0) if `src` is shorter.
    pub fn read(src: &[u8]) -> Self {
        src.get(..HEADER_BYTES).map_or(Self::zeroed(), bytemuck::pod_read_unaligned)
    }

    /// The row scale as stored.
    pub fn row_scale(&self) -> f16 {
        f16::from_bits(u16::from_le_bytes(self.row_scale_a))
    }

    /// Validates the header of a row of `blocks` blocks of `format` and returns the row scale
    /// as f32. Errors (offsets relative to the row start):
    ///
    /// * `row_scale_a` NaN or infinite: [`Error::NonFiniteScale`] at 0.
    /// * `row_scale_a` negative (sign bit set, -0 included; hipfire's encoder writes
    ///   `rowmax / 6 >= 0`): [`Error::IllegalByte`] at 1.
    /// * `row_scale_b` not 0 (reserved; hipfire always writes 0 and no kernel reads it):
    ///   [`Error::IllegalByte`] at the first non-zero byte (2 or 3).
    /// * `block_count` not `blocks`: [`Error::IllegalByte`] at the first differing byte (4, 5).
    /// * `format_flags` not the format's ([`expected_flags`]): [`Error::IllegalByte`] at 6.
    /// * a non-zero reserved byte: [`Error::IllegalByte`] at its offset (7..16).
    pub fn validate(&self, format: FormatId, blocks: usize) -> Result<f32> {
        let ill = |field, offset, byte| Error::IllegalByte { format, field, offset, byte };
        let rs = self.row_scale();
        if !rs.is_finite() {
            return Err(Error::NonFiniteScale { format, field: "row_scale_a", offset: 0 });
        }
        if rs.is_sign_negative() {
            return Err(ill("row_scale_a", 1, self.row_scale_a[1]));
        }
        for (i, &b) in self.row_scale_b.iter().enumerate() {
            if b != 0 {
                return Err(ill("row_scale_b", 2 + i, b));
            }
        }
        let want = match u16::try_from(blocks) {
            Ok(n) => n.to_le_bytes(),
            // No u16 can name this many blocks: the low byte can never match.
            Err(_) => return Err(ill("block_count", 4, self.block_count[0])),
        };
        for (i, (&got, &w)) in self.block_count.iter().zip(&want).enumerate() {
            if got != w {
                return Err(ill("block_count", 4 + i, got));
            }
        }
        if self.flags != expected_flags(format) {
            return Err(ill("format_flags", 6, self.flags));
        }
        for (i, &b) in self.reserved.iter().enumerate() {
            if b != 0 {
                return Err(ill("reserved", 7 + i, b));
            }
        }
        Ok(rs.to_f32())
    }
}

//! The hipfire HFP4 family: HFP4G32, MFP4G32 and MFP4G32P.
//!
//! A row of K weights is a 16-byte header ([`header::RowHeader`]: f16 row scale, reserved f16,
//! u16 block count, flags, zeros) followed by K/32 blocks of 17 bytes (a scale byte and 32
//! E2M1 codes, [`block`]). Element values:
//!
//! * HFP4G32 (hipfire qt 21, flags 0x00): `w = (f16(row_scale_a) * 2^(e - 127)) * E2M1[code]`.
//! * MFP4G32 (qt 24, flags 0x05): the same bytes computed on the row rotated by
//!   [`crate::rotate::fwht256`] per 256-segment.
//! * MFP4G32P (qt 33, flags 0x05): MFP4G32 with an E4M3 block scale:
//!   `w = (f16(row_scale_a) * E4M3(scale)) * E2M1[code]`.
//!
//! Decode order (as hipfire's CPU dequantizers `dequant_hfp4g32_row`, `dequant_mfp4g32_p`):
//! the combined scale `row_scale * block_factor` is one f32 multiply, then one multiply per
//! element. [`decode_row`] (what `codec::decode_row` returns) gives the ORIGINAL domain: for
//! MFP4G32 / MFP4G32P it then applies [`crate::rotate::fwht256_inverse`] to every 256-segment
//! (hipfire's `dequant_mfp4g32`: `cpu_fwht_256(seg, signs2, signs1)`). [`decode_row_stored`]
//! stops before the rotation (the domain the codes and the dot product live in).
//!
//! Note: hipfire's GPU kernels build `2^(e - 127)` as the f32 bit pattern `e << 23`, which is
//! 0.0 for e = 0 where the CPU dequantizer (and lowbit) use the subnormal 2^-127. hipfire's
//! encoder writes e = 0 with non-zero codes only for blocks more than 2^127 times smaller than
//! the row maximum.
//!
//! Files: `header.rs` (row header), `block.rs` (block types, scale bytes, E2M1 rounding),
//! `reference.rs` (hipfire's encoders, byte-exact), `improved.rs` (lowbit's search),
//! `dot.rs` (reference dot product against f32 activations).
//!
//! Sources: github warpfront/hipfire (fork unverbraucht/hipfire)
//! `crates/hipfire-quantize/src/quant_hfp4.rs` (in the fork: `src/main.rs`),
//! `crates/hipfire-quantize/src/float16.rs`, `kernels/src/gemv_hfp4g32.hip`,
//! `docs/quant-formats/hfp4.md`.

pub mod block;
pub(crate) mod dot;
pub mod header;
pub(crate) mod improved;
pub(crate) mod reference;

pub use block::{BlockHfp4G32, BlockMfp4G32P};
pub use header::RowHeader;

use crate::codec::{ActRow, EncodeOptions, Rule};
use crate::error::{Buffer, Error, Result};
use crate::registry::{Family, FormatId};
use crate::rotate::fwht256_inverse;

use block::{block_scale, decode_codes, QK};
use header::HEADER_BYTES;
use reference::BLOCK_BYTES;

fn check_row(format: FormatId, src_len: usize, k: usize) -> Result<()> {
    if format.info().family != Family::Hipfire {
        return Err(Error::Unsupported { format, op: "hipfire row decode" });
    }
    let need = format.row_bytes(k)?;
    if src_len != need {
        return Err(Error::Length {
            format,
            buffer: Buffer::Encoded,
            got: src_len,
            expected: need,
        });
    }
    Ok(())
}

/// Decodes one row into the stored domain (for MFP4G32 / MFP4G32P: still rotated), validating
/// the header ([`RowHeader::validate`]) and every block scale ([`block::block_scale`]).
/// `src` holds exactly `format.row_bytes(dst.len())` bytes; error offsets are into `src`.
pub fn decode_row_stored(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_row(format, src.len(), dst.len())?;
    let rs = RowHeader::read(src).validate(format, dst.len() / QK)?;
    for (b, out) in dst.chunks_exact_mut(QK).enumerate() {
        let off = HEADER_BYTES + b * BLOCK_BYTES;
        let sc = block_scale(format, rs, src[off]).map_err(|e| e.at(off))?;
        let mut qs = [0u8; 16];
        qs.copy_from_slice(&src[off + 1..off + BLOCK_BYTES]);
        decode_codes(&qs, sc, out);
    }
    Ok(())
}

/// Decodes one row into the original domain: [`decode_row_stored`], then for the rotated
/// formats the inverse FWHT-256 of every 256-segment.
pub fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    decode_row_stored(format, src, dst)?;
    if format.info().rotation == crate::registry::Rotation::Fwht256 {
        for seg in dst.chunks_exact_mut(256) {
            if let Ok(a) = <&mut [f32; 256]>::try_from(seg) {
                fwht256_inverse(a);
            }
        }
    }
    Ok(())
}

pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    match (opts.rule, format) {
        (Rule::Improved, FormatId::Hfp4G32 | FormatId::Mfp4G32) => {
            improved::encode_row(format, src, opts.importance, dst)
        }
        (Rule::Reference, _) if opts.importance.is_none() => {
            reference::encode_row(format, src, dst)
        }
        (Rule::Reference, _) => {
            Err(Error::Unsupported { format, op: "the reference rule with importance weights" })
        }
        _ => Err(Error::Unsupported { format, op: "this encoder rule" }),
    }
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    match act {
        ActRow::F32(x) => dot::dot_row(format, w, x),
        other => Err(Error::WrongActivation {
            format,
            expected: crate::registry::ActFormat::F32,
            got: other.format(),
        }),
    }
}

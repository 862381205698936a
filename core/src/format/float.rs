//! Plain float "formats" (F32, F16, BF16), so that the registry and codec entry points cover
//! unquantized tensors too.
//!
//! Encode: f32 -> f16 and f32 -> bf16 round to nearest, ties to even (`half`); overflow gives
//! ±inf for f16 only when the input is beyond f16's range; NaN inputs are rejected by
//! [`crate::codec::encode_row`] before reaching here. Decode is exact. The dot product is a
//! sequential f32 sum of `w[i] * x[i]` in index order.

use half::{bf16, f16};

use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::F32 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            }
        }
        FormatId::F16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        FormatId::Bf16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = bf16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        _ => return Err(Error::Unsupported { format, op: "decode as float" }),
    }
    Ok(())
}

pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    _opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    match format {
        FormatId::F32 => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src) {
                d.copy_from_slice(&s.to_le_bytes());
            }
        }
        FormatId::F16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src) {
                d.copy_from_slice(&f16::from_f32(*s).to_le_bytes());
            }
        }
        FormatId::Bf16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src) {
                d.copy_from_slice(&bf16::from_f32(*s).to_le_bytes());
            }
        }
        _ => return Err(Error::Unsupported { format, op: "encode as float" }),
    }
    Ok(())
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let ActRow::F32(x) = act else {
        return Err(Error::Unsupported { format, op: "dot with quantized activations" });
    };
    let mut acc = 0f32;
    let mut buf = [0f32; 64];
    let bytes_per = format.geometry().block_bytes;
    for (wc, xc) in w.chunks(64 * bytes_per).zip(x.chunks(64)) {
        let out = &mut buf[..xc.len()];
        decode_row(format, wc, out)?;
        for (a, b) in out.iter().zip(xc) {
            acc += a * b;
        }
    }
    Ok(acc)
}

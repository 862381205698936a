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
    let x = act.f32(format)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(format: FormatId, x: &[f32]) -> [u8; 8] {
        let mut out = [0u8; 8];
        let n = x.len() * format.geometry().block_bytes;
        encode_row(format, x, &EncodeOptions::default(), &mut out[..n]).unwrap();
        out
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        // 1 + 2^-11 is the midpoint of 1 and 1 + 2^-10: ties to the even 1.0 (0x3C00);
        // 1 + 3·2^-11 ties up to 1 + 2^-9 (0x3C02); 65520 overflows to inf; 2^-25 ties to 0.
        let b = enc(FormatId::F16, &[1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11)]);
        assert_eq!(&b[..4], &[0x00, 0x3C, 0x02, 0x3C]);
        let b = enc(FormatId::F16, &[65520.0, -(2f32.powi(-25))]);
        assert_eq!(&b[..4], &[0x00, 0x7C, 0x00, 0x80]);
        let b = enc(FormatId::F16, &[65519.0, 3.0 * 2f32.powi(-26)]);
        assert_eq!(&b[..4], &[0xFF, 0x7B, 0x01, 0x00]);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 0x3F808000 is the midpoint of 0x3F80 and 0x3F81: ties to even 0x3F80;
        // 0x3F818000 ties up to 0x3F82; f32::MAX rounds to inf.
        let x = [f32::from_bits(0x3F80_8000), f32::from_bits(0x3F81_8000)];
        assert_eq!(&enc(FormatId::Bf16, &x)[..4], &[0x80, 0x3F, 0x82, 0x3F]);
        assert_eq!(&enc(FormatId::Bf16, &[f32::MAX])[..2], &[0x80, 0x7F]);
    }

    #[test]
    fn decode_is_exact_and_keeps_specials() {
        let mut out = [0f32; 4];
        decode_row(FormatId::F16, &[0x01, 0x00, 0x00, 0xFC, 0x00, 0x7E, 0xFF, 0x7B], &mut out)
            .unwrap();
        assert_eq!(out[0], 2f32.powi(-24));
        assert_eq!(out[1], f32::NEG_INFINITY);
        assert!(out[2].is_nan());
        assert_eq!(out[3], 65504.0);
        decode_row(FormatId::Bf16, &[0x01, 0x00, 0x80, 0xFF, 0xC0, 0x7F, 0x80, 0x3F], &mut out)
            .unwrap();
        assert_eq!(out[0].to_bits(), 0x0001_0000);
        assert_eq!(out[1], f32::NEG_INFINITY);
        assert!(out[2].is_nan());
        assert_eq!(out[3], 1.0);
        let mut one = [0f32; 1];
        decode_row(FormatId::F32, &(-0.0f32).to_le_bytes(), &mut one).unwrap();
        assert_eq!(one[0].to_bits(), 0x8000_0000);
    }

    #[test]
    fn dot_is_sequential_f32() {
        // 1e8 + 1 - 1e8 in f32 sequential order is 0 (1 is lost), not 1.
        let w: [u8; 12] = core::array::from_fn(|i| [1e8f32, 1.0, -1e8][i / 4].to_le_bytes()[i % 4]);
        let y = dot_row(FormatId::F32, &w, ActRow::F32(&[1.0, 1.0, 1.0])).unwrap();
        assert_eq!(y, 0.0);
        let w16 = enc(FormatId::F16, &[2.0, -3.0, 0.5]);
        let y = dot_row(FormatId::F16, &w16[..6], ActRow::F32(&[1.0, 2.0, 4.0])).unwrap();
        assert_eq!(y, 2.0 - 6.0 + 2.0);
    }
}

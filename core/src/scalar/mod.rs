//! The scalar types that low-bit formats store: element codes (E2M1) and scale bytes (E4M3,
//! UE4M3, UE4M3-b8, UE8M0), plus f16/bf16 from the `half` crate.
//!
//! Every conversion documents its rounding, tie rule, NaN handling and saturation. Decoders
//! are exact (each code maps to one `f32`); the few codes that mean NaN or are illegal are
//! surfaced as `None` by the `try_` functions so block decoders can report them.
//!
//! Oracles (`tools/oracle_scalars.py`, checked by `tests/scalars.rs`): ml_dtypes for E2M1,
//! E4M3FN, E8M0 and bf16, numpy for f16, gguf-py for ggml's UE4M3, and independent numpy
//! definitions for UE4M3-b8 and the truncating f16 conversion.
//!
//! What must not live here: block layouts and scale *searches* (those are per format).

mod e2m1;
mod e4m3;
mod minifloat;
mod ue4m3;
mod ue4m3_b8;
mod ue8m0;

pub use e2m1::*;
pub use e4m3::*;
pub use ue4m3::*;
pub use ue4m3_b8::*;
pub use ue8m0::*;

pub use half::{bf16, f16};

/// f32 -> f16, IEEE round-to-nearest-even (also into f16 subnormals); magnitudes that round
/// beyond 65504 (>= 65520) give ±inf; ±inf stay; NaN stays NaN (sign kept, quiet).
/// (This is `half::f16::from_f32`, restated so the rule is documented where it is used;
/// checked against numpy `float16` in `tests/scalars.rs`.)
#[inline]
pub fn f32_to_f16_rne(x: f32) -> f16 {
    f16::from_f32(x)
}

/// f32 -> bf16, IEEE round-to-nearest-even on the dropped low 16 bits (subnormals included);
/// magnitudes that round beyond bf16's largest finite value give ±inf; NaN stays NaN (sign
/// kept, quiet). `half::bf16::from_f32`; checked against ml_dtypes `bfloat16`.
#[inline]
pub fn f32_to_bf16_rne(x: f32) -> bf16 {
    bf16::from_f32(x)
}

/// f32 -> f16 by truncation of the mantissa (round toward zero), as hipfire writes its row
/// scale (github warpfront/hipfire `crates/hipfire-quantize/src/float16.rs` `f32_to_f16`).
///
/// * Rounding: toward zero, in the normal and the subnormal f16 range; magnitudes below the
///   smallest f16 subnormal (2^-24) give ±0.
/// * Overflow: decided by the exponent alone, as hipfire does: |x| in [65504, 65536) truncates
///   to ±65504, |x| >= 65536 (f32 exponent beyond f16's) gives ±inf (not the ±65504 a pure
///   round-toward-zero would give).
/// * ±inf stay ±inf; NaN gives a NaN with the sign and the top 10 payload bits kept and the
///   lowest payload bit set (`0x7C00 | (payload >> 13) | 1`).
///
/// Checked against an independent table-search truncation in `tests/scalars.rs`.
pub fn f32_to_f16_truncate(x: f32) -> f16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let frac = b & 0x007f_ffff;
    if exp == 0xff {
        let payload = if frac == 0 { 0 } else { ((frac >> 13) | 1) as u16 };
        return f16::from_bits(sign | 0x7c00 | payload);
    }
    let e16 = exp - 127 + 15;
    if e16 >= 31 {
        return f16::from_bits(sign | 0x7c00);
    }
    if e16 <= 0 {
        // Subnormal f16 (or zero): shift the 24-bit significand down, dropping bits.
        if e16 < -10 {
            return f16::from_bits(sign);
        }
        let sig = frac | 0x0080_0000;
        return f16::from_bits(sign | (sig >> (14 - e16)) as u16);
    }
    f16::from_bits(sign | ((e16 as u16) << 10) | (frac >> 13) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_edges() {
        assert_eq!(f32_to_f16_truncate(1.0).to_bits(), 0x3c00);
        assert_eq!(f32_to_f16_truncate(f32::from_bits(0x3f80_1fff)).to_bits(), 0x3c00);
        assert_eq!(f32_to_f16_truncate(-65535.0).to_bits(), 0xfbff);
        assert_eq!(f32_to_f16_truncate(65536.0).to_bits(), 0x7c00);
        assert_eq!(f32_to_f16_truncate(2f32.powi(-24)).to_bits(), 0x0001);
        assert_eq!(f32_to_f16_truncate(2f32.powi(-25)).to_bits(), 0x0000);
        assert_eq!(f32_to_f16_truncate(-1e-30).to_bits(), 0x8000);
        assert!(f32_to_f16_truncate(f32::NAN).is_nan());
    }
}

//! UE8M0, the OCP MX block scale: an unsigned biased exponent, value 2^(e - 127); 0xFF is NaN.
//! Byte 0x00 is 2^-127, an f32 subnormal, represented exactly.
//!
//! Sources: OCP Microscaling Formats (MX) v1.0; ml_dtypes `float8_e8m0fnu` (decode and the
//! f32 -> E8M0 rounding, checked against it in `tests/scalars.rs`); ggml
//! `ggml/src/ggml-impl.h` `ggml_e8m0_to_fp32_half` (the halved decode MXFP4 uses).

use super::minifloat::{floor_log2, scale_pow2};

/// The NaN byte.
pub const UE8M0_NAN: u8 = 0xff;

/// Decodes a UE8M0 byte, `None` for 0xFF (NaN). Exact: 2^(e - 127), byte 0 is the f32
/// subnormal 2^-127.
pub fn try_ue8m0_to_f32(e: u8) -> Option<f32> {
    if e == UE8M0_NAN {
        None
    } else {
        Some(scale_pow2(1.0, e as i32 - 127))
    }
}

/// Decodes a UE8M0 byte; 0xFF gives NaN. Exact.
pub fn ue8m0_to_f32(e: u8) -> f32 {
    try_ue8m0_to_f32(e).unwrap_or(f32::NAN)
}

/// Half the value of a UE8M0 byte, 2^(e - 128), exact (byte 0 gives the f32 subnormal
/// 2^-128); `None` for 0xFF. This is ggml's `ggml_e8m0_to_fp32_half`, which MXFP4 pairs with
/// its doubled E2M1 table (`kvalues_mxfp4`); ggml itself does not check 0xFF (it would read
/// 2^127), lowbit reports it.
pub fn try_ue8m0_to_f32_half(e: u8) -> Option<f32> {
    if e == UE8M0_NAN {
        None
    } else {
        Some(scale_pow2(1.0, e as i32 - 128))
    }
}

/// f32 -> UE8M0 as ml_dtypes `float8_e8m0fnu` converts:
///
/// * rounding: to the nearest power of two *by value* (a mantissa of 1.5 or more rounds up);
///   ties (exactly 1.5 * 2^k) round up, to the larger power;
/// * underflow: positive values up to 2^-127 give byte 0x00 (2^-127): there is no zero;
/// * f32 subnormal inputs (below 2^-126) follow ml_dtypes' own quirk: every value strictly
///   above 2^-127 gives 0x01 (2^-126), i.e. rounds up, where nearest would give 0x00 below
///   1.5 * 2^-127;
/// * overflow: values that round above 2^127 give 0xFF (NaN);
/// * zero, negative values, infinities and NaN give 0xFF (NaN): E8M0 has no sign and no zero.
pub fn f32_to_ue8m0(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return UE8M0_NAN;
    }
    if x < f32::MIN_POSITIVE {
        return if x > scale_pow2(1.0, -127) { 1 } else { 0 };
    }
    let e = floor_log2(x);
    // Mantissa in [1, 2): its top fraction bit decides (>= 1.5 rounds up, ties up).
    let m = scale_pow2(x, -e);
    let e = if m >= 1.5 { e + 1 } else { e };
    let biased = e + 127;
    if biased < 0 {
        0
    } else if biased > 254 {
        UE8M0_NAN
    } else {
        biased as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_edges() {
        assert_eq!(try_ue8m0_to_f32(127), Some(1.0));
        assert_eq!(try_ue8m0_to_f32(0).map(f32::to_bits), Some(0x0040_0000));
        assert_eq!(try_ue8m0_to_f32_half(0).map(f32::to_bits), Some(0x0020_0000));
        assert_eq!(try_ue8m0_to_f32_half(1).map(f32::to_bits), Some(0x0040_0000));
        assert_eq!(try_ue8m0_to_f32_half(2).map(f32::to_bits), Some(1 << 23));
        assert_eq!(try_ue8m0_to_f32_half(254), Some(2f32.powi(126)));
        assert_eq!(try_ue8m0_to_f32(0xff), None);
        assert_eq!(try_ue8m0_to_f32_half(0xff), None);
        assert!(ue8m0_to_f32(0xff).is_nan());
    }

    #[test]
    fn encode_rounding() {
        assert_eq!(f32_to_ue8m0(1.0), 127);
        assert_eq!(f32_to_ue8m0(1.5), 128);
        assert_eq!(f32_to_ue8m0(f32::from_bits(1.5f32.to_bits() - 1)), 127);
        assert_eq!(f32_to_ue8m0(3.0), 129);
        assert_eq!(f32_to_ue8m0(1e-45), 0);
        assert_eq!(f32_to_ue8m0(f32::from_bits(0x0040_0000)), 0);
        assert_eq!(f32_to_ue8m0(f32::from_bits(0x0040_0001)), 1);
        assert_eq!(f32_to_ue8m0(0.0), 0xff);
        assert_eq!(f32_to_ue8m0(-1.0), 0xff);
        assert_eq!(f32_to_ue8m0(f32::MAX), 0xff);
    }
}

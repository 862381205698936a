//! UE8M0, the OCP MX block scale: an unsigned biased exponent, value 2^(e - 127); 0xFF is NaN.
//! Byte 0x00 is 2^-127, an f32 subnormal, represented exactly.
//!
//! Source: OCP Microscaling Formats (MX) v1.0; ml_dtypes `float8_e8m0fnu`.

use super::minifloat::scale_pow2;

/// The NaN byte.
pub const UE8M0_NAN: u8 = 0xff;

/// Decodes a UE8M0 byte, `None` for 0xFF (NaN). Exact.
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

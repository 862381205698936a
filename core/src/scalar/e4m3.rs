//! OCP E4M3FN (FP8): sign bit, 4 exponent bits (bias 7), 3 mantissa bits, max 448, no
//! infinities; 0x7F and 0xFF are NaN. (ggml's NVFP4 scale, UE4M3, has conversions of its own:
//! see `ue4m3.rs`.)
//!
//! Source: OCP 8-bit Floating Point Specification (OFP8) rev 1.0; ml_dtypes `float8_e4m3fn`
//! (every byte's decode and the f32 -> E4M3FN rounding are checked against it in
//! `tests/scalars.rs`).

use super::minifloat::{code_value, rne_code};

/// Largest finite E4M3FN magnitude.
pub const E4M3_MAX: f32 = 448.0;

/// Decodes an E4M3FN byte. Exact (subnormals M * 2^-9, normals (8 + M) * 2^(E - 10)).
/// 0x7F / 0xFF give NaN; 0x80 gives -0.0.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let mag = b & 0x7f;
    if mag == 0x7f {
        return f32::NAN;
    }
    let v = code_value(mag as u32, 3, 7);
    if b & 0x80 != 0 {
        -v
    } else {
        v
    }
}

/// Decodes an E4M3FN byte, `None` for the NaN codes.
pub fn try_e4m3_to_f32(b: u8) -> Option<f32> {
    let v = e4m3_to_f32(b);
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// f32 -> E4M3FN as ml_dtypes converts: round to nearest, ties to the even code (also in the
/// subnormal range, step 2^-9); a magnitude that rounds above 448 (that is, >= 464 with the
/// tie at 464 going down to 448) becomes NaN (0x7F / 0xFF), as does ±inf: there is no
/// saturation. NaN gives 0x7F or 0xFF (its sign kept). -0.0 and negative values that round to
/// zero give 0x80.
pub fn f32_to_e4m3_rne(x: f32) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if !x.is_finite() {
        return sign | 0x7f;
    }
    let code = rne_code(x.abs(), 3, 7);
    if code >= 0x7f {
        sign | 0x7f
    } else {
        sign | code as u8
    }
}

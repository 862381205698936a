//! E2M1, the OCP FP4 element: sign in bit 3, magnitude index in bits 0-2 onto
//! {0, 0.5, 1, 1.5, 2, 3, 4, 6}. No infinities, no NaN; -0 (code 8) exists.
//!
//! Source: OCP Microscaling Formats (MX) v1.0 spec, table of FP4 E2M1 values; ggml
//! `kvalues_mxfp4` holds the same magnitudes doubled.

use super::minifloat::rne_code;

/// The value of each of the 16 E2M1 codes.
pub const E2M1_VALUES: [f32; 16] =
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

/// Largest E2M1 magnitude.
pub const E2M1_MAX: f32 = 6.0;

/// Decodes the low 4 bits of `code` (higher bits are ignored). Exact.
#[inline]
pub fn e2m1_to_f32(code: u8) -> f32 {
    E2M1_VALUES[(code & 15) as usize]
}

/// f32 -> E2M1, round to nearest, ties to the even code (ml_dtypes `float4_e2m1fn`; checked
/// against it on every midpoint in `tests/scalars.rs`). Saturates: |x| > 6, including ±inf,
/// gives ±6. -0.0 and negative values that round to zero give code 8 (-0).
/// NaN gives `None`: E2M1 has no NaN (ml_dtypes silently writes a zero code for it).
pub fn f32_to_e2m1_rne(x: f32) -> Option<u8> {
    if x.is_nan() {
        return None;
    }
    let sign = if x.is_sign_negative() { 8 } else { 0 };
    let a = x.abs();
    let code = if a >= E2M1_MAX { 7 } else { rne_code(a, 1, 1).min(7) as u8 };
    Some(sign | code)
}

/// f32 -> E2M1 magnitude index (0..=7) of |x|, nearest with ties toward the smaller magnitude
/// (hipfire's quantizer; ggml's `best_index_mxfp4` on exact ties). The midpoints are compared
/// exactly (no scaling happens here). Saturates at 6; NaN gives 0.
pub fn e2m1_index_ties_down(a: f32) -> u8 {
    // Midpoints between consecutive magnitudes; a value equal to a midpoint stays below it.
    const MID: [f32; 7] = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0];
    let a = a.abs();
    let mut i = 0u8;
    while (i as usize) < MID.len() && a > MID[i as usize] {
        i += 1;
    }
    i
}

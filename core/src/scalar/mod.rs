//! The scalar types that low-bit formats store: element codes (E2M1) and scale bytes (E4M3,
//! UE4M3, UE4M3-b8, UE8M0), plus f16/bf16 from the `half` crate.
//!
//! Every conversion documents its rounding, tie rule, NaN handling and saturation. Decoders
//! are exact (each code maps to one `f32`); the few codes that mean NaN or are illegal are
//! surfaced as `None` by the `try_` functions so block decoders can report them.
//!
//! What must not live here: block layouts and scale *searches* (those are per format).

mod e2m1;
mod e4m3;
mod minifloat;
mod ue4m3_b8;
mod ue8m0;

pub use e2m1::*;
pub use e4m3::*;
pub use ue4m3_b8::*;
pub use ue8m0::*;

pub use half::{bf16, f16};

/// f32 -> f16, IEEE round-to-nearest-even; overflow gives ±inf, NaN stays NaN.
/// (This is `half::f16::from_f32`, restated so the rule is documented where it is used.)
#[inline]
pub fn f32_to_f16_rne(x: f32) -> f16 {
    f16::from_f32(x)
}

/// f32 -> f16 by truncation of the mantissa (round toward zero), as hipfire writes its row
/// scale. Overflow: values beyond f16's finite range become ±inf exactly as truncating the
/// exponent would not allow, so they saturate to ±inf; NaN stays NaN.
pub fn f32_to_f16_truncate(x: f32) -> f16 {
    let r = f16::from_f32(x);
    if !x.is_finite() || r.to_f32() == x {
        return r;
    }
    // RNE may have rounded away from zero; step one ulp back toward zero if so.
    if r.to_f32().abs() > x.abs() {
        f16::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

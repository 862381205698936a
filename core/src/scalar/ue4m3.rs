//! UE4M3 as ggml stores NVFP4's block scales: an unsigned E4M3 (4 exponent bits, bias 7,
//! 3 mantissa bits, max 448), with ggml's own conversions, which differ from OCP E4M3FN
//! rounding in several ways reproduced here bit for bit.
//!
//! Source: ggml `ggml/src/ggml-impl.h` (`ggml_ue4m3_to_fp32`, `ggml_fp32_to_ue4m3`); gguf-py
//! `gguf/quants.py` class `NVFP4` ports both (the oracle for `tests/scalars.rs`).
//!
//! Decode (ggml): bytes 0x00 and 0x7F give 0; otherwise exponent field `(b >> 3) & 15` and
//! mantissa `b & 7`, so bit 7 is ignored. lowbit decodes exactly that, except that it reports
//! 0x7F and 0xFF (the E4M3 NaN codes; ggml reads 0 and 480) as illegal instead of silently
//! producing a value. ggml's encoder never writes either.

use super::minifloat::code_value;

/// Largest value ggml's encoder produces (byte 0x7E).
pub const UE4M3_MAX: f32 = 448.0;

/// The largest byte ggml's encoder produces.
pub const UE4M3_MAX_BYTE: u8 = 0x7e;

/// Decodes a ggml UE4M3 scale byte: `None` for 0x7F and 0xFF (E4M3's NaN codes); bit 7 of
/// every other byte is ignored, as in ggml (0x80 reads as 0, 0x81 as 0x01, ...). Exact.
pub fn try_ue4m3_to_f32(b: u8) -> Option<f32> {
    let m = b & 0x7f;
    if m == 0x7f {
        return None;
    }
    Some(code_value(m as u32, 3, 7))
}

/// Half the value of a ggml UE4M3 byte (ggml's `ggml_ue4m3_to_fp32` returns this, to pair with
/// the doubled E2M1 table `kvalues_mxfp4`); `None` for 0x7F / 0xFF. Exact.
pub fn try_ue4m3_to_f32_half(b: u8) -> Option<f32> {
    try_ue4m3_to_f32(b).map(|v| v * 0.5)
}

/// f32 -> UE4M3 byte exactly as ggml's `ggml_fp32_to_ue4m3` (byte-exact, checked against
/// gguf-py's port on every midpoint):
///
/// * `x <= 0` and NaN give 0x00; `x > 448` is clamped to 448;
/// * below 2^-6 (E4M3's subnormal range): `m = (int)(x * 512 + 0.5)` in f32 arithmetic, i.e.
///   nearest with ties up (the f32 addition itself may round up by one ulp), clamped to 7,
///   and `m < 1` gives 0x00. So values in [7.5, 8) * 2^-9 give 0x07, not the normal 0x08;
/// * normal range: the mantissa is rounded half up on the first dropped bit (ties away from
///   zero, not to even); a carry into the exponent is kept;
/// * any value whose exponent field would reach 15 (>= 256 before or after rounding) gives
///   0x7E (448): ggml saturates the whole top binade, so 0x78..0x7D are never produced.
pub fn f32_to_ue4m3(x: f32) -> u8 {
    // NaN fails this comparison too.
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = if x > UE4M3_MAX { UE4M3_MAX } else { x };
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 7;
    if exp <= 0 {
        let m = (x * 512.0 + 0.5) as i32;
        return if m < 1 { 0 } else { m.min(7) as u8 };
    }
    if exp >= 15 {
        return UE4M3_MAX_BYTE;
    }
    let mut man = ((bits >> 20) & 7) as i32 + ((bits >> 19) & 1) as i32;
    let mut exp = exp;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return UE4M3_MAX_BYTE;
        }
    }
    ((exp << 3) | man) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_values() {
        assert_eq!(try_ue4m3_to_f32(0x38), Some(1.0));
        assert_eq!(try_ue4m3_to_f32(0x7e), Some(448.0));
        assert_eq!(try_ue4m3_to_f32(0x01), Some(2f32.powi(-9)));
        assert_eq!(try_ue4m3_to_f32(0x80), Some(0.0));
        assert_eq!(try_ue4m3_to_f32(0xb8), Some(1.0));
        assert_eq!(try_ue4m3_to_f32(0x7f), None);
        assert_eq!(try_ue4m3_to_f32(0xff), None);
        assert_eq!(try_ue4m3_to_f32_half(0x38), Some(0.5));
    }

    #[test]
    fn encode_quirks() {
        assert_eq!(f32_to_ue4m3(1.0), 0x38);
        assert_eq!(f32_to_ue4m3(1.0625), 0x39); // tie rounds up
        assert_eq!(f32_to_ue4m3(240.0), 0x77);
        assert_eq!(f32_to_ue4m3(248.0), 0x7e); // carries into the top binade -> 448
        assert_eq!(f32_to_ue4m3(256.0), 0x7e);
        assert_eq!(f32_to_ue4m3(1e9), 0x7e);
        assert_eq!(f32_to_ue4m3(7.75 / 512.0), 0x07); // subnormal clamp, not 0x08
        assert_eq!(f32_to_ue4m3(0.4 / 512.0), 0x00);
        assert_eq!(f32_to_ue4m3(-1.0), 0x00);
        assert_eq!(f32_to_ue4m3(f32::NAN), 0x00);
    }
}

//! UE4M3-b8, the ROCmFPX scale byte: unsigned, 4 exponent bits with bias 8, 3 mantissa bits.
//! E = b >> 3, M = b & 7; E = 0: M * 2^-10; otherwise (8 + M) * 2^(E - 11).
//! Bytes 0x00..=0x7E are legal (0 .. 224); 0x7F and above are illegal and must be rejected.
//!
//! Source: github ciru-ai/ROCmFPX `ggml/rocmfpx/rocmfpx.h`; FORMATS.md section 1
//! (worked: 0x38 = 0.5, 0x7E = 224, 0x01 = 2^-10, 0x12 = 0.01953125).

use super::minifloat::code_value;

/// Largest legal UE4M3-b8 byte.
pub const UE4M3_B8_MAX_BYTE: u8 = 0x7e;

/// Largest UE4M3-b8 value (byte 0x7E).
pub const UE4M3_B8_MAX: f32 = 224.0;

/// Decodes a UE4M3-b8 byte; `None` for the illegal bytes 0x7F..=0xFF. Exact.
pub fn try_ue4m3_b8_to_f32(b: u8) -> Option<f32> {
    if b > UE4M3_B8_MAX_BYTE {
        None
    } else {
        Some(code_value(b as u32, 3, 8))
    }
}

/// The value of every legal UE4M3-b8 byte, indexed by byte (0x00..=0x7E).
pub fn ue4m3_b8_table() -> [f32; 127] {
    let mut t = [0f32; 127];
    let mut b = 0;
    while b < 127 {
        t[b] = code_value(b as u32, 3, 8);
        b += 1;
    }
    t
}

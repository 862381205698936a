//! NEON weight decoders for the 32-element formats against Q8_0 activations: Q8_0, Q4_0 and
//! ROCmFP2 (the body is [`super::int`]).
//!
//! * Q8_0 (ggml `block_q8_0`: f16 `d`, then 32 signed quants): the quants as they are, `d`
//!   widened and broadcast.
//! * Q4_0 (ggml `block_q4_0`: f16 `d`, then 16 bytes): low nibbles of `qs[0..16]` are elements
//!   0..16, high nibbles 16..32; value `nibble - 8`.
//! * ROCmFP2 (github ciru-ai/ROCmFPX; the core's `format::rocmfpx::fp2`): 8 code bytes, element
//!   `4j + i` is bits `2i` of byte `j`, levels `{-4, -1, +1, +4}`; then two UE4M3-b8 scale
//!   bytes, `e[0]` for elements 0..16 and `e[1]` for 16..32 (bytes 0x7F..=0xFF are illegal
//!   and rejected at upload; the table index is masked only to stay in bounds). Each code byte is copied to 4 lanes by `tbl`, shifted right by
//!   `0, 2, 4, 6` per lane (`ushl` with negative counts), masked to 2 bits, and the level
//!   looked up with a second `tbl`.
//!
//! What must not live here: the kernel body, other formats.

use std::arch::aarch64::*;

use super::int::{f16_to_f32, IntFormat};

/// Q8_0 weights.
pub(crate) struct Q8_0;
/// Q4_0 weights.
pub(crate) struct Q4_0;
/// ROCmFP2 weights.
pub(crate) struct Fp2;

impl IntFormat for Q8_0 {
    const BYTES: usize = 34;
    const SUB: usize = 1;
    const Q8K: bool = false;

    #[inline(always)]
    unsafe fn decode(p: *const u8, _t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        // SAFETY: reads bytes 0..34 of the block at `p` (caller); NEON is available.
        unsafe {
            let d = f16_to_f32(u16::from_le_bytes([*p, *p.add(1)]));
            (vld1q_s8(p.add(2).cast()), vld1q_s8(p.add(18).cast()), vdupq_n_f32(d))
        }
    }
}

impl IntFormat for Q4_0 {
    const BYTES: usize = 18;
    const SUB: usize = 1;
    const Q8K: bool = false;

    #[inline(always)]
    unsafe fn decode(p: *const u8, _t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        // SAFETY: reads bytes 0..18 of the block at `p` (caller); NEON is available.
        unsafe {
            let d = f16_to_f32(u16::from_le_bytes([*p, *p.add(1)]));
            let x = vld1q_u8(p.add(2));
            let eight = vdupq_n_s8(8);
            let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0F))), eight);
            let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(x)), eight);
            (lo, hi, vdupq_n_f32(d))
        }
    }
}

/// The 2-bit codes of 32 elements from 8 bytes at `p` (element `4j + i` = bits `2i` of byte
/// `j`), looked up in `lut` (indices 0..4): elements 0..16 and 16..32.
///
/// # Safety
/// NEON is available; `p .. p + 8` is readable.
#[inline(always)]
pub(crate) unsafe fn codes2(p: *const u8, lut: int8x16_t) -> (int8x16_t, int8x16_t) {
    const SPREAD: [u8; 32] = {
        let mut t = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = (i / 4) as u8;
            i += 1;
        }
        t
    };
    const SHIFT: [i8; 16] = [0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6];
    // SAFETY: reads 8 bytes at `p` (caller) and the 32 + 16 bytes of the constant tables;
    // register-only NEON operations otherwise.
    unsafe {
        let b = vld1_u8(p);
        let v = vcombine_u8(b, b);
        let sh = vld1q_s8(SHIFT.as_ptr());
        let m = vdupq_n_u8(3);
        let c0 = vandq_u8(vshlq_u8(vqtbl1q_u8(v, vld1q_u8(SPREAD.as_ptr())), sh), m);
        let c1 = vandq_u8(vshlq_u8(vqtbl1q_u8(v, vld1q_u8(SPREAD.as_ptr().add(16))), sh), m);
        (vqtbl1q_s8(lut, c0), vqtbl1q_s8(lut, c1))
    }
}

/// UE4M3-b8 byte (index `b & 0x7F`) to f32, exactly: `m * 2^(max(E, 1) - 11)` with
/// `m = M + 8` for E > 0 and `m = M` for E = 0 (ROCmFPX's scale rule, as the core's
/// `scalar::try_ue4m3_b8_to_f32` states it); entry 0x7F (an illegal byte, rejected at upload)
/// is 0. A test checks every legal byte against the core.
static UE4M3_B8: [f32; 128] = {
    let mut t = [0f32; 128];
    let mut b = 0;
    while b < 0x7F {
        let e = b >> 3;
        let m = if e > 0 { (b & 7) + 8 } else { b & 7 };
        let emax = if e > 1 { e } else { 1 };
        t[b] = m as f32 * f32::from_bits(((emax + 127 - 11) as u32) << 23);
        b += 1;
    }
    t
};

impl IntFormat for Fp2 {
    const BYTES: usize = 10;
    const SUB: usize = 1;
    const Q8K: bool = false;

    #[inline(always)]
    unsafe fn decode(p: *const u8, _t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        const LUT: [i8; 16] = [-4, -1, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        // SAFETY: reads bytes 0..10 of the block at `p` (caller); table indices are masked to
        // 0..128; NEON is available.
        unsafe {
            let (w0, w1) = codes2(p, vld1q_s8(LUT.as_ptr()));
            let s0 = UE4M3_B8[usize::from(*p.add(8) & 0x7F)];
            let s1 = UE4M3_B8[usize::from(*p.add(9) & 0x7F)];
            let sv = vcombine_f32(vdup_n_f32(s0), vdup_n_f32(s1));
            (w0, w1, sv)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue4m3_b8_table_matches_core() {
        for b in 0u8..=0x7E {
            let want = lowbit_core::scalar::try_ue4m3_b8_to_f32(b).unwrap();
            assert_eq!(UE4M3_B8[usize::from(b)].to_bits(), want.to_bits(), "byte {b:#04x}");
        }
    }
}

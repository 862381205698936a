//! The arithmetic ggml's four 32-element "legacy" formats share: Q4_0 and Q5_0 (symmetric,
//! `w = (q - half) * d`, dot against Q8_0) and Q4_1 and Q5_1 (affine, `w = q * d + m`, dot
//! against Q8_1). Each format module keeps its block layout, its code narrowing and its facts;
//! this module holds the nibble/5th-bit packing, the scale searches, the decode loops and the
//! dot-product loops, written once.
//!
//! What must not live here: block structs, anything another format family uses.
//!
//! Facts carried over, with their sources:
//! * Nibble order: ggml `ggml/src/ggml-common.h` `block_q4_0`: element `j` in the low nibble of
//!   `qs[j]`, element `j + 16` in the high nibble (Q4_1, Q5_0, Q5_1 keep it for the low bits).
//! * 5th bits: `block_q5_0` / `block_q5_1` `qh[4]`, a little-endian u32 whose bit `j` is bit 4
//!   of element `j`; packed as `quantize_row_q5_0_ref`'s `qh |= ((q & 0x10) >> 4) << j`.
//! * Scales: ggml `ggml/src/ggml-quants.c` `quantize_row_q4_0_ref` / `quantize_row_q5_0_ref`
//!   (signed largest-magnitude `max`, `d = max / -half`) and `quantize_row_q4_1_ref` /
//!   `quantize_row_q5_1_ref` (`min`/`max` from ±FLT_MAX with strict compares,
//!   `d = (max - min) / levels`); `id = d != 0 ? 1/d : 0` in all four.
//! * Dot loops: ggml `ggml/src/ggml-cpu/quants.c` `ggml_vec_dot_q{4,5}_{0,1}_q8_{0,1}_generic`.

use half::f16;

use crate::block::{check_block_out, read_block, Block};
use crate::codec::ActRow;
use crate::error::Result;
use crate::registry::FormatId;

use super::q8::store_f16;

/// The per-format parts of a legacy 32-element block.
pub(crate) trait Legacy32: Block {
    /// What the stored code is offset by: `w = (q - OFFSET) * d` for Q4_0 (8) and Q5_0 (16);
    /// 0 for Q4_1 and Q5_1, whose offset is the stored minimum `m`.
    const OFFSET: i32;
    /// The code of element `j` (0..32).
    fn code_at(&self, j: usize) -> u8;
    /// `(d, m)` as f32, or `Error::NonFiniteScale` naming the first that is NaN or ±inf and its
    /// offset in the block; `m` is 0 for the symmetric formats.
    fn checked_scales(&self) -> Result<(f32, f32)>;
}

/// The 4-bit code of element `j` (0..32) in ggml's nibble order.
#[inline]
pub(crate) fn code4(qs: &[u8; 16], j: usize) -> u8 {
    let b = qs[j % 16];
    if j < 16 {
        b & 0x0F
    } else {
        b >> 4
    }
}

/// The 5-bit code of element `j` (0..32) from `qh` and `qs` (Q5_0, Q5_1).
#[inline]
pub(crate) fn code5(qh: [u8; 4], qs: &[u8; 16], j: usize) -> u8 {
    let hi = ((u32::from_le_bytes(qh) >> (j % 32)) & 1) as u8;
    code4(qs, j) | (hi << 4)
}

/// Packs 32 codes into 16 bytes as ggml's Q4_0/Q4_1 encoders do: `qs[j] = q[j] | q[j + 16] << 4`
/// (no mask: the codes are already clamped to 15).
#[inline]
pub(crate) fn pack4(codes: &[u8; 32]) -> [u8; 16] {
    core::array::from_fn(|j| codes[j] | (codes[j + 16] << 4))
}

/// Packs 32 five-bit codes into `(qh, qs)` (Q5_0, Q5_1): the C code's
/// `qs[j] = (q0 & 15) | ((q1 & 15) << 4)` and `qh |= ((q & 0x10) >> 4) << j`.
#[inline]
pub(crate) fn pack5(codes: &[u8; 32]) -> ([u8; 4], [u8; 16]) {
    let mut qs = [0u8; 16];
    let mut qh = 0u32;
    for (j, q) in qs.iter_mut().enumerate() {
        let (c0, c1) = (codes[j], codes[j + 16]);
        *q = (c0 & 0x0F) | ((c1 & 0x0F) << 4);
        qh |= u32::from((c0 & 0x10) >> 4) << j;
        qh |= u32::from((c1 & 0x10) >> 4) << (j + 16);
    }
    (qh.to_le_bytes(), qs)
}

/// The symmetric encoders' codes (Q4_0 `half = 8`, Q5_0 `half = 16`): `max` the signed value of
/// the first element with the largest |x|; `d = max / -half` (f32), stored as f16 rounded to
/// nearest even (`Error::OutOfRange` naming that element when beyond f16's range); `id = 1/d`
/// (0 if `d == 0`); `q = min(2*half - 1, (int8)trunc(x*id + (half + 0.5)))`, two separate f32
/// operations (no FMA), the float-to-int conversion as C on x86-64.
pub(crate) fn encode_symmetric(x: &[f32], format: FormatId, half: i8) -> Result<(f16, [u8; 32])> {
    let (mut amax, mut max, mut imax) = (0f32, 0f32, 0usize);
    for (i, &v) in x.iter().enumerate() {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
            imax = i;
        }
    }
    let d = max / -f32::from(half);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let bias = f32::from(half) + 0.5;
    let top = 2 * half - 1;
    let codes =
        core::array::from_fn(|j| (super::q8::c_f32_to_i32(x[j] * id + bias) as i8).min(top) as u8);
    Ok((store_f16(d, format, imax)?, codes))
}

/// The affine encoders' scales (Q4_1 `levels = 15`, Q5_1 `levels = 31`): `min`, `max` over the
/// block; `d = (max - min) / levels` (f32); `d` and `m = min` stored as f16 rounded to nearest
/// even, `d` first (`Error::OutOfRange` naming the largest-magnitude element); `id = 1/d` (0 if
/// `d == 0`). Returns `(d, m, min, id)`; the caller narrows `(x - min)*id + 0.5` its own way.
pub(crate) fn affine_scales(
    x: &[f32],
    format: FormatId,
    levels: f32,
) -> Result<(f16, f16, f32, f32)> {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / levels;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let big = super::q8::argmax_abs(x);
    Ok((store_f16(d, format, big)?, store_f16(min, format, big)?, min, id))
}

/// Symmetric decode: `w = (float)(q - OFFSET) * d` in f32 (exact).
pub(crate) fn decode_symmetric<B: Legacy32>(b: &B, out: &mut [f32]) -> Result<()> {
    check_block_out::<B>(out)?;
    let (d, _) = b.checked_scales()?;
    for (j, o) in out.iter_mut().enumerate() {
        *o = (i32::from(b.code_at(j)) - B::OFFSET) as f32 * d;
    }
    Ok(())
}

/// Affine decode: `w = (float)q * d + m` in f32 (the product is exact, so FMA or not, one
/// rounding).
pub(crate) fn decode_affine<B: Legacy32>(b: &B, out: &mut [f32]) -> Result<()> {
    check_block_out::<B>(out)?;
    let (d, m) = b.checked_scales()?;
    for (j, o) in out.iter_mut().enumerate() {
        *o = f32::from(b.code_at(j)) * d + m;
    }
    Ok(())
}

/// Dot of symmetric weights with Q8_0 activations: per block the exact `i32`
/// `sumi = Σ (qw - OFFSET)·qa`, then `sumf += step(sumi as f32, dw, da)` from `sumf = 0`, blocks
/// in order. `step` is the format's own f32 association (ggml's Q4_0 and Q5_0 differ). A
/// non-finite weight `d` gives `Error::NonFiniteScale` with its offset in `w`.
pub(crate) fn dot_q8_0<B: Legacy32>(
    w: &[u8],
    act: ActRow<'_>,
    step: fn(f32, f32, f32) -> f32,
) -> Result<f32> {
    let a = act.q8_0(B::FORMAT)?;
    let mut sumf = 0f32;
    for (i, ab) in a.iter().enumerate() {
        let wb: B = read_block(w, i);
        let (dw, _) = wb.checked_scales().map_err(|e| e.at(i * B::BYTES))?;
        let sumi: i32 =
            (0..32).map(|j| (i32::from(wb.code_at(j)) - B::OFFSET) * i32::from(ab.qs[j])).sum();
        sumf += step(sumi as f32, dw, ab.d.to_f32());
    }
    Ok(sumf)
}

/// Dot of affine weights with Q8_1 activations: per block the exact `i32` `sumi = Σ qw·qa`, then
/// `sumf += ((dw * da) * (float)sumi) + (mw * sa)` in f32 (this association, no FMA), blocks in
/// order from `sumf = 0`. A non-finite weight `d` or `m` gives `Error::NonFiniteScale` with its
/// offset in `w`.
pub(crate) fn dot_q8_1<B: Legacy32>(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8_1(B::FORMAT)?;
    let mut sumf = 0f32;
    for (i, ab) in a.iter().enumerate() {
        let wb: B = read_block(w, i);
        let (dw, mw) = wb.checked_scales().map_err(|e| e.at(i * B::BYTES))?;
        let sumi: i32 = (0..32).map(|j| i32::from(wb.code_at(j)) * i32::from(ab.qs[j])).sum();
        sumf += (dw * ab.d.to_f32()) * sumi as f32 + mw * ab.s.to_f32();
    }
    Ok(sumf)
}

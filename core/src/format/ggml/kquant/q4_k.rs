//! ggml Q4_K: 256 elements in 8 sub-blocks of 32, 4-bit quants, a 6-bit scale and a 6-bit min
//! per sub-block, f16 super-block scales `d` and `dmin` (144 bytes, 4.5 bits per weight).
//!
//! Layout: ggml-org/llama.cpp `ggml/src/ggml-common.h` `block_q4_K`. Unpacking and arithmetic:
//! `ggml/src/ggml-quants.c` `dequantize_row_q4_K` and gguf-py `gguf/quants.py`
//! `Q4_K.dequantize_blocks`. Dot product: `ggml/src/ggml-cpu/quants.c`
//! `ggml_vec_dot_q4_K_q8_K_generic`. The decode and dot arithmetic is shared with Q5_K
//! (`decode_scaled_min`, `dot_block_k4`).

use half::f16;

use super::scales::scales_mins_k4;
use super::{bsum_min_term, finite_scale, lane_dot, lane_sums, LaneAcc, LaneDot, QK_K};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q4K;

/// ggml `block_q4_K`.
///
/// Element `e` has quant `(qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 15`, in
/// sub-block `e / 32` whose scale and min come from [`super::scales::get_scale_min_k4`]. Value:
/// `(d * scale) * q - (dmin * min)`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4K {
    /// Super-block scale for the scales (byte offset 0).
    pub d: f16,
    /// Super-block scale for the mins (byte offset 2).
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed.
    pub scales: [u8; 12],
    /// 4-bit quants, two per byte.
    pub qs: [u8; 128],
}
assert_block_size!(BlockQ4K, FormatId::Q4K);

/// Byte offset of `d` in Q4_K and Q5_K blocks.
pub const D_OFFSET: usize = 0;
/// Byte offset of `dmin` in Q4_K and Q5_K blocks.
pub const DMIN_OFFSET: usize = 2;

/// `d` and `dmin` of a Q4_K/Q5_K block as f32; NaN or infinite -> NonFiniteScale at offset 0
/// (`d`, checked first) or 2 (`dmin`).
pub(crate) fn scales_f32(format: FormatId, d: f16, dmin: f16) -> Result<(f32, f32)> {
    Ok((finite_scale(format, d, "d", D_OFFSET)?, finite_scale(format, dmin, "dmin", DMIN_OFFSET)?))
}

/// The low nibbles of Q4_K/Q5_K quants in element order: element `e` takes byte
/// `32 * (e / 64) + e % 32`, low nibble for `(e % 64) < 32`, high nibble otherwise.
pub(crate) fn nibbles(qs: &[u8; 128]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (e, v) in q.iter_mut().enumerate() {
        *v = ((qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0F) as i8;
    }
    q
}

/// Q4_K/Q5_K decode: per sub-block of 32, `d1 = d * scale` and `m1 = dmin * min` (f32), then per
/// element `d1 * q - m1` (two f32 operations, not fused), as ggml and gguf-py compute it.
pub(crate) fn decode_scaled_min(
    d: f32,
    dmin: f32,
    scales: &[u8; 12],
    q: &[i8; QK_K],
    out: &mut [f32],
) {
    let (sc, m) = scales_mins_k4(scales);
    for (((o, qg), &s), &mn) in out.chunks_exact_mut(32).zip(q.chunks_exact(32)).zip(&sc).zip(&m) {
        let d1 = d * f32::from(s);
        let m1 = dmin * f32::from(mn);
        for (y, &x) in o.iter_mut().zip(qg) {
            *y = d1 * f32::from(x) - m1;
        }
    }
}

/// One Q4_K/Q5_K block's contribution to the lane accumulator (see [`dot_row`]).
pub(crate) fn dot_block_k4(
    acc: &mut LaneAcc,
    d: f32,
    dmin: f32,
    scales: &[u8; 12],
    q: &[i8; QK_K],
    y: &BlockQ8K,
) {
    let (sc, m) = scales_mins_k4(scales);
    let scale16: [i32; 16] = core::array::from_fn(|g| i32::from(sc[g / 2]));
    let lanes = lane_sums(q, &y.qs, &scale16);
    acc.add_lanes(d * y.d, &lanes);
    acc.sub_min(dmin * y.d, bsum_min_term(&y.bsums, &m));
}

impl BlockQ4K {
    /// `d` and `dmin` as f32 (NaN/inf -> NonFiniteScale at offset 0 or 2).
    pub fn scales_f32(&self) -> Result<(f32, f32)> {
        scales_f32(FORMAT, self.d, self.dmin)
    }

    /// The 256 quants (0..=15) in element order.
    pub fn quants(&self) -> [i8; QK_K] {
        nibbles(&self.qs)
    }
}

impl Block for BlockQ4K {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = QK_K;

    /// Per sub-block of 32, `d1 = d * scale`, `m1 = dmin * min` (f32), per element
    /// `d1 * q - m1` (two f32 operations, not fused), as ggml and gguf-py compute it.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let (d, dmin) = self.scales_f32()?;
        decode_scaled_min(d, dmin, &self.scales, &self.quants(), out);
        Ok(())
    }
}

impl LaneDot for BlockQ4K {
    /// See [`dot_row`].
    fn add_block(&self, acc: &mut LaneAcc, y: &BlockQ8K) -> Result<()> {
        let (d, dmin) = self.scales_f32()?;
        dot_block_k4(acc, d, dmin, &self.scales, &self.quants(), y);
        Ok(())
    }
}

/// Reference dot product of a Q4_K row with a Q8_K row (ggml `ggml_vec_dot_q4_K_q8_K_generic`;
/// Q5_K uses the same order).
///
/// Per block: eight exact i32 lane sums `lane[l] = sum_{e % 8 == l} scale[e/32] * q[e] * q8[e]`
/// and the exact min term `sumi = sum_j bsums[j] * min[j/2]` (from the activation block's stored
/// `bsums`, as ggml does); `sums[l] += (d_w * d_a) * (lane[l] as f32)` (eight f32 accumulators)
/// and `sumf -= (dmin_w * d_a) * (sumi as f32)`, in block order; at the end
/// `sumf += sums[0]; ...; sumf += sums[7]`. Each operation is rounded to f32, no fusion. Error
/// against the exact sum: `|y - y_ref| <= c * n * 2^-24 * sum|terms|` with `c = 1`, `n` the row
/// length and `terms` the per-element products `d*scale*q*d_a*q8` and `dmin*min*d_a*q8` counted
/// separately (tested in `tests/ggml_kquant.rs`). NaN/inf weight scales -> NonFiniteScale; the
/// activation `d` is used as is.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    lane_dot::<BlockQ4K>(w, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    #[test]
    fn decode_nibble_order() {
        let mut b = BlockQ4K::zeroed();
        b.d = f16::from_f32(1.0);
        b.dmin = f16::from_f32(0.5);
        b.scales = [0xFF; 12]; // every scale and min 63
        b.qs[33] = 0x5A; // byte 33: elements 64 + 1 (low nibble 10) and 96 + 1 (high nibble 5)
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        assert_eq!(out[65], 63.0 * 10.0 - 31.5);
        assert_eq!(out[97], 63.0 * 5.0 - 31.5);
        assert_eq!(out[0], -31.5);
    }

    #[test]
    fn rejects_nan_d_before_dmin() {
        let mut b = BlockQ4K::zeroed();
        b.d = f16::NAN;
        b.dmin = f16::INFINITY;
        let mut out = [0f32; 256];
        assert_eq!(
            b.decode(&mut out),
            Err(crate::Error::NonFiniteScale { format: FORMAT, field: "d", offset: 0 })
        );
    }
}

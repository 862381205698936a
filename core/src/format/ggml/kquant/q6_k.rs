//! ggml Q6_K: 256 elements in 16 sub-blocks of 16, 6-bit quants (low nibble in `ql`, 2 high bits
//! in `qh`) offset by 32, a signed 8-bit scale per sub-block, an f16 super-block scale `d`
//! (210 bytes, 6.5625 bits per weight).
//!
//! Layout: ggml-org/llama.cpp `ggml/src/ggml-common.h` `block_q6_K`. Unpacking and arithmetic:
//! `ggml/src/ggml-quants.c` `dequantize_row_q6_K` and gguf-py `gguf/quants.py`
//! `Q6_K.dequantize_blocks`. Dot product: `ggml/src/ggml-cpu/quants.c`
//! `ggml_vec_dot_q6_K_q8_K_generic`.

use half::f16;

use super::{decode_sub16, finite_scale, lane_dot, lane_sums, LaneAcc, LaneDot, QK_K};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q6K;

/// ggml `block_q6_K`.
///
/// Element `e = 128 * h + r` (h = 0, 1; r = 0..128) has low nibble
/// `(ql[64 * h + r % 64] >> (4 * (r / 64))) & 15` and high bits
/// `(qh[32 * h + r % 32] >> (2 * (r / 32))) & 3`; its quant is `(low | high << 4) - 32`
/// (-32..=31). Value: `(d * scales[e / 16]) * q`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ6K {
    /// Low 4 bits of each quant.
    pub ql: [u8; 128],
    /// High 2 bits of each quant.
    pub qh: [u8; 64],
    /// Signed scale per sub-block of 16.
    pub scales: [i8; 16],
    /// Super-block scale (byte offset 208).
    pub d: f16,
}
assert_block_size!(BlockQ6K, FormatId::Q6K);

/// Byte offset of `d` in the block.
pub const D_OFFSET: usize = 208;

impl BlockQ6K {
    /// `d` as f32; NaN or infinite -> [`crate::Error::NonFiniteScale`] at offset 208.
    pub fn d_f32(&self) -> Result<f32> {
        finite_scale(FORMAT, self.d, "d", D_OFFSET)
    }

    /// The 256 signed quants (-32..=31) in element order.
    pub fn quants(&self) -> [i8; QK_K] {
        let mut q = [0i8; QK_K];
        for (e, v) in q.iter_mut().enumerate() {
            let (h, r) = (e / 128, e % 128);
            let low = (self.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            let high = (self.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            *v = (low | (high << 4)) as i8 - 32;
        }
        q
    }
}

impl Block for BlockQ6K {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = QK_K;

    /// Per sub-block `dl = d * scale` (f32), then per element `dl * q` (one f32 multiply), as
    /// ggml and gguf-py compute it.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        decode_sub16(self.d_f32()?, &self.scales, &self.quants(), out);
        Ok(())
    }
}

impl LaneDot for BlockQ6K {
    /// See [`dot_row`].
    fn add_block(&self, acc: &mut LaneAcc, y: &BlockQ8K) -> Result<()> {
        let dw = self.d_f32()?;
        acc.add_lanes(dw * y.d, &lane_sums(&self.quants(), &y.qs, &self.scales.map(i32::from)));
        Ok(())
    }
}

/// Reference dot product of a Q6_K row with a Q8_K row (ggml `ggml_vec_dot_q6_K_q8_K_generic`).
///
/// Per block: eight exact i32 lane sums `lane[l] = sum_{e % 8 == l} scales[e/16] * q[e] * q8[e]`
/// (|lane| <= 2^24, so the conversion to f32 is exact); `sums[l] += (d_w * d_a) * (lane[l] as
/// f32)` (eight f32 accumulators, block order); at the end `sumf = 0 + sums[0] + ... + sums[7]`.
/// Each operation is rounded to f32, no fusion. Error against the exact sum:
/// `|y - y_ref| <= c * n * 2^-24 * sum|terms|` with `c = 1`, `n` the row length and `terms` the
/// per-element products `d*scale*q*d_a*q8` (tested in `tests/ggml_kquant.rs`). NaN/inf `d` ->
/// NonFiniteScale; the activation `d` is used as is.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    lane_dot::<BlockQ6K>(w, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    #[test]
    fn decode_bit_positions() {
        let mut b = BlockQ6K::zeroed();
        b.d = f16::from_f32(1.0);
        b.scales = [1; 16];
        // Element 128 + 64 + 5 = 197: ql[64 + 5] high nibble, qh[32 + 5] bits 4..6.
        b.ql[69] = 0xF0;
        b.qh[37] = 0b0011_0000;
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        assert_eq!(out[197], 31.0);
        // Element 133 = 128 + 5 reads the low nibble of ql[69] (0) and bits 0..2 of qh[37] (0).
        assert_eq!(out[133], -32.0);
    }
}

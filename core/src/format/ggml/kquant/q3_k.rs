//! ggml Q3_K: 256 elements in 16 sub-blocks of 16, 3-bit quants (2 low bits in `qs`, the high
//! bit in `hmask`), a signed 6-bit scale per sub-block, an f16 super-block scale `d` (110 bytes,
//! 3.4375 bits per weight).
//!
//! Layout: ggml-org/llama.cpp `ggml/src/ggml-common.h` `block_q3_K`. Unpacking and arithmetic:
//! `ggml/src/ggml-quants.c` `dequantize_row_q3_K` and gguf-py `gguf/quants.py`
//! `Q3_K.dequantize_blocks`. Dot product: `ggml/src/ggml-cpu/quants.c`
//! `ggml_vec_dot_q3_K_q8_K_generic`.

use half::f16;

use super::scales::q3k_scales;
use super::{decode_sub16, finite_scale, lane_dot, lane_sums, LaneAcc, LaneDot, QK_K};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q3K;

/// ggml `block_q3_K`.
///
/// Element `e` has low bits `(qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3` and
/// high bit `(hmask[e % 32] >> (e / 32)) & 1`; its quant is `low - 4` when the high bit is
/// **clear** and `low` when it is set (-4..=3). Value: `(d * (scale[e / 16] - 32)) * q`, the
/// 6-bit scales unpacked by [`super::scales::q3k_scales`].
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ3K {
    /// High bit of each quant (bit `e / 32` of byte `e % 32`).
    pub hmask: [u8; 32],
    /// Low 2 bits of each quant, four per byte.
    pub qs: [u8; 64],
    /// Sixteen packed 6-bit scales.
    pub scales: [u8; 12],
    /// Super-block scale (byte offset 108).
    pub d: f16,
}
assert_block_size!(BlockQ3K, FormatId::Q3K);

/// Byte offset of `d` in the block.
pub const D_OFFSET: usize = 108;

impl BlockQ3K {
    /// `d` as f32; NaN or infinite -> [`crate::Error::NonFiniteScale`] at offset 108.
    pub fn d_f32(&self) -> Result<f32> {
        finite_scale(FORMAT, self.d, "d", D_OFFSET)
    }

    /// The 256 signed quants (-4..=3) in element order.
    pub fn quants(&self) -> [i8; QK_K] {
        let mut q = [0i8; QK_K];
        for (e, v) in q.iter_mut().enumerate() {
            let low = (self.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            let high = (self.hmask[e % 32] >> (e / 32)) & 1;
            *v = low as i8 - if high == 0 { 4 } else { 0 };
        }
        q
    }
}

impl Block for BlockQ3K {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = QK_K;

    /// Per sub-block `dl = d * (scale - 32)` (f32), then per element `dl * q` (one f32
    /// multiply), as ggml and gguf-py compute it.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        decode_sub16(self.d_f32()?, &q3k_scales(&self.scales), &self.quants(), out);
        Ok(())
    }
}

impl LaneDot for BlockQ3K {
    /// See [`dot_row`].
    fn add_block(&self, acc: &mut LaneAcc, y: &BlockQ8K) -> Result<()> {
        let dw = self.d_f32()?;
        let sc = q3k_scales(&self.scales).map(i32::from);
        acc.add_lanes(dw * y.d, &lane_sums(&self.quants(), &y.qs, &sc));
        Ok(())
    }
}

/// Reference dot product of a Q3_K row with a Q8_K row (ggml `ggml_vec_dot_q3_K_q8_K_generic`).
///
/// Per block: eight exact i32 lane sums `lane[l] = sum_{e % 8 == l} (scale[e/16] - 32) * q[e] *
/// q8[e]`; `d = d_w * d_a` (f32); `sums[l] += d * (lane[l] as f32)` (f32, in block order, eight
/// separate accumulators starting at 0). At the end `sumf = 0 + sums[0] + ... + sums[7]`, left to
/// right. Error against the exact sum: `|y - y_ref| <= c * n * 2^-24 * sum|terms|` with `c = 1`,
/// `n` the row length and `terms` the per-element products `d*scale*q*d_a*q8` (tested in
/// `tests/ggml_kquant.rs`). NaN/inf `d` -> [`crate::Error::NonFiniteScale`]; the activation `d`
/// is used as is.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    lane_dot::<BlockQ3K>(w, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    #[test]
    fn decode_hmask_and_scales() {
        let mut b = BlockQ3K::zeroed();
        b.d = f16::from_f32(2.0);
        // All scales 0 (stored) -> -32; all hmask bits clear -> q = low - 4 = -4.
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        assert!(out.iter().all(|&v| v == 2.0 * -32.0 * -4.0));
        b.hmask[5] = 1 << 3; // element 3 * 32 + 5 = 101 has its high bit set -> q = 0
        b.decode(&mut out).unwrap();
        assert_eq!(out[101], 0.0);
        assert_eq!(out[100], 256.0);
    }

    #[test]
    fn rejects_inf_d() {
        let mut b = BlockQ3K::zeroed();
        b.d = f16::NEG_INFINITY;
        let mut out = [0f32; 256];
        assert_eq!(
            b.decode(&mut out),
            Err(crate::Error::NonFiniteScale { format: FORMAT, field: "d", offset: 108 })
        );
    }
}

//! ggml Q5_K: 256 elements in 8 sub-blocks of 32, 5-bit quants (low nibble in `qs`, high bit in
//! `qh`), a 6-bit scale and a 6-bit min per sub-block, f16 super-block scales `d` and `dmin`
//! (176 bytes, 5.5 bits per weight).
//!
//! Layout: ggml-org/llama.cpp `ggml/src/ggml-common.h` `block_q5_K`. Unpacking and arithmetic:
//! `ggml/src/ggml-quants.c` `dequantize_row_q5_K` and gguf-py `gguf/quants.py`
//! `Q5_K.dequantize_blocks`. Dot product: `ggml/src/ggml-cpu/quants.c`
//! `ggml_vec_dot_q5_K_q8_K_generic` (same order as Q4_K, shared code in `q4_k.rs`).

use half::f16;

use super::q4_k::{decode_scaled_min, dot_block_k4, nibbles, scales_f32};
use super::{lane_dot, LaneAcc, LaneDot, QK_K};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q5K;

/// ggml `block_q5_K`.
///
/// Element `e` has quant `low | high << 4` where `low` is the Q4_K nibble
/// (`(qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 15`) and `high = (qh[e % 32] >>
/// (e / 32)) & 1`. Value: `(d * scale) * q - (dmin * min)` with the Q4_K scales and mins.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5K {
    /// Super-block scale for the scales (byte offset 0).
    pub d: f16,
    /// Super-block scale for the mins (byte offset 2).
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed as in Q4_K.
    pub scales: [u8; 12],
    /// High bit of each quant (bit `e / 32` of byte `e % 32`).
    pub qh: [u8; 32],
    /// Low 4 bits of each quant, two per byte.
    pub qs: [u8; 128],
}
assert_block_size!(BlockQ5K, FormatId::Q5K);

impl BlockQ5K {
    /// `d` and `dmin` as f32 (NaN/inf -> NonFiniteScale at offset 0 or 2).
    pub fn scales_f32(&self) -> Result<(f32, f32)> {
        scales_f32(FORMAT, self.d, self.dmin)
    }

    /// The 256 quants (0..=31) in element order.
    pub fn quants(&self) -> [i8; QK_K] {
        let mut q = nibbles(&self.qs);
        for (e, v) in q.iter_mut().enumerate() {
            *v |= (((self.qh[e % 32] >> (e / 32)) & 1) << 4) as i8;
        }
        q
    }
}

impl Block for BlockQ5K {
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

impl LaneDot for BlockQ5K {
    /// See [`dot_row`].
    fn add_block(&self, acc: &mut LaneAcc, y: &BlockQ8K) -> Result<()> {
        let (d, dmin) = self.scales_f32()?;
        dot_block_k4(acc, d, dmin, &self.scales, &self.quants(), y);
        Ok(())
    }
}

/// Reference dot product of a Q5_K row with a Q8_K row (ggml `ggml_vec_dot_q5_K_q8_K_generic`):
/// the same integer sums, f32 order and error bound (`c = 1`) as the Q4_K dot product, with
/// quants 0..=31.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    lane_dot::<BlockQ5K>(w, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    #[test]
    fn decode_high_bit() {
        let mut b = BlockQ5K::zeroed();
        b.d = f16::from_f32(1.0);
        b.scales[0] = 1; // sub-block 0: scale 1, min 0
        b.scales[3] = 2; // sub-block 3: scale 2
        b.qh[7] = 0b1001; // elements 7 (sub-block 0) and 96 + 7 (sub-block 3) get +16
        b.qs[32 + 7] = 0x30; // byte 39: low nibble -> element 71, high nibble -> element 103
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        assert_eq!(out[7], 16.0);
        assert_eq!(out[103], 2.0 * (16.0 + 3.0));
        assert_eq!(out[8], 0.0);
    }
}

//! ggml Q2_K: 256 elements in 16 sub-blocks of 16, 2-bit quants, a 4-bit scale and a 4-bit min
//! per sub-block, f16 super-block scales `d` and `dmin` (84 bytes, 2.625 bits per weight).
//!
//! Layout: ggml-org/llama.cpp `ggml/src/ggml-common.h` `block_q2_K`. Unpacking and arithmetic:
//! `ggml/src/ggml-quants.c` `dequantize_row_q2_K` and gguf-py `gguf/quants.py`
//! `Q2_K.dequantize_blocks`. Dot product: `ggml/src/ggml-cpu/quants.c`
//! `ggml_vec_dot_q2_K_q8_K_generic`.

use half::f16;

use super::{finite_scale, QK_K};
use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Q2K;

/// ggml `block_q2_K`.
///
/// Element `e` has quant `(qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3`, in
/// sub-block `e / 16`, whose byte `scales[e / 16]` holds the scale (low nibble) and the min (high
/// nibble). Value: `(d * scale) * q - (dmin * min)`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ2K {
    /// Per sub-block: scale in bits 0..4, min in bits 4..8.
    pub scales: [u8; 16],
    /// 2-bit quants, four per byte (see the type's documentation for the order).
    pub qs: [u8; 64],
    /// Super-block scale for the scales (byte offset 80).
    pub d: f16,
    /// Super-block scale for the mins (byte offset 82).
    pub dmin: f16,
}
assert_block_size!(BlockQ2K, FormatId::Q2K);

/// Byte offset of `d` in the block.
pub const D_OFFSET: usize = 80;
/// Byte offset of `dmin` in the block.
pub const DMIN_OFFSET: usize = 82;

impl BlockQ2K {
    /// `d` and `dmin` as f32; NaN or infinite -> [`crate::Error::NonFiniteScale`] (offset 80
    /// for `d`, checked first, or 82 for `dmin`).
    pub fn scales_f32(&self) -> Result<(f32, f32)> {
        let d = finite_scale(FORMAT, self.d, "d", D_OFFSET)?;
        let dmin = finite_scale(FORMAT, self.dmin, "dmin", DMIN_OFFSET)?;
        Ok((d, dmin))
    }

    /// The 256 quants (0..=3) in element order.
    pub fn quants(&self) -> [i8; QK_K] {
        let mut q = [0i8; QK_K];
        for (e, v) in q.iter_mut().enumerate() {
            let byte = self.qs[32 * (e / 128) + e % 32];
            *v = ((byte >> (2 * ((e % 128) / 32))) & 3) as i8;
        }
        q
    }
}

impl Block for BlockQ2K {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = QK_K;

    /// Per sub-block `dl = d * (scales & 15)` and `ml = dmin * (scales >> 4)` (f32), then per
    /// element `dl * q - ml` (two f32 operations, not fused), as ggml and gguf-py compute it.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let (d, dmin) = self.scales_f32()?;
        let q = self.quants();
        for ((o, qg), &sc) in out.chunks_exact_mut(16).zip(q.chunks_exact(16)).zip(&self.scales) {
            let dl = d * f32::from(sc & 0x0F);
            let ml = dmin * f32::from(sc >> 4);
            for (y, &x) in o.iter_mut().zip(qg) {
                *y = dl * f32::from(x) - ml;
            }
        }
        Ok(())
    }
}

/// Reference dot product of a Q2_K row with a Q8_K row (ggml `ggml_vec_dot_q2_K_q8_K_generic`).
///
/// Per block: exact i32 sums `isum = sum_e (scales[e/16] & 15) * q[e] * q8[e]` and
/// `summs = sum_j bsums[j] * (scales[j] >> 4)` (the min term uses the activation block's stored
/// `bsums`, as ggml does); `dall = d_a * d_w`, `dmin = d_a * dmin_w` (f32); then
/// `sumf += dall * (isum as f32) - dmin * (summs as f32)` (each operation rounded to f32, no
/// fusion) in block order, starting from `sumf = 0`. Both int-to-f32 conversions are exact for
/// consistent `bsums`. Error against the exact sum: `|y - y_ref| <= c * n * 2^-24 * sum|terms|`
/// with `c = 1`, `n` the row length and `terms` the per-element products
/// `d*scale*q*d_a*q8` and `dmin*min*d_a*q8` counted separately (tested in `tests/ggml_kquant.rs`).
/// NaN/inf weight scales -> [`crate::Error::NonFiniteScale`]; the activation `d` is used as is.
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut sumf = 0f32;
    for (i, (wb, y)) in w.chunks_exact(BlockQ2K::BYTES).zip(a).enumerate() {
        let x: BlockQ2K = bytemuck::pod_read_unaligned(wb);
        let (d, dm) = x.scales_f32().map_err(|e| e.at(i * BlockQ2K::BYTES))?;
        let q = x.quants();
        let summs: i32 =
            y.bsums.iter().zip(&x.scales).map(|(&b, &s)| i32::from(b) * i32::from(s >> 4)).sum();
        let mut isum = 0i32;
        for ((qg, yg), &s) in q.chunks_exact(16).zip(y.qs.chunks_exact(16)).zip(&x.scales) {
            let isuml: i32 = qg.iter().zip(yg).map(|(&u, &v)| i32::from(u) * i32::from(v)).sum();
            isum += i32::from(s & 0x0F) * isuml;
        }
        let dall = y.d * d;
        let dmin = y.d * dm;
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    Ok(sumf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;

    #[test]
    fn decode_one_element_per_field() {
        let mut b = BlockQ2K::zeroed();
        b.d = f16::from_f32(0.5);
        b.dmin = f16::from_f32(0.25);
        b.scales[9] = 0x32; // sub-block 9 (elements 144..160): scale 2, min 3
        b.qs[32 + 16] = 0b11 << 2; // q = 3 at e = 128 + 32 * 1 + 16 = 176 (shift 2)
        let mut out = [0f32; 256];
        b.decode(&mut out).unwrap();
        // Element 176 is in sub-block 11 (scale 0, min 0) -> 0.
        assert_eq!(out[176], 0.0);
        // Sub-block 9 (e = 144..160) has q = 0: value -(0.25 * 3).
        assert_eq!(out[150], -0.75);
        b.scales[11] = 0x04;
        b.decode(&mut out).unwrap();
        assert_eq!(out[176], 0.5 * 4.0 * 3.0);
    }

    #[test]
    fn rejects_nan_dmin() {
        let mut b = BlockQ2K::zeroed();
        b.dmin = f16::NAN;
        let mut out = [0f32; 256];
        assert_eq!(
            b.decode(&mut out),
            Err(crate::Error::NonFiniteScale { format: FORMAT, field: "dmin", offset: 82 })
        );
    }
}

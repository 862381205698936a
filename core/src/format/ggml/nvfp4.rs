//! ggml NVFP4 (GGUF type 40): 64 E2M1 values in four sub-blocks of 16, each with a UE4M3
//! scale; 36 bytes per block.
//!
//! Layout (ggml `ggml/src/ggml-common.h` `block_nvfp4`, `QK_NVFP4 = 64`, `QK_NVFP4_SUB = 16`):
//! `d[4]` (UE4M3, one per sub-block), then `qs[32]`; sub-block `s` uses `qs[8s .. 8s + 8]`,
//! element `16s + j` (j < 8) is the low nibble of `qs[8s + j]` and element `16s + j + 8` its
//! high nibble.
//!
//! Values (ggml `dequantize_row_nvfp4`, gguf-py `NVFP4`): `w = kvalues_mxfp4[nibble] *
//! ggml_ue4m3_to_fp32(d[s])`, where ggml's UE4M3 decode already halves the scale (see
//! [`crate::scalar::try_ue4m3_to_f32_half`]); every value is exact. Scale bytes 0x7F and 0xFF
//! (E4M3's NaN codes) are rejected with [`Error::IllegalByte`]; ggml reads them as 0 and 240.
//! Bit 7 of the other scale bytes is ignored, as ggml does. NVIDIA's NVFP4 also has a per-tensor
//! f32 scale; ggml keeps it outside the block, and so does lowbit.

use half::f16;

use super::mxfp4::{best_index, encode_reference_blocks, KVALUES_MXFP4};
use crate::assert_block_size;
use crate::block::{read_block, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::scalar::{f32_to_ue4m3, try_ue4m3_to_f32_half};

const FORMAT: FormatId = FormatId::Nvfp4;

/// ggml `block_nvfp4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockNvfp4 {
    /// UE4M3 scale of each 16-element sub-block (ggml's encoding; 0x7F / 0xFF are illegal).
    pub d: [u8; 4],
    /// Codes: sub-block s in `qs[8s..8s + 8]`, low nibbles first 8 elements, high nibbles next 8.
    pub qs: [u8; 32],
}
assert_block_size!(BlockNvfp4, FormatId::Nvfp4);

impl BlockNvfp4 {
    /// The halved scale of sub-block `s` (< 4), or [`Error::IllegalByte`] at offset `s`.
    pub fn half_scale(&self, s: usize) -> Result<f32> {
        let b = self.d[s & 3];
        try_ue4m3_to_f32_half(b).ok_or(Error::IllegalByte {
            format: FORMAT,
            field: "d",
            offset: s & 3,
            byte: b,
        })
    }
}

impl Block for BlockNvfp4 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 64;

    /// `out[16s + j] = kvalues_mxfp4[code] as f32 * ue4m3_half(d[s])`, bit-exact with gguf-py.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        crate::block::check_block_out::<Self>(out)?;
        for (s, (ys, qs)) in out.chunks_exact_mut(16).zip(self.qs.chunks_exact(8)).enumerate() {
            let d = self.half_scale(s)?;
            let (lo, hi) = ys.split_at_mut(8);
            for ((q, a), b) in qs.iter().zip(lo).zip(hi) {
                *a = f32::from(KVALUES_MXFP4[(q & 15) as usize]) * d;
                *b = f32::from(KVALUES_MXFP4[(q >> 4) as usize]) * d;
            }
        }
        Ok(())
    }
}

/// Encodes one block by ggml's `quantize_row_nvfp4_ref` (byte-exact with it; gguf-py has no
/// NVFP4 encoder, the oracle is an independent numpy port in `tools/`): per sub-block,
/// `amax` = largest |x|, scale byte `f32_to_ue4m3(amax / 6)` (ggml's rounding: see
/// [`crate::scalar::f32_to_ue4m3`]), then each element the code of ggml's `best_index_mxfp4`
/// against the halved decoded scale (nearest, exact ties to the smaller magnitude, never -0).
/// Values beyond 6 * scale saturate to ±6; an amax above 6 * 448 saturates the scale at 448.
pub fn encode_block_reference(x: &[f32; 64]) -> BlockNvfp4 {
    let mut b = BlockNvfp4 { d: [0; 4], qs: [0; 32] };
    for (s, xs) in x.chunks_exact(16).enumerate() {
        let mut amax = 0f32;
        for v in xs {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let ue = f32_to_ue4m3(amax / 6.0);
        b.d[s] = ue;
        let d = try_ue4m3_to_f32_half(ue).unwrap_or(0.0);
        for j in 0..8 {
            b.qs[8 * s + j] = best_index(xs[j], d) | (best_index(xs[j + 8], d) << 4);
        }
    }
    b
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    crate::block::decode_blocks::<BlockNvfp4>(src, dst)
}

pub(crate) fn encode_row(src: &[f32], opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_reference_blocks(src, opts, dst, encode_block_reference)
}

/// Reference dot product with Q8_0 activations (ggml's `vec_dot_type` for NVFP4: one NVFP4
/// block spans two Q8_0 blocks), following ggml's `ggml_vec_dot_nvfp4_q8_0_generic`
/// (`ggml/src/ggml-cpu/quants.c`):
///
/// for each block `i`, for each sub-block `s = 0..4` (in order): `y = act[2i + s/2]`, lanes
/// `16 * (s % 2) ..` of it; `sumi = Σ kvalues_mxfp4[code] * q8` as an exact i32;
/// `sum += (f32(y.d) * ue4m3_half(d[s])) * sumi as f32` into one running f32 sum from +0.
///
/// Accuracy against an f64 sum of decoded products: at most three roundings per sub-block
/// (scale product, product with `sumi`, accumulation), so `|y - y_ref| <= 3 * n_sub * 2^-24 *
/// Σ|terms|` (c = 3 per 16 elements). A scale byte 0x7F / 0xFF is an [`Error::IllegalByte`].
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8_0(FORMAT)?;
    let mut sum = 0f32;
    for (i, ys) in a.chunks_exact(2).enumerate() {
        let x: BlockNvfp4 = read_block(w, i);
        for s in 0..4 {
            let d = x.half_scale(s).map_err(|e| e.at(i * BlockNvfp4::BYTES))?;
            let y = &ys[s / 2];
            let off = 16 * (s % 2);
            let mut lo = 0i32;
            let mut hi = 0i32;
            for j in 0..8 {
                let q = x.qs[8 * s + j];
                lo += i32::from(y.qs[off + j]) * i32::from(KVALUES_MXFP4[(q & 15) as usize]);
                hi += i32::from(y.qs[off + j + 8]) * i32::from(KVALUES_MXFP4[(q >> 4) as usize]);
            }
            sum += f16::to_f32(y.d) * d * (lo + hi) as f32;
        }
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illegal_scales_report_their_offset() {
        let mut out = [0f32; 64];
        for (s, byte) in [(0usize, 0x7fu8), (3, 0xff)] {
            let mut b = BlockNvfp4 { d: [0x38; 4], qs: [0; 32] };
            b.d[s] = byte;
            assert_eq!(
                b.decode(&mut out),
                Err(Error::IllegalByte { format: FORMAT, field: "d", offset: s, byte })
            );
        }
    }

    #[test]
    fn encode_simple_block() {
        let mut x = [0f32; 64];
        x[0] = 6.0;
        x[8] = -3.0;
        let b = encode_block_reference(&x);
        assert_eq!(b.d[0], 0x38); // amax / 6 = 1.0
        assert_eq!(b.qs[0], 0x07 | (0x0d << 4)); // +6, -3
        assert_eq!(b.d[1], 0);
        let mut y = [0f32; 64];
        b.decode(&mut y).unwrap();
        assert_eq!((y[0], y[8]), (6.0, -3.0));
    }
}

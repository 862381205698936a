//! Reference dot products of ROCmFP2 / ROCmFP3 weight rows with Q8_0 activation rows. Only the
//! dot products live here (no decode of whole rows, no encoders).
//!
//! Both formats have 32-weight blocks that line up with Q8_0's 32-element blocks. Order (the
//! ROCmFPX kernels' per-block expression, github ciru-ai/ROCmFPX
//! `ggml/src/ggml-cuda/vecdotq.cuh`, `vec_dot_rocmfpx_fp3_q8_1_*`: `db * (s0 * sumi0 + s1 *
//! sumi1)`), per block in block order:
//!
//! ```text
//! sum_h = Σ_{i in half h} level_i * q_i            (i32, exact: |sum_h| <= 16*4*128)
//! acc  += d_act * (s_0 * (sum_0 as f32) + s_1 * (sum_1 as f32))     (f32, no fused ops)
//! ```
//!
//! with `d_act` the Q8_0 block's f16 scale widened to f32 and `s_h` the UE4M3-b8 scale of half
//! `h`. Bound: three roundings per block and one per accumulation give
//! `|y - y_ref| <= c * n * 2^-24 * Σ|w_i a_i|` with `c = 1` (`n` elements, `nb = n / 32`
//! blocks, `3 + nb <= n`), where `y_ref` is the f64 sum of decoded weights times decoded
//! activations. Illegal scale bytes are [`crate::Error::IllegalByte`] at their row offset.

use super::fp2::BlockRocmFp2;
use super::fp3::{BlockRocmFp3, FP3_LEVELS};
use crate::block::{read_block, Block};
use crate::error::Result;
use crate::format::ggml::BlockQ8_0;

/// The per-block expression shared by both formats.
#[inline]
fn block_value(d_act: f32, s: [f32; 2], sums: [i32; 2]) -> f32 {
    d_act * (s[0] * sums[0] as f32 + s[1] * sums[1] as f32)
}

/// ROCmFP2 row (`w`, whole blocks) times Q8_0 activations (`a`, same number of blocks).
pub(crate) fn dot_fp2_q8_0(w: &[u8], a: &[BlockQ8_0]) -> Result<f32> {
    let mut acc = 0f32;
    for (i, act) in a.iter().enumerate() {
        let blk: BlockRocmFp2 = read_block(w, i);
        let s = blk.scales().map_err(|e| e.at(i * BlockRocmFp2::BYTES))?;
        let mut sums = [0i32; 2];
        for (j, &q) in act.qs.iter().enumerate() {
            let l = super::fp2::FP2_LEVELS[blk.code(j) as usize];
            sums[j / 16] += i32::from(l) * i32::from(q);
        }
        acc += block_value(act.d.to_f32(), s, sums);
    }
    Ok(acc)
}

/// ROCmFP3 row (`w`, whole blocks) times Q8_0 activations (`a`, same number of blocks).
pub(crate) fn dot_fp3_q8_0(w: &[u8], a: &[BlockQ8_0]) -> Result<f32> {
    let mut acc = 0f32;
    for (i, act) in a.iter().enumerate() {
        let blk: BlockRocmFp3 = read_block(w, i);
        let s = blk.scales().map_err(|e| e.at(i * BlockRocmFp3::BYTES))?;
        let codes = blk.codes();
        let mut sums = [0i32; 2];
        for (j, (&q, &c)) in act.qs.iter().zip(codes.iter()).enumerate() {
            sums[j / 16] += i32::from(FP3_LEVELS[c as usize]) * i32::from(q);
        }
        acc += block_value(act.d.to_f32(), s, sums);
    }
    Ok(acc)
}

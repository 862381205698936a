//! ggml K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): 256-element super-blocks with packed sub-block
//! scales, decoded bit-exactly and dotted against Q8_K activations.
//!
//! One file per format holds its `#[repr(C)]` block type (exact `ggml-common.h` layout), its
//! [`Block`] impl and its reference dot product; [`scales`] holds the
//! shared 6-bit scale unpacking. What must not live here: encoders (ggml's K-quant encoders are
//! not offered, see `registry.rs`), SIMD kernels, and the Q8_K encoder (`q8_k.rs`).
//!
//! Sources of the facts used here (layouts, unpacking, dot-product order):
//! * ggml-org/llama.cpp `ggml/src/ggml-common.h` (`block_q2_K` .. `block_q6_K`, `block_q8_K`);
//! * ggml-org/llama.cpp `ggml/src/ggml-quants.c` (`dequantize_row_q2_K` .. `dequantize_row_q6_K`,
//!   `get_scale_min_k4`);
//! * ggml-org/llama.cpp `ggml/src/ggml-cpu/quants.c` (`ggml_vec_dot_q2_K_q8_K_generic` ..
//!   `ggml_vec_dot_q6_K_q8_K_generic`);
//! * gguf-py `gguf/quants.py` (`Q2_K.dequantize_blocks` .. `Q6_K.dequantize_blocks`), the oracle
//!   of `tools/oracle_ggml_kquant.py`.
//!
//! Common rules: every f32 operation is a single IEEE-754 binary32 operation with
//! round-to-nearest-even and no fused multiply-add, in the order each function documents. A
//! stored f16 `d` or `dmin` that is NaN or infinite is rejected with
//! [`Error::NonFiniteScale`] naming the field's byte offset (ggml would produce NaN/inf); every
//! other byte pattern is a valid block.

pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
pub mod scales;

pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_k::BlockQ4K;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;

use half::f16;

use crate::block::{decode_blocks, Block};
use crate::codec::{ActRow, EncodeOptions};
use crate::error::{Error, Result};
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// Elements per K-quant super-block (ggml `QK_K`).
pub const QK_K: usize = 256;

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::Q2K => decode_blocks::<BlockQ2K>(src, dst),
        FormatId::Q3K => decode_blocks::<BlockQ3K>(src, dst),
        FormatId::Q4K => decode_blocks::<BlockQ4K>(src, dst),
        FormatId::Q5K => decode_blocks::<BlockQ5K>(src, dst),
        FormatId::Q6K => decode_blocks::<BlockQ6K>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as a K-quant" }),
    }
}

/// K-quant encoders are not provided (the registry offers none): always
/// [`Error::Unsupported`].
pub(crate) fn encode_row(
    format: FormatId,
    _src: &[f32],
    _opts: &EncodeOptions<'_>,
    _dst: &mut [u8],
) -> Result<()> {
    Err(Error::Unsupported { format, op: "encode" })
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8k(format)?;
    match format {
        FormatId::Q2K => q2_k::dot_row(w, a),
        FormatId::Q3K => q3_k::dot_row(w, a),
        FormatId::Q4K => q4_k::dot_row(w, a),
        FormatId::Q5K => q5_k::dot_row(w, a),
        FormatId::Q6K => q6_k::dot_row(w, a),
        _ => Err(Error::Unsupported { format, op: "dot as a K-quant" }),
    }
}

/// Converts a stored f16 scale to f32 (exact), rejecting NaN and infinities with
/// [`Error::NonFiniteScale`] at `offset` (relative to the block).
#[inline]
pub(crate) fn finite_scale(
    format: FormatId,
    v: f16,
    field: &'static str,
    offset: usize,
) -> Result<f32> {
    let x = v.to_f32();
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::NonFiniteScale { format, field, offset })
    }
}

/// The integer part of ggml's 8-lane dot-product kernels (Q3_K..Q6_K): lane `l` (0..8) sums
/// `scale16[e / 16] * q[e] * q8[e]` over the elements `e` with `e % 8 == l`.
///
/// Exact in i32 for every input: |scale16| <= 128, |q| <= 32, |q8| <= 128 and 32 elements per
/// lane give at most 2^24 in magnitude.
#[inline]
pub(crate) fn lane_sums(q: &[i8; QK_K], q8: &[i8; QK_K], scale16: &[i32; 16]) -> [i32; 8] {
    let mut acc = [0i32; 8];
    for (g, (qg, yg)) in q.chunks_exact(16).zip(q8.chunks_exact(16)).enumerate() {
        let s = scale16[g];
        for (e, (&x, &y)) in qg.iter().zip(yg).enumerate() {
            acc[e % 8] += s * (i32::from(x) * i32::from(y));
        }
    }
    acc
}

/// ggml's lane accumulator for the Q3_K..Q6_K generic dot products: `sums[l] += d * lane[l]`
/// per block (int converted to f32 first, then one f32 multiply and one add), `sumf -= dmin *
/// sumi` per block for the formats with mins, and at the end `sumf += sums[l]` for l = 0..8.
#[derive(Default)]
pub(crate) struct LaneAcc {
    sums: [f32; 8],
    sumf: f32,
}

impl LaneAcc {
    /// Adds one block's lane sums scaled by `d = d_w * d_a`.
    #[inline]
    pub(crate) fn add_lanes(&mut self, d: f32, lanes: &[i32; 8]) {
        for (s, &l) in self.sums.iter_mut().zip(lanes) {
            *s += d * l as f32;
        }
    }

    /// Subtracts one block's min term `dmin * sumi` (`dmin = dmin_w * d_a`).
    #[inline]
    pub(crate) fn sub_min(&mut self, dmin: f32, sumi: i32) {
        self.sumf -= dmin * sumi as f32;
    }

    /// The final sum: `sumf` plus the lanes in order 0..8.
    #[inline]
    pub(crate) fn finish(self) -> f32 {
        let mut s = self.sumf;
        for l in self.sums {
            s += l;
        }
        s
    }
}

/// The per-format part of the Q3_K..Q6_K reference dot products: one weight block's terms added
/// to ggml's lane accumulator ([`LaneAcc`]).
pub(crate) trait LaneDot: Block {
    /// Adds this block's terms against the activation block `y`; a NaN or infinite stored scale
    /// gives [`Error::NonFiniteScale`] with its offset in the block.
    fn add_block(&self, acc: &mut LaneAcc, y: &BlockQ8K) -> Result<()>;
}

/// The Q3_K..Q6_K dot-product loop: weight and activation blocks in order into one
/// [`LaneAcc`], then [`LaneAcc::finish`]; a scale error names its byte offset in `w`.
pub(crate) fn lane_dot<B: LaneDot>(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    let mut acc = LaneAcc::default();
    for (i, (wb, y)) in w.chunks_exact(B::BYTES).zip(a).enumerate() {
        let x: B = bytemuck::pod_read_unaligned(wb);
        x.add_block(&mut acc, y).map_err(|e| e.at(i * B::BYTES))?;
    }
    Ok(acc.finish())
}

/// Q3_K/Q6_K decode: per sub-block of 16, `dl = d * scale` (f32), then per element `dl * q`
/// (one f32 multiply), as ggml and gguf-py compute it.
pub(crate) fn decode_sub16(d: f32, scales: &[i8; 16], q: &[i8; QK_K], out: &mut [f32]) {
    for ((o, qg), &s) in out.chunks_exact_mut(16).zip(q.chunks_exact(16)).zip(scales) {
        let dl = d * f32::from(s);
        for (y, &x) in o.iter_mut().zip(qg) {
            *y = dl * f32::from(x);
        }
    }
}

/// The min term of Q4_K/Q5_K against Q8_K: `sum_j bsums[j] * min[j / 2]` over the 16 groups of
/// 16, using the activation block's stored `bsums` as ggml does.
#[inline]
pub(crate) fn bsum_min_term(bsums: &[i16; 16], mins: &[u8; 8]) -> i32 {
    bsums.iter().enumerate().map(|(j, &b)| i32::from(b) * i32::from(mins[j / 2])).sum()
}

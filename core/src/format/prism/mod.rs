//! PrismML's ternary formats PQ2_0 (type 142) and PTQ1_0 (type 143): block types, decode, the
//! Prism reference encoder, lowbit's improved encoder, and the reference dot products against
//! Q8_0 activations.
//!
//! Sources (facts only, no code carried over): github PrismML-Eng/llama.cpp branch `prism`,
//! `ggml/src/ggml-common.h` (`block_pq2_0`, `block_ptq1_0`), `ggml/src/ggml-quants.c`
//! (`quantize_row_pq2_0_ref`, `quantize_row_ptq1_0_ref`, `dequantize_row_pq2_0`,
//! `dequantize_row_ptq1_0`), `ggml/src/ggml-cpu/ggml-cpu.c` (type traits: both formats take
//! `vec_dot_type = GGML_TYPE_Q8_0`) and `ggml/src/ggml-cpu/quants.c`
//! (`ggml_vec_dot_pq2_0_q8_0_generic`, `ggml_vec_dot_ptq1_0_q8_0_generic`).
//!
//! What lives here: the two formats and the rule they share ([`reference_trits`]). What must not:
//! the least-squares fit (that is [`crate::quantize::ternary`], shared with TQ1_0/TQ2_0) and the
//! Hadamard rotation of folded weights ([`crate::rotate::hadamard`]).

mod pq2_0;
mod ptq1_0;

pub use pq2_0::BlockPq2_0;
pub use ptq1_0::{BlockPtq1_0, PTQ1_0_PLACEMENT};

use half::f16;

use crate::block::Block;
use crate::codec::{ActRow, EncodeOptions, Rule};
use crate::error::{Error, Result};
use crate::registry::FormatId;

/// Elements per block of both formats.
pub const QK: usize = 128;

/// Prism's reference rule for one 128-element group, shared by PQ2_0 and PTQ1_0: returns the
/// stored f16 scale and writes the trits (`-1, 0, +1`) to `t`.
///
/// * `amax = max |x|` (f32), `d = f16(amax)` (round to nearest, ties to even).
/// * `id = 1/amax` in f32 (0 when `amax == 0`), and `t = round(x * id)`, the product rounded to
///   f32 first and then to an integer with ties away from zero (C `roundf`/`lroundf`), clamped to
///   `[-1, +1]`. Since `|x * id| <= 1 + 2^-23`, PQ2_0's code 3 (+2) is never produced and the clamp
///   never acts. Note the codes use the unrounded f32 `amax`, not the stored f16 `d`.
/// * Ties: `x * id` exactly ±0.5 gives ±1 (away from zero).
/// * `amax` so small that `1/amax` overflows f32 (`amax < 2^-128`): C's float-to-int conversion of
///   the resulting inf/NaN is undefined; lowbit defines `t = round(x / amax)` there (correctly
///   rounded division). Such blocks store `d = +0`, so every choice decodes to ±0.
/// * `amax >= 65520` rounds to an infinite f16 that no valid block holds: [`Error::OutOfRange`]
///   naming the (first) largest element, relative to the group.
///
/// The caller has rejected NaN and infinite inputs.
pub fn reference_trits(format: FormatId, x: &[f32], t: &mut [i8]) -> Result<f16> {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = f16::from_f32(amax);
    if !d.is_finite() {
        let index = x.iter().position(|v| v.abs() == amax).unwrap_or(0);
        return Err(Error::OutOfRange { format, index });
    }
    let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
    for (c, &v) in t.iter_mut().zip(x) {
        let r = if id.is_finite() { libm::roundf(v * id) } else { libm::roundf(v / amax) };
        *c = r.clamp(-1.0, 1.0) as i8;
    }
    Ok(d)
}

/// Trits and scale of one group under `opts` (reference rule or least-squares fit).
fn group_trits(
    format: FormatId,
    x: &[f32],
    importance: Option<&[f32]>,
    rule: Rule,
    t: &mut [i8; QK],
) -> Result<f16> {
    match rule {
        Rule::Reference => {
            if importance.is_some() {
                return Err(Error::Unsupported {
                    format,
                    op: "the reference rule with importance weights (use Rule::Improved)",
                });
            }
            reference_trits(format, x, t)
        }
        Rule::Improved => Ok(crate::quantize::ternary::fit_ternary(x, importance, t)),
        Rule::Exhaustive => Err(Error::Unsupported { format, op: "encode by exhaustive search" }),
    }
}

/// Checks that a stored f16 scale is finite.
fn check_scale(format: FormatId, d: f16, offset: usize) -> Result<f32> {
    if d.is_finite() {
        Ok(d.to_f32())
    } else {
        Err(Error::NonFiniteScale { format, field: "d", offset })
    }
}

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::Pq2_0 => crate::block::decode_blocks::<BlockPq2_0>(src, dst),
        FormatId::Ptq1_0 => crate::block::decode_blocks::<BlockPtq1_0>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode as a Prism format" }),
    }
}

pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    let bytes = match format {
        FormatId::Pq2_0 => <BlockPq2_0 as Block>::BYTES,
        FormatId::Ptq1_0 => <BlockPtq1_0 as Block>::BYTES,
        _ => return Err(Error::Unsupported { format, op: "encode as a Prism format" }),
    };
    let mut t = [0i8; QK];
    for (b, (x, out)) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(bytes)).enumerate() {
        let imp = opts.importance.and_then(|w| w.get(b * QK..(b + 1) * QK));
        let d = group_trits(format, x, imp, opts.rule, &mut t).map_err(|e| e.at_element(b * QK))?;
        match format {
            FormatId::Pq2_0 => out.copy_from_slice(bytemuck::bytes_of(&BlockPq2_0::pack(d, &t))),
            _ => out.copy_from_slice(bytemuck::bytes_of(&BlockPtq1_0::pack(d, &t))),
        }
    }
    Ok(())
}

/// The reference dot product against Q8_0 activations (four Q8_0 blocks per weight block).
///
/// Order (Prism's `ggml_vec_dot_{pq2_0,ptq1_0}_q8_0_generic`): for each weight block, in block
/// order, and each of its four 32-element sub-blocks `k`: `sumi_k = Σ t_j q_j` exactly in i32
/// (`t` = code - 1, so PQ2_0's code 3 counts +2); `s = s + d_a(k) * (sumi_k as f32)` in f32
/// starting from `s = 0`; then `sum = sum + d_w * s`. Stated accumulation bound against an f64
/// reference: `c = 1` in `|y - y_ref| <= c * n * 2^-24 * Σ|terms|`. A NaN/inf weight scale is an
/// error ([`Error::NonFiniteScale`]); activation scales are used as stored.
pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let a = act.q8_0(format)?;
    let (bytes, d_off) = match format {
        FormatId::Pq2_0 => (<BlockPq2_0 as Block>::BYTES, 0),
        FormatId::Ptq1_0 => (<BlockPtq1_0 as Block>::BYTES, 26),
        _ => return Err(Error::Unsupported { format, op: "dot as a Prism format" }),
    };
    let mut sum = 0f32;
    let mut t = [0i8; QK];
    for (b, (wb, ab)) in w.chunks_exact(bytes).zip(a.chunks_exact(4)).enumerate() {
        let d = match format {
            FormatId::Pq2_0 => {
                let blk: BlockPq2_0 = bytemuck::pod_read_unaligned(wb);
                blk.trits(&mut t);
                blk.d
            }
            _ => {
                let blk: BlockPtq1_0 = bytemuck::pod_read_unaligned(wb);
                blk.trits(&mut t);
                blk.d
            }
        };
        let dw = check_scale(format, d, b * bytes + d_off)?;
        let mut s = 0f32;
        for (k, q8) in ab.iter().enumerate() {
            let sumi: i32 =
                t[32 * k..32 * k + 32].iter().zip(&q8.qs).map(|(&x, &y)| x as i32 * y as i32).sum();
            s += q8.d.to_f32() * sumi as f32;
        }
        sum += dw * s;
    }
    Ok(sum)
}

//! The ROCmFPX family: ROCmFP2 (`Q2_0_ROCMFPX`, 10 bytes per 32 weights, 2.5 bpw) and ROCmFP3
//! (`Q3_0_ROCMFPX`, 14 bytes per 32 weights, 3.5 bpw).
//!
//! * `fp2.rs`, `fp3.rs`: block types, decode, code choice, packing.
//! * `scale_search.rs`: the per-half objective and the exhaustive search (`Rule::Exhaustive`),
//!   with optional importance weights.
//! * `quad_fp2.rs`: ROCmFP2's fast search (`Rule::Reference`, provably the same bytes): the
//!   lower envelope of 17 quadratics from the sorted magnitudes, with rigorous error bounds.
//! * `fast_fp2.rs`: the window driver shared with `fast_fp3.rs` (estimates from the exhaustive
//!   search's own terms, closed by monotone tail bounds) and ROCmFP2's window search, the
//!   envelope search's fallback.
//! * `fast_fp3.rs`: ROCmFP3's fast search (`Rule::Reference`, provably the same bytes): FP3's
//!   terms and tail bounds on the same driver.
//! * `dot.rs`: reference dot products against Q8_0 activations.
//!
//! Nothing here allocates. Sources: github ciru-ai/ROCmFPX (`ggml/rocmfpx/rocmfpx.{h,c}`,
//! `rocmfp2_reference.{h,c}`, `ggml/src/ggml-cuda/vecdotq.cuh`), FORMATS.md section 3.
//!
//! Encoding never fails on finite input (the codec has rejected NaN/inf): values beyond the
//! largest representable magnitude `4 * 224 = 896` are not an error, as in ROCmFPX; the search
//! simply picks the byte with the smallest f64 error, which for moderately large values is 0x7E
//! (the value saturates to ±896), and for values so large (beyond ~2^60) that every candidate's
//! rounded error is the same, is the lowest tied byte (often 0x00, which decodes to zeros).

mod dot;
mod fast_fp2;
mod fast_fp3;
mod fp2;
mod fp3;
pub(crate) mod quad_fp2;
mod scale_search;

pub use fp2::{BlockRocmFp2, FP2_LEVELS};
pub use fp3::{BlockRocmFp3, FP3_LEVELS};

use crate::block::decode_blocks;
use crate::codec::{ActRow, EncodeOptions, Rule};
use crate::error::{Error, Result};
use crate::registry::FormatId;
use scale_search::{Codebook, Half};

pub(crate) fn decode_row(format: FormatId, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match format {
        FormatId::RocmFp2 => decode_blocks::<BlockRocmFp2>(src, dst),
        FormatId::RocmFp3 => decode_blocks::<BlockRocmFp3>(src, dst),
        _ => Err(Error::Unsupported { format, op: "decode" }),
    }
}

/// The importance-weighted objective's `sigma2`: the row's mean of `x^2`, summed left to right in
/// f64 (each `x^2` exact) and divided by `k` in f64.
fn row_sigma2(src: &[f32]) -> f64 {
    let mut s = 0f64;
    for &x in src {
        let x = f64::from(x);
        s += x * x;
    }
    s / src.len() as f64
}

/// Fills one half in place: inputs widened to f64 and, with importance weights, the weights
/// `qw * sqrt(sigma2 + x^2)` (without, the weights stay 1 as the half was created). The codec
/// has checked that importance weights, when given, cover the whole row, so `qw` is `Some` for
/// every half of a row or for none, and no half keeps another half's weights.
fn fill_half(h: &mut Half, x: &[f32], qw: Option<&[f32]>, sigma2: f64) {
    for (o, &v) in h.x.iter_mut().zip(x.iter()) {
        *o = f64::from(v);
    }
    if let Some(qw) = qw {
        for (i, &q) in qw.iter().take(16).enumerate() {
            let x = h.x[i];
            h.w[i] = f64::from(q) * libm::sqrt(sigma2 + x * x);
        }
    }
}

/// Encodes a row (lengths checked by the codec). `Rule::Reference` runs the fast search,
/// `Rule::Exhaustive` the exhaustive one; both give the same bytes. Importance weights, when
/// given, weight each element's squared error by `qw_i * sqrt(sigma2 + x_i^2)`.
pub(crate) fn encode_row(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    dst: &mut [u8],
) -> Result<()> {
    encode_row_scales(format, src, opts, None, dst)
}

/// ROCmFP2's fast search (`Rule::Reference`) of one half without importance weights, for a
/// caller that searches halves itself (the CPU backend's vector search hands it the halves it
/// does not decide). Values must be finite (the codec's check); for others it returns some byte
/// without panicking, which [`encode_row_scales`]'s checks then reject with the row.
pub(crate) fn search_fp2_half(x: &[f32; 16]) -> u8 {
    if x.iter().any(|v| !v.is_finite()) {
        return 0;
    }
    let mut half = Half { x: [0.0; 16], w: [1.0; 16] };
    fill_half(&mut half, x, None, 0.0);
    quad_fp2::search_fp2_unweighted(&half, &fast_fp2::SCALE_TABLE)
}

/// [`encode_row`], or with `scales` (two bytes per block, each `<= 0x7E`, checked by the codec)
/// the blocks those scale bytes give: the same code choice and packing as both rules, so the
/// bytes are the rule's own whenever `scales` are the bytes its search returns.
pub(crate) fn encode_row_scales(
    format: FormatId,
    src: &[f32],
    opts: &EncodeOptions<'_>,
    scales: Option<&[u8]>,
    dst: &mut [u8],
) -> Result<()> {
    let cb = match format {
        FormatId::RocmFp2 => Codebook::Fp2,
        FormatId::RocmFp3 => Codebook::Fp3,
        _ => return Err(Error::Unsupported { format, op: "encode" }),
    };
    let exhaustive = match opts.rule {
        Rule::Reference => false,
        Rule::Exhaustive => true,
        Rule::Improved => {
            return Err(Error::Unsupported { format, op: "encode with the improved rule" })
        }
    };
    let table = fast_fp2::SCALE_TABLE;
    let sigma2 = if opts.importance.is_some() { row_sigma2(src) } else { 0.0 };
    let bb = format.geometry().block_bytes;
    for (bi, (x, out)) in src.chunks_exact(32).zip(dst.chunks_exact_mut(bb)).enumerate() {
        let mut e = [0u8; 2];
        let mut codes = [[0u8; 16]; 2];
        let mut half = Half { x: [0.0; 16], w: [1.0; 16] };
        for hh in 0..2 {
            let xs = &x[16 * hh..16 * hh + 16];
            let qw = opts.importance.and_then(|w| w.get(32 * bi + 16 * hh..32 * bi + 16 * hh + 16));
            fill_half(&mut half, xs, qw, sigma2);
            let b = if let Some(sc) = scales {
                sc[2 * bi + hh]
            } else if exhaustive {
                scale_search::search_exhaustive(cb, &half, &table)
            } else if cb == Codebook::Fp2 && opts.importance.is_none() {
                quad_fp2::search_fp2_unweighted(&half, &table)
            } else if cb == Codebook::Fp2 {
                quad_fp2::search_fp2(&half, &table)
            } else {
                fast_fp3::search_fp3(&half, &table)
            };
            e[hh] = b;
            codes[hh] = scale_search::half_codes(cb, &half, table[b as usize]);
        }
        match cb {
            Codebook::Fp2 => {
                let mut blk = BlockRocmFp2 { qs: [0; 8], e };
                fp2::fp2_pack_half(&mut blk.qs, 0, &codes[0]);
                fp2::fp2_pack_half(&mut blk.qs, 1, &codes[1]);
                out.copy_from_slice(bytemuck::bytes_of(&blk));
            }
            Codebook::Fp3 => {
                let mut blk = BlockRocmFp3 { qs: [0; 12], e };
                fp3::fp3_pack_half(&mut blk.qs, 0, &codes[0]);
                fp3::fp3_pack_half(&mut blk.qs, 1, &codes[1]);
                out.copy_from_slice(bytemuck::bytes_of(&blk));
            }
        }
    }
    Ok(())
}

pub(crate) fn dot_row(format: FormatId, w: &[u8], act: ActRow<'_>) -> Result<f32> {
    let ActRow::Q8_0(a) = act else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: act.format(),
        });
    };
    match format {
        FormatId::RocmFp2 => dot::dot_fp2_q8_0(w, a),
        FormatId::RocmFp3 => dot::dot_fp3_q8_0(w, a),
        _ => Err(Error::Unsupported { format, op: "dot" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;

    #[test]
    fn worked_example_and_test_vector() {
        // FORMATS.md: scale 0x38 (0.5), x = [-1.8, -0.4, 0.7, 2.1] -> codes 0,1,2,3 -> 0xE4.
        let codes: [u8; 4] = [-1.8f32, -0.4, 0.7, 2.1].map(|x| fp2::fp2_code(f64::from(x), 0.5));
        assert_eq!(codes, [0, 1, 2, 3]);
        // ROCmFPX test vector: e4 x8, 12, 7e.
        let blk = BlockRocmFp2 { qs: [0xE4; 8], e: [0x12, 0x7E] };
        let mut out = [0f32; 32];
        blk.decode(&mut out).unwrap();
        assert_eq!(&out[..4], &[-4.0 * 0.019_531_25, -0.019_531_25, 0.019_531_25, 0.078_125]);
        assert_eq!(&out[28..], &[-896.0, -224.0, 224.0, 896.0]);
    }

    #[test]
    fn illegal_scale_offsets() {
        let blk = BlockRocmFp2 { qs: [0; 8], e: [0x00, 0x7F] };
        let mut out = [0f32; 32];
        assert!(matches!(
            blk.decode(&mut out),
            Err(Error::IllegalByte { offset: 9, byte: 0x7F, .. })
        ));
        let blk = BlockRocmFp3 { qs: [0; 12], e: [0x80, 0x00] };
        assert!(matches!(
            blk.decode(&mut out),
            Err(Error::IllegalByte { offset: 12, byte: 0x80, .. })
        ));
    }

    #[test]
    fn fp3_pack_roundtrip() {
        let codes: [u8; 16] = core::array::from_fn(|i| (i * 5 % 8) as u8);
        let mut qs = [0u8; 12];
        fp3::fp3_pack_half(&mut qs, 1, &codes);
        let blk = BlockRocmFp3 { qs, e: [0, 0] };
        assert_eq!(&blk.codes()[16..], &codes);
    }
}

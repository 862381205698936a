//! AVX2 kernel body for Q2_K weights against Q8_K activations, bit-identical to the core's
//! reference (`format::ggml::kquant::q2_k::dot_row`, ggml's `ggml_vec_dot_q2_K_q8_K_generic`):
//! per row and block the exact i32 sums `isum = Σ_e (scales[e / 16] & 15) * q[e] * a[e]` and
//! `summs = Σ_j bsums[j] * (scales[j] >> 4)`, then in f32, unfused,
//! `sumf += (d_a * d_w) * isum - (d_a * dmin_w) * summs` in block order from `sumf = 0`.
//! Bound: the reference's (c = 1 per the core's docs).
//!
//! Layout (ggml `block_q2_K`, as the core's `BlockQ2K`): `scales[16]` (scale in the low, min
//! in the high nibble, per 16 elements), `qs[64]` at 16, `d` at 80, `dmin` at 82; element `e`
//! has quant `(qs[32 (e / 128) + e % 32] >> 2 ((e % 128) / 32)) & 3`. So 32-element sub-block
//! `sb` is plane `sb % 4` of the 32 bytes `qs[32 (sb / 4)..]`, in element order: no lane
//! shuffle, since only whole-block sums are needed. As in ggml's AVX2 `ggml_vec_dot_q2_K_q8_K`
//! (ggml-org/llama.cpp `ggml/src/ggml-cpu/arch/x86/quants.c`), each plane meets the 32
//! activations in one `maddubs` (pairs <= 2 * 3 * 128) and one `madd` by the sub-block's two
//! scales (low 128 bits: scale `2 sb`, elements 0..16; high: `2 sb + 1`), and the min term is
//! one `madd` of `bsums` by the mins as words.
//!
//! Shape: rows in groups of 8, one row per f32 vector lane (one accumulator per column): each
//! row's block is decoded once and met right away by every column of the tile (the activations
//! re-read from L1 as `maddubs` operands; a first version decoded all 8 rows into arrays
//! first, spilled to the stack: 3.4 GB/s, n = 1, against 12.7 GB/s read); per column the 8
//! rows' i32 vectors are then summed across lanes together (`hsum8`).
//!
//! What must not live here: length checks and entry points (`super::kquant_avx2`), the other
//! K-quants (`super::kquant`).

use std::arch::x86_64::*;
use std::ops::Range;

use super::ext::{f16x8, hsum8, row_ptrs, store_rows, ActSlice, Shape};
use super::Prefetch;

/// Block bytes of Q2_K.
const BS: usize = 84;

/// Q2_K rows against Q8_K columns (see the module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `ext::check` invariants hold for Q2_K (`s.act` is
/// Q8_K with `nb` blocks per column, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // row and sub-block indices address several arrays
pub(crate) unsafe fn q2k<const MAXC: usize>(
    w: &[u8],
    rb: usize,
    s: Shape<'_>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ActSlice::Q8K(a) = s.act else { return };
    let nb = s.nb;
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (block `b < nb`, bytes
    // `b * 84 .. b * 84 + 80` loaded, the f16 pair at 80..84 by `f16x8`); activation blocks
    // are indexed safely and their `qs` (256 bytes) and `bsums` (32 bytes) read whole;
    // prefetch hints never fault; AVX2/FMA/F16C are available.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m4 = _mm_set1_epi8(0x0F);
        // `vpshufb` indices: the scale byte of 16-element group `2 sb` zero-extended into
        // every word of the low 128 bits, that of `2 sb + 1` into the high.
        let sel: [__m256i; 8] = core::array::from_fn(|sb| {
            let g = 2 * sb as i16;
            _mm256_set_m128i(_mm_set1_epi16((g + 1) | -0x8000), _mm_set1_epi16(g | -0x8000))
        });
        let pfx = Prefetch::DEFAULT.one_group_ahead(8 * rb);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<8>(w, rb, nrows, r0);
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut bp = rp;
                // Per column: the 8 rows' i32 partial sums of `isum` and of `summs`.
                let mut sums = [[_mm256_setzero_si256(); 8]; MAXC];
                let mut mins = [[_mm256_setzero_si256(); 8]; MAXC];
                for i in 0..8 {
                    // Row `i`'s block decoded (the 8 planes' quants 0..=3, their scale
                    // vectors, the 16 mins as words) and met at once by every column, so a
                    // one-column tile keeps it in registers.
                    bp[i] = bp[i].add(b * BS);
                    let q = bp[i];
                    pfx.span(q, BS);
                    let sc = _mm_loadu_si128(q.cast());
                    let lo = _mm256_broadcastsi128_si256(_mm_and_si128(sc, m4));
                    let sv: [__m256i; 8] =
                        core::array::from_fn(|sb| _mm256_shuffle_epi8(lo, sel[sb]));
                    let mv = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(sc), m4));
                    let mut qv = [_mm256_setzero_si256(); 8];
                    for h in 0..2 {
                        let x = _mm256_loadu_si256(q.add(16 + 32 * h).cast());
                        qv[4 * h] = _mm256_and_si256(x, m3);
                        qv[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16::<2>(x), m3);
                        qv[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m3);
                        qv[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16::<6>(x), m3);
                    }
                    for jj in 0..nc {
                        let blk = &a[(cols.start + jj) * nb + b];
                        let yp = blk.qs.as_ptr();
                        let t = |sb: usize| {
                            let y = _mm256_loadu_si256(yp.add(32 * sb).cast());
                            _mm256_madd_epi16(_mm256_maddubs_epi16(qv[sb], y), sv[sb])
                        };
                        let s01 = _mm256_add_epi32(t(0), t(1));
                        let s23 = _mm256_add_epi32(t(2), t(3));
                        let s45 = _mm256_add_epi32(t(4), t(5));
                        let s67 = _mm256_add_epi32(t(6), t(7));
                        sums[jj][i] = _mm256_add_epi32(
                            _mm256_add_epi32(s01, s23),
                            _mm256_add_epi32(s45, s67),
                        );
                        let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
                        mins[jj][i] = _mm256_madd_epi16(bs, mv);
                    }
                }
                let dw = f16x8(&bp, 80);
                let dmw = f16x8(&bp, 82);
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let blk = &a[(cols.start + jj) * nb + b];
                    let (lo, hi) = hsum8(&sums[jj]);
                    let isum = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
                    let (lo, hi) = hsum8(&mins[jj]);
                    let summs = _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
                    let yd = _mm256_set1_ps(blk.d);
                    let dall = _mm256_mul_ps(yd, dw);
                    let dmin = _mm256_mul_ps(yd, dmw);
                    let t = _mm256_sub_ps(_mm256_mul_ps(dall, isum), _mm256_mul_ps(dmin, summs));
                    *accj = _mm256_add_ps(*accj, t);
                }
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

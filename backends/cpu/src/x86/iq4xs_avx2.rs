//! AVX2 (with FMA and F16C) IQ4_XS kernel against Q8_K activations.
//!
//! IQ4_XS (ggml `block_iq4_xs`, 136 bytes of 256 elements: `d` f16, `scales_h` u16,
//! `scales_l[4]`, `qs[128]`; sub-block `ib` of 32 has the 6-bit scale `ls` (low nibble of
//! `scales_l[ib / 2]` at bit `4 (ib % 2)`, two high bits `scales_h >> 2 ib`) used as
//! `ls - 32`; low nibbles of `qs[16 ib..16 ib + 16]` are elements `32 ib + j`, high nibbles
//! `32 ib + 16 + j`; values `d (ls - 32) kvalues_iq4nl[c]`; layout from ggml
//! `dequantize_row_iq4_xs`, as in the core's `format::ggml::iq::iq4_xs`).
//!
//! Decode, per row, block and pair `k` of sub-blocks (`2k`, `2k + 1`): `qs[32k..32k + 32]` is
//! one 256-bit load whose low and high nibbles are looked up (`vpshufb`) in `kvalues_iq4nl`:
//! `w_lo` holds elements `0..16` of sub-block `2k` (low 128 bits) and of `2k + 1` (high), `w_hi`
//! elements `16..32` of each. The 8 scales `ls - 32` are unpacked with vector operations
//! ([`scales`]) into one i16 vector; one `vpshufb` per pair spreads sub-block `2k`'s scale
//! over the low and `2k + 1`'s over the high 128 bits.
//!
//! Activations (once per column, block and row group, [`record`]): the Q8_K quants of each
//! pair rearranged to meet `w_lo` / `w_hi` (two `vperm2i128`), and their absolute values.
//!
//! Per row, column and pair: `madd(maddubs(|a_lo|, sign(w_lo, a_lo)), sc) + madd(maddubs(|a_hi|,
//! sign(w_hi, a_hi)), sc)` added into an i32 vector (`maddubs` pairs <= 2 * 128 * 127 < 2^15;
//! Q8_K quants lie in -127..=127, and `vpabsb` of -128 would still read as 128 unsigned); each
//! i32 lane sums 4 pairs of 2 products of at most 32258 * 32, so <= 4 * 2 * 32258 * 32 < 2^24
//! and converts exactly. Then `acc = fma(cvt(i), d_w * d_a, acc)` once per block. Rows in
//! groups of `R` (the last repeated), columns in sub-tiles of `CT`, the 8 lanes summed by
//! [`hsum_ps`] at the end. Bound: per lane and block one rounded scale product and one FMA
//! rounding, then 3 in the tree: `2 K / 256 + 4 <= K` roundings per term, so
//! `|y - y_exact| <= c * K * 2^-24 * sum|w_i a_i|` with **c = 1** (the reference keeps c = 4).
//!
//! What must not live here: other formats, the AVX-512 IQ4_XS kernel (`super::iq512`), length
//! checks (`super::ext::check`).

// Row, column and pair indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::format::ggml::iq::tables::KVALUES_IQ4NL;
use lowbit_core::format::ggml::BlockQ8K;
use lowbit_core::{Error, FormatId};

use super::avx2::hsum_ps;
use super::ext::{check, row_ptrs, ActSlice, W_IQ4XS};
use crate::act::Acts;
use crate::kernels::Kernel;

/// IQ4_XS block bytes.
const BB: usize = 136;
/// Bytes ahead of the current block that each row stream prefetches (into L1).
const PREFETCH: usize = 640;

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Iq4Xs => Some(Kernel { name: "avx2-iq4_xs", f: run }),
        _ => None,
    }
}

fn run(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = check::<W_IQ4XS>(format, w, rb, acts, &cols, out)?;
    let ActSlice::Q8K(a) = s.act else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; `check` verified
    // `rb == nb * 136`, whole rows, `out.len() == rows * cols.len()`, `1 <= cols.len() <= 16`,
    // `cols.end <= acts.n` and `acts.n * nb` activation blocks.
    unsafe { entry(w, rb, s.nb, a, cols, out) };
    Ok(())
}

/// Column-count dispatch.
///
/// # Safety
/// As [`body`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8K],
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match cols.len() {
            1 => body::<1, 4>(w, rb, nb, a, cols, out),
            2 => body::<2, 2>(w, rb, nb, a, cols, out),
            3 | 4 => body::<4, 2>(w, rb, nb, a, cols, out),
            _ => body::<8, 1>(w, rb, nb, a, cols, out),
        }
    }
}

/// The 8 sub-block scales `ls - 32` of the block at `p` as i16, in both 128-bit halves.
/// `scales_l` bytes are spread to words `2i, 2i + 1 = byte i`, multiplied by 16 (even words)
/// or 1 (odd), shifted right by 4 and masked: the low or the high nibble. `scales_h` is
/// broadcast and multiplied by `2^(14 - 2 ib)`, which moves bits `2 ib, 2 ib + 1` to bits 14
/// and 15 (higher bits fall off the word); shifted right by 10 and masked they are bits 4
/// and 5 of `ls`.
///
/// # Safety
/// AVX2 is available; `p .. p + 8` is readable.
#[inline(always)]
unsafe fn scales(p: *const u8) -> __m256i {
    // SAFETY: reads bytes 2..8 at `p` (caller); register-only operations otherwise.
    unsafe {
        let sl = ptr::read_unaligned(p.add(4).cast::<i32>());
        let sh = ptr::read_unaligned(p.add(2).cast::<i16>());
        let spread = _mm_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1);
        let l = _mm_shuffle_epi8(_mm_cvtsi32_si128(sl), spread);
        let l = _mm_mullo_epi16(l, _mm_setr_epi16(16, 1, 16, 1, 16, 1, 16, 1));
        let l = _mm_and_si128(_mm_srli_epi16::<4>(l), _mm_set1_epi16(0x0F));
        let hmul = _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1);
        let h = _mm_mullo_epi16(_mm_set1_epi16(sh), hmul);
        let h = _mm_and_si128(_mm_srli_epi16::<10>(h), _mm_set1_epi16(0x30));
        let ls = _mm_sub_epi16(_mm_or_si128(l, h), _mm_set1_epi16(32));
        _mm256_broadcastsi128_si256(ls)
    }
}

/// Pair `k`'s scale vector (`k < 4`) from [`scales`]: word `2k` in the low, `2k + 1` in the high half.
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn pair_scale(sc: __m256i, k: i8) -> __m256i {
    // SAFETY: register-only AVX2 operation (caller).
    unsafe {
        let (l0, l1, h0, h1) = (4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
        let idx = _mm256_setr_epi8(
            l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, h0, h1, h0, h1, h0, h1,
            h0, h1, h0, h1, h0, h1, h0, h1, h0, h1,
        );
        _mm256_shuffle_epi8(sc, idx)
    }
}

/// One column's activation record of one block: per pair `k`, `[a_lo, a_hi, |a_lo|, |a_hi|]`
/// (module doc).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn record(ab: &BlockQ8K, rec: &mut [__m256i; 16]) {
    // SAFETY: reads the 256 quants of `ab`; register-only operations otherwise.
    unsafe {
        let q = ab.qs.as_ptr();
        for k in 0..4 {
            let x0 = _mm256_loadu_si256(q.add(64 * k).cast());
            let x1 = _mm256_loadu_si256(q.add(64 * k + 32).cast());
            let lo = _mm256_permute2x128_si256::<0x20>(x0, x1);
            let hi = _mm256_permute2x128_si256::<0x31>(x0, x1);
            rec[4 * k] = lo;
            rec[4 * k + 1] = hi;
            rec[4 * k + 2] = _mm256_abs_epi8(lo);
            rec[4 * k + 3] = _mm256_abs_epi8(hi);
        }
    }
}

/// Pair `K` of one row's block at `p` against `CT` columns' records: adds the scaled i32
/// lane sums into `iacc`.
///
/// # Safety
/// AVX2 is available; `p .. p + 136` is readable.
#[inline(always)]
unsafe fn pair<const K: usize, const CT: usize>(
    p: *const u8,
    lut: __m256i,
    sc: __m256i,
    rec: &[[__m256i; 16]; CT],
    iacc: &mut [__m256i; CT],
) {
    // SAFETY: reads bytes `8 + 32 K .. 40 + 32 K < 136` at `p` (caller); register-only
    // operations otherwise.
    unsafe {
        let m = _mm256_set1_epi8(0x0F);
        let x = _mm256_loadu_si256(p.add(8 + 32 * K).cast());
        let wl = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, m));
        let wh = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16::<4>(x), m));
        let s = pair_scale(sc, K as i8);
        for jj in 0..CT {
            let r = &rec[jj];
            let pl = _mm256_maddubs_epi16(r[4 * K + 2], _mm256_sign_epi8(wl, r[4 * K]));
            let ph = _mm256_maddubs_epi16(r[4 * K + 3], _mm256_sign_epi8(wh, r[4 * K + 1]));
            let t = _mm256_add_epi32(_mm256_madd_epi16(pl, s), _mm256_madd_epi16(ph, s));
            iacc[jj] = _mm256_add_epi32(iacc[jj], t);
        }
    }
}

/// The kernel body (module doc). `CT` is the columns per sub-tile, `R` the rows per group.
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` is whole rows of `rb = nb * 136` bytes; `a` holds
/// `nb` blocks per column for every column in `cols`; `out.len() == rows * cols.len()`;
/// `1 <= cols.len()`.
#[inline(always)]
unsafe fn body<const CT: usize, const R: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8K],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let ncols = cols.len();
    // SAFETY: row pointers are clamped to `nrows - 1` and block reads stay inside the row
    // (`b < nb`); activation blocks are `j * nb + b` with `j` a column of the tile (clamped
    // to its last), `< acts.n`; loads are unaligned; the prefetch never faults.
    unsafe {
        let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<R>(w, rb, nrows, r0);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let cj: [usize; CT] =
                    core::array::from_fn(|jj| (cols.start + c0 + jj.min(nc - 1)) * nb);
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                let mut rec = [[_mm256_setzero_si256(); 16]; CT];
                for b in 0..nb {
                    let mut da = [_mm256_setzero_ps(); CT];
                    for jj in 0..CT {
                        let ab = a.get_unchecked(cj[jj] + b);
                        record(ab, &mut rec[jj]);
                        da[jj] = _mm256_set1_ps(ab.d);
                    }
                    for i in 0..R {
                        let p = rp[i].add(b * BB);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + 64).cast());
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH + BB - 1).cast());
                        let sc = scales(p);
                        let mut iacc = [_mm256_setzero_si256(); CT];
                        pair::<0, CT>(p, lut, sc, &rec, &mut iacc);
                        pair::<1, CT>(p, lut, sc, &rec, &mut iacc);
                        pair::<2, CT>(p, lut, sc, &rec, &mut iacc);
                        pair::<3, CT>(p, lut, sc, &rec, &mut iacc);
                        let dw = _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                            ptr::read_unaligned(p.cast::<u16>()),
                        ))));
                        for jj in 0..CT {
                            let s = _mm256_mul_ps(dw, da[jj]);
                            acc[i][jj] =
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[jj]), s, acc[i][jj]);
                        }
                    }
                }
                for i in 0..here {
                    for jj in 0..nc {
                        out[(r0 + i) * ncols + c0 + jj] = hsum_ps(acc[i][jj]);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rng::Rng;
    use super::*;

    /// The vector scale unpacking against the core's per-sub-block formula, for every value of
    /// each scale field position.
    #[test]
    fn scales_match_formula() {
        if !crate::isa::Isa::Avx2.available() {
            return;
        }
        let mut rng = Rng(7);
        for _ in 0..512 {
            let mut blk = [0u8; 8];
            blk[2..8].copy_from_slice(&rng.next().to_le_bytes()[..6]);
            let sh = u16::from_le_bytes([blk[2], blk[3]]);
            let mut got = [0i16; 16];
            // SAFETY: AVX2 detected above; reads the 8 local bytes, stores 32 local bytes.
            unsafe { _mm256_storeu_si256(got.as_mut_ptr().cast(), scales(blk.as_ptr())) };
            for ib in 0..8 {
                let lo = (blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
                let hi = (sh >> (2 * ib)) & 3;
                let want = (i16::from(lo) | (hi as i16) << 4) - 32;
                assert_eq!(got[ib], want, "ib {ib} of {blk:?}");
                assert_eq!(got[8 + ib], want, "ib {ib} (high half) of {blk:?}");
            }
        }
    }
}

//! AVX2 (with FMA and F16C) NVFP4 kernel against Q8_0 activations.
//!
//! NVFP4 (36-byte blocks of 64: four UE4M3 sub-block scales `d[4]`, then `qs[32]`; sub-block
//! `s` (16 elements) is `qs[8s..8s + 8]`, low nibbles elements `16s + j`, high nibbles
//! `16s + 8 + j`; values `kvalues_mxfp4[c] * ue4m3_half(d[s])`; layout from ggml
//! `block_nvfp4` / `dequantize_row_nvfp4`, as in the core's `format::ggml::nvfp4`).
//!
//! Decode, per row and block: `qs` is one 256-bit load; its low and its high nibbles are
//! looked up (`vpshufb`) as `kvalues + 12` (0..=24, unsigned, [`super::nvfp4_512`]'s table)
//! into `lo` and `hi`, whose i32 lane `l` lies in sub-block `l / 2`. The four scales are
//! computed, not looked up ([`ue4m3_half_x8`]), into the 8-lane vector `d_w(l) = d[l / 2]`.
//! The activations of the block (two Q8_0 blocks `A0`, `A1`) are rearranged per column to
//! meet them: `a_lo` = the quadwords `A0[0], A0[2], A1[0], A1[2]` (elements `16s..16s + 8`),
//! `a_hi` = `A0[1], A0[3], A1[1], A1[3]` (one `vpermq` per block and two `vperm2i128`), with
//! `12 * asum` per lane and `d_a(l)` = the scale of `A0` (lanes 0..4) or `A1` (lanes 4..8).
//!
//! Per row and column: `madd(maddubs(lo, a_lo) + maddubs(hi, a_hi), 1) - 12 asum` (exact:
//! i16 lanes <= 4 * 24 * 127 < 2^15; i32 lanes far below 2^24, converted exactly), then
//! `acc = fma(cvt(i), d_w * d_a, acc)`. Rows in groups of `R` (the last row repeated), columns
//! in sub-tiles of `CT`; the 8 lanes summed at the end by [`hsum_ps`]. Bound: per lane and
//! block one rounded scale product and one FMA rounding, then the 3 of the tree: each term
//! carries at most `2 K / 64 + 4 <= K` roundings, so `|y - y_exact| <= c * K * 2^-24 *
//! sum|w_i a_i|` with **c = 1**.
//!
//! What must not live here: other formats, the AVX-512 NVFP4 kernel (`super::nvfp4_512`),
//! length checks (`super::ext::check`).

// Row and column indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::avx2::hsum_ps;
use super::ext::{check, row_ptrs, ActSlice, W_NVFP4};
use super::nvfp4_512::NV_U;
use crate::act::Acts;
use crate::kernels::Kernel;

/// NVFP4 block bytes.
const BB: usize = 36;
/// Q8_0 activation block bytes (`d` f16, 32 quants).
const AB: usize = 34;
/// Bytes ahead of the current block that each row stream prefetches (into L1).
const PREFETCH: usize = 576;

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Nvfp4 => Some(Kernel { name: "avx2-nvfp4", f: run }),
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
    let s = check::<W_NVFP4>(format, w, rb, acts, &cols, out)?;
    let ActSlice::Q8_0(a, ad) = s.act else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; `check` verified
    // `rb == nb * 36`, whole rows, `out.len() == rows * cols.len()`, `1 <= cols.len() <= 16`,
    // `cols.end <= acts.n` and `acts.n * 2 nb` activation blocks and scales.
    unsafe { entry(w, rb, s.nb, a, ad, cols, out) };
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
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match cols.len() {
            1 => body::<1, 4>(w, rb, nb, a, ad, cols, out),
            2 => body::<2, 2>(w, rb, nb, a, ad, cols, out),
            3 | 4 => body::<4, 2>(w, rb, nb, a, ad, cols, out),
            _ => body::<8, 1>(w, rb, nb, a, ad, cols, out),
        }
    }
}

/// Half the UE4M3 value of the low byte of each i32 lane (bit 7 ignored; exponent `e` 4 bits,
/// bias 7, mantissa `m` 3 bits, subnormal at `e = 0`), as ggml's `ggml_ue4m3_to_fp32`, computed
/// without a table and without f32 subnormals: for `e >= 1` the 7 value bits placed at bit 20
/// plus 119 in the f32 exponent field are exactly `(1 + m/8) 2^(e - 8)`; for `e = 0` the value
/// `m 2^-10` is `vcvtdq2ps(m)` times 2^-10 (exact), chosen by a compare. The bytes 0x7F and
/// 0xFF (E4M3 NaN, rejected at upload) give 0, as in [`super::nvfp4_512`]. A test checks every
/// byte against the core.
///
/// (`super::nvfp4_512`'s form, the 7 bits at bit 20 read as an f32 and multiplied by 2^119,
/// multiplies an f32 subnormal whenever `e = 0`, which the Gaussian-coded bench weights hit
/// often: on this Zen 3 that form ran NVFP4 at n = 2 3.5x slower than at n = 1, the `vmulps`
/// carrying most of the profile's samples.)
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn ue4m3_half_x8(b: __m256i) -> __m256 {
    // SAFETY: register-only AVX2 operations (caller).
    unsafe {
        let em = _mm256_and_si256(b, _mm256_set1_epi32(0x7F));
        let nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7F)));
        let normal = _mm256_add_epi32(_mm256_slli_epi32::<20>(em), _mm256_set1_epi32(119 << 23));
        let sub = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(1.0 / 1024.0));
        let is_sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), em));
        let d = _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub, is_sub);
        _mm256_andnot_ps(nan, d)
    }
}

/// One weight block: `(lo, hi, d_w)` (module doc).
///
/// # Safety
/// AVX2 is available; `p .. p + 36` is readable.
#[inline(always)]
unsafe fn decode(p: *const u8, lut: __m256i) -> (__m256i, __m256i, __m256) {
    // SAFETY: reads bytes 0..36 at `p` (caller); register-only operations otherwise.
    unsafe {
        let m = _mm256_set1_epi8(0x0F);
        let x = _mm256_loadu_si256(p.add(4).cast());
        let lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, m));
        let hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16::<4>(x), m));
        // Lane l gets scale byte l / 2 (zero-extended); the broadcast puts all four bytes in
        // both 128-bit halves, where `vpshufb` indexes.
        let spread = _mm256_setr_epi8(
            0, -1, -1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 2, -1, -1,
            -1, 3, -1, -1, -1, 3, -1, -1, -1,
        );
        let sb = _mm256_set1_epi32(ptr::read_unaligned(p.cast::<i32>()));
        (lo, hi, ue4m3_half_x8(_mm256_shuffle_epi8(sb, spread)))
    }
}

/// The kernel body (module doc). `CT` is the columns per sub-tile, `R` the rows per group.
///
/// # Safety
/// AVX2, FMA and F16C are available; `w` is whole rows of `rb = nb * 36` bytes; `a` and `ad`
/// hold `2 nb` entries per column for every column in `cols`; `out.len() == rows *
/// cols.len()`; `1 <= cols.len()`.
#[inline(always)]
unsafe fn body<const CT: usize, const R: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let ncols = cols.len();
    let abase = a.as_ptr().cast::<u8>();
    // SAFETY: row pointers are clamped to `nrows - 1` and block reads stay inside the row
    // (`b < nb`); activation reads are blocks `2b, 2b + 1 < 2 nb` of a column `< acts.n`
    // (clamped to the tile's last); loads are unaligned; the prefetch never faults.
    unsafe {
        let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(NV_U.as_ptr().cast()));
        let one8 = _mm256_set1_epi8(1);
        let one16 = _mm256_set1_epi16(1);
        let twelve = _mm256_set1_epi16(12);
        let halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs::<R>(w, rb, nrows, r0);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut ap = [abase; CT];
                let mut dp = [ad.as_ptr(); CT];
                for jj in 0..CT {
                    let j = cols.start + c0 + jj.min(nc - 1);
                    ap[jj] = abase.add(j * 2 * nb * AB + 2);
                    dp[jj] = ad.as_ptr().add(j * 2 * nb);
                }
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                for b in 0..nb {
                    let mut lo = [_mm256_setzero_si256(); R];
                    let mut hi = [_mm256_setzero_si256(); R];
                    let mut dw = [_mm256_setzero_ps(); R];
                    for i in 0..R {
                        let p = rp[i].add(b * BB);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                        (lo[i], hi[i], dw[i]) = decode(p, lut);
                    }
                    for jj in 0..CT {
                        let a0 = _mm256_loadu_si256(ap[jj].add(2 * b * AB).cast());
                        let a1 = _mm256_loadu_si256(ap[jj].add((2 * b + 1) * AB).cast());
                        let t0 = _mm256_permute4x64_epi64::<0b11_01_10_00>(a0);
                        let t1 = _mm256_permute4x64_epi64::<0b11_01_10_00>(a1);
                        let alo = _mm256_permute2x128_si256::<0x20>(t0, t1);
                        let ahi = _mm256_permute2x128_si256::<0x31>(t0, t1);
                        let pairs = _mm256_add_epi16(
                            _mm256_maddubs_epi16(one8, alo),
                            _mm256_maddubs_epi16(one8, ahi),
                        );
                        let a12 = _mm256_madd_epi16(pairs, twelve);
                        let d2 = _mm_castsi128_ps(_mm_loadl_epi64(dp[jj].add(2 * b).cast()));
                        let da = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d2), halves);
                        for i in 0..R {
                            let p = _mm256_add_epi16(
                                _mm256_maddubs_epi16(lo[i], alo),
                                _mm256_maddubs_epi16(hi[i], ahi),
                            );
                            let si = _mm256_sub_epi32(_mm256_madd_epi16(p, one16), a12);
                            let sc = _mm256_mul_ps(dw[i], da);
                            acc[i][jj] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), sc, acc[i][jj]);
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
    use super::*;

    #[test]
    fn ue4m3_half_matches_core() {
        if !crate::isa::Isa::Avx2.available() {
            return;
        }
        for b0 in (0u32..256).step_by(8) {
            let bytes: [u32; 8] = core::array::from_fn(|i| b0 + i as u32);
            let mut got = [0f32; 8];
            // SAFETY: AVX2 detected above; 8-lane load and store of local arrays.
            unsafe {
                let v = ue4m3_half_x8(_mm256_loadu_si256(bytes.as_ptr().cast()));
                _mm256_storeu_ps(got.as_mut_ptr(), v);
            }
            for (b, g) in bytes.iter().zip(got) {
                let want = lowbit_core::scalar::try_ue4m3_to_f32_half(*b as u8).unwrap_or(0.0);
                assert_eq!(g.to_bits(), want.to_bits(), "byte {b:#04x}");
            }
        }
    }
}

//! AVX-512 (F/BW/VL) kernels for Q8_0 and Q4_0 against Q8_0 activations. Formats
//! that [`super::z512`] covers (Q4_0 and Q8_0 at every tile width since session 8, the K-quants,
//! the ternary types, MXFP4, IQ4_NL) are routed there first by [`kernel`], so the bodies here
//! are reached by no table today.
//!
//! Same arithmetic as the AVX2 body (`super::avx2`, whose module doc gives the order and the
//! bound, c = 1), but two rows share one 512-bit register: the low 256 bits hold row `i`'s
//! decoded block, the high 256 bits row `i + 1`'s, and each column's 32 activation bytes are
//! broadcast to both halves, so one `vpmaddubsw`/`vpmaddwd`/`vcvtdq2ps`/`vfmadd` serves two
//! rows. AVX-512 has no `vpsignb`: the activation is negated where the weight is negative with
//! a byte mask (`vpmovb2m` once per row pair and block, then a masked `vpsubb` per column),
//! which equals `sign(a, w)` wherever the weight is nonzero (where it is zero, `|w| = 0`
//! makes the product 0 either way). Lane order per row and the final 8-lane tree are the AVX2
//! body's, so results are identical to it. For one column the AVX2 body itself runs (compiled
//! here with the AVX-512 features): there the pairing's inserts cost more than they save.
//!
//! The AVX-512 intrinsics and target features are stable since Rust 1.89 (the workspace MSRV
//! says 1.85; the `avx512*` target features this module already enabled need 1.89 too), hence
//! the `incompatible_msrv` allowance below.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::avx2::{body, decode_block, hsum_ps, PREFETCH};
use super::{block_bytes, check_q8_0, W_Q4_0, W_Q8_0};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX-512 kernel for `format`, if one exists.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    if let Some(k) = super::z512::kernel(format) {
        return Some(k);
    }
    match format {
        FormatId::Q8_0 => Some(Kernel { name: "avx512-q8_0", f: run::<W_Q8_0> }),
        FormatId::Q4_0 => Some(Kernel { name: "avx512-q4_0", f: run::<W_Q4_0> }),
        _ => None,
    }
}

pub(crate) fn run<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let ck = check_q8_0(format, w, rb, acts, &cols, out, block_bytes(F))?;
    // SAFETY: this wrapper is reachable only through `kernel`, which `KernelTable::new` calls
    // only for `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2,
    // FMA and F16C; the lengths the body relies on were checked by `check_q8_0`.
    unsafe { entry::<F>(w, rb, ck.nb, ck.a, ck.ad, cols, out) };
    Ok(())
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry<const F: u8>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check_q8_0` invariants.
    unsafe {
        match cols.len() {
            // n = 1: the extra inserts of the paired layout cost more than they save (one
            // column), so the 256-bit body runs, EVEX-encoded.
            1 => body::<F, 1, 4>(w, rb, nb, a, ad, cols, out),
            2 => body512::<F, 2, 4>(w, rb, nb, a, ad, cols, out),
            3 => body512::<F, 3, 2>(w, rb, nb, a, ad, cols, out),
            4 => body512::<F, 4, 2>(w, rb, nb, a, ad, cols, out),
            5..=8 => body512::<F, 8, 1>(w, rb, nb, a, ad, cols, out),
            _ => body512::<F, 16, 1>(w, rb, nb, a, ad, cols, out),
        }
    }
}

/// The 512-bit kernel body (see the module doc): `CT` columns per sub-tile, `P` row pairs per
/// group (the last group repeats its last row and discards the extra results).
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C are available, and the `check_q8_0` invariants hold:
/// `w` is whole rows of `rb = nb * block_bytes(F)` bytes, `a`/`ad` hold `nb` entries per column
/// for every column in `cols`, `out.len() == rows * cols.len()`, `1 <= cols.len()`.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn body512<const F: u8, const CT: usize, const P: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    a: &[BlockQ8_0],
    ad: &[f32],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let bs = block_bytes(F);
    let nrows = w.len() / rb;
    let ncols = cols.len();
    let base = w.as_ptr();
    let abase = a.as_ptr().cast::<u8>();
    // SAFETY: as in `super::avx2::body`: row indices are clamped to `nrows - 1`, column
    // indices to the tile's last column, block indices are `< nb`, so every load stays inside
    // `w`, `a` and `ad`; the prefetch hint never faults; the features are available.
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let zero = _mm512_setzero_si512();
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(2 * P);
            let mut rp = [[base; 2]; P];
            for (q, pair) in rp.iter_mut().enumerate() {
                for (h, p) in pair.iter_mut().enumerate() {
                    *p = base.add((r0 + (2 * q + h).min(here - 1)) * rb);
                }
            }
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut ap = [abase; CT];
                let mut dp = [ad.as_ptr(); CT];
                for jj in 0..CT {
                    let j = cols.start + c0 + jj.min(nc - 1);
                    ap[jj] = abase.add(j * nb * 34 + 2);
                    dp[jj] = ad.as_ptr().add(j * nb);
                }
                let mut acc = [[_mm512_setzero_ps(); CT]; P];
                for b in 0..nb {
                    let mut wa = [zero; P];
                    let mut neg = [0u64; P];
                    let mut sw = [_mm512_setzero_ps(); P];
                    for q in 0..P {
                        let p0 = rp[q][0].add(b * bs);
                        let p1 = rp[q][1].add(b * bs);
                        _mm_prefetch::<_MM_HINT_T0>(p0.wrapping_add(PREFETCH).cast());
                        _mm_prefetch::<_MM_HINT_T0>(p1.wrapping_add(PREFETCH).cast());
                        let (v0, _, s0) = decode_block::<F>(p0);
                        let (v1, _, s1) = decode_block::<F>(p1);
                        let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(v0), v1);
                        wa[q] = _mm512_abs_epi8(v);
                        neg[q] = _mm512_movepi8_mask(v);
                        // AVX-512F only (no DQ): insert as 4 f64, which moves the same bits.
                        sw[q] = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                            _mm512_castpd256_pd512(_mm256_castps_pd(s0)),
                            _mm256_castps_pd(s1),
                        ));
                    }
                    for jj in 0..CT {
                        let av =
                            _mm512_broadcast_i64x4(_mm256_loadu_si256(ap[jj].add(b * 34).cast()));
                        let da = _mm512_set1_ps(*dp[jj].add(b));
                        for q in 0..P {
                            let sa = _mm512_mask_sub_epi8(av, neg[q], zero, av);
                            let prod = _mm512_maddubs_epi16(wa[q], sa);
                            let s = _mm512_cvtepi32_ps(_mm512_madd_epi16(prod, ones));
                            acc[q][jj] = _mm512_fmadd_ps(s, _mm512_mul_ps(sw[q], da), acc[q][jj]);
                        }
                    }
                }
                for (q, accq) in acc.iter().enumerate() {
                    for (jj, accj) in accq.iter().enumerate().take(nc) {
                        let lo = _mm512_castps512_ps256(*accj);
                        let hi =
                            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(*accj)));
                        for (h, v) in [lo, hi].into_iter().enumerate() {
                            let r = 2 * q + h;
                            if r < here {
                                out[(r0 + r) * ncols + c0 + jj] = hsum_ps(v);
                            }
                        }
                    }
                }
                c0 += CT;
            }
            r0 += 2 * P;
        }
    }
}

//! AVX2 kernels (AVX2 + FMA + F16C) for Q8_0, Q4_0, Q5_0, MXFP4 and IQ4_NL weights against
//! Q8_0 activations, and the shared kernel body the AVX-512 entry points also compile.
//!
//! Shape of the body (the ggml-style bandwidth layout): rows in groups of `R` (the last group
//! repeats its last row and discards the extra results), columns in sub-tiles of `CT`. For each
//! block, each row's 32 weights are expanded once to signed bytes (`wv`) and their absolute
//! values (`wa`), and reused for every column of the sub-tile: `maddubs(wa, sign(a, wv))` then
//! `madd(.., 1)` gives 8 exact i32 partial sums (lane l covers elements 4l..4l+4); these are
//! converted to f32 (exact: |partial| <= 4 * 128 * 127 < 2^24) and FMA'd with the lane scale
//! `s_w * d_a` into an f32 accumulator of 8 lanes per (row, column). After the last block the
//! 8 lanes are summed (a fixed tree). No horizontal operation per block: the loop is one load,
//! a few integer ops and one FMA per (block, row, column).
//!
//! Accumulation order and bound. Per (row, column), lane l accumulates, in block order,
//! `fl(p_{b,l} * fl(s_w,b,l * d_a,b) + acc)` (one FMA), then the 8 lanes are added as
//! `((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))`. This differs from the reference's order (exact block
//! sums, one f32 product chain and sum per block), so results are not bit-identical to it, but
//! with u = 2^-24 and `n_terms = K` every lane term carries one rounding of its scale product
//! and at most `K/32 + 3` roundings of the sums, so
//! `|y - y_exact| <= c * K * 2^-24 * sum|w_i a_i|` with **c = 1** (since `K/32 + 4 <= K` for
//! `K >= 32`), against the exact sum of decoded weights times decoded activations. The tests
//! check this bound for every SIMD kernel.
//!
//! `maddubs` cannot saturate: |w| <= 128 (Q8_0 weights may hold -128), and the activations come
//! from the core's Q8_0 encoder, whose quants lie in -127..=127 (|q| = round(|x| * 127 /
//! amax)), so a pair sums to at most 2 * 128 * 127 = 32512 < 32767.
//!
//! Weight decode:
//! * Q8_0: the 32 quants as they are; `d` (f16) widened by `vcvtph2ps` and broadcast.
//! * Q4_0: low nibbles of `qs[0..16]` are elements 0..16, high nibbles 16..32; minus 8. The
//!   256-bit body skips the sign trick here: `maddubs(q, a)` on the unsigned nibbles, minus
//!   `8 * sum(a)` per 4-element lane (computed once per column and block), which is the same
//!   exact i32 partial sum with 3 fewer vector operations per row.
//! * Q5_0 (ggml `block_q5_0`: `d` f16, `qh` u32 whose bit `j` is bit 4 of element `j`, then
//!   Q4_0's 16 nibble bytes): Q4_0's unsigned path with codes `nibble + 16 * bit` (0..=31; the
//!   bits spread to bytes by [`fifth_bits`]) and `16 * sum(a)` subtracted (`maddubs` pairs
//!   <= 2 * 31 * 127 < 32767).

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use lowbit_core::format::ggml::iq::tables::KVALUES_IQ4NL;
use lowbit_core::format::ggml::mxfp4::KVALUES_MXFP4;

use super::z512::E8M0_HALF;
use super::{block_bytes, check_q8_0, W_IQ4NL, W_MXFP4, W_Q4_0, W_Q5_0, W_Q8_0};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX2 kernel for `format`, if one exists.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q8_0 => Some(Kernel { name: "avx2-q8_0", f: run::<W_Q8_0> }),
        FormatId::Q4_0 => Some(Kernel { name: "avx2-q4_0", f: run::<W_Q4_0> }),
        FormatId::Q5_0 => Some(Kernel { name: "avx2-q5_0", f: run::<W_Q5_0> }),
        FormatId::Mxfp4 => Some(Kernel { name: "avx2-mxfp4", f: run::<W_MXFP4> }),
        FormatId::Iq4Nl => Some(Kernel { name: "avx2-iq4_nl", f: run::<W_IQ4NL> }),
        _ => None,
    }
}

fn run<const F: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let ck = check_q8_0(format, w, rb, acts, &cols, out, block_bytes(F))?;
    // SAFETY: this wrapper is reachable only through `kernel`, which `KernelTable::new` calls
    // only for `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the
    // lengths the body relies on were checked by `check_q8_0`.
    unsafe { entry::<F>(w, rb, ck.nb, ck.a, ck.ad, cols, out) };
    Ok(())
}

#[target_feature(enable = "avx2,fma,f16c")]
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
            1 => body::<F, 1, 4>(w, rb, nb, a, ad, cols, out),
            2 => body::<F, 2, 2>(w, rb, nb, a, ad, cols, out),
            3 => body::<F, 3, 2>(w, rb, nb, a, ad, cols, out),
            4 => body::<F, 4, 2>(w, rb, nb, a, ad, cols, out),
            _ => body::<F, 8, 1>(w, rb, nb, a, ad, cols, out),
        }
    }
}

/// Q8_0 weights: the 32 quants after the 2-byte scale.
#[inline(always)]
unsafe fn load_q8_0(p: *const u8) -> __m256i {
    // SAFETY: `p` points at a whole 34-byte block; bytes 2..34 are read.
    unsafe { _mm256_loadu_si256(p.add(2).cast()) }
}

/// Q4_0 weights: nibbles minus 8 as signed bytes in element order.
#[inline(always)]
unsafe fn load_q4_0(p: *const u8) -> __m256i {
    // SAFETY: `p` points at a whole 18-byte block; bytes 2..18 are read.
    unsafe {
        let x = _mm_loadu_si128(p.add(2).cast());
        let m = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(x, m);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), m);
        _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8))
    }
}

/// The 16 nibble bytes at `p` as 32 signed bytes in element order (low nibbles are elements
/// 0..16, high nibbles 16..32), each nibble looked up in the 16-entry table `t`.
#[inline(always)]
unsafe fn load_nib_lut(p: *const u8, t: &[i8; 16]) -> __m256i {
    // SAFETY: `p .. p + 16` is readable (the caller's block); `t` is 16 bytes.
    unsafe {
        let x = _mm_loadu_si128(p.cast());
        let m = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(x, m);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), m);
        let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()));
        _mm256_shuffle_epi8(lut, _mm256_set_m128i(hi, lo))
    }
}

/// The sum of the 8 lanes of `v`, in the fixed order `((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))`.
#[inline(always)]
pub(crate) unsafe fn hsum_ps(v: __m256) -> f32 {
    // SAFETY: register-only AVX operations; the caller has AVX2.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// The 16 nibble bytes at `p` as 32 unsigned codes 0..=15 in element order (low nibbles are
/// elements 0..16, high nibbles 16..32).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: `p .. p + 16` is readable (the caller's block); AVX2 available.
    unsafe {
        let x = _mm_loadu_si128(p.cast());
        let m = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(x, m);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), m);
        _mm256_set_m128i(hi, lo)
    }
}

/// The f16 at `p`, widened and broadcast.
#[inline(always)]
unsafe fn f16_bcast(p: *const u8) -> __m256 {
    // SAFETY: `p .. p + 2` is readable (the caller's block); F16C/AVX2 available.
    unsafe {
        let d = ptr::read_unaligned(p.cast::<u16>());
        _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(d))))
    }
}

/// One Q4_0 block as unsigned nibbles 0..=15 in element order (no -8) and its scale
/// broadcast; `maddubs(q, a)` cannot saturate (2 * 15 * 127 < 32767).
#[inline(always)]
unsafe fn decode_q4_0_unsigned(p: *const u8) -> (__m256i, __m256) {
    // SAFETY: `p` points at a whole 18-byte block; bytes 0..18 are read; AVX2/F16C available.
    unsafe { (nibbles(p.add(2)), f16_bcast(p)) }
}

/// `0x10` in byte `j` where bit `j` of `qh` is set, else 0 (the fifth bit of Q5_0 / Q5_1
/// element `j`, in the element order of [`decode_q4_0_unsigned`]): `qh`'s byte `j / 8` is
/// copied to byte `j`, every bit but bit `j % 8` set, compared with all ones.
#[inline(always)]
pub(crate) unsafe fn fifth_bits(qh: u32) -> __m256i {
    // SAFETY: register-only AVX2 operations; the caller has AVX2.
    unsafe {
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let b = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
        let b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
        let set = _mm256_cmpeq_epi8(b, _mm256_set1_epi8(-1));
        _mm256_and_si256(set, _mm256_set1_epi8(0x10))
    }
}

/// One Q5_0 block as unsigned codes 0..=31 in element order (no -16) and its scale
/// broadcast; `maddubs(q, a)` cannot saturate (2 * 31 * 127 < 32767).
#[inline(always)]
unsafe fn decode_q5_0_unsigned(p: *const u8) -> (__m256i, __m256) {
    // SAFETY: `p` points at a whole 22-byte block (`d`, `qh`, the nibbles at `p + 6`);
    // AVX2/F16C available.
    unsafe {
        let qh = ptr::read_unaligned(p.add(2).cast::<u32>());
        (_mm256_or_si256(nibbles(p.add(6)), fifth_bits(qh)), f16_bcast(p))
    }
}

/// One weight block of one row, decoded: signed bytes, their absolute values, and the weight
/// scale per i32 lane.
#[inline(always)]
pub(crate) unsafe fn decode_block<const F: u8>(p: *const u8) -> (__m256i, __m256i, __m256) {
    // SAFETY: `p` points at a whole block of `block_bytes(F)` bytes; AVX2/F16C available.
    unsafe {
        let f16_scale = |p: *const u8| {
            let d = ptr::read_unaligned(p.cast::<u16>());
            _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(d))))
        };
        let (wv, sw) = match F {
            W_Q8_0 => (load_q8_0(p), f16_scale(p)),
            W_MXFP4 => {
                (load_nib_lut(p.add(1), &KVALUES_MXFP4), _mm256_set1_ps(E8M0_HALF[usize::from(*p)]))
            }
            W_IQ4NL => (load_nib_lut(p.add(2), &KVALUES_IQ4NL), f16_scale(p)),
            _ => (load_q4_0(p), f16_scale(p)),
        };
        (wv, _mm256_abs_epi8(wv), sw)
    }
}

/// The kernel body (see the module doc). `F` is the weight format, `CT` the columns per
/// sub-tile (the accumulators held), `R` the rows per group.
///
/// # Safety
/// AVX2, FMA and F16C are available, and the `check_q8_0` invariants hold: `w` is whole rows of
/// `rb = nb * block_bytes(F)` bytes, `a`/`ad` hold `nb` entries per column for every column in
/// `cols`, `out.len() == rows * cols.len()`, `1 <= cols.len()`.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub(crate) unsafe fn body<const F: u8, const CT: usize, const R: usize>(
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
    // SAFETY: all pointer offsets stay inside `w`, `a` and `ad` by the invariants above (row
    // index clamped to `nrows - 1`, block index `< nb`, activation index `j * nb + b` with
    // `j < acts.n`); loads are unaligned; the prefetch hint never faults; AVX2/FMA/F16C are
    // available.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(R);
            let mut rp = [base; R];
            for (i, p) in rp.iter_mut().enumerate() {
                *p = base.add((r0 + i.min(here - 1)) * rb);
            }
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                // Columns past the tile's end repeat its last column (results discarded), so
                // every loop below has the constant trip count CT and stays in registers.
                let mut ap = [abase; CT];
                let mut dp = [ad.as_ptr(); CT];
                for jj in 0..CT {
                    let j = cols.start + c0 + jj.min(nc - 1);
                    ap[jj] = abase.add(j * nb * 34 + 2);
                    dp[jj] = ad.as_ptr().add(j * nb);
                }
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                for b in 0..nb {
                    let mut wv = [_mm256_setzero_si256(); R];
                    let mut wa = [_mm256_setzero_si256(); R];
                    let mut sw = [_mm256_setzero_ps(); R];
                    for i in 0..R {
                        let p = rp[i].add(b * bs);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                        if F == W_Q4_0 {
                            // Unsigned nibbles 0..=15 (the -8 is applied to the sums below).
                            (wv[i], sw[i]) = decode_q4_0_unsigned(p);
                        } else if F == W_Q5_0 {
                            // Unsigned codes 0..=31 (the -16 is applied to the sums below).
                            (wv[i], sw[i]) = decode_q5_0_unsigned(p);
                        } else {
                            (wv[i], wa[i], sw[i]) = decode_block::<F>(p);
                        }
                    }
                    for jj in 0..CT {
                        let av = _mm256_loadu_si256(ap[jj].add(b * 34).cast());
                        let da = _mm256_broadcast_ss(&*dp[jj].add(b));
                        // Q4_0 / Q5_0: 8 / 16 * (the activation's 4-element sums), once per
                        // column and block.
                        let a8 = if F == W_Q4_0 || F == W_Q5_0 {
                            let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), av);
                            let sums = _mm256_madd_epi16(pairs, ones);
                            if F == W_Q5_0 {
                                _mm256_slli_epi32::<4>(sums)
                            } else {
                                _mm256_slli_epi32::<3>(sums)
                            }
                        } else {
                            _mm256_setzero_si256()
                        };
                        for i in 0..R {
                            let si = if F == W_Q4_0 || F == W_Q5_0 {
                                // sum(q * a) - 8 * sum(a) = sum((q - 8) * a), exactly, per lane
                                // (Q5_0: 16).
                                let prod = _mm256_maddubs_epi16(wv[i], av);
                                _mm256_sub_epi32(_mm256_madd_epi16(prod, ones), a8)
                            } else {
                                let prod = _mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(av, wv[i]));
                                _mm256_madd_epi16(prod, ones)
                            };
                            let s = _mm256_cvtepi32_ps(si);
                            acc[i][jj] = _mm256_fmadd_ps(s, _mm256_mul_ps(sw[i], da), acc[i][jj]);
                        }
                    }
                }
                for (i, acci) in acc.iter().enumerate().take(here) {
                    for (jj, accj) in acci.iter().enumerate().take(nc) {
                        out[(r0 + i) * ncols + c0 + jj] = hsum_ps(*accj);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// Bytes ahead of the current block that each row stream prefetches.
pub(crate) const PREFETCH: usize = 512;

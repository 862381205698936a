//! AVX2 kernels (AVX2 + FMA + F16C) for Q8_0, Q4_0 and ROCmFP2 weights against Q8_0
//! activations, and the shared kernel body the AVX-512 entry points also compile.
//!
//! Shape of the body: rows in groups of 8 (the last group repeats its last row and discards
//! the extra results); per block, each row's 32 weights are expanded once to signed bytes and
//! reused for every column of the tile. Per row and column, `maddubs(|w|, sign(a, w))` then
//! `madd(.., 1)` gives 8 exact i32 partial sums; a `hadd` tree turns the 8 rows' partials into
//! one vector whose lane i is row i's block sum (or, for ROCmFP2, two vectors: the sums of each
//! 16-weight half, which are exactly the two 128-bit lanes). The f32 block value is then
//! computed lane-wise with the reference's expression and added to the column's accumulator,
//! so every lane accumulates its row in block order: bit-identical to the core reference.
//!
//! `maddubs` cannot saturate: |w| <= 128 (Q8_0 weights may hold -128), and the activations come
//! from the core's Q8_0 encoder, whose quants lie in -127..=127 (|q| = round(|x| * 127 /
//! amax)), so a pair sums to at most 2 * 128 * 127 = 32512 < 32767.
//!
//! Weight decode:
//! * Q8_0: the 32 quants as they are; `d` (f16) of 8 rows widened by `vcvtph2ps`.
//! * Q4_0: low nibbles of `qs[0..16]` are elements 0..16, high nibbles 16..32; minus 8.
//! * ROCmFP2: the 8 code bytes broadcast, each byte copied to 4 lanes by `pshufb`, masked
//!   with `[0x03, 0x0C, 0x30, 0xC0]` so lane 4j+i keeps code i of byte j at bits 2i; then
//!   `(m | m >> 4) & 0x0F` folds the codes of positions 2 and 3 down, giving an index in
//!   {c, 4c} whose level a second `pshufb` looks up (`{-4,-1,1,4}` at 0..3 and at 0,4,8,12;
//!   code 0 is index 0 in both cases). Scales are decoded 8 rows at a time by [`ue4m3_b8_x8`]
//!   (a test checks all 127 legal bytes against the core).

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::format::ggml::BlockQ8_0;
use lowbit_core::{Error, FormatId};

use super::{block_bytes, check_q8_0, W_FP2, W_Q4_0, W_Q8_0};
use crate::act::Acts;
use crate::kernels::Kernel;

/// The AVX2 kernel for `format`, if one exists.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q8_0 => Some(Kernel { name: "avx2-q8_0", f: q8_0 }),
        FormatId::Q4_0 => Some(Kernel { name: "avx2-q4_0", f: q4_0 }),
        FormatId::RocmFp2 => Some(Kernel { name: "avx2-rocmfp2", f: fp2 }),
        _ => None,
    }
}

fn q8_0(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_Q8_0>(f, w, rb, a, c, o)
}

fn q4_0(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_Q4_0>(f, w, rb, a, c, o)
}

fn fp2(
    f: FormatId,
    w: &[u8],
    rb: usize,
    a: &Acts,
    c: Range<usize>,
    o: &mut [f32],
) -> Result<(), Error> {
    run::<W_FP2>(f, w, rb, a, c, o)
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
            1 => body::<F, 1>(w, rb, nb, a, ad, cols, out),
            2..=4 => body::<F, 4>(w, rb, nb, a, ad, cols, out),
            _ => body::<F, 16>(w, rb, nb, a, ad, cols, out),
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

/// ROCmFP2 weights: the levels {-4,-1,1,4} of the 32 codes as signed bytes in element order.
#[inline(always)]
unsafe fn load_fp2(p: *const u8) -> __m256i {
    // SAFETY: `p` points at a whole 10-byte block; bytes 0..8 are read.
    unsafe {
        let q = ptr::read_unaligned(p.cast::<i64>());
        let v = _mm256_set1_epi64x(q);
        #[rustfmt::skip]
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
            4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
        );
        let rep = _mm256_shuffle_epi8(v, spread);
        let m = _mm256_and_si256(rep, _mm256_set1_epi32(0xC030_0C03_u32 as i32));
        let idx =
            _mm256_and_si256(_mm256_or_si256(m, _mm256_srli_epi16::<4>(m)), _mm256_set1_epi8(0x0F));
        #[rustfmt::skip]
        let lut = _mm256_setr_epi8(
            -4, -1, 1, 4, -1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0,
            -4, -1, 1, 4, -1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0,
        );
        _mm256_shuffle_epi8(lut, idx)
    }
}

/// UE4M3-b8 bytes (legal: 0..=0x7E, one per i32 lane) to f32, exactly:
/// `m * 2^(max(E, 1) - 11)` with `m = M + 8` for E > 0 and `m = M` for E = 0 (so E = 0 gives
/// `M * 2^-10`). `m <= 15` converts exactly and the power of two is a normal f32, so no
/// denormal operand ever reaches the multiplier (a denormal would cost a microcode assist).
#[inline(always)]
unsafe fn ue4m3_b8_x8(b: __m256i) -> __m256 {
    // SAFETY: register-only AVX2 operations; the caller has AVX2.
    unsafe {
        let one = _mm256_set1_epi32(1);
        let e = _mm256_srli_epi32::<3>(b);
        let m = _mm256_or_si256(
            _mm256_and_si256(b, _mm256_set1_epi32(7)),
            _mm256_slli_epi32::<3>(_mm256_min_epu32(e, one)),
        );
        let pow = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_max_epu32(e, one),
            _mm256_set1_epi32(127 - 11),
        ));
        _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_castsi256_ps(pow))
    }
}

/// Row sums of 8 rows' i32 partials: (lanes 0..4 of each row, lanes 4..8 of each row), lane i
/// of each result belonging to row i. For 32-element blocks these are the two 16-element halves.
#[inline(always)]
unsafe fn hsum8(p: &[__m256i; 8]) -> (__m256i, __m256i) {
    // SAFETY: register-only AVX2 operations; the caller has AVX2.
    unsafe {
        let h01 = _mm256_hadd_epi32(p[0], p[1]);
        let h23 = _mm256_hadd_epi32(p[2], p[3]);
        let h45 = _mm256_hadd_epi32(p[4], p[5]);
        let h67 = _mm256_hadd_epi32(p[6], p[7]);
        let h0123 = _mm256_hadd_epi32(h01, h23);
        let h4567 = _mm256_hadd_epi32(h45, h67);
        (
            _mm256_permute2x128_si256::<0x20>(h0123, h4567),
            _mm256_permute2x128_si256::<0x31>(h0123, h4567),
        )
    }
}

/// The kernel body (see the module doc). `F` is the weight format, `MAXC` the most columns the
/// accumulators hold (`cols.len() <= MAXC`).
///
/// # Safety
/// AVX2, FMA and F16C are available, and the `check_q8_0` invariants hold: `w` is whole rows of
/// `rb = nb * block_bytes(F)` bytes, `a`/`ad` hold `nb` entries per column for every column in
/// `cols`, `out.len() == rows * cols.len()`, `1 <= cols.len() <= MAXC`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn body<const F: u8, const MAXC: usize>(
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
    let nc = cols.len().min(MAXC);
    let base = w.as_ptr();
    // SAFETY: all pointer offsets stay inside `w`, `a` and `ad` by the invariants above (row
    // index clamped to `nrows - 1`, block index `< nb`, activation index `j * nb + b` with
    // `j < acts.n`); loads are unaligned; AVX2/FMA/F16C are available.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(8);
            let mut rp = [base; 8];
            for (i, p) in rp.iter_mut().enumerate() {
                *p = base.add((r0 + i.min(here - 1)) * rb);
            }
            let mut acc = [_mm256_setzero_ps(); MAXC];
            for b in 0..nb {
                let mut wv = [_mm256_setzero_si256(); 8];
                let s0;
                let s1;
                if F == W_FP2 {
                    let mut ebits = [0u16; 8];
                    for i in 0..8 {
                        let p = rp[i].add(b * bs);
                        wv[i] = load_fp2(p);
                        ebits[i] = ptr::read_unaligned(p.add(8).cast::<u16>());
                    }
                    let e = _mm256_cvtepu16_epi32(_mm_loadu_si128(ebits.as_ptr().cast()));
                    s0 = ue4m3_b8_x8(_mm256_and_si256(e, _mm256_set1_epi32(0xFF)));
                    s1 = ue4m3_b8_x8(_mm256_srli_epi32::<8>(e));
                } else {
                    let mut dbits = [0u16; 8];
                    for i in 0..8 {
                        let p = rp[i].add(b * bs);
                        dbits[i] = ptr::read_unaligned(p.cast::<u16>());
                        wv[i] = if F == W_Q8_0 { load_q8_0(p) } else { load_q4_0(p) };
                    }
                    s0 = _mm256_cvtph_ps(_mm_loadu_si128(dbits.as_ptr().cast()));
                    s1 = s0;
                }
                let mut wa = [_mm256_setzero_si256(); 8];
                for i in 0..8 {
                    wa[i] = _mm256_abs_epi8(wv[i]);
                }
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let ai = (cols.start + jj) * nb + b;
                    let av = _mm256_loadu_si256(a.as_ptr().add(ai).cast::<u8>().add(2).cast());
                    let da = _mm256_set1_ps(*ad.as_ptr().add(ai));
                    let mut p = [_mm256_setzero_si256(); 8];
                    for i in 0..8 {
                        let prod = _mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(av, wv[i]));
                        p[i] = _mm256_madd_epi16(prod, ones);
                    }
                    let (lo, hi) = hsum8(&p);
                    let v = match F {
                        // sumi * (dw * da)
                        W_Q8_0 => _mm256_mul_ps(
                            _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi)),
                            _mm256_mul_ps(s0, da),
                        ),
                        // (sumi * dw) * da
                        W_Q4_0 => _mm256_mul_ps(
                            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi)), s0),
                            da,
                        ),
                        // da * (s0 * sum0 + s1 * sum1)
                        _ => _mm256_mul_ps(
                            da,
                            _mm256_add_ps(
                                _mm256_mul_ps(s0, _mm256_cvtepi32_ps(lo)),
                                _mm256_mul_ps(s1, _mm256_cvtepi32_ps(hi)),
                            ),
                        ),
                    };
                    *accj = _mm256_add_ps(*accj, v);
                }
            }
            for (jj, accj) in acc.iter().enumerate().take(nc) {
                let mut t = [0f32; 8];
                _mm256_storeu_ps(t.as_mut_ptr(), *accj);
                for (i, &v) in t.iter().enumerate().take(here) {
                    out[(r0 + i) * nc + jj] = v;
                }
            }
            r0 += 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue4m3_b8_vector_decode_matches_core() {
        if !crate::isa::Isa::Avx2.available() {
            return;
        }
        for b in (0u8..=0x7E).step_by(8) {
            let bytes: [i32; 8] =
                core::array::from_fn(|i| i32::from(b.saturating_add(i as u8).min(0x7E)));
            let mut got = [0f32; 8];
            // SAFETY: AVX2 was detected above; the store writes 8 floats into `got`.
            unsafe {
                let v = ue4m3_b8_x8(_mm256_loadu_si256(bytes.as_ptr().cast()));
                _mm256_storeu_ps(got.as_mut_ptr(), v);
            }
            for (x, g) in bytes.iter().zip(got) {
                let want = lowbit_core::scalar::try_ue4m3_b8_to_f32(*x as u8).unwrap();
                assert_eq!(g.to_bits(), want.to_bits(), "byte {x:#04x}");
            }
        }
    }
}

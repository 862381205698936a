//! The activation layout of the ROCmFPX kernels ([`Group`]) and its builder.
//!
//! The weight decoders ([`super::fp2`], [`super::fp3`]) load the code words of 8 consecutive
//! blocks of a row (repacked at upload, qword `q` = block `q`) and turn them into four vectors
//! in which byte `j` of qword `q` of vector `t` is the offset level of element `4j + t` of
//! block `q`. The activations are laid out the same way once per matmul call, so the weights
//! never need a byte permutation per row. With offset weights `w + 4` in `0..=8` (unsigned,
//! for `vpmaddubsw`), each 16-element half needs the correction `4 * sum(a)` over that half,
//! stored here as `a4`; `d` holds the Q8_0 block scale times 128 (the factor the weight-scale
//! conversion leaves out, see [`super::fp2`]).
//!
//! What must not live here: weight decoding, the dot products.

use std::arch::x86_64::*;

use bytemuck::Zeroable;
use lowbit_core::format::ggml::BlockQ8_0;

/// Blocks per group (one 512-bit vector of code words).
pub(crate) const GROUP: usize = 8;

/// One group of 8 Q8_0 blocks of one activation column, in the kernel layout.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct Group {
    /// `q[t][8 * b + j]` = quant `4 * j + t` of block `b` of the group.
    pub q: [[i8; 64]; 4],
    /// Lane `2 * b + h`: 4 x the sum of the 16 quants of half `h` of block `b` (exact).
    pub a4: [i32; 16],
    /// Lanes `2 * b` and `2 * b + 1`: the scale of block `b` (f32) times 128 (exact).
    pub d: [f32; 16],
}

/// An all-zero group (zero quants and scales: contributes exactly 0).
pub(crate) const ZERO: Group = Group { q: [[0; 64]; 4], a4: [0; 16], d: [0.0; 16] };

/// Builds the groups of the columns `cols` (`nb` blocks each, `a`/`ad` as in `check_q8_0`):
/// `out[c * ng + g]` is group `g` of column `cols.start + c`, `ng = nb.div_ceil(8)`; the blocks
/// past `nb` in the last group are zero.
///
/// # Safety
/// AVX2 is available; `a` and `ad` hold `nb` entries for every column of `cols`; `out` holds
/// `cols.len() * ng` groups.
#[inline(always)]
pub(crate) unsafe fn build(
    a: &[BlockQ8_0],
    ad: &[f32],
    nb: usize,
    cols: std::ops::Range<usize>,
    out: &mut [Group],
) {
    let ng = nb.div_ceil(GROUP);
    for (c, j) in cols.enumerate() {
        let ab = &a[j * nb..(j + 1) * nb];
        let db = &ad[j * nb..(j + 1) * nb];
        let dst = &mut out[c * ng..(c + 1) * ng];
        let full = nb / GROUP;
        for (g, o) in dst.iter_mut().enumerate().take(full) {
            let s = g * GROUP;
            // SAFETY: blocks `s..s + 8` exist (g < full); AVX2 is available (caller).
            unsafe { group(&ab[s..s + GROUP], &db[s..s + GROUP], o) };
        }
        if full < ng {
            let mut tb = [BlockQ8_0::zeroed(); GROUP];
            let mut td = [0f32; GROUP];
            let s = full * GROUP;
            tb[..nb - s].copy_from_slice(&ab[s..]);
            td[..nb - s].copy_from_slice(&db[s..]);
            // SAFETY: 8 blocks and scales in the local arrays; AVX2 is available (caller).
            unsafe { group(&tb, &td, &mut dst[full]) };
        }
    }
}

/// One group from 8 blocks and their f32 scales (see [`Group`]).
///
/// # Safety
/// AVX2 is available; `b` and `d` hold at least 8 entries.
#[inline(always)]
unsafe fn group(b: &[BlockQ8_0], d: &[f32], out: &mut Group) {
    debug_assert!(b.len() >= GROUP && d.len() >= GROUP);
    // SAFETY: reads the 32 quants of blocks 0..8 and 8 scales (lengths above); writes inside
    // `out`; AVX2 is available.
    unsafe {
        // Per 128-bit lane: quants 4j + t (j = 0..4 of that lane) gathered into dword t.
        #[rustfmt::skip]
        let tr = _mm256_setr_epi8(
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
        );
        let ilv = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let ones8 = _mm256_set1_epi8(1);
        let ones16 = _mm256_set1_epi16(1);
        let dv = _mm256_mul_ps(_mm256_loadu_ps(d.as_ptr()), _mm256_set1_ps(128.0));
        for h in 0..2 {
            let mut y = [_mm256_setzero_si256(); 4];
            for (i, yi) in y.iter_mut().enumerate() {
                let x = _mm256_loadu_si256(b[4 * h + i].qs.as_ptr().cast());
                *yi = _mm256_shuffle_epi8(x, tr);
            }
            // 4x4 dword transpose inside each lane: z[t] lane L = [t-part of blocks 0..4].
            let t0 = _mm256_unpacklo_epi32(y[0], y[1]);
            let t1 = _mm256_unpackhi_epi32(y[0], y[1]);
            let t2 = _mm256_unpacklo_epi32(y[2], y[3]);
            let t3 = _mm256_unpackhi_epi32(y[2], y[3]);
            let z = [
                _mm256_unpacklo_epi64(t0, t2),
                _mm256_unpackhi_epi64(t0, t2),
                _mm256_unpacklo_epi64(t1, t3),
                _mm256_unpackhi_epi64(t1, t3),
            ];
            let mut s16 = _mm256_setzero_si256();
            for (t, zt) in z.iter().enumerate() {
                // [j 0..4 | j 4..8] of each block -> one qword per block.
                let v = _mm256_permutevar8x32_epi32(*zt, ilv);
                _mm256_storeu_si256(out.q[t].as_mut_ptr().add(32 * h).cast(), v);
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(ones8, v));
            }
            let s32 = _mm256_slli_epi32::<2>(_mm256_madd_epi16(s16, ones16));
            _mm256_storeu_si256(out.a4.as_mut_ptr().add(8 * h).cast(), s32);
            let di = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
            let di = _mm256_add_epi32(di, _mm256_set1_epi32(4 * h as i32));
            _mm256_storeu_ps(out.d.as_mut_ptr().add(8 * h), _mm256_permutevar8x32_ps(dv, di));
        }
    }
}

//! AVX-512 (F/BW/VL, and VNNI where present) Q8_0 weights against Q8_0 activations in
//! [`super::z512`]'s one-row-per-register layout, **one block per i32 lane**: groups of 16
//! blocks (512 weights, 544 bytes), for calls of 3..=16 columns and of 2 on long rows
//! (`super::z512`'s `q8x16_for`; other calls keep `super::q8_512::Q8`).
//!
//! Why. With two blocks per register (`super::q8_512::Q8`, eight lanes per block) every
//! (row, column) paid a conversion, a scale product and an FMA per `vpdpbusd`: three of the
//! four ops that compete for the two FMA pipes of this project's EPYC (Zen 4), which bounded
//! n = 4 at about 2.4x the n = 1 time. Here each lane sums a whole block (8 `vpdpbusd` per 16
//! blocks and column), so one conversion, one product and one FMA cover 16 blocks of one
//! column; the transpose that puts a block in a lane is paid once per row and shared by the
//! columns.
//!
//! Layout. Q8_0 (34-byte blocks: `d` f16, then 32 signed codes; layout from ggml `block_q8_0`
//! (ggml/src/ggml-common.h), as in the core). For each half `h` of the 32 codes, the decode
//! loads the 16 bytes of blocks `4t..4t+4` side by side (one per 128-bit lane `u`) into `X_t`
//! and transposes dwords within each 128-bit lane across `X_0..X_3`
//! (`super::q4_0x16::transpose4`): `Y_{4h+k}` holds in i32 lane `l = 4u + t` codes
//! `16h + 4k .. 16h + 4k + 4` of block `4t + u` (`super::q4_0x16::lane_block`), offset to
//! unsigned (`w ^ 0x80 = w + 128`). The 16 weight scales are read into four words in lane order. Record
//! (per column and group): the eight activation vectors in the same order, `-128 * sum(a)` of
//! each lane's block, and the activation scale of each lane's block.
//!
//! Arithmetic. Per column, VNNI: eight chained `vpdpbusd` from `-128 * asum` (no saturation in
//! `vpdpbusd`); otherwise, per vector, the activations' signs flipped where the weight is
//! negative, `vpmaddubsw(|w|, ±a)` (pairs <= 2 * 128 * 127 < 2^15) and `vpmaddwd` by ones,
//! summed in i32. Both give the exact `sum(w * a)` of the lane's block (|.| <= 32 * 128 * 127
//! < 2^24, so its conversion is exact), then `acc_l = fma(float(s_l), fl(d_w * d_a), acc_l)`:
//! one rounded product and one FMA per block, then `super::z512`'s 16-lane tree, so its bound
//! holds with **c = 1** (not the bits of `super::q8_512::Q8`; VNNI and plain AVX-512 give the
//! same bits). Under VNNI a tile's (row, column) pairs run interleaved
//! (`super::q4_0x16::tile8_vnni`, each pair's instructions unchanged).
//!
//! Memory safety: a full group's decode reads bytes `0..544` of the group only (the scales at
//! `34b .. 34b + 2`, `b < 16`, the code bytes at `34b + 2 .. 34b + 34`).
//!
//! What must not live here: the drivers (`super::z512`, `super::zseg`), other formats.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::q4_0x16::{lane_records, lane_records_fast, load4, transpose4};
use super::z512::{ld, ldps, Lanes, V64};

/// Q8_0 in groups of 16 blocks, one block per lane (see the module doc).
pub(crate) struct Q8x16;

impl Lanes for Q8x16 {
    const BB: usize = 34;
    const GB: usize = 16;
    const REC: usize = 10;
    // Nine registers per decoded row: rows in pairs for 1..=4 columns.
    const PAIRS: bool = true;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        lane_records::<128>(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { lane_records_fast::<7>(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..544 at `p` (caller): the code bytes `34b + 2 .. 34b + 34` and
        // the scales at `34b .. 34b + 2`; register-only otherwise.
        unsafe {
            let flip = _mm512_set1_epi8(-128);
            let mut c = [_mm512_setzero_si512(); 8];
            for h in 0..2 {
                let mut x = [_mm512_setzero_si512(); 4];
                for (t, xt) in x.iter_mut().enumerate() {
                    let q = p.add(136 * t + 2 + 16 * h);
                    *xt = load4(q, q.add(34), q.add(68), q.add(102));
                }
                for (k, y) in transpose4(x).into_iter().enumerate() {
                    c[4 * h + k] = _mm512_xor_si512(y, flip);
                }
            }
            // Lanes `4u..4u + 4` hold blocks `u, 4 + u, 8 + u, 12 + u` (`lane_block`).
            let h = |b: usize| u64::from(ptr::read_unaligned(p.add(34 * b).cast::<u16>()));
            let word = |u: usize| (h(u) | h(4 + u) << 16 | h(8 + u) << 32 | h(12 + u) << 48) as i64;
            let v = _mm256_set_epi64x(word(3), word(2), word(1), word(0));
            (c, _mm512_cvtph_ps(v))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 10 record vectors (caller); register-only operations.
        unsafe {
            let flip = _mm512_set1_epi8(-128);
            let ones = _mm512_set1_epi16(1);
            let mut s = _mm512_setzero_si512();
            for k in 0..8 {
                let wk = _mm512_xor_si512(w.0[k], flip);
                let av = ld(a, k);
                let sa =
                    _mm512_mask_sub_epi8(av, _mm512_movepi8_mask(wk), _mm512_setzero_si512(), av);
                let p = _mm512_maddubs_epi16(_mm512_abs_epi8(wk), sa);
                s = _mm512_add_epi32(s, _mm512_madd_epi16(p, ones));
            }
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, ldps(a, 9)), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { super::q4_0x16::dot8_vnni(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_tile<const R: usize, const CT: usize, const V: bool>(
        dec: &[Self::W; R],
        a: &[*const V64; CT],
        acc: &mut [[__m512; CT]; R],
    ) {
        // SAFETY: forwarded from the caller (VNNI when `V`).
        unsafe {
            if V {
                super::q4_0x16::tile8_vnni(dec, a, acc);
            } else {
                for jj in 0..CT {
                    for i in 0..R {
                        acc[i][jj] = Self::dot(&dec[i], a[jj], acc[i][jj]);
                    }
                }
            }
        }
    }
}

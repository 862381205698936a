//! AVX-512 (F/BW/VL, and VNNI where present) PQ2_0 weights against Q8_0 activations in
//! [`super::z512`]'s one-row-per-register layout, **one activation block per i32 lane**:
//! groups of 4 weight blocks (512 weights, 136 bytes), lane `l` = activation block `l` of the
//! group (32 weights of weight block `l / 4`).
//!
//! Why. `super::z512::Pq2` spends, per (row, column) and 128 weights, two `vpdpbusd` and a
//! correction, a conversion, a scale product and an FMA. Here each lane sums a whole
//! activation block over eight `vpdpbusd`, so those four operations cover 512 weights of one
//! column (the same idea as [`super::q4_0x16`], whose dot this shares).
//!
//! Layout. PQ2_0 (34-byte blocks of 128: `d` f16, then 32 code bytes; element `j` is bits
//! `2 * (j % 4)` of byte `j / 4`, value `c - 1`; from the core's `format::prism`). The code
//! bytes of the four blocks are loaded as two vectors (blocks 0, 1 and 2, 3; qword `q` of
//! each is activation block `q` resp. `8 + q`), and `vpermt2d` gathers the low (`P_0`) and
//! high (`P_1`) dwords of the 16 qwords into lane order. Code vector `(h, r)`:
//! `(P_h >> 2r) & 3`, whose byte `e` of lane `l` is element `16h + 4e + r` of activation
//! block `l`. The weight scale of lane `l` is that of block `l / 4`. Record (per column and
//! group): the eight activation vectors in the same order (a byte shuffle gathering each
//! residue mod 4, then [`super::q4_0x16::transpose4`] on blocks `t, 4 + t, 8 + t, 12 + t`),
//! `-sum(a)` of each lane's block and its activation scale.
//!
//! Arithmetic: [`super::q4_0x16::dot8`] / `dot8_vnni` (codes <= 3): per lane the exact
//! `sum((c - 1) * a)` of one activation block, converted exactly, one FMA by the rounded
//! `d_w * d_a`; `super::z512`'s bound holds with **c = 1** (not the bits of the
//! four-lanes-per-block form; VNNI and plain AVX-512 give the same bits).
//!
//! Memory safety: a full group's decode reads bytes `0..136` of the group only.
//!
//! What must not live here: the drivers (`super::z512`, `super::zseg`), other formats.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::q4_0x16::{dot8, dot8_vnni, load4, transpose4};
use super::z512::{q8_0_block, Lanes, V64};

/// PQ2_0 in groups of 4 blocks, one activation block per lane (see the module doc).
pub(crate) struct Pq2x4;

impl Lanes for Pq2x4 {
    const BB: usize = 34;
    const GB: usize = 4;
    const REC: usize = 10;
    // Nine registers per decoded row: rows in pairs for 2..=4 columns (one column:
    // `super::z512::drive1`, 4 rows).
    const PAIRS: bool = true;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        rec.iter_mut().for_each(|r| *r = V64([0; 64]));
        if rec.len() != 10 {
            return;
        }
        for l in 0..16 {
            let Some((q, d)) = q8_0_block(act, 4 * nb, j, 16 * g + l) else { continue };
            for h in 0..2 {
                for r in 0..4 {
                    for e in 0..4 {
                        rec[4 * h + r].put_i8(4 * l + e, q[16 * h + 4 * e + r]);
                    }
                }
            }
            let s: i32 = q.iter().map(|&v| i32::from(v)).sum();
            rec[8].put_i32(l, -s);
            rec[9].put_f32(l, d);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let ActSlice::Q8_0(a, ad) = act else { return };
        let i0 = j * 4 * nb + 16 * g;
        let (Some(b), Some(d), true) = (a.get(i0..i0 + 16), ad.get(i0..i0 + 16), rec.len() == 10)
        else {
            return;
        };
        let r = rec.as_mut_ptr();
        // SAFETY: reads the 16 blocks' quants (16 bytes at `16 h` of each 32) and the 16
        // scales (bounds-checked slices); writes the 10 record vectors.
        unsafe {
            // Per 16-byte lane: the bytes of residue r (mod 4) gathered into dword r.
            #[rustfmt::skip]
            let sh = _mm512_broadcast_i32x4(_mm_setr_epi8(
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            ));
            let one = _mm512_set1_epi8(1);
            let mut p = _mm512_setzero_si512();
            for h in 0..2 {
                // Vector t: blocks t, 4 + t, 8 + t, 12 + t (128-bit lane u: block 4u + t), so
                // the transpose puts block l in lane l.
                // Written out (no closures): see `super::q4_0x16`.
                let mut x = [_mm512_setzero_si512(); 4];
                for t in 0..4 {
                    let v = load4(
                        b[t].qs.as_ptr().add(16 * h).cast(),
                        b[4 + t].qs.as_ptr().add(16 * h).cast(),
                        b[8 + t].qs.as_ptr().add(16 * h).cast(),
                        b[12 + t].qs.as_ptr().add(16 * h).cast(),
                    );
                    x[t] = _mm512_shuffle_epi8(v, sh);
                }
                for (k, y) in transpose4(x).into_iter().enumerate() {
                    p = _mm512_add_epi16(p, _mm512_maddubs_epi16(one, y));
                    _mm512_store_si512(r.add(4 * h + k).cast(), y);
                }
            }
            let s = _mm512_madd_epi16(p, _mm512_set1_epi16(1));
            _mm512_store_si512(r.add(8).cast(), _mm512_sub_epi32(_mm512_setzero_si512(), s));
            _mm512_store_ps(r.add(9).cast(), _mm512_loadu_ps(d.as_ptr()));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..136 at `p` (caller): the code bytes `34b + 2 .. 34b + 34` and
        // the scales `34b .. 34b + 2`; register-only otherwise.
        unsafe {
            let z0 = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(p.add(2).cast())),
                _mm256_loadu_si256(p.add(36).cast()),
            );
            let z1 = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(p.add(70).cast())),
                _mm256_loadu_si256(p.add(104).cast()),
            );
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
            let ph =
                [_mm512_permutex2var_epi32(z0, even, z1), _mm512_permutex2var_epi32(z0, odd, z1)];
            let m = _mm512_set1_epi8(3);
            let mut c = [_mm512_setzero_si512(); 8];
            for h in 0..2 {
                c[4 * h] = _mm512_and_si512(ph[h], m);
                c[4 * h + 1] = _mm512_and_si512(_mm512_srli_epi16::<2>(ph[h]), m);
                c[4 * h + 2] = _mm512_and_si512(_mm512_srli_epi16::<4>(ph[h]), m);
                c[4 * h + 3] = _mm512_and_si512(_mm512_srli_epi16::<6>(ph[h]), m);
            }
            let h = |b: usize| u64::from(ptr::read_unaligned(p.add(34 * b).cast::<u16>()));
            let d4 = h(0) | h(1) << 16 | h(2) << 32 | h(3) << 48;
            let dv = _mm_cvtph_ps(_mm_cvtsi64_si128(d4 as i64));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            (c, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dv)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller (codes <= 3, the record shape of `dot8`).
        unsafe { dot8(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { dot8_vnni(w, a, acc) }
    }
}

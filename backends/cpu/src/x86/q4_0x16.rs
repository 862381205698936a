//! AVX-512 (F/BW/VL, and VNNI where present) Q4_0 weights against Q8_0 activations in
//! [`super::z512`]'s one-row-per-register layout, **one block per i32 lane**: groups of 16
//! blocks (512 weights, 288 bytes), for calls of 2..=16 columns (single columns keep
//! `super::z512::Q4_0`, which streamed long rows faster).
//!
//! Why. With a block spread over four lanes (`super::z512::Q4_0`, groups of 4 blocks), every
//! (row, column) paid a conversion, a scale product and an FMA per two `vpdpbusd`: at n = 4
//! those, not the dot products, were most of the work. Here each lane sums a whole block
//! (8 `vpdpbusd` per 16 blocks and column), so one conversion, one product and one FMA cover
//! 16 blocks of one column.
//!
//! Layout. Q4_0 (18-byte blocks: `d` f16, then 16 bytes whose low nibbles are elements 0..16
//! and high nibbles 16..32, codes `q - 8`; layout from ggml `block_q4_0`
//! (ggml/src/ggml-common.h), as in the core). The decode loads blocks `4t..4t+4` side by side
//! (one per 128-bit lane `u`) into `X_t`, then transposes dwords within each 128-bit lane
//! across `X_0..X_3` (`vpunpck{l,h}dq`, `vpunpck{l,h}qdq`): `Y_k` holds in i32 lane
//! `l = 4u + t` dword `k` of block `4t + u` ([`lane_block`]). Its low nibbles are elements
//! `4k..4k+4` of that block, its high nibbles `16+4k..16+4k+4`: eight code vectors. The 16
//! weight scales are read as one f16 vector in [`lane_block`] order. Record (per column and group, [`Lanes::prep`]): the eight activation vectors in the
//! same order (built by the same transpose), `-8 * sum(a)` of each lane's block, and the
//! activation scale of each lane's block.
//!
//! Arithmetic. Per column: VNNI, eight chained `vpdpbusd` from `-8 * asum`; otherwise the
//! eight `vpmaddubsw` summed in i16 (each pair <= 2 * 15 * 127, eight sums <= 30480 < 2^15)
//! and one `vpmaddwd` by ones, plus `-8 * asum`. Both give the exact `sum((q - 8) * a)` of
//! the lane's block (|.| <= 32 * 8 * 127 < 2^24, so its conversion is exact), and then
//! `acc_l = fma(float(s_l), fl(d_w * d_a), acc_l)`: one rounded product and one FMA per block
//! and group, then `super::z512`'s 16-lane tree, so its bound holds with **c = 1** (not the
//! bits of the four-lane form; VNNI and plain AVX-512 give the same bits). Under VNNI the
//! drivers' tile step ([`Lanes::dot_tile`]) runs the pairs of a tile interleaved
//! ([`tile8_vnni`]), each pair's instructions unchanged.
//!
//! Memory safety: a full group's decode reads bytes `0..288` of the group only (the scales
//! at `18b`, the 16 code bytes at `18b + 2`).
//!
//! The AVX-512 tables run this type's arithmetic on rows repacked into its register order at
//! upload (`super::q4_0pack::Q4_0Pk16`, same bits); the canonical decode here serves a row's
//! partial last group, `super::q8x16` and `super::pq2x4`, and the tests.
//!
//! What must not live here: the drivers (`super::z512`, `super::zseg`), other formats.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::z512::{ld, ldps, q8_0_block, Lanes, V64};

/// Q4_0 in groups of 16 blocks, one block per lane (see the module doc).
pub(crate) struct Q4_0x16;

/// The block (0..16 within the group) whose values lane `l` holds.
pub(crate) const fn lane_block(l: usize) -> usize {
    4 * (l % 4) + l / 4
}

/// The dword transpose within 128-bit lanes: out `k`, lane `4u + t` = dword `k` of lane `u`
/// of `x[t]`.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn transpose4(x: [__m512i; 4]) -> [__m512i; 4] {
    // SAFETY: register-only operations.
    unsafe {
        let t0 = _mm512_unpacklo_epi32(x[0], x[1]);
        let t1 = _mm512_unpackhi_epi32(x[0], x[1]);
        let t2 = _mm512_unpacklo_epi32(x[2], x[3]);
        let t3 = _mm512_unpackhi_epi32(x[2], x[3]);
        [
            _mm512_unpacklo_epi64(t0, t2),
            _mm512_unpackhi_epi64(t0, t2),
            _mm512_unpacklo_epi64(t1, t3),
            _mm512_unpackhi_epi64(t1, t3),
        ]
    }
}

/// Four 16-byte loads at `p + stride * i + off` (i = 0..4), one per 128-bit lane.
///
/// # Safety
/// Those 64 bytes are readable; AVX-512F is available.
#[inline(always)]
unsafe fn load4x16(p: *const u8, stride: usize, off: usize) -> __m512i {
    // SAFETY: reads the four 16-byte ranges (caller).
    unsafe {
        let q = p.add(off);
        load4(q, q.add(stride), q.add(2 * stride), q.add(3 * stride))
    }
}

/// The 16 bytes at each of `p0..p3`, one per 128-bit lane (lane `i` from `p_i`).
///
/// # Safety
/// Those 64 bytes are readable; AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn load4(p0: *const u8, p1: *const u8, p2: *const u8, p3: *const u8) -> __m512i {
    // SAFETY: reads the four 16-byte ranges (caller); register-only otherwise.
    unsafe {
        let x = _mm512_castsi128_si512(_mm_loadu_si128(p0.cast()));
        let x = _mm512_inserti32x4::<1>(x, _mm_loadu_si128(p1.cast()));
        let x = _mm512_inserti32x4::<2>(x, _mm_loadu_si128(p2.cast()));
        _mm512_inserti32x4::<3>(x, _mm_loadu_si128(p3.cast()))
    }
}

/// `lane_block` as a `vpermps` index.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
unsafe fn lane_block_idx() -> __m512i {
    // SAFETY: register-only.
    unsafe { _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15) }
}

/// The activation records of one group of 16 Q8_0 blocks, one block per lane (lane `l` holds
/// block [`lane_block`]`(l)`), shared by the one-block-per-lane bodies whose weights are
/// unsigned bytes with an implied offset (`Q4_0x16`: 8, `super::q8x16::Q8x16`: 128):
/// records 0..8 the quants (record `4h + k`, bytes `4l .. 4l + 4` = quants `16h + 4k ..` of
/// lane `l`'s block), record 8 `-OFFSET * sum(quants)` per lane (i32), record 9 the scales
/// (f32). Blocks past the activations are zero records. The scalar form of
/// [`lane_records_fast`].
pub(crate) fn lane_records<const OFFSET: i32>(
    act: ActSlice<'_>,
    nb: usize,
    j: usize,
    g: usize,
    rec: &mut [V64],
) {
    rec.iter_mut().for_each(|r| *r = V64([0; 64]));
    if rec.len() != 10 {
        return;
    }
    for l in 0..16 {
        let Some((q, d)) = q8_0_block(act, nb, j, 16 * g + lane_block(l)) else { continue };
        for h in 0..2 {
            for k in 0..4 {
                for e in 0..4 {
                    rec[4 * h + k].put_i8(4 * l + e, q[16 * h + 4 * k + e]);
                }
            }
        }
        let s: i32 = q.iter().map(|&v| i32::from(v)).sum();
        rec[8].put_i32(l, -OFFSET * s);
        rec[9].put_f32(l, d);
    }
}

/// [`lane_records`] with vector transposes, for a group of 16 whole blocks (`1 << SHIFT` is
/// the offset); leaves `rec` alone when the group is not whole (the caller then uses
/// [`lane_records`]).
///
/// # Safety
/// AVX-512 F/BW and AVX2 are available.
#[inline(always)]
pub(crate) unsafe fn lane_records_fast<const SHIFT: u32>(
    act: ActSlice<'_>,
    nb: usize,
    j: usize,
    g: usize,
    rec: &mut [V64],
) {
    let ActSlice::Q8_0(a, ad) = act else { return };
    let i0 = j * nb + 16 * g;
    let (Some(b), Some(d), true) = (a.get(i0..i0 + 16), ad.get(i0..i0 + 16), rec.len() == 10)
    else {
        return;
    };
    let r = rec.as_mut_ptr();
    // SAFETY: reads the 16 blocks' quants (16 bytes at `16 h` of each 32) and the 16 scales
    // (bounds-checked slices); writes the 10 record vectors; features as the caller states.
    unsafe {
        let one = _mm512_set1_epi8(1);
        let mut s = _mm512_setzero_si512();
        // Written out (no closures): a closure is compiled without the caller's target
        // features, so the intrinsics in it would become out-of-line calls.
        for h in 0..2 {
            let mut x = [_mm512_setzero_si512(); 4];
            for t in 0..4 {
                x[t] = load4(
                    b[4 * t].qs.as_ptr().add(16 * h).cast(),
                    b[4 * t + 1].qs.as_ptr().add(16 * h).cast(),
                    b[4 * t + 2].qs.as_ptr().add(16 * h).cast(),
                    b[4 * t + 3].qs.as_ptr().add(16 * h).cast(),
                );
            }
            for (k, y) in transpose4(x).into_iter().enumerate() {
                let p = _mm512_maddubs_epi16(one, y);
                s = _mm512_add_epi32(s, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
                _mm512_store_si512(r.add(4 * h + k).cast(), y);
            }
        }
        let neg = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<SHIFT>(s));
        _mm512_store_si512(r.add(8).cast(), neg);
        let dv = _mm512_permutexvar_ps(lane_block_idx(), _mm512_loadu_ps(d.as_ptr()));
        _mm512_store_ps(r.add(9).cast(), dv);
    }
}

impl Lanes for Q4_0x16 {
    const BB: usize = 18;
    const GB: usize = 16;
    const REC: usize = 10;
    // Nine registers per decoded row: rows in pairs for 1..=4 columns.
    const PAIRS: bool = true;
    type W = ([__m512i; 8], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        lane_records::<8>(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { lane_records_fast::<3>(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..288 at `p` (caller): the code bytes `18b + 2 .. 18b + 18` and
        // the scales `18b .. 18b + 2`; register-only otherwise.
        unsafe {
            let y = transpose4([
                load4x16(p, 18, 2),
                load4x16(p.add(72), 18, 2),
                load4x16(p.add(144), 18, 2),
                load4x16(p.add(216), 18, 2),
            ]);
            let m = _mm512_set1_epi8(0x0F);
            let mut c = [_mm512_setzero_si512(); 8];
            for k in 0..4 {
                c[k] = _mm512_and_si512(y[k], m);
                c[4 + k] = _mm512_and_si512(_mm512_srli_epi16::<4>(y[k]), m);
            }
            // Lanes `4u..4u + 4` hold blocks `u, 4 + u, 8 + u, 12 + u` ([`lane_block`]): the
            // words are built in lane order (no permute after the conversion).
            let h = |b: usize| u64::from(ptr::read_unaligned(p.add(18 * b).cast::<u16>()));
            let word = |u: usize| (h(u) | h(4 + u) << 16 | h(8 + u) << 32 | h(12 + u) << 48) as i64;
            let v = _mm256_set_epi64x(word(3), word(2), word(1), word(0));
            (c, _mm512_cvtph_ps(v))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { dot8(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { dot8_vnni(w, a, acc) }
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
                tile8_vnni(dec, a, acc);
            } else {
                for jj in 0..CT {
                    for i in 0..R {
                        acc[i][jj] = dot8(&dec[i], a[jj], acc[i][jj]);
                    }
                }
            }
        }
    }
}

/// [`dot8_vnni`] for every (row `i`, column `jj`) pair of a tile, interleaved: the `R * CT`
/// `vpdpbusd` chains advance together (vector `k` of every pair, then `k + 1`), each record
/// vector loaded once for the tile's rows, then per pair the conversion, the scale product
/// and the FMA. Each pair's chain is [`dot8_vnni`]'s, in the same order, so every result is
/// the same bits. Written out pair by pair, `R * CT` chains of eight dependent `vpdpbusd`
/// followed one another in program order, and the n = 4 tile (2 rows x 4 columns) ran 3-12%
/// slower (docs/BENCHMARKS.md, "Session 10 (n4)").
///
/// # Safety
/// As [`dot8_vnni`] for every `a[jj]`.
#[inline(always)]
pub(super) unsafe fn tile8_vnni<const R: usize, const CT: usize>(
    dec: &[([__m512i; 8], __m512); R],
    a: &[*const V64; CT],
    acc: &mut [[__m512; CT]; R],
) {
    // SAFETY: reads the 10 record vectors of every `a[jj]` (caller); register-only operations;
    // VNNI is available (caller).
    unsafe {
        let mut s = [[_mm512_setzero_si512(); CT]; R];
        for jj in 0..CT {
            let c = ld(a[jj], 8);
            for si in s.iter_mut() {
                si[jj] = c;
            }
        }
        for k in 0..8 {
            for jj in 0..CT {
                let av = ld(a[jj], k);
                for i in 0..R {
                    s[i][jj] = _mm512_dpbusd_epi32(s[i][jj], dec[i].0[k], av);
                }
            }
        }
        for jj in 0..CT {
            let da = ldps(a[jj], 9);
            for i in 0..R {
                let sc = _mm512_mul_ps(dec[i].1, da);
                acc[i][jj] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][jj]), sc, acc[i][jj]);
            }
        }
    }
}

/// The dot of eight unsigned code vectors (at most 15) and a record of eight activation
/// vectors, the lanes' integer corrections (vector 8) and activation scales (vector 9): per
/// lane the exact `sum(c * a) + corr` (eight `vpmaddubsw` summed in i16: pairs <= 2 * 15 *
/// 127, eight of them < 2^15; one `vpmaddwd` by ones), converted, FMA'd with `w.1 * d_a`.
///
/// # Safety
/// `a` points at 10 readable vectors; the AVX-512 set of `super::z512`'s entry is available.
#[inline(always)]
pub(super) unsafe fn dot8(w: &([__m512i; 8], __m512), a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads the 10 record vectors (caller); register-only operations.
    unsafe {
        let mut p = _mm512_maddubs_epi16(w.0[0], ld(a, 0));
        for k in 1..8 {
            p = _mm512_add_epi16(p, _mm512_maddubs_epi16(w.0[k], ld(a, k)));
        }
        let s = _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 8));
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, ldps(a, 9)), acc)
    }
}

/// [`dot8`] with eight chained `vpdpbusd` from the correction: the same exact lane integers,
/// so the same result.
///
/// # Safety
/// As [`dot8`], plus AVX-512 VNNI is available.
#[inline(always)]
pub(super) unsafe fn dot8_vnni(w: &([__m512i; 8], __m512), a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads the 10 record vectors (caller); register-only operations; VNNI is
    // available (caller).
    unsafe {
        let mut s = ld(a, 8);
        for k in 0..8 {
            s = _mm512_dpbusd_epi32(s, w.0[k], ld(a, k));
        }
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.1, ldps(a, 9)), acc)
    }
}

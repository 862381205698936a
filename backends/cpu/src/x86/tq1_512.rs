//! AVX-512 (F/BW/VL) kernels for the base-3 packed ternary formats, TQ1_0 (Q8_K activations)
//! and PTQ1_0 (Q8_0 activations), in [`super::z512`]'s one-row-per-register layout (its
//! driver, records and column reuse).
//!
//! TQ1_0 (54-byte blocks of 256: `qs[48]`, `qh[4]`, `d` f16 at 52; five base-3 digits per byte,
//! digit `n` read as `((u8)(byte * 3^n) * 3) >> 8`, value `digit - 1`; element order from ggml
//! `quantize_row_tq1_0_ref` / `dequantize_row_tq1_0`, as in the core's `format::ggml::tq1_0`).
//! The 52 packed bytes are loaded once (masked: nothing past the block is read) and digit
//! plane `n` is computed for all of them at once: `q_n = q_{n-1} * 3` per byte (two wrapping
//! byte adds), digit = `(q_n > 85) + (q_n > 170)`, which is `(q_n * 3) >> 8` (`q * 3 >= 256`
//! iff `q >= 86`, `>= 512` iff `q >= 171`). Five planes of 64 byte slots hold the 256 elements
//! (slot `b` of plane `n`: element `b + 32n` for `b < 32`, `160 + (b - 32) + 16n` for
//! `b < 48`, `240 + (b - 48) + 4n` for `b < 52, n < 4`; every other slot meets a zero
//! activation). Record: the activations in those slots, minus the exact activation sum of each
//! i32 lane (`-asum`), `d_a`. Per column: `madd(sum_n maddubs(u_n, a_n), 1) + (-asum)` = exact
//! `sum((u - 1) a)` per lane (i16 lanes <= 5 * 2 * 2 * 127 < 2^15), one `vcvtdq2ps`, one FMA
//! by `d * d_a`: the bound of [`super::z512`] holds with **c = 1**.
//!
//! PTQ1_0 (28-byte blocks of 128: `qs[24]`, `qh[2]`, `d` f16 at 26; the same digit reading;
//! element placement from Prism's `block_ptq1_0`, as in the core's `format::prism`): groups of
//! two blocks (56 bytes, one masked load: slot `28 t + b` is byte `b < 26` of block `t`).
//! Slot `b` of plane `n` holds element `b + 16n` (`b < 16`), `80 + (b - 16) + 8n` (`b < 24`)
//! or `120 + (b - 24) + 2n` (`b < 26`, `n < 4`). Every i32 lane of a plane then lies in one
//! Q8_0 activation block, and planes 0 and 1, 2 and 3 map lanes to the same blocks, so the
//! record holds the five activation planes, three negated exact per-lane activation sums and
//! three per-lane activation-scale vectors (planes {0, 1}, {2, 3}, {4}). Per column: three
//! `madd(maddubs + maddubs, 1) + (-asum)` i32 vectors (i16 lanes <= 2 * 2 * 2 * 127), each
//! converted exactly, `t = s_0 d_a0 + s_1 d_a1 + s_2 d_a2` (one product, two FMAs), then
//! `acc + t * d_w(lane)` (one FMA): every lane's integers are exact per group and each term
//! meets at most 4 roundings per group, so c = 1 holds here too.
//!
//! Decode with AVX-512 VBMI ([`planes_vbmi`], the `Isa::Avx512Vnni` kernels where the CPU has
//! it): one 256-entry table lookup (two `vpermi2b` and a blend) gives digits 0..3 of every
//! byte as 2-bit fields, a second digit 4. Against a lookup per digit (10 `vpermi2b`), with
//! the scale changes above, L3-resident 1024 x 14336, n = 1, one thread (`kcols`, minimum of
//! 500 calls, two interleaved rounds, 2026-12-01 22:30 UTC): TQ1_0 368 / 327 -> 273 / 297 µs,
//! PTQ1_0 489 / 499 -> 317 / 334 µs. Digit extraction by `vgf2p8affineqb` instead of the
//! shifts and masks measured no faster.
//!
//! What must not live here: the driver and the other formats (`super::z512`).

#![allow(clippy::incompatible_msrv)]
// Plane and slot indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::ext::ActSlice;
use super::z512::{ld, ldps, q8_0_block, q8_k_block, Lanes, V64};

/// The f16 at `p` as a scalar f32 (`vcvtph2ps` on one 128-bit register): the weight scale of
/// a block, multiplied by the column's activation scale in scalar registers and broadcast
/// once ([`scaled`]), where a broadcast f16 converted as 16 lanes and a 16-lane product cost
/// two 512-bit operations per block and row more (the same product, so the same bits).
///
/// # Safety
/// `p .. p + 2` is readable; F16C is available.
#[inline(always)]
pub(super) unsafe fn f16_scalar(p: *const u8) -> f32 {
    // SAFETY: reads 2 bytes at `p` (caller); register-only operations.
    unsafe {
        let h = std::ptr::read_unaligned(p.cast::<u16>());
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))))
    }
}

/// `d_w * d_a` in every lane, `d_a` read from lane 0 of record vector `i` at `a` (whose lanes
/// all hold it).
///
/// # Safety
/// `a + i` is a readable [`V64`]; AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn scaled(dw: f32, a: *const V64, i: usize) -> __m512 {
    // SAFETY: reads the first 4 bytes of the 64-byte-aligned record vector (caller).
    unsafe { _mm512_set1_ps(dw * *a.add(i).cast::<f32>()) }
}

/// The element of TQ1_0 slot `b` (< 64) of digit plane `n` (< 5), if any (module doc).
const fn tq1_slot(n: usize, b: usize) -> Option<usize> {
    if b < 32 {
        Some(b + 32 * n)
    } else if b < 48 {
        Some(160 + (b - 32) + 16 * n)
    } else if b < 52 && n < 4 {
        Some(240 + (b - 48) + 4 * n)
    } else {
        None
    }
}

/// Digit plane `n` (0..=2 per byte) of the packed bytes `q_n = bytes * 3^n`.
///
/// # Safety
/// AVX-512 F/BW are available.
#[inline(always)]
unsafe fn digits(q: __m512i) -> __m512i {
    // SAFETY: register-only operations.
    unsafe {
        let one = _mm512_set1_epi8(1);
        let k1 = _mm512_cmpgt_epu8_mask(q, _mm512_set1_epi8(85));
        let k2 = _mm512_cmpgt_epu8_mask(q, _mm512_set1_epi8(170u8 as i8));
        let u = _mm512_maskz_mov_epi8(k1, one);
        _mm512_mask_add_epi8(u, k2, u, one)
    }
}

/// `DIGIT_LUT[n][b]`: digit `n` of packed byte `b`, `((u8)(b * 3^n) * 3) >> 8` (the core's
/// `trit`, checked for every byte by a test); rows 0..4 of [`PACKED_LUT`] are built from it.
const DIGIT_LUT: [[u8; 256]; 5] = {
    let mut t = [[0u8; 256]; 5];
    let pow = [1u8, 3, 9, 27, 81];
    let mut n = 0;
    while n < 5 {
        let mut b = 0;
        while b < 256 {
            let q = (b as u8).wrapping_mul(pow[n]);
            t[n][b] = ((q as u16 * 3) >> 8) as u8;
            b += 1;
        }
        n += 1;
    }
    t
};

/// Two 256-entry tables for the `vpermi2b` decode ([`planes_vbmi`]): row 0 holds digits 0..3
/// of each byte as 2-bit fields, `d0 | d1 << 2 | d2 << 4 | d3 << 6` (at most 170), row 1
/// digit 4.
#[repr(C, align(64))]
struct PackedLut([[u8; 256]; 2]);

static PACKED_LUT: PackedLut = {
    let mut t = [[0u8; 256]; 2];
    let mut b = 0;
    while b < 256 {
        let d = &DIGIT_LUT;
        t[0][b] = d[0][b] | d[1][b] << 2 | d[2][b] << 4 | d[3][b] << 6;
        t[1][b] = d[4][b];
        b += 1;
    }
    PackedLut(t)
};

/// The 256-entry lookup of row `r` of [`PACKED_LUT`] for every byte of `x`: two `vpermi2b`
/// (each indexes a 128-entry half by the low 7 bits) and a blend on bit 7 (`hi`). Two
/// merge-masked `vpermi2b` instead (the upper half for `hi`, then the lower half for the
/// rest) measured no faster: the compiler makes the second mask by one more byte compare,
/// which competes with the permutes and `vpdpbusd` as the blend did not (docs/BENCHMARKS.md
/// "Session 11 (t1)").
///
/// # Safety
/// AVX-512 F/BW and VBMI are available.
#[inline(always)]
unsafe fn lookup256(r: usize, x: __m512i, hi: __mmask64) -> __m512i {
    // SAFETY: reads the 64-byte-aligned 256-byte row `r` (< 2) of `PACKED_LUT`.
    unsafe {
        let t = PACKED_LUT.0[r].as_ptr();
        let lo = _mm512_permutex2var_epi8(
            _mm512_load_si512(t.cast()),
            x,
            _mm512_load_si512(t.add(64).cast()),
        );
        let up = _mm512_permutex2var_epi8(
            _mm512_load_si512(t.add(128).cast()),
            x,
            _mm512_load_si512(t.add(192).cast()),
        );
        _mm512_mask_blend_epi8(hi, lo, up)
    }
}

/// The five digit planes of the packed bytes `x` by table: one 256-entry lookup gives digits
/// 0..3 as 2-bit fields (then a shift and a mask each), a second digit 4 ([`PACKED_LUT`]): 4
/// `vpermi2b`, 2 blends, 3 shifts and 4 masks per 64 bytes, where a table per digit took 10
/// `vpermi2b` and 5 blends (the permutes, one per cycle on Zen 4, bounded the kernel).
///
/// # Safety
/// AVX-512 F/BW and VBMI are available.
#[inline(always)]
unsafe fn planes_vbmi(x: __m512i) -> [__m512i; 5] {
    // SAFETY: `lookup256`'s table reads; register-only otherwise.
    unsafe {
        let hi = _mm512_movepi8_mask(x);
        let e = lookup256(0, x, hi);
        let m = _mm512_set1_epi8(3);
        [
            _mm512_and_si512(e, m),
            _mm512_and_si512(_mm512_srli_epi16::<2>(e), m),
            _mm512_and_si512(_mm512_srli_epi16::<4>(e), m),
            _mm512_and_si512(_mm512_srli_epi16::<6>(e), m),
            lookup256(1, x, hi),
        ]
    }
}

/// The five digit planes of `x`: [`planes_vbmi`] when `VB`, else the running `x * 3^n` and
/// [`digits`].
///
/// # Safety
/// AVX-512 F/BW are available (`VB`: and VBMI).
#[inline(always)]
unsafe fn planes<const VB: bool>(x: __m512i) -> [__m512i; 5] {
    // SAFETY: register-only operations (and `planes_vbmi`'s table reads) with the features
    // the caller guarantees.
    unsafe {
        if VB {
            return planes_vbmi(x);
        }
        let mut q = x;
        let mut u = [_mm512_setzero_si512(); 5];
        for (n, u) in u.iter_mut().enumerate() {
            if n > 0 {
                q = _mm512_add_epi8(_mm512_add_epi8(q, q), q);
            }
            *u = digits(q);
        }
        u
    }
}

/// TQ1_0 (module doc); `VB`: digit planes by [`planes_vbmi`] (AVX-512 VBMI), else by
/// [`digits`] (the same values).
pub(crate) struct Tq1<const VB: bool = false>;

impl<const VB: bool> Lanes for Tq1<VB> {
    const BB: usize = 54;
    const GB: usize = 1;
    const REC: usize = 7;
    type W = ([__m512i; 5], f32);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        let mut sums = [0i32; 16];
        for n in 0..5 {
            for b in 0..64 {
                let v = tq1_slot(n, b).map_or(0, |e| blk.qs[e]);
                rec[n].put_i8(b, v);
                sums[b / 4] += i32::from(v);
            }
        }
        for (l, s) in sums.iter().enumerate() {
            rec[5].put_i32(l, -*s);
            rec[6].put_f32(l, blk.d);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 7) else { return };
        let q: &[u8] = bytemuck::cast_slice(&blk.qs[..]);
        for (n, r) in rec.iter_mut().take(5).enumerate() {
            r.0 = [0; 64];
            r.0[..32].copy_from_slice(&q[32 * n..32 * n + 32]);
            r.0[32..48].copy_from_slice(&q[160 + 16 * n..176 + 16 * n]);
            if n < 4 {
                r.0[48..52].copy_from_slice(&q[240 + 4 * n..244 + 4 * n]);
            }
        }
        let r = rec.as_mut_ptr();
        // SAFETY: reads and writes the 7 record vectors.
        unsafe {
            let one = _mm512_set1_epi8(1);
            let mut p = _mm512_setzero_si512();
            for n in 0..5 {
                p = _mm512_add_epi16(p, _mm512_maddubs_epi16(one, ld(r, n)));
            }
            _mm512_store_si512(r.add(5).cast(), _mm512_madd_epi16(p, _mm512_set1_epi16(-1)));
            _mm512_store_ps(r.add(6).cast(), _mm512_set1_ps(blk.d));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: the masked load reads bytes 0..52 at `p` (masked-off bytes are not
        // accessed), the scale bytes 52..54 (caller); register-only operations otherwise.
        unsafe {
            let x = _mm512_maskz_loadu_epi8((1u64 << 52) - 1, p.cast());
            (planes::<VB>(x), f16_scalar(p.add(52)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 7 record vectors (caller); register-only operations.
        unsafe {
            let m = |n: usize| _mm512_maddubs_epi16(w.0[n], ld(a, n));
            let p = _mm512_add_epi16(_mm512_add_epi16(m(0), m(1)), _mm512_add_epi16(m(2), m(3)));
            let p = _mm512_add_epi16(p, m(4));
            let s = _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 5));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scaled(w.1, a, 6), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 7 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let mut s = ld(a, 5);
            for n in 0..5 {
                s = _mm512_dpbusd_epi32(s, w.0[n], ld(a, n));
            }
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scaled(w.1, a, 6), acc)
        }
    }
}

/// The element (0..128) of PTQ1_0 block byte `b` (< 26), digit `n` (< 5), if any (module
/// doc).
const fn ptq1_slot(n: usize, b: usize) -> Option<usize> {
    if b < 16 {
        Some(b + 16 * n)
    } else if b < 24 {
        Some(80 + (b - 16) + 8 * n)
    } else if b < 26 && n < 4 {
        Some(120 + (b - 24) + 2 * n)
    } else {
        None
    }
}

/// The element of slot `s` (< 64) of plane `n` in a two-block group: `(block, element)`.
const fn ptq1_group_slot(n: usize, s: usize) -> Option<(usize, usize)> {
    let (t, b) = (s / 28, s % 28);
    if t > 1 || b >= 26 {
        return None;
    }
    match ptq1_slot(n, b) {
        Some(e) => Some((t, e)),
        None => None,
    }
}

/// Plane group of each plane: {0, 1}, {2, 3}, {4}.
const PTQ1_GROUP: [usize; 5] = [0, 0, 1, 1, 2];

/// For each plane group and i32 lane, the Q8_0 activation block (0..8 within the two weight
/// blocks) its slots belong to, or 8 (no slot: zero activations). A test checks every slot of
/// every plane against it.
const PTQ1_LANE_QB: [[u8; 16]; 3] = {
    let mut t = [[8u8; 16]; 3];
    let reps = [0usize, 2, 4];
    let mut g = 0;
    while g < 3 {
        let mut s = 0;
        while s < 64 {
            if let Some((blk, e)) = ptq1_group_slot(reps[g], s) {
                t[g][s / 4] = (4 * blk + e / 32) as u8;
            }
            s += 1;
        }
        g += 1;
    }
    t
};

/// `acc + d_w * (s_0 * d_a0 + s_1 * d_a1 + s_2 * d_a2)` per lane, the activation scales
/// `d_ak` in record vectors `8 + k` at `a`: one product and three FMAs, where scaling each
/// sum by its own `d_w * d_ak` took three products and three FMAs.
///
/// # Safety
/// `a` points at [`Ptq1`]'s 11 readable record vectors; AVX-512F is available.
#[inline(always)]
unsafe fn scale3(dw: __m512, s: [__m512; 3], a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads record vectors 8..11 (caller); register-only operations.
    unsafe {
        let t = _mm512_mul_ps(s[0], ldps(a, 8));
        let t = _mm512_fmadd_ps(s[1], ldps(a, 9), t);
        let t = _mm512_fmadd_ps(s[2], ldps(a, 10), t);
        _mm512_fmadd_ps(t, dw, acc)
    }
}

/// PTQ1_0 (module doc); `VB` as for [`Tq1`].
pub(crate) struct Ptq1<const VB: bool = false>;

impl<const VB: bool> Ptq1<VB> {
    /// The activation planes of group `g`, column `j` (blocks past `nb` zero).
    fn planes(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) -> [f32; 9] {
        let nbq = 4 * nb;
        let mut d = [0f32; 9];
        for qb in 0..8 {
            if 2 * g + qb / 4 < nb {
                if let Some((_, dq)) = q8_0_block(act, nbq, j, 8 * g + qb) {
                    d[qb] = dq;
                }
            }
        }
        for r in rec.iter_mut().take(5) {
            *r = V64([0; 64]);
        }
        for t in 0..2 {
            if 2 * g + t >= nb {
                continue;
            }
            let blocks: [Option<&[u8]>; 4] = core::array::from_fn(|k| {
                q8_0_block(act, nbq, j, 8 * g + 4 * t + k).map(|(q, _)| bytemuck::cast_slice(q))
            });
            for n in 0..5 {
                let dst = &mut rec[n].0[28 * t..28 * t + 26];
                let mut copy = |s0: usize, e0: usize, len: usize| {
                    if let Some(q) = blocks[e0 / 32] {
                        dst[s0..s0 + len].copy_from_slice(&q[e0 % 32..e0 % 32 + len]);
                    }
                };
                copy(0, 16 * n, 16);
                copy(16, 80 + 8 * n, 8);
                if n < 4 {
                    copy(24, 120 + 2 * n, 2);
                }
            }
        }
        d
    }
}

impl<const VB: bool> Lanes for Ptq1<VB> {
    const BB: usize = 28;
    const GB: usize = 2;
    const REC: usize = 11;
    type W = ([__m512i; 5], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let d = Self::planes(act, nb, j, g, rec);
        for grp in 0..3 {
            let mut sums = [0i32; 16];
            for n in (0..5).filter(|&n| PTQ1_GROUP[n] == grp) {
                for (b, v) in rec[n].0.iter().enumerate() {
                    sums[b / 4] += i32::from(*v as i8);
                }
            }
            for l in 0..16 {
                rec[5 + grp].put_i32(l, -sums[l]);
                rec[8 + grp].put_f32(l, d[usize::from(PTQ1_LANE_QB[grp][l])]);
            }
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        if rec.len() != 11 {
            return;
        }
        let d = Self::planes(act, nb, j, g, rec);
        let r = rec.as_mut_ptr();
        // SAFETY: reads `d` and the 3 index rows, reads and writes the 11 record vectors.
        unsafe {
            let one = _mm512_set1_epi8(1);
            let m = |n: usize| _mm512_maddubs_epi16(one, ld(r, n));
            // Negated sums: `madd` by -1 (i16 pair sums <= 2 * 2 * 128, exact).
            let ones = _mm512_set1_epi16(-1);
            let s01 = _mm512_madd_epi16(_mm512_add_epi16(m(0), m(1)), ones);
            let s23 = _mm512_madd_epi16(_mm512_add_epi16(m(2), m(3)), ones);
            let s4 = _mm512_madd_epi16(m(4), ones);
            _mm512_store_si512(r.add(5).cast(), s01);
            _mm512_store_si512(r.add(6).cast(), s23);
            _mm512_store_si512(r.add(7).cast(), s4);
            let dv0 = _mm512_castps256_ps512(_mm256_loadu_ps(d.as_ptr()));
            for grp in 0..3 {
                let idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(PTQ1_LANE_QB[grp].as_ptr().cast()));
                // Index 8 (no slot) reads lane 8 of `dv0`, zero.
                let dv = _mm512_permutexvar_ps(idx, dv0);
                _mm512_store_ps(r.add(8 + grp).cast(), dv);
            }
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: the masked load reads bytes 0..26 and 28..54 at `p` (masked-off bytes are
        // not accessed), the scales at 26 and 54 (caller: `p .. p + 56` is readable).
        unsafe {
            let keep = (1u64 << 26) - 1;
            let x = _mm512_maskz_loadu_epi8(keep | keep << 28, p.cast());
            let u = planes::<VB>(x);
            // Lanes 0..7 hold block 0's slots, 7..14 block 1's: both f16 scales converted in
            // one 128-bit register, then spread by one permute.
            let h = |o: usize| i32::from(std::ptr::read_unaligned(p.add(o).cast::<u16>()));
            let d2 = _mm_cvtph_ps(_mm_cvtsi32_si128(h(26) | h(54) << 16));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1);
            (u, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(d2)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 11 record vectors (caller); register-only operations.
        unsafe {
            let m = |n: usize| _mm512_maddubs_epi16(w.0[n], ld(a, n));
            let ones = _mm512_set1_epi16(1);
            let s01 = _mm512_madd_epi16(_mm512_add_epi16(m(0), m(1)), ones);
            let s23 = _mm512_madd_epi16(_mm512_add_epi16(m(2), m(3)), ones);
            let s4 = _mm512_madd_epi16(m(4), ones);
            let c = |s: __m512i, k: usize| _mm512_cvtepi32_ps(_mm512_add_epi32(s, ld(a, 5 + k)));
            scale3(w.1, [c(s01, 0), c(s23, 1), c(s4, 2)], a, acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 11 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let d = |k: usize, n: usize| _mm512_dpbusd_epi32(ld(a, 5 + k), w.0[n], ld(a, n));
            let s01 = _mm512_dpbusd_epi32(d(0, 0), w.0[1], ld(a, 1));
            let s23 = _mm512_dpbusd_epi32(d(1, 2), w.0[3], ld(a, 3));
            let s4 = d(2, 4);
            let c = _mm512_cvtepi32_ps;
            scale3(w.1, [c(s01), c(s23), c(s4)], a, acc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot map covers every element exactly once.
    #[test]
    fn tq1_slots_are_a_bijection() {
        let mut seen = [0u8; 256];
        for n in 0..5 {
            for b in 0..64 {
                if let Some(e) = tq1_slot(n, b) {
                    seen[e] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    /// The PTQ1_0 slot map is the core's placement, and every slot of a plane lies in its
    /// group's lane block.
    #[test]
    fn ptq1_slots_match_core_and_lane_blocks() {
        for (e, &(b, n)) in lowbit_core::format::prism::PTQ1_0_PLACEMENT.iter().enumerate() {
            assert_eq!(ptq1_slot(usize::from(n), usize::from(b)), Some(e));
        }
        let mut count = 0;
        for n in 0..5 {
            for s in 0..64 {
                if let Some((t, e)) = ptq1_group_slot(n, s) {
                    assert_eq!(usize::from(PTQ1_LANE_QB[PTQ1_GROUP[n]][s / 4]), 4 * t + e / 32);
                    count += 1;
                }
            }
        }
        assert_eq!(count, 256);
    }

    /// The `vpermi2b` tables hold the core's `trit` for every byte and position.
    #[test]
    fn digit_table_is_ggml_trit() {
        for b in 0..=255u8 {
            let e = PACKED_LUT.0[0][usize::from(b)];
            let got = [e & 3, e >> 2 & 3, e >> 4 & 3, e >> 6, PACKED_LUT.0[1][usize::from(b)]];
            for n in 0..5 {
                assert_eq!(
                    got[n],
                    lowbit_core::format::ggml::tq1_0::trit(b, n),
                    "byte {b} digit {n}"
                );
            }
        }
    }

    /// The compare form of the digit equals the core's `trit` for every byte and position.
    #[test]
    fn digit_compare_is_ggml_trit() {
        for b in 0..=255u8 {
            for n in 0..5 {
                let q = b.wrapping_mul([1u8, 3, 9, 27, 81][n]);
                let d = u8::from(q > 85) + u8::from(q > 170);
                assert_eq!(d, lowbit_core::format::ggml::tq1_0::trit(b, n), "byte {b} digit {n}");
            }
        }
    }
}

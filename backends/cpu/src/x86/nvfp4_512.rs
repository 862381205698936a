//! AVX-512 (F/BW/VL) NVFP4 kernel against Q8_0 activations, in [`super::z512`]'s
//! one-row-per-register layout (its driver, records and column reuse).
//!
//! NVFP4 (36-byte blocks of 64: four UE4M3 sub-block scales `d[4]`, then `qs[32]`; sub-block
//! `s` (16 elements) is `qs[8s..8s + 8]`, low nibbles elements `16s + j`, high nibbles
//! `16s + 8 + j`; values `kvalues_mxfp4[c] * ue4m3_half(d[s])`; layout from ggml `block_nvfp4`
//! / `dequantize_row_nvfp4`, as in the core's `format::ggml::nvfp4`). Groups of two blocks: the
//! two `qs` fields side by side in one register, codes looked up (`vpshufb`) as
//! `kvalues + 12` (0..=24, unsigned) for the low and the high nibbles, as
//! [`super::z512::Mxfp4`]. Every i32 lane (4 bytes) then lies in one sub-block and one Q8_0
//! activation block, so the weight scale (computed from the 8 scale bytes of the group,
//! [`ue4m3_half_x8`], and spread) and the activation scale are per-lane vectors. Record: the
//! activations in the low- and high-nibble orders, `12 * asum` per lane, `d_a` per lane. Per column: Q4_0's arithmetic
//! (`madd(maddubs(lo, a_lo) + maddubs(hi, a_hi), 1) - 12 asum`, exact: i16 lanes <= 4 * 24 *
//! 127 < 2^15), one `vcvtdq2ps`, one FMA by `d_w(lane) * d_a(lane)`: the bound of
//! [`super::z512`] holds with **c = 1**.
//!
//! What must not live here: the driver and the other formats (`super::z512`).

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::ext::ActSlice;
use super::z512::{q8_0_block, Lanes, Q4_0, V64};

/// `kvalues_mxfp4[c] + 12` (ggml `kvalues_mxfp4`; a test checks it against the core).
pub(crate) const NV_U: [i8; 16] = [12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0];

/// Half the UE4M3 value of each of 8 scale bytes (the low byte of each i32 lane; bit 7
/// ignored, exponent 4 bits, bias 7, 3 mantissa bits, subnormal below exponent 1), as ggml's
/// `ggml_ue4m3_to_fp32`, computed instead of looked up: the 7 value bits `em` placed at bit
/// 20 are the f32 `2^(e - 127) (1 + m/8)` (`e >= 1`) or `m/8 * 2^-126` (`e = 0`, an f32
/// subnormal), and one exact multiply by 2^119 gives `(1 + m/8) 2^(e - 8)` or `m 2^-10`.
/// The bytes 0x7F and 0xFF (E4M3 NaN, rejected at upload) give 0. A test checks every legal
/// byte against the core. It replaced an 8-wide gather from a 256-entry table (see
/// [`Nvfp4::decode`] for the measured effect).
///
/// # Safety
/// AVX-512 F/VL are available.
#[inline(always)]
unsafe fn ue4m3_half_x8(b: __m256i) -> __m256 {
    // SAFETY: register-only AVX-512 F/VL operations (caller).
    unsafe {
        let em = _mm256_and_si256(b, _mm256_set1_epi32(0x7F));
        let ok = _mm256_cmpneq_epi32_mask(em, _mm256_set1_epi32(0x7F));
        let v = _mm256_castsi256_ps(_mm256_slli_epi32::<20>(em));
        _mm256_maskz_mul_ps(ok, v, _mm256_set1_ps(f32::from_bits(246 << 23)))
    }
}

/// NVFP4 (module doc).
pub(crate) struct Nvfp4;

impl Nvfp4 {
    /// Copies the activations of weight blocks `2g, 2g + 1` of column `j` into the low- and
    /// high-nibble orders (blocks past `nb` zero); returns the 4 Q8_0 scales (0 where absent).
    fn planes(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) -> [f32; 4] {
        let nbq = 2 * nb;
        let mut d = [0f32; 4];
        rec[0] = V64([0; 64]);
        rec[1] = V64([0; 64]);
        for (qb, dd) in d.iter_mut().enumerate() {
            let Some((q, dq)) = q8_0_block(act, nbq, j, 4 * g + qb) else { continue };
            *dd = dq;
            let q: &[u8] = bytemuck::cast_slice(q);
            // Q8_0 block qb = weight block qb / 2, sub-blocks 2 (qb % 2) and 2 (qb % 2) + 1.
            for h in 0..2 {
                let s = 2 * (qb % 2) + h;
                let at = 32 * (qb / 2) + 8 * s;
                rec[0].0[at..at + 8].copy_from_slice(&q[16 * h..16 * h + 8]);
                rec[1].0[at..at + 8].copy_from_slice(&q[16 * h + 8..16 * h + 16]);
            }
        }
        d
    }
}

impl Lanes for Nvfp4 {
    const BB: usize = 36;
    const GB: usize = 2;
    const REC: usize = 4;
    /// The L2 default, one row group ahead. Its former L1 2 KiB ahead measured faster when the
    /// bench read the weights partly from L3 (session 6), slower once they came from memory:
    /// n = 1, one thread, µs, two alternated rounds, 2026-12-01 20:46 UTC: 4096 x 14336
    /// 3663 -> 2933, 14336 x 4096 5695 -> 3293 (two threads 2406 -> 2239, 3587 -> 1947).
    const PREFETCH: super::Prefetch = super::Prefetch::DEFAULT;
    type W = (__m512i, __m512i, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let d = Self::planes(act, nb, j, g, rec);
        for l in 0..16 {
            let at = 4 * l;
            let s: i32 = (0..4)
                .map(|i| i32::from(rec[0].0[at + i] as i8) + i32::from(rec[1].0[at + i] as i8))
                .sum();
            rec[2].put_i32(l, 12 * s);
            // Lane l: weight block l / 8, sub-block (l % 8) / 4 * 2 + ..: Q8_0 block l / 4.
            rec[3].put_f32(l, d[l / 4]);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        if rec.len() != 4 {
            return;
        }
        let d = Self::planes(act, nb, j, g, rec);
        let r = rec.as_mut_ptr();
        // SAFETY: reads `d` and record vectors 0, 1; writes vectors 2, 3.
        unsafe {
            let one = _mm512_set1_epi8(1);
            let p = _mm512_add_epi16(
                _mm512_maddubs_epi16(one, _mm512_load_si512(r.cast())),
                _mm512_maddubs_epi16(one, _mm512_load_si512(r.add(1).cast())),
            );
            let s = _mm512_madd_epi16(p, _mm512_set1_epi16(12));
            _mm512_store_si512(r.add(2).cast(), s);
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            let dv = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_loadu_ps(d.as_ptr())));
            _mm512_store_ps(r.add(3).cast(), dv);
        }
    }

    /// The sub-block scales come from [`ue4m3_half_x8`] (computed), not an 8-wide gather from
    /// a 256-entry table as before: n = 1, weights from memory, µs, gather -> computed, two
    /// alternated rounds, 2026-12-01 22:25 UTC: 4096 x 14336 one thread 3325 / 3156 -> 2452 /
    /// 2359, two 2005 / 4006 -> 1383 / 1627; 14336 x 4096 one thread 3199 / 3300 -> 2187 /
    /// 2163, two 2080 / 2201 -> 1293 / 1631.
    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..72 at `p` (caller); register-only operations otherwise.
        unsafe {
            let x = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(p.add(4).cast())),
                _mm256_loadu_si256(p.add(40).cast()),
            );
            let m = _mm512_set1_epi8(0x0F);
            let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(NV_U.as_ptr().cast()));
            let lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(x, m));
            let hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(x), m));
            let sb = u64::from(ptr::read_unaligned(p.cast::<u32>()))
                | u64::from(ptr::read_unaligned(p.add(36).cast::<u32>())) << 32;
            let ds = ue4m3_half_x8(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(sb as i64)));
            // Lane l belongs to sub-block l / 2 of the group (8 sub-blocks, 2 lanes each).
            let spread = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
            (lo, hi, _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(ds)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller; Q4_0's arithmetic (module doc).
        unsafe { Q4_0::dot(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0::dot_vnni(w, a, acc) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue4m3_half_matches_core() {
        if !crate::isa::Isa::Avx512.available() {
            return;
        }
        for b0 in (0u32..256).step_by(8) {
            let bytes: [u32; 8] = core::array::from_fn(|i| b0 + i as u32);
            let mut got = [0f32; 8];
            // SAFETY: AVX-512 F/VL detected above; 8-lane load and store of local arrays.
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

    #[test]
    fn offset_table_matches_core() {
        for (u, k) in NV_U.iter().zip(lowbit_core::format::ggml::mxfp4::KVALUES_MXFP4) {
            assert_eq!(i32::from(*u), i32::from(k) + 12);
        }
    }
}

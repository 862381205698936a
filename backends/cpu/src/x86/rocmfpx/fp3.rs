//! The ROCmFP3 codec of the ROCmFPX bodies ([`super::body`]): the upload-time repacked layout
//! and its AVX-512 / AVX2 decoders.
//!
//! Canonical block (FORMATS.md section 3, from github ciru-ai/ROCmFPX
//! `ggml/rocmfpx/rocmfpx.{h,c}`: `block_rocmfp3`, `rocmfpx_fp3_unpack8`): `qs[12], e[2]`, eight
//! 3-bit codes per three bytes, least significant bits first (code `i` of a triple in bits
//! `3i..3i+2` of its 24-bit little-endian value), half 0 (weights 0..16) in `qs[0..6]`; a code
//! is a sign (bit 2) and a magnitude index (bits 0-1) into `{0, 1, 2, 4}`; code 4 ("-0")
//! decodes to 0.
//!
//! * **Layout ([`Fp3::repack_group`]).** Each full group of 8 blocks (112 bytes) of a row is
//!   stored as: bytes `0..64`, the magnitude indices in ROCmFP2's arrangement (block `b` in
//!   qword `b`, the index of element `4j + t` in bits `2t+1..2t` of byte `j`); bytes
//!   `64..96`, four little-endian 64-bit sign planes (plane `t` at `64 + 8t`: bit `8b + j` =
//!   sign of element `4j + t` of block `b`); bytes `96..112`, the scale bytes (`e[h]` of block
//!   `b` at `96 + 2b + h`). A row's last, partial group stays canonical. The canonical bytes
//!   are validated before the repack.
//! * **Codes.** As ROCmFP2: the low and high nibbles of the 64 magnitude bytes index two
//!   `vpshufb` tables that give `4 + m` (m in `{0, 1, 2, 4}`) for element `4j + t`, t = 0..4;
//!   then the sign plane of vector `t` is loaded straight into a mask register and a masked
//!   `vpsubb` turns `4 + m` into `8 - (4 + m) = 4 - m` where the sign is set (AVX2: the 32
//!   sign bits are spread to byte masks with `vpshufb` + `vpand` + `vpcmpeqb` and blended;
//!   the AVX2 kernel reads [`super::fp3avx2`]'s layout instead, and this AVX2 decode is the
//!   reference that layout's decode and kernel are tested against bit for bit).
//!   The offset levels `w + 4` lie in `0..=8` (code 4 gives 4, i.e. `w = 0`), so the bodies'
//!   i16 bound and `a4` correction are ROCmFP2's.
//! * **Scales.** As ROCmFP2 (UE4M3-b8 bytes widened exactly through f16, divided by 2^7).
//!
//! The dot products and their bound (c = 1) are in [`super::body`].
//!
//! Memory safety: a full group's decode reads exactly its 112 bytes (AVX-512: 64 code bytes,
//! four 8-byte planes, 16 scale bytes; AVX2 per half: 32 code bytes, four 4-byte plane halves,
//! 8 scale bytes).

use std::arch::x86_64::*;
use std::ptr;

use super::body::{Codec, Codec256, Codec512};

/// The ROCmFP3 codec.
pub(crate) struct Fp3;

/// `vpshufb` table: a nibble holding indices `m0 | m1 << 2` -> `4 + level(m0)`.
#[rustfmt::skip]
pub(super) const LUT_LO: [i8; 16] = [4, 5, 6, 8, 4, 5, 6, 8, 4, 5, 6, 8, 4, 5, 6, 8];

/// `vpshufb` table: a nibble holding indices `m0 | m1 << 2` -> `4 + level(m1)`.
#[rustfmt::skip]
pub(super) const LUT_HI: [i8; 16] = [4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 8, 8, 8, 8];

/// The 32 codes (0..=7) of one canonical 14-byte block.
pub(super) fn codes(blk: &[u8]) -> [u8; 32] {
    let mut c = [0u8; 32];
    for (out, tri) in c.chunks_exact_mut(8).zip(blk[..12].chunks_exact(3)) {
        let v = u32::from(tri[0]) | u32::from(tri[1]) << 8 | u32::from(tri[2]) << 16;
        for (i, o) in out.iter_mut().enumerate() {
            *o = (v >> (3 * i) & 7) as u8;
        }
    }
    c
}

impl Codec for Fp3 {
    const BLOCK: usize = 14;
    const GB: usize = 112;
    /// 16 KiB: on short rows one row group (4 x 1792 bytes at K = 4096) is under the 8 KiB
    /// default, and the streams ran short of prefetched lines; long rows keep one group (25 KiB
    /// at K = 14336). n = 1, weights from memory, µs, 8 KiB -> two groups (14 KiB) ahead, two
    /// alternated rounds, 2026-12-01 22:34 UTC, one thread: 14336 x 4096 1610 / 1773 -> 1328
    /// / 1296, and at 22:42 UTC 1455 / 1746 -> 1358 / 1348 (two threads 1259 / 948 -> 895 /
    /// 876); at 4096 x 14336 two groups (50 KiB) were no better than one (1372 -> 1435 mean of
    /// four), so the minimum is in bytes. This 16 KiB build at 22:59 UTC: 14336 x 4096 1651 /
    /// 1550 -> 1228 / 1181 (ratio 0.52-0.59 -> 0.75-0.80).
    const PF_MIN: usize = 16 << 10;

    /// Rewrites 8 canonical blocks into the layout of the module doc.
    fn repack_group(src: &[u8], dst: &mut [u8]) {
        dst[..Self::GB].iter_mut().for_each(|b| *b = 0);
        let mut planes = [0u64; 4];
        for (b, blk) in src.chunks_exact(14).enumerate() {
            for (i, &c) in codes(blk).iter().enumerate() {
                let (j, t) = (i / 4, i % 4);
                dst[8 * b + j] |= (c & 3) << (2 * t);
                planes[t] |= u64::from(c >> 2) << (8 * b + j);
            }
            dst[96 + 2 * b..98 + 2 * b].copy_from_slice(&blk[12..14]);
        }
        for (t, p) in planes.iter().enumerate() {
            dst[64 + 8 * t..72 + 8 * t].copy_from_slice(&p.to_le_bytes());
        }
    }
}

impl Codec512 for Fp3 {
    #[inline(always)]
    unsafe fn decode512(p: *const u8) -> ([__m512i; 4], __m512) {
        // SAFETY: the loads read p .. p + 64, p + 64 .. p + 96 (four 8-byte planes) and
        // p + 96 .. p + 112, inside the 112 bytes the caller guarantees.
        unsafe {
            let q = _mm512_loadu_si512(p.cast());
            let m = _mm512_set1_epi8(0x0F);
            let lo = _mm512_and_si512(q, m);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m);
            let la = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
            let lb = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
            let eight = _mm512_set1_epi8(8);
            let mut w = [
                _mm512_shuffle_epi8(la, lo),
                _mm512_shuffle_epi8(lb, lo),
                _mm512_shuffle_epi8(la, hi),
                _mm512_shuffle_epi8(lb, hi),
            ];
            // (No closures here: they would not inherit the caller's target features.)
            for (t, v) in w.iter_mut().enumerate() {
                let k = ptr::read_unaligned(p.add(64 + 8 * t).cast::<u64>());
                *v = _mm512_mask_sub_epi8(*v, k, eight, *v);
            }
            let e = _mm_loadu_si128(p.add(96).cast());
            let h = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(e));
            (w, _mm512_cvtph_ps(h))
        }
    }
}

impl Codec256 for Fp3 {
    #[inline(always)]
    unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256) {
        // SAFETY: the loads read p + 32h .. + 32, p + 64 + 8t + 4h .. + 4 (t < 4) and
        // p + 96 + 8h .. + 8, inside the 112 bytes the caller guarantees (h < 2).
        unsafe {
            let eight = _mm256_set1_epi8(8);
            // Byte `i` of the spread takes byte `i / 8` of the 32 sign bits, then bit `i % 8`.
            #[rustfmt::skip]
            let spread = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
            );
            let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            let mut w = magnitudes256(p, h);
            for (t, v) in w.iter_mut().enumerate() {
                let s = ptr::read_unaligned(p.add(64 + 8 * t + 4 * h).cast::<i32>());
                let x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(s), spread), bit);
                let neg = _mm256_cmpeq_epi8(x, bit);
                *v = _mm256_blendv_epi8(*v, _mm256_sub_epi8(eight, *v), neg);
            }
            (w, scales256(p, h))
        }
    }
}

/// The magnitude bytes of half `h` of a 256-weight group (the 32 code bytes at `p + 32h`, each
/// nibble looked up in [`LUT_LO`] / [`LUT_HI`]): the sign-free part of the AVX2 decode, shared
/// by the canonical layout ([`Fp3`]) and the AVX2 one (`super::fp3avx2`), which differ only in
/// where the sign bits lie.
///
/// # Safety
/// AVX2 is available; `p + 32h .. p + 32h + 32` is readable.
#[inline(always)]
pub(super) unsafe fn magnitudes256(p: *const u8, h: usize) -> [__m256i; 4] {
    // SAFETY: reads the 32 bytes the caller guarantees and the two 16-byte tables.
    unsafe {
        let q = _mm256_loadu_si256(p.add(32 * h).cast());
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_and_si256(q, m);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m);
        let la = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
        let lb = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
        [
            _mm256_shuffle_epi8(la, lo),
            _mm256_shuffle_epi8(lb, lo),
            _mm256_shuffle_epi8(la, hi),
            _mm256_shuffle_epi8(lb, hi),
        ]
    }
}

/// The eight bias-8 E4M3 scale bytes of half `h` (at `p + 96 + 8h`) as f32 values of the
/// kernel's scale domain (`byte << 7` read as f16), shared as [`magnitudes256`] is.
///
/// # Safety
/// AVX2 and F16C are available; `p + 96 + 8h .. + 8` is readable.
#[inline(always)]
pub(super) unsafe fn scales256(p: *const u8, h: usize) -> __m256 {
    // SAFETY: reads the 8 bytes the caller guarantees; register-only otherwise.
    unsafe {
        let e = _mm_loadl_epi64(p.add(96 + 8 * h).cast());
        _mm256_cvtph_ps(_mm_slli_epi16::<7>(_mm_cvtepu8_epi16(e)))
    }
}

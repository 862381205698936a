//! The ROCmFP2 codec of the ROCmFPX bodies ([`super::body`]): the upload-time repacked layout
//! and its AVX-512 / AVX2 decoders.
//!
//! * **Layout ([`Fp2::repack_group`]).** Each full group of 8 blocks of a row is stored as the
//!   eight 8-byte code words (block `b` at bytes `8b..8b+8`) followed by the 16 scale bytes
//!   (`e[h]` of block `b` at byte `64 + 2b + h`); a row's last, partial group stays canonical.
//!   The canonical layout (FORMATS.md section 3, from github ciru-ai/ROCmFPX
//!   `ggml/rocmfpx/rocmfpx.h`: `qs[8], e[2]` per 10-byte block, weight `4j + t` in bits
//!   `2t+1..2t` of `qs[j]`) is validated before the repack.
//! * **Codes.** One 64-byte load gives every code word of the group, block `b` in qword `b`.
//!   Its low nibbles (`q & 0x0F`) hold the codes of elements `4j` and `4j + 1` of each byte
//!   `j`, its high nibbles (`(q >> 4) & 0x0F`) those of `4j + 2` and `4j + 3`; two 16-entry
//!   `vpshufb` tables, one reading the nibble's low code and one its high code, map each
//!   nibble straight to the offset level `w + 4` in `{0, 3, 5, 8}` (codes 0..3 = -4, -1, +1,
//!   +4). So vector `t` (t = 0..4) holds in byte `j` of qword `b` the offset level of element
//!   `4j + t` of block `b`: 1 shift, 2 masks and 4 `vpshufb` per 256 weights. The activations
//!   are permuted to the same order once per matmul call ([`super::prep`]).
//! * **Scales.** The 16 scale bytes are zero-extended to 16 bits (`vpmovzxbw`), shifted left
//!   by 7 and widened by `vcvtph2ps`: UE4M3-b8 `e = E:M` read as an f16 with exponent field
//!   `E` and mantissa `M << 7` is exactly `scale(e) / 2^7`, subnormals included (E = 0:
//!   `M * 2^-17` vs `M * 2^-10`; E > 0: `(1 + M/8) 2^(E-15)` vs `(1 + M/8) 2^(E-8)`). The 2^7
//!   is folded into the activation scale (`Group::d`). Lane `2b + h` holds the scale of half
//!   `h` of block `b`.
//!
//! The dot products and their bound (c = 1) are in [`super::body`].
//!
//! Memory safety: a full group's decode reads exactly its 80 bytes (one 64-byte and one
//! 16-byte load for AVX-512; 32 + 8 bytes per half for AVX2).

use std::arch::x86_64::*;

use super::body::{Codec, Codec256, Codec512};

/// The ROCmFP2 codec.
pub(crate) struct Fp2;

/// `vpshufb` table: a nibble holding codes `c0 | c1 << 2` -> the offset level `w + 4` of
/// `c0` (levels 0, 3, 5, 8 for codes 0..3).
#[rustfmt::skip]
const LUT_LO: [i8; 16] = [0, 3, 5, 8, 0, 3, 5, 8, 0, 3, 5, 8, 0, 3, 5, 8];

/// `vpshufb` table: a nibble holding codes `c0 | c1 << 2` -> the offset level of `c1`.
#[rustfmt::skip]
const LUT_HI: [i8; 16] = [0, 0, 0, 0, 3, 3, 3, 3, 5, 5, 5, 5, 8, 8, 8, 8];

impl Codec for Fp2 {
    const BLOCK: usize = 10;
    const GB: usize = 80;
    /// 16 KiB, as ROCmFP3 (see `Fp3::PF_MIN`): at K = 4096 one row group is 4 x 1280 bytes,
    /// under the 8 KiB default, and the streams ran short of prefetched lines. n = 1, weights
    /// from memory, 14336 x 4096, one thread, µs, 8 -> 16 KiB in alternated quiet
    /// windows, 2026-12-02 07:40-07:58 UTC (`lowbit bench --format ROCMFP2 --shape 14336x4096
    /// --n 1,4 --threads 1,2`, the minimum switched by a temporary environment variable): 1156
    /// / 1155 / 1405 / 1068 -> 845 / 866 / 986 / 800 (ratio 0.49-0.63 -> 0.68-0.84); 12 and 24
    /// KiB within noise of 16; 32 KiB was slower at 4096 x 14336 (1000 against 800-860 µs),
    /// whose row group (17.5 KiB) is over 16 KiB, so 16 leaves that shape as it was.
    const PF_MIN: usize = 16 << 10;

    /// Rewrites one canonical group of 8 blocks (`src`, 80 bytes) into the repacked layout
    /// (`dst`): code words first, then the scale bytes (see the module doc).
    fn repack_group(src: &[u8], dst: &mut [u8]) {
        for (b, blk) in src.chunks_exact(10).enumerate() {
            dst[8 * b..8 * b + 8].copy_from_slice(&blk[..8]);
            dst[64 + 2 * b..66 + 2 * b].copy_from_slice(&blk[8..10]);
        }
    }
}

impl Codec512 for Fp2 {
    /// One repacked group of one row, decoded: `w[t]` (offset levels, see the module doc) and the
    /// scales divided by 2^7 in lane `2b + h`.
    ///
    /// # Safety
    /// AVX-512 F/BW and AVX2/F16C are available; `p .. p + 80` is readable.
    #[inline(always)]
    unsafe fn decode512(p: *const u8) -> ([__m512i; 4], __m512) {
        // SAFETY: the loads read p .. p + 64 and p + 64 .. p + 80, inside the 80 bytes the caller
        // guarantees; the rest is register-only.
        unsafe {
            let q = _mm512_loadu_si512(p.cast());
            let m = _mm512_set1_epi8(0x0F);
            let lo = _mm512_and_si512(q, m);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m);
            let la = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
            let lb = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
            let w = [
                _mm512_shuffle_epi8(la, lo),
                _mm512_shuffle_epi8(lb, lo),
                _mm512_shuffle_epi8(la, hi),
                _mm512_shuffle_epi8(lb, hi),
            ];
            let e = _mm_loadu_si128(p.add(64).cast());
            let h = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(e));
            (w, _mm512_cvtph_ps(h))
        }
    }
}

impl Codec256 for Fp2 {
    /// One half group (blocks `4h .. 4h + 4`) of one repacked group, decoded for AVX2: `w[t]`
    /// and the scales divided by 2^7 in lane `2b + h'` (b = 0..4 within the half).
    ///
    /// # Safety
    /// AVX2 and F16C are available; `p .. p + 80` is readable; `h < 2`.
    #[inline(always)]
    unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256) {
        // SAFETY: the loads read p + 32h .. p + 32h + 32 and p + 64 + 8h .. p + 72 + 8h, inside
        // the 80 bytes the caller guarantees; the rest is register-only.
        unsafe {
            let q = _mm256_loadu_si256(p.add(32 * h).cast());
            let m = _mm256_set1_epi8(0x0F);
            let lo = _mm256_and_si256(q, m);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m);
            let la = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
            let lb = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
            let w = [
                _mm256_shuffle_epi8(la, lo),
                _mm256_shuffle_epi8(lb, lo),
                _mm256_shuffle_epi8(la, hi),
                _mm256_shuffle_epi8(lb, hi),
            ];
            let e = _mm_loadl_epi64(p.add(64 + 8 * h).cast());
            let x = _mm_slli_epi16::<7>(_mm_cvtepu8_epi16(e));
            (w, _mm256_cvtph_ps(x))
        }
    }
}

//! Unit tests of the shared decode pieces (the kernels themselves are checked bit for bit
//! against the reference in `tests/matmul.rs`).

// Register, group and element indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use lowbit_core::format::ggml::iq::tables::KSIGNS_IQ2XS;

use super::*;

#[test]
fn parity_signs_are_ksigns_iq2xs() {
    if !is_x86_feature_detected!("avx2") {
        return;
    }
    for i in 0..128u8 {
        let mut s7 = [0u8; 32];
        for (b, v) in s7.iter_mut().enumerate() {
            *v = if b % 5 == 0 { i } else { i.wrapping_mul(b as u8).wrapping_add(3) & 127 };
        }
        let mut got = [0u8; 32];
        // SAFETY: AVX2 was detected; the load and store touch the 32 bytes of the arrays.
        unsafe {
            let v = with_parity(_mm256_loadu_si256(s7.as_ptr().cast()));
            _mm256_storeu_si256(got.as_mut_ptr().cast(), v);
        }
        for (b, v) in s7.iter().enumerate() {
            assert_eq!(got[b], KSIGNS_IQ2XS[usize::from(*v)], "entry {v} byte {b}");
        }
    }
}

#[test]
fn fields_and_signs_land_on_their_elements() {
    if !is_x86_feature_detected!("avx2") {
        return;
    }
    // Dword k: field l = 13 k + 5 l + 1 (< 128).
    let mut dw = [0u32; 8];
    for (k, d) in dw.iter_mut().enumerate() {
        for l in 0..4 {
            *d |= ((13 * k + 5 * l + 1) as u32) << (7 * l);
        }
        *d |= 0xA000_0000;
    }
    let (mut f, mut sg) = ([0u8; 32], [[0i8; 32]; 8]);
    // SAFETY: AVX2 was detected; loads and stores touch the local arrays only.
    unsafe {
        let x = _mm256_loadu_si256(dw.as_ptr().cast());
        let v = fields7(x);
        _mm256_storeu_si256(f.as_mut_ptr().cast(), v);
        let h = sign_halves(v);
        for (k, r) in sg.iter_mut().enumerate() {
            _mm256_storeu_si256(r.as_mut_ptr().cast(), sign_reg(&h, k));
        }
    }
    for k in 0..8 {
        for l in 0..4 {
            assert_eq!(usize::from(f[4 * k + l]), 13 * k + 5 * l + 1, "field {l} of dword {k}");
            for j in 0..8 {
                let neg = f[4 * k + l] >> j & 1 == 1;
                assert_eq!(sg[k][8 * l + j], if neg { -1 } else { 1 }, "k {k} l {l} j {j}");
            }
        }
    }
}

#[test]
fn scales_spread_to_their_sub_blocks() {
    if !is_x86_feature_detected!("avx2") {
        return;
    }
    let bytes: [u8; 16] = core::array::from_fn(|i| (3 * i + 1) as u8);
    let (mut s16, mut s32) = ([[0i16; 16]; 8], [[0i16; 16]; 8]);
    // SAFETY: AVX2 was detected; loads and stores touch the local arrays only.
    unsafe {
        let b = _mm256_broadcastsi128_si256(_mm_loadu_si128(bytes.as_ptr().cast()));
        for k in 0..8 {
            _mm256_storeu_si256(s16[k].as_mut_ptr().cast(), scale_reg::<true>(b, k));
            _mm256_storeu_si256(s32[k].as_mut_ptr().cast(), scale_reg::<false>(b, k));
        }
    }
    for k in 0..8 {
        for w in 0..16 {
            assert_eq!(s16[k][w], i16::from(bytes[2 * k + w / 8]), "per-16 k {k} word {w}");
            assert_eq!(s32[k][w], i16::from(bytes[k]), "per-32 k {k} word {w}");
        }
    }
}

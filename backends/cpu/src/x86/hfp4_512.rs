//! The AVX-512 body of the HFP4-family kernels (`hfp4.rs` holds the dispatch, the checks, the
//! arithmetic and its bound, c = 0.5).
//!
//! Layout: once per call, each activation column of the tile is copied into a per-thread
//! buffer (`hfp4.rs`, slice-major: the slice a row tile works on is contiguous) with every
//! 32-element block de-interleaved (its 16 even elements, then its 16 odd ones: one
//! `vpermt2ps` pair per block). A weight block then decodes in four operations: `vpmovzxbd`
//! of the 16 nibble bytes (lane `i` = byte `i`), `vpsrld` by 4, and two `vpermps` on the
//! scaled 16-entry table `t = E2M1 * f` of the block's scale byte (one load; `vpermps` reads
//! bits 0..3 of each lane: the low nibble, element `2 i`, and the high one, element `2 i + 1`).
//! Two FMAs per block and column follow; rows go in groups of `R`, sharing each activation
//! load.
//!
//! What must not live here: AVX2 code, length checks (the safe wrapper in `hfp4.rs`).

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::hfp4::{row_scale, tile_rows, Lut16, Pass, ACC_VECS, BLOCK, HEADER};

/// Entry: runs the body for the tile.
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C are available; `w` holds whole rows of `rb = 16 + 17
/// p.nb` bytes; `p.x` holds `p.ncp` (1..=16) de-interleaved columns of `32 p.nb` values
/// staged by `stage` with slices of `p.sb` blocks; `p.nc == p.ncp`, `p.j0 == 0`, `out.len() == rows * p.nc`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn entry(w: &[u8], rb: usize, lut: &Lut16, p: &Pass, out: &mut [f32]) {
    // SAFETY: the caller guarantees the features and the `Pass` invariants.
    unsafe {
        match p.ncp {
            1 => body::<4, 1>(w, rb, lut, p, out),
            2 => body::<4, 2>(w, rb, lut, p, out),
            3 => body::<4, 3>(w, rb, lut, p, out),
            4 => body::<2, 4>(w, rb, lut, p, out),
            5 | 6 => body::<2, 6>(w, rb, lut, p, out),
            7 | 8 => body::<2, 8>(w, rb, lut, p, out),
            9..=12 => body::<1, 12>(w, rb, lut, p, out),
            _ => body::<1, 16>(w, rb, lut, p, out),
        }
    }
}

/// `dst[32 b + i] = src[32 b + 2 i]`, `dst[32 b + 16 + i] = src[32 b + 2 i + 1]` (i < 16)
/// for every 32-value block `b`.
///
/// # Safety
/// AVX-512 F is available; `src.len() == dst.len()`, a multiple of 32.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn deinterleave(src: &[f32], dst: &mut [f32]) {
    // SAFETY: 32-value reads and writes at `32 b < len` (caller: equal lengths, multiples of
    // 32); AVX-512 F is available.
    unsafe {
        let ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        for (s, d) in src.chunks_exact(32).zip(dst.chunks_exact_mut(32)) {
            let a = _mm512_loadu_ps(s.as_ptr());
            let b = _mm512_loadu_ps(s.as_ptr().add(16));
            _mm512_storeu_ps(d.as_mut_ptr(), _mm512_permutex2var_ps(a, ev, b));
            _mm512_storeu_ps(d.as_mut_ptr().add(16), _mm512_permutex2var_ps(a, od, b));
        }
    }
}

/// The body: cache tiles of `tile_shape` rows x blocks, rows in groups of `R` (then single
/// rows), `C >= p.ncp` columns (extra ones repeat the last column and are not stored).
///
/// # Safety
/// AVX-512 F/BW/VL and FMA are available; `w` holds whole rows of `rb = 16 + 17 p.nb` bytes;
/// `p.x` holds `p.ncp` (1..=C) de-interleaved columns of `32 p.nb` values; `out.len() == rows
/// * p.nc`, `p.j0 + p.ncp <= p.nc`.
#[inline(always)]
unsafe fn body<const R: usize, const C: usize>(
    w: &[u8],
    rb: usize,
    lut: &Lut16,
    p: &Pass,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let rs = tile_rows(C, R, 64);
    // Prefetch distance: one column: into L2, one group of `R` rows ahead (8 KiB at least), as
    // `super::Prefetch::one_group_ahead` does. It was along the row into L1,
    // `super::hfp4::PREFETCH` bytes ahead, until the bench read the weights from memory; then
    // one thread at 4096 x 14336 went 3948 -> 3197 µs and at 14336 x 4096 5545 -> 2691 µs for
    // HFP4G32, MFP4G32 alike (two alternated rounds, 2026-12-01 20:50 UTC). Several columns:
    // into L1, the same blocks `2 R` rows down (tiles visit the rows of a slice before the
    // next slice).
    let pf = if C == 1 { (R * rb).max(8 << 10) } else { 2 * R * rb };
    // SAFETY: weight reads: the scale byte at `16 + 17 b` and 16 bytes at `16 + 17 b + 1` of
    // rows `< nrows`, inside `w`; activation reads: `x[c k + 32 b..][..32]` for `c < ncp`;
    // `buf` indices `< rs * C <= ACC_VECS`; prefetches never fault; register operations need
    // AVX-512 F and FMA (caller).
    unsafe {
        let mut buf = [_mm512_setzero_ps(); ACC_VECS];
        let mut g0 = 0;
        while g0 < nrows {
            let gr = rs.min(nrows - g0);
            buf[..gr * C].fill(_mm512_setzero_ps());
            let mut b0 = 0;
            while b0 < p.nb {
                let b1 = (b0 + p.sb).min(p.nb);
                // This slice's columns (see `stage`), from block `b0` on.
                let xc: [*const f32; C] = core::array::from_fn(|j| {
                    let j = j.min(p.ncp - 1);
                    p.x.as_ptr().add(32 * (b0 * p.ncp + j * (b1 - b0)))
                });
                let mut r = 0;
                while r < gr {
                    let here = if r + R <= gr { R } else { 1 };
                    macro_rules! group {
                        ($rr:expr) => {{
                            let rp: [*const u8; $rr] = core::array::from_fn(|i| {
                                w.as_ptr().add((g0 + r + i) * rb + HEADER)
                            });
                            let mut acc: [[__m512; C]; $rr] = core::array::from_fn(|i| {
                                core::array::from_fn(|j| buf[(r + i) * C + j])
                            });
                            for b in b0..b1 {
                                let mut lo = [_mm512_setzero_ps(); $rr];
                                let mut hi = [_mm512_setzero_ps(); $rr];
                                for i in 0..$rr {
                                    let blk = rp[i].add(b * BLOCK);
                                    if C == 1 {
                                        _mm_prefetch::<_MM_HINT_T1>(blk.wrapping_add(pf).cast());
                                    } else {
                                        _mm_prefetch::<_MM_HINT_T0>(blk.wrapping_add(pf).cast());
                                    }
                                    let t = _mm512_load_ps(lut.0[usize::from(*blk)].as_ptr());
                                    let d =
                                        _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(1).cast()));
                                    lo[i] = _mm512_permutexvar_ps(d, t);
                                    hi[i] = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(d), t);
                                }
                                for j in 0..C {
                                    let xl = _mm512_loadu_ps(xc[j].add(32 * (b - b0)));
                                    let xh = _mm512_loadu_ps(xc[j].add(32 * (b - b0) + 16));
                                    for i in 0..$rr {
                                        acc[i][j] = _mm512_fmadd_ps(lo[i], xl, acc[i][j]);
                                        acc[i][j] = _mm512_fmadd_ps(hi[i], xh, acc[i][j]);
                                    }
                                }
                            }
                            for i in 0..$rr {
                                for j in 0..C {
                                    buf[(r + i) * C + j] = acc[i][j];
                                }
                            }
                        }};
                    }
                    if here == R {
                        group!(R);
                    } else {
                        group!(1);
                    }
                    r += here;
                }
                b0 = b1;
            }
            for i in 0..gr {
                let row = g0 + i;
                let scale = row_scale(&w[row * rb..(row + 1) * rb]);
                for j in 0..p.ncp {
                    out[row * p.nc + p.j0 + j] = _mm512_reduce_add_ps(buf[i * C + j]) * scale;
                }
            }
            g0 += gr;
        }
    }
}

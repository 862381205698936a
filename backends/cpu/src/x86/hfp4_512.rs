//! The AVX-512 body of the HFP4-family kernels (`hfp4.rs` holds the dispatch, the checks, the
//! arithmetic and its bound, c = 0.5).
//!
//! Layout: once per call, each activation column of the tile is copied into a per-thread
//! buffer with every 32-element block de-interleaved (its 16 even elements, then its 16 odd
//! ones: one `vpermt2ps` pair per block). A weight block then decodes in five operations:
//! `vpmovzxbd` of the 16 nibble bytes (lane `i` = byte `i`), `vpsrld` by 4, the scaled
//! 16-entry table `t = E2M1 * f` (one multiply), and two `vpermps` (which read bits 0..3 of
//! each lane: the low nibble, element `2 i`, and the high one, element `2 i + 1`). Two FMAs per
//! block and column follow; rows go in groups of `R`, sharing each activation load.
//!
//! What must not live here: AVX2 code, length checks (the safe wrapper in `hfp4.rs`).

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::cell::Cell;

use lowbit_core::scalar::E2M1_VALUES;

use super::hfp4::{row_scale, Pass, BLOCK, HEADER};

thread_local! {
    /// The de-interleaved activations of the current call (reused across calls).
    static XBUF: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Entry: de-interleaves the `nc` activation columns of `x` (each `32 nb` values) and runs the
/// body for the tile.
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C are available; `w` holds whole rows of `rb = 16 + 17
/// nb` bytes, `x.len() == nc * 32 nb`, `1 <= nc <= 16`, `out.len() == rows * nc`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn entry(
    w: &[u8],
    rb: usize,
    nb: usize,
    fac: &'static [f32; 256],
    x: &[f32],
    nc: usize,
    out: &mut [f32],
) {
    let mut buf = XBUF.take();
    if buf.len() < x.len() {
        buf.resize(x.len(), 0.0);
    }
    // SAFETY: the caller guarantees the features; `buf` holds at least `x.len()` values.
    unsafe { deinterleave(x, &mut buf[..x.len()]) };
    let p = Pass { nb, fac, x: &buf[..x.len()], ncp: nc, nc, j0: 0 };
    // SAFETY: the caller guarantees the features and the row and output lengths; `p.x` holds
    // `nc` columns of `32 nb` values.
    unsafe {
        match nc {
            1 => body::<4, 1>(w, rb, &p, out),
            2 => body::<4, 2>(w, rb, &p, out),
            3 => body::<4, 3>(w, rb, &p, out),
            4 => body::<2, 4>(w, rb, &p, out),
            5 | 6 => body::<2, 6>(w, rb, &p, out),
            7 | 8 => body::<2, 8>(w, rb, &p, out),
            9..=12 => body::<1, 12>(w, rb, &p, out),
            _ => body::<1, 16>(w, rb, &p, out),
        }
    }
    XBUF.set(buf);
}

/// `dst[32 b + i] = src[32 b + 2 i]`, `dst[32 b + 16 + i] = src[32 b + 2 i + 1]` (i < 16).
///
/// # Safety
/// AVX-512 F is available; `src.len() == dst.len()`, a multiple of 32.
#[target_feature(enable = "avx512f")]
unsafe fn deinterleave(src: &[f32], dst: &mut [f32]) {
    // SAFETY: 32-value reads and writes at `32 b < len` (caller: lengths equal, multiples of
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

/// The body: rows in groups of `R` (then single rows), `C >= p.ncp` columns (extra ones repeat
/// the last column and are not stored).
///
/// # Safety
/// AVX-512 F/BW/VL and FMA are available; `w` holds whole rows of `rb = 16 + 17 p.nb` bytes;
/// `p.x` holds `p.ncp` (1..=C) de-interleaved columns of `32 p.nb` values; `out.len() == rows
/// * p.nc`, `p.j0 + p.ncp <= p.nc`.
#[inline(always)]
unsafe fn body<const R: usize, const C: usize>(w: &[u8], rb: usize, p: &Pass, out: &mut [f32]) {
    let nrows = w.len() / rb;
    let k = 32 * p.nb;
    // SAFETY: weight reads: the scale byte at `16 + 17 b` and 16 bytes at `16 + 17 b + 1` of
    // rows `< nrows`, inside `w`; activation reads: `x[c k + 32 b..][..32]` for `c < ncp`;
    // register operations need AVX-512 F and FMA (caller).
    unsafe {
        let lut = _mm512_loadu_ps(E2M1_VALUES.as_ptr());
        let xc: [*const f32; C] = core::array::from_fn(|j| p.x.as_ptr().add(j.min(p.ncp - 1) * k));
        let mut r0 = 0;
        while r0 < nrows {
            let here = if r0 + R <= nrows { R } else { 1 };
            let mut acc = [[_mm512_setzero_ps(); C]; R];
            macro_rules! group {
                ($rr:expr) => {{
                    let rp: [*const u8; $rr] =
                        core::array::from_fn(|r| w.as_ptr().add((r0 + r) * rb + HEADER));
                    for b in 0..p.nb {
                        let mut lo = [_mm512_setzero_ps(); $rr];
                        let mut hi = [_mm512_setzero_ps(); $rr];
                        for r in 0..$rr {
                            let blk = rp[r].add(b * BLOCK);
                            let f = _mm512_set1_ps(p.fac[usize::from(*blk)]);
                            let t = _mm512_mul_ps(lut, f);
                            let d = _mm512_cvtepu8_epi32(_mm_loadu_si128(blk.add(1).cast()));
                            lo[r] = _mm512_permutexvar_ps(d, t);
                            hi[r] = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(d), t);
                        }
                        for j in 0..C {
                            let xl = _mm512_loadu_ps(xc[j].add(32 * b));
                            let xh = _mm512_loadu_ps(xc[j].add(32 * b + 16));
                            for r in 0..$rr {
                                acc[r][j] = _mm512_fmadd_ps(lo[r], xl, acc[r][j]);
                                acc[r][j] = _mm512_fmadd_ps(hi[r], xh, acc[r][j]);
                            }
                        }
                    }
                }};
            }
            if here == R {
                group!(R);
            } else {
                group!(1);
            }
            for (r, accr) in acc.iter().enumerate().take(here) {
                let row = r0 + r;
                let rs = row_scale(&w[row * rb..(row + 1) * rb]);
                for (j, a) in accr.iter().enumerate().take(p.ncp) {
                    out[row * p.nc + p.j0 + j] = _mm512_reduce_add_ps(*a) * rs;
                }
            }
            r0 += here;
        }
    }
}

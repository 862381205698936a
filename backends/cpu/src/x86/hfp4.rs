//! AVX2 / AVX-512 kernels for the HFP4 family with f32 activations: HFP4G32, MFP4G32 and
//! MFP4G32P (the rotated formats' activations arrive FWHT-rotated, once per matmul call, from
//! `act.rs`; the kernels see plain f32 columns).
//!
//! Row layout (from the core's `format::hipfire`): a 16-byte header (f16 row scale at 0), then
//! 17-byte blocks (scale byte, 16 bytes of E2M1 nibbles, low nibble = even element).
//!
//! Shape: rows in groups of 8, one row per vector lane. Per block, the 16 nibble bytes of the
//! 8 rows are transposed (24 `punpck`) so that byte `b` of all 8 rows sits in one vector; each
//! nibble becomes its f32 E2M1 value through `vpermps` on the 8 magnitudes plus the sign bit
//! (bit 3 of the code moved to bit 31). The 32 resulting vectors (element `t` of 8 rows) are
//! reused for every column of the tile. Each lane then evaluates the core reference's sequence
//! exactly (`s = 0; s += E2M1[c_t] * x_t` for t in order, `acc += s * factor`, `y = acc * rs`;
//! separate multiply and add, no FMA), so results are bit-identical to the reference
//! (`format::hipfire::dot`), whose bound applies: **c = 2**.
//!
//! What must not live here: the integer-activation formats (`ext.rs` and its bodies).

use std::arch::x86_64::*;
use std::ops::Range;

use lowbit_core::error::Buffer;
use lowbit_core::format::hipfire::block::block_factor;
use lowbit_core::format::hipfire::header::RowHeader;
use lowbit_core::{Error, FormatId};

use super::ext::{row_ptrs, store_rows};
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, MAX_TILE};

const HEADER: usize = 16;
const BLOCK: usize = 17;

/// The AVX2 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx2(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Hfp4G32 => Some(Kernel { name: "avx2-hfp4g32", f: run_avx2 }),
        FormatId::Mfp4G32 => Some(Kernel { name: "avx2-mfp4g32", f: run_avx2 }),
        FormatId::Mfp4G32P => Some(Kernel { name: "avx2-mfp4g32p", f: run_avx2 }),
        _ => None,
    }
}

/// The AVX-512 kernel for `format`, if this module has one.
pub(crate) fn kernel_avx512(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Hfp4G32 => Some(Kernel { name: "avx512-hfp4g32", f: run_avx512 }),
        FormatId::Mfp4G32 => Some(Kernel { name: "avx512-mfp4g32", f: run_avx512 }),
        FormatId::Mfp4G32P => Some(Kernel { name: "avx512-mfp4g32p", f: run_avx512 }),
        _ => None,
    }
}

/// Checks `rb == 16 + nb * 17` with `nb * 32 == acts.k`, whole rows, a tile of 1..=16 columns
/// inside `acts`, `out.len() == rows * tile`, f32 activations of `n * k` values; returns the
/// activations and `nb`.
fn check<'a>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<(&'a [f32], usize), Error> {
    let ActData::F32(x) = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let nb = rb.saturating_sub(HEADER) / BLOCK;
    let nc = cols.len();
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let ok = nb != 0
        && rb == HEADER + nb * BLOCK
        && nb * 32 == acts.k
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && x.len() == acts.n * acts.k
        && out.len() == rows * nc;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: x.len(),
            expected: acts.n * acts.k,
        });
    }
    Ok((x, nb))
}

/// The block factors of the 8 rows at `rp` for the block whose scale byte is at `off`, read
/// through the core (validated at upload; a byte the core refuses reads as 0 here, which
/// uploaded matrices never reach).
///
/// # Safety
/// Every `rp[i] + off` is readable.
#[inline(always)]
unsafe fn factors(format: FormatId, rp: &[*const u8; 8], off: usize) -> [f32; 8] {
    // SAFETY: the caller guarantees the reads.
    core::array::from_fn(|i| block_factor(format, unsafe { *rp[i].add(off) }).unwrap_or(0.0))
}

fn run_avx2(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (x, nb) = check(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx2`, which `KernelTable::new` reaches only for
    // `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; the lengths the
    // body relies on were checked by `check`.
    unsafe { entry_avx2(format, w, rb, nb, x, acts.k, cols, out) };
    Ok(())
}

fn run_avx512(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (x, nb) = check(format, w, rb, acts, &cols, out)?;
    // SAFETY: reachable only through `kernel_avx512`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; the lengths the body relies on were checked by `check`.
    unsafe { entry_avx512(format, w, rb, nb, x, acts.k, cols, out) };
    Ok(())
}

#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry_avx2(
    format: FormatId,
    w: &[u8],
    rb: usize,
    nb: usize,
    x: &[f32],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check` invariants.
    unsafe {
        match cols.len() {
            1 => body::<1>(format, w, rb, nb, x, k, cols, out),
            2..=4 => body::<4>(format, w, rb, nb, x, k, cols, out),
            _ => body::<16>(format, w, rb, nb, x, k, cols, out),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn entry_avx512(
    format: FormatId,
    w: &[u8],
    rb: usize,
    nb: usize,
    x: &[f32],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: the caller guarantees the features and the `check` invariants.
    unsafe {
        match cols.len() {
            1 => body::<1>(format, w, rb, nb, x, k, cols, out),
            2..=4 => body::<4>(format, w, rb, nb, x, k, cols, out),
            _ => body::<16>(format, w, rb, nb, x, k, cols, out),
        }
    }
}

/// The E2M1 values of the 8 codes in the low nibble (`HIGH = false`) or high nibble of the 8
/// i32 lanes of `v` (one byte per lane).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn e2m1x8<const HIGH: bool>(v: __m256i) -> __m256 {
    // SAFETY: register-only AVX2 operations.
    unsafe {
        let c = if HIGH { _mm256_srli_epi32::<4>(v) } else { v };
        let c = _mm256_and_si256(c, _mm256_set1_epi32(15));
        let mag = _mm256_setr_ps(0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
        // vpermps reads index bits 0..3; bit 3 of the code is the sign.
        let m = _mm256_permutevar8x32_ps(mag, c);
        let sign = _mm256_slli_epi32::<28>(_mm256_and_si256(c, _mm256_set1_epi32(8)));
        _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(m), sign))
    }
}

/// The 32 values of one block of 8 rows, element-major: `tv[t]` lane `i` is element `t` of row
/// `i` (without any scale).
///
/// # Safety
/// AVX2 is available; every `p[i] .. p[i] + 16` is readable.
#[inline(always)]
unsafe fn decode8(p: &[*const u8; 8], tv: &mut [__m256; 32]) {
    // SAFETY: 16-byte reads at each `p[i]` (caller); register-only AVX2 operations.
    unsafe {
        let r: [__m128i; 8] = core::array::from_fn(|i| _mm_loadu_si128(p[i].cast()));
        let mut q = [_mm_setzero_si128(); 8];
        for g in 0..2 {
            let (a, b, c, d) = (r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
            let abl = _mm_unpacklo_epi8(a, b);
            let abh = _mm_unpackhi_epi8(a, b);
            let cdl = _mm_unpacklo_epi8(c, d);
            let cdh = _mm_unpackhi_epi8(c, d);
            // q[4g + m]: byte indices 4m..4m+4, 4 rows (4g..4g+4) each.
            q[4 * g] = _mm_unpacklo_epi16(abl, cdl);
            q[4 * g + 1] = _mm_unpackhi_epi16(abl, cdl);
            q[4 * g + 2] = _mm_unpacklo_epi16(abh, cdh);
            q[4 * g + 3] = _mm_unpackhi_epi16(abh, cdh);
        }
        for m in 0..4 {
            // Byte indices 4m, 4m+1 (lo) and 4m+2, 4m+3 (hi), 8 rows each.
            let lo = _mm_unpacklo_epi32(q[m], q[4 + m]);
            let hi = _mm_unpackhi_epi32(q[m], q[4 + m]);
            for (h, z) in [lo, hi].into_iter().enumerate() {
                let bi = 4 * m + 2 * h;
                let v0 = _mm256_cvtepu8_epi32(z);
                let v1 = _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(z));
                tv[2 * bi] = e2m1x8::<false>(v0);
                tv[2 * bi + 1] = e2m1x8::<true>(v0);
                tv[2 * bi + 2] = e2m1x8::<false>(v1);
                tv[2 * bi + 3] = e2m1x8::<true>(v1);
            }
        }
    }
}

/// The kernel body (see the module doc).
///
/// # Safety
/// AVX2, FMA and F16C are available; the `check` invariants hold (`w` whole rows of
/// `rb = 16 + 17 nb` bytes, `x` holds `k = 32 nb` values per column for every column in
/// `cols`, `out.len() == rows * cols.len()`, `1 <= cols.len() <= MAXC`).
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn body<const MAXC: usize>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    nb: usize,
    x: &[f32],
    k: usize,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nc = cols.len().min(MAXC);
    // SAFETY: weight reads stay inside the rows `row_ptrs` returns (header bytes 0..16, block
    // `b < nb` at `16 + 17 b .. 16 + 17 (b + 1)`); activation reads are `x[(c * k + 32 b)..][..32]`
    // (`..64` for a pair, only when `b + 1 < nb`)
    // for columns `c < acts.n` (checked); AVX2/FMA/F16C are available.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = row_ptrs(w, rb, nrows, r0);
            let rs: [f32; 8] = core::array::from_fn(|i| {
                let hdr: &[u8; 16] = &*rp[i].cast::<[u8; 16]>();
                RowHeader::read(hdr).row_scale().to_f32()
            });
            let mut acc = [_mm256_setzero_ps(); MAXC];
            let mut tv = [[_mm256_setzero_ps(); 32]; 2];
            let mut b = 0;
            while b < nb {
                // Two blocks at a time (their block sums are independent chains; the adds into
                // `acc` stay in block order), one for an odd last block.
                let two = b + 1 < nb;
                let mut fac = [_mm256_setzero_ps(); 2];
                for h in 0..1 + usize::from(two) {
                    let off = HEADER + (b + h) * BLOCK;
                    fac[h] = _mm256_loadu_ps(factors(format, &rp, off).as_ptr());
                    let qp: [*const u8; 8] = core::array::from_fn(|i| rp[i].add(off + 1));
                    decode8(&qp, &mut tv[h]);
                }
                for (jj, accj) in acc.iter_mut().enumerate().take(nc) {
                    let xp = x.as_ptr().add((cols.start + jj) * k + 32 * b);
                    let mut s0 = _mm256_setzero_ps();
                    if two {
                        let mut s1 = _mm256_setzero_ps();
                        for t in 0..32 {
                            let x0 = _mm256_set1_ps(*xp.add(t));
                            let x1 = _mm256_set1_ps(*xp.add(32 + t));
                            s0 = _mm256_add_ps(s0, _mm256_mul_ps(tv[0][t], x0));
                            s1 = _mm256_add_ps(s1, _mm256_mul_ps(tv[1][t], x1));
                        }
                        *accj = _mm256_add_ps(*accj, _mm256_mul_ps(s0, fac[0]));
                        *accj = _mm256_add_ps(*accj, _mm256_mul_ps(s1, fac[1]));
                    } else {
                        for (t, v) in tv[0].iter().enumerate() {
                            s0 = _mm256_add_ps(s0, _mm256_mul_ps(*v, _mm256_set1_ps(*xp.add(t))));
                        }
                        *accj = _mm256_add_ps(*accj, _mm256_mul_ps(s0, fac[0]));
                    }
                }
                b += 2;
            }
            let rsv = _mm256_loadu_ps(rs.as_ptr());
            for a in acc.iter_mut().take(nc) {
                *a = _mm256_mul_ps(*a, rsv);
            }
            store_rows(&acc, nc, r0, here, out);
            r0 += 8;
        }
    }
}

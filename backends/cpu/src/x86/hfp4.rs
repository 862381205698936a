//! AVX2 / AVX-512 kernels for the HFP4 family with f32 activations: HFP4G32, MFP4G32 and
//! MFP4G32P (the rotated formats' activations arrive FWHT-rotated, once per matmul call, from
//! `act.rs`; the kernels see plain f32 columns). This file holds the shared part (dispatch,
//! length checks, block-factor tables, row scales) and the AVX2 body; the AVX-512 body is in
//! `hfp4_512.rs`.
//!
//! Row layout (from the core's `format::hipfire`): a 16-byte header (f16 row scale at 0), then
//! 17-byte blocks (scale byte, 16 bytes of E2M1 nibbles, low nibble = even element).
//!
//! Arithmetic (both ISAs): per row and block, the block factor `f` (2^(e - 127), or the E4M3
//! value for MFP4G32P, read from a 256-entry table) scales the E2M1 value table once
//! (`t = E2M1 * f`, exact: a power of two, or a 2-bit by 4-bit significand product); each
//! nibble then selects its scaled weight from `t` with one `vpermps` (the AVX-512 table has
//! all 16 signed values; the AVX2 one has the 8 magnitudes and the sign bit is XORed in), and
//! the weights go into per-lane f32 accumulators with FMA (the product is exact inside the
//! FMA, one rounding per term and lane). At the end of the row the lanes are summed (a fixed
//! tree) and multiplied by the row scale. Each decoded block serves every column of the tile
//! (n = 2..16) from registers.
//!
//! Bound: a term passes through at most `K/8` FMA roundings in its lane (AVX2: 4 per block and
//! lane with one accumulator, fewer with two; AVX-512: 2 per block), one add joining two
//! accumulators, at most 4 levels of the lane tree and the row-scale multiply: depth
//! `d <= K/8 + 6 <= 0.32 K` for `K >= 32`, so `|y - y_exact| <= d u sum|terms| (1 + O(d u))`
//! and the DESIGN.md bound holds with **c = 0.5** (as long as no intermediate underflows into
//! f32 subnormals, the reference's own proviso).
//!
//! What must not live here: the integer-activation formats (`ext.rs` and its bodies).

use std::arch::x86_64::*;
use std::ops::Range;
use std::sync::OnceLock;

use lowbit_core::error::Buffer;
use lowbit_core::format::hipfire::block::block_factor;
use lowbit_core::format::hipfire::header::RowHeader;
use lowbit_core::{Error, FormatId};

use super::hfp4_512;
use crate::act::{ActData, Acts};
use crate::kernels::{Kernel, MAX_TILE};

/// Bytes of the row header.
pub(super) const HEADER: usize = 16;
/// Bytes of a block (scale byte + 16 nibble bytes).
pub(super) const BLOCK: usize = 17;

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

/// The block factor of every scale byte of `format`, through the core's `block_factor`
/// (validated at upload; a byte the core refuses reads as 0 here, which uploaded matrices
/// never reach). Built once per process.
pub(super) fn factor_table(format: FormatId) -> &'static [f32; 256] {
    static UE8M0: OnceLock<[f32; 256]> = OnceLock::new();
    static E4M3: OnceLock<[f32; 256]> = OnceLock::new();
    // HFP4G32 and MFP4G32 share the UE8M0 block exponent.
    let (cell, f) = match format {
        FormatId::Mfp4G32P => (&E4M3, FormatId::Mfp4G32P),
        _ => (&UE8M0, FormatId::Hfp4G32),
    };
    cell.get_or_init(|| core::array::from_fn(|b| block_factor(f, b as u8).unwrap_or(0.0)))
}

/// The row scale (f16 at byte 0 of the header) of the row starting at `row`.
pub(super) fn row_scale(row: &[u8]) -> f32 {
    RowHeader::read(row).row_scale().to_f32()
}

/// What a kernel body needs besides the weights: blocks per row, the factor table, the
/// activation columns of this pass (`x[c * k..]` for tile column `c`), the output stride
/// (columns of the whole tile) and the output column of the pass's first column.
pub(super) struct Pass<'a> {
    /// Blocks per row.
    pub nb: usize,
    /// Block factor of each scale byte.
    pub fac: &'static [f32; 256],
    /// The pass's activation columns, `k = 32 nb` values each.
    pub x: &'a [f32],
    /// Columns in this pass (1..=16; the body's column count `C` may be larger: the extra
    /// columns repeat the last one and are not stored).
    pub ncp: usize,
    /// Output stride: columns of the whole tile.
    pub nc: usize,
    /// Output column of the pass's first column.
    pub j0: usize,
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
    let k = acts.k;
    let fac = factor_table(format);
    let nc = cols.len();
    let xt = &x[cols.start * k..cols.end * k];
    let mut j0 = 0;
    while j0 < nc {
        // AVX2 has 16 registers: at most 8 columns per pass over the rows.
        let ncp = (nc - j0).min(8);
        let pass = Pass { nb, fac, x: &xt[j0 * k..(j0 + ncp) * k], ncp, nc, j0 };
        // SAFETY: reachable only through `kernel_avx2`, which `KernelTable::new` reaches only
        // for `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; `check`
        // gave whole rows of `rb = 16 + 17 nb` bytes, `ncp` columns of `32 nb` values in
        // `pass.x` and `out.len() == rows * nc` with `j0 + ncp <= nc`.
        unsafe { entry_avx2(w, rb, &pass, out) };
        j0 += ncp;
    }
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
    let k = acts.k;
    let xt = &x[cols.start * k..cols.end * k];
    let fac = factor_table(format);
    // SAFETY: reachable only through `kernel_avx512`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; `check` gave whole rows of `rb = 16 + 17 nb` bytes, `cols.len()` (1..=16) columns
    // of `32 nb` values in `xt` and `out.len() == rows * cols.len()`.
    unsafe { hfp4_512::entry(w, rb, nb, fac, xt, cols.len(), out) };
    Ok(())
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry_avx2(w: &[u8], rb: usize, p: &Pass, out: &mut [f32]) {
    // SAFETY: the caller guarantees the features and the `Pass` invariants.
    unsafe {
        match p.ncp {
            1 => body_avx2::<2, 1, 2>(w, rb, p, out),
            2 => body_avx2::<2, 2, 1>(w, rb, p, out),
            3 => body_avx2::<1, 3, 2>(w, rb, p, out),
            4 => body_avx2::<1, 4, 2>(w, rb, p, out),
            _ => body_avx2::<1, 8, 1>(w, rb, p, out),
        }
    }
}

/// Sum of the 8 lanes (fixed tree).
///
/// # Safety
/// AVX is available.
#[inline(always)]
unsafe fn hsum8(v: __m256) -> f32 {
    // SAFETY: register-only AVX operations.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// The AVX2 body: rows in groups of `R` (then single rows), `C` columns (the pass's `ncp <= C`
/// real ones), `A` accumulators per (row, column) (quarter `q` of a block goes to `q % A`).
///
/// Per row and block: `t = E2M1 magnitudes * f`, XORed with `idx << 28` in lane `idx`; for
/// each quarter (8 elements, nibble bytes `4q..4q+4` broadcast as one dword), `vpsrlvd` by
/// `4 j` puts element `j`'s code in the low bits of lane `j` (natural element order);
/// `vpermps` picks `t[code & 7]`, and XOR with `code << 28` cancels the `idx << 28` and sets
/// the sign bit from bit 3 of the code.
///
/// # Safety
/// AVX2 and FMA are available; `w` holds whole rows of `rb = 16 + 17 p.nb` bytes; `p.x` holds
/// `p.ncp` (1..=C) columns of `32 p.nb` values; `out.len() == rows * p.nc`, `p.j0 + p.ncp <=
/// p.nc`.
#[inline(always)]
unsafe fn body_avx2<const R: usize, const C: usize, const A: usize>(
    w: &[u8],
    rb: usize,
    p: &Pass,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let k = 32 * p.nb;
    // SAFETY: weight reads: the scale byte at `16 + 17 b` and the dwords at `16 + 17 b + 1 +
    // 4 q` (q < 4) of rows `< nrows`, inside `w`; activation reads: `x[c k + 32 b + 8 q..][..8]`
    // for `c < ncp`; register operations need AVX2/FMA (caller).
    unsafe {
        let mag = _mm256_setr_ps(0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0);
        let junk =
            _mm256_setr_epi32(0, 1 << 28, 2 << 28, 3 << 28, 4 << 28, 5 << 28, 6 << 28, 7 << 28);
        let sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        let xc: [*const f32; C] = core::array::from_fn(|j| p.x.as_ptr().add(j.min(p.ncp - 1) * k));
        let mut r0 = 0;
        while r0 < nrows {
            let here = if r0 + R <= nrows { R } else { 1 };
            let mut acc = [[[_mm256_setzero_ps(); A]; C]; R];
            macro_rules! group {
                ($rr:expr) => {{
                    let rp: [*const u8; $rr] =
                        core::array::from_fn(|r| w.as_ptr().add((r0 + r) * rb + HEADER));
                    for b in 0..p.nb {
                        let mut t = [_mm256_setzero_ps(); $rr];
                        for r in 0..$rr {
                            let f = _mm256_set1_ps(p.fac[usize::from(*rp[r].add(b * BLOCK))]);
                            let s = _mm256_castps_si256(_mm256_mul_ps(mag, f));
                            t[r] = _mm256_castsi256_ps(_mm256_xor_si256(s, junk));
                        }
                        for q in 0..4 {
                            let mut wv = [_mm256_setzero_ps(); $rr];
                            for r in 0..$rr {
                                let src = rp[r].add(b * BLOCK + 1 + 4 * q);
                                let d = _mm256_set1_epi32(src.cast::<i32>().read_unaligned());
                                let v = _mm256_srlv_epi32(d, sh);
                                let m = _mm256_permutevar8x32_ps(t[r], v);
                                let sgn = _mm256_slli_epi32::<28>(v);
                                wv[r] = _mm256_castsi256_ps(_mm256_xor_si256(
                                    _mm256_castps_si256(m),
                                    sgn,
                                ));
                            }
                            for j in 0..C {
                                let xv = _mm256_loadu_ps(xc[j].add(32 * b + 8 * q));
                                for r in 0..$rr {
                                    acc[r][j][q % A] = _mm256_fmadd_ps(wv[r], xv, acc[r][j][q % A]);
                                }
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
                    let s = if A == 2 { _mm256_add_ps(a[0], a[A - 1]) } else { a[0] };
                    out[row * p.nc + p.j0 + j] = hsum8(s) * rs;
                }
            }
            r0 += here;
        }
    }
}

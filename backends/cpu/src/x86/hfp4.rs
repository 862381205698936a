//! AVX2 / AVX-512 kernels for the HFP4 family with f32 activations: HFP4G32, MFP4G32 and
//! MFP4G32P (the rotated formats' activations arrive FWHT-rotated, once per matmul call, from
//! `act.rs`; the kernels see plain f32 columns). This file holds the shared part (dispatch,
//! length checks, block-factor tables, row scales) and the AVX2 body; the AVX-512 body is in
//! `hfp4_512.rs`.
//!
//! Row layout (from the core's `format::hipfire`): a 16-byte header (f16 row scale at 0), then
//! 17-byte blocks (scale byte, 16 bytes of E2M1 nibbles, low nibble = even element).
//!
//! Arithmetic (both ISAs): per row and block, the scale byte `e` selects a precomputed table
//! `t = E2M1 * f` (`f` = 2^(e - 127), or the E4M3 value for MFP4G32P; built once per process,
//! exact: a power of two, or a 2-bit by 4-bit significand product); each
//! nibble then selects its scaled weight from `t` with one `vpermps` (the AVX-512 table has
//! all 16 signed values; the AVX2 one has the 8 magnitudes and the sign bit is XORed in), and
//! the weights go into per-lane f32 accumulators with FMA (the product is exact inside the
//! FMA, one rounding per term and lane). At the end of the row the lanes are summed (a fixed
//! tree) and multiplied by the row scale. Each decoded block serves every column of the tile
//! (n = 2..16) from registers; tiles run over L1-sized row x block tiles (`tile_rows`,
//! `slice_blocks`) with activations staged slice-major (`stage`).
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
use std::cell::Cell;
use std::ops::Range;
use std::sync::OnceLock;

use lowbit_core::format::hipfire::block::block_factor;
use lowbit_core::format::hipfire::header::RowHeader;
use lowbit_core::scalar::E2M1_VALUES;
use lowbit_core::{Error, FormatId};

use super::hfp4_512;
use crate::act::Acts;
use crate::kernels::Kernel;

use crate::shape::check_hfp4;
pub(super) use crate::shape::{HFP4_BLOCK as BLOCK, HFP4_HEADER as HEADER};

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

/// The 16 signed E2M1 values scaled by the block factor of scale byte `e`, for every `e`
/// (AVX-512: one `vpermps` on a row reads a block's weights straight from entry `e`).
#[repr(C, align(64))]
pub(super) struct Lut16(pub [[f32; 16]; 256]);

/// The 8 E2M1 magnitudes scaled by the block factor of scale byte `e`, with `idx << 28` XORed
/// into entry `idx` (AVX2: see `body_avx2`).
#[repr(C, align(32))]
pub(super) struct Lut8(pub [[f32; 8]; 256]);

/// The block factor of every scale byte of `format` through the core's `block_factor`
/// (validated at upload; a byte the core refuses reads as 0 here, which uploaded matrices
/// never reach). `E2M1 * factor` is exact: a power of two, or (E4M3) a product of 2- and
/// 4-bit significands that stays above 2^-149.
fn factors(format: FormatId) -> [f32; 256] {
    core::array::from_fn(|b| block_factor(format, b as u8).unwrap_or(0.0))
}

/// HFP4G32 and MFP4G32 share the UE8M0 block exponent; MFP4G32P has E4M3 block scales.
fn table_format(format: FormatId) -> FormatId {
    match format {
        FormatId::Mfp4G32P => FormatId::Mfp4G32P,
        _ => FormatId::Hfp4G32,
    }
}

/// The AVX-512 table of `format`, built once per process.
pub(super) fn lut16(format: FormatId) -> &'static Lut16 {
    static UE8M0: OnceLock<Box<Lut16>> = OnceLock::new();
    static E4M3: OnceLock<Box<Lut16>> = OnceLock::new();
    let f = table_format(format);
    let cell = if f == FormatId::Mfp4G32P { &E4M3 } else { &UE8M0 };
    cell.get_or_init(|| {
        let fac = factors(f);
        Box::new(Lut16(core::array::from_fn(|e| E2M1_VALUES.map(|v| v * fac[e]))))
    })
}

/// The AVX2 table of `format`, built once per process.
pub(super) fn lut8(format: FormatId) -> &'static Lut8 {
    static UE8M0: OnceLock<Box<Lut8>> = OnceLock::new();
    static E4M3: OnceLock<Box<Lut8>> = OnceLock::new();
    let f = table_format(format);
    let cell = if f == FormatId::Mfp4G32P { &E4M3 } else { &UE8M0 };
    cell.get_or_init(|| {
        let fac = factors(f);
        Box::new(Lut8(core::array::from_fn(|e| {
            core::array::from_fn(|i| {
                f32::from_bits((E2M1_VALUES[i] * fac[e]).to_bits() ^ ((i as u32) << 28))
            })
        })))
    })
}

/// The row scale (f16 at byte 0 of the header) of the row starting at `row`.
pub(super) fn row_scale(row: &[u8]) -> f32 {
    RowHeader::read(row).row_scale().to_f32()
}

/// What a kernel body needs besides the weights and the table: blocks per row, the
/// activation columns of this pass (`x[c * k..]` for tile column `c`), the output stride
/// (columns of the whole tile) and the output column of the pass's first column.
pub(super) struct Pass<'a> {
    /// Blocks per row.
    pub nb: usize,
    /// The pass's activation columns, `k = 32 nb` values each, staged slice-major (see
    /// [`stage`]) with slices of `sb` blocks.
    pub x: &'a [f32],
    /// Blocks per activation slice ([`slice_blocks`]).
    pub sb: usize,
    /// Columns in this pass (1..=16; the body's column count `C` may be larger: the extra
    /// columns repeat the last one and are not stored).
    pub ncp: usize,
    /// Output stride: columns of the whole tile.
    pub nc: usize,
    /// Output column of the pass's first column.
    pub j0: usize,
}

/// Blocks per activation slice for `ncp` columns: all of them for one column; else as many
/// as keep the slice (`ncp * sb * 128` bytes) within about 12 KiB of L1, so that it is read
/// from L2 once per tile of rows instead of once per row group.
pub(super) fn slice_blocks(ncp: usize, nb: usize) -> usize {
    if ncp == 1 {
        nb.max(1)
    } else {
        (TILE_BYTES / (ncp * 128)).max(1)
    }
}

/// Rows per cache tile of a `c`-column body with `r`-row groups and `vb`-byte vectors: for
/// `c > 1`, as many (a multiple of `r`) as keep the accumulators (`c * rows` vectors) within
/// about 12 KiB of L1; one column: `r`. Always `rows * c <= ACC_VECS` (given `r * c <=
/// ACC_VECS`, true of every body).
pub(super) fn tile_rows(c: usize, r: usize, vb: usize) -> usize {
    if c == 1 {
        return r;
    }
    let rows = (TILE_BYTES / (c * vb)).min(ACC_VECS / c);
    (rows / r).max(1) * r
}

/// Copies `ncp` activation columns of `k` values (`src`) into `dst`, slice-major: for each
/// slice of `sb` blocks (the last may be shorter, `len` blocks), the slice of column 0, then
/// of column 1, ...; slice `b0` starts at `32 b0 ncp` and column `j` in it at `32 j len`.
/// `blk` copies one column's slice (plain or rearranged within each 32-value block).
fn stage(
    src: &[f32],
    k: usize,
    ncp: usize,
    sb: usize,
    dst: &mut Vec<f32>,
    mut blk: impl FnMut(&[f32], &mut [f32]),
) {
    let nb = k / 32;
    dst.resize(ncp * k, 0.0);
    let mut off = 0;
    let mut b0 = 0;
    while b0 < nb {
        let len = sb.min(nb - b0);
        for j in 0..ncp {
            let s = &src[j * k + 32 * b0..][..32 * len];
            blk(s, &mut dst[off..off + 32 * len]);
            off += 32 * len;
        }
        b0 += len;
    }
}

/// L1 bytes for the activation slice, and for the accumulators, of a tile.
const TILE_BYTES: usize = 12288;

/// Accumulator vectors of the tile buffer (`rs * c` of them in use).
pub(super) const ACC_VECS: usize = 256;

thread_local! {
    /// The staged activation columns of the current call (reused across calls).
    static XBUF: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

fn run_avx2(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (x, nb) = check_hfp4(format, w, rb, acts, &cols, out)?;
    let k = acts.k;
    let lut = lut8(format);
    let nc = cols.len();
    let xt = &x[cols.start * k..cols.end * k];
    if nc == 1 {
        let pass = Pass { nb, x: xt, sb: nb, ncp: 1, nc: 1, j0: 0 };
        // SAFETY: reachable only through `kernel_avx2`, which `KernelTable::new` reaches only
        // for `Isa::Avx2` after `Isa::Avx2.available()` detected AVX2, FMA and F16C; `check`
        // gave whole rows of `rb = 16 + 17 nb` bytes, one column of `32 nb` values in
        // `pass.x` (one slice) and `out.len() == rows`.
        unsafe { entry_avx2(w, rb, lut, &pass, out) };
        return Ok(());
    }
    let mut buf = XBUF.take();
    let mut j0 = 0;
    while j0 < nc {
        // AVX2 has 16 registers: at most 8 columns per pass over the rows.
        let ncp = (nc - j0).min(8);
        let sb = slice_blocks(ncp, nb);
        stage(&xt[j0 * k..(j0 + ncp) * k], k, ncp, sb, &mut buf, |s, d| d.copy_from_slice(s));
        let pass = Pass { nb, x: &buf, sb, ncp, nc, j0 };
        // SAFETY: as above, with `ncp` columns staged by `stage` in `pass.x` and
        // `out.len() == rows * nc`, `j0 + ncp <= nc`.
        unsafe { entry_avx2(w, rb, lut, &pass, out) };
        j0 += ncp;
    }
    XBUF.set(buf);
    Ok(())
}

pub(super) fn run_avx512(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (x, nb) = check_hfp4(format, w, rb, acts, &cols, out)?;
    let k = acts.k;
    let nc = cols.len();
    let xt = &x[cols.start * k..cols.end * k];
    let sb = slice_blocks(nc, nb);
    let mut buf = XBUF.take();
    stage(xt, k, nc, sb, &mut buf, |s, d| {
        // SAFETY: reachable only through `kernel_avx512`, which `KernelTable::new` reaches
        // only for `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL,
        // AVX2, FMA and F16C; `stage` passes equal lengths, multiples of 32.
        unsafe { hfp4_512::deinterleave(s, d) }
    });
    let pass = Pass { nb, x: &buf, sb, ncp: nc, nc, j0: 0 };
    // SAFETY: as above; `check` also gave whole rows of `rb = 16 + 17 nb` bytes and
    // `out.len() == rows * nc` (1..=16 columns); `pass.x` holds the `nc` columns staged by
    // `stage` (de-interleaved).
    unsafe { hfp4_512::entry(w, rb, lut16(format), &pass, out) };
    XBUF.set(buf);
    Ok(())
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn entry_avx2(w: &[u8], rb: usize, lut: &Lut8, p: &Pass, out: &mut [f32]) {
    // SAFETY: the caller guarantees the features and the `Pass` invariants.
    unsafe {
        match p.ncp {
            1 => body_avx2::<4, 1>(w, rb, lut, p, out),
            2 => body_avx2::<3, 2>(w, rb, lut, p, out),
            3 => body_avx2::<2, 3>(w, rb, lut, p, out),
            4 => body_avx2::<2, 4>(w, rb, lut, p, out),
            _ => body_avx2::<1, 8>(w, rb, lut, p, out),
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

/// Bytes ahead along a row that the one-column bodies prefetch.
pub(super) const PREFETCH: usize = 1024;

/// The AVX2 body: cache tiles of `tile_shape` rows x blocks, rows in groups of `R` (then
/// single rows), `C` columns (the pass's `ncp <= C` real ones).
///
/// Per row and block: `t = lut[e]` (magnitudes times the block factor, lane `idx` XORed with
/// `idx << 28`); for each quarter (8 elements, nibble bytes `4q..4q+4` broadcast as one
/// dword), `vpsrlvd` by `4 j` puts element `j`'s code in the low bits of lane `j` (natural
/// element order); `vpermps` picks `t[code & 7]`, and XOR with `code << 28` cancels the
/// `idx << 28` and sets the sign bit from bit 3 of the code.
///
/// # Safety
/// AVX2 and FMA are available; `w` holds whole rows of `rb = 16 + 17 p.nb` bytes; `p.x` holds
/// `p.ncp` (1..=C) columns of `32 p.nb` values; `out.len() == rows * p.nc`, `p.j0 + p.ncp <=
/// p.nc`.
#[inline(always)]
unsafe fn body_avx2<const R: usize, const C: usize>(
    w: &[u8],
    rb: usize,
    lut: &Lut8,
    p: &Pass,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let rs = tile_rows(C, R, 32);
    // Prefetch distance: along the row (one column), or the same blocks `2 R` rows down
    // (tiles visit the rows of a slice before the next slice).
    let pf = if C == 1 { PREFETCH } else { 2 * R * rb };
    // SAFETY: weight reads: the scale byte at `16 + 17 b` and the dwords at `16 + 17 b + 1 +
    // 4 q` (q < 4) of rows `< nrows`, inside `w`; activation reads: `x[c k + 32 b + 8 q..][..8]`
    // for `c < ncp`; `buf` indices `< rs * C <= ACC_VECS`; prefetches never fault; register
    // operations need AVX2/FMA (caller).
    unsafe {
        let sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        let mut buf = [_mm256_setzero_ps(); ACC_VECS];
        let mut g0 = 0;
        while g0 < nrows {
            let gr = rs.min(nrows - g0);
            buf[..gr * C].fill(_mm256_setzero_ps());
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
                            let mut acc: [[__m256; C]; $rr] = core::array::from_fn(|i| {
                                core::array::from_fn(|j| buf[(r + i) * C + j])
                            });
                            for b in b0..b1 {
                                let mut t = [_mm256_setzero_ps(); $rr];
                                for i in 0..$rr {
                                    let blk = rp[i].add(b * BLOCK);
                                    _mm_prefetch::<_MM_HINT_T0>(blk.wrapping_add(pf).cast());
                                    t[i] = _mm256_load_ps(lut.0[usize::from(*blk)].as_ptr());
                                }
                                for q in 0..4 {
                                    let mut wv = [_mm256_setzero_ps(); $rr];
                                    for i in 0..$rr {
                                        let src = rp[i].add(b * BLOCK + 1 + 4 * q);
                                        let d =
                                            _mm256_set1_epi32(src.cast::<i32>().read_unaligned());
                                        let v = _mm256_srlv_epi32(d, sh);
                                        let m =
                                            _mm256_castps_si256(_mm256_permutevar8x32_ps(t[i], v));
                                        let sgn = _mm256_slli_epi32::<28>(v);
                                        wv[i] = _mm256_castsi256_ps(_mm256_xor_si256(m, sgn));
                                    }
                                    for j in 0..C {
                                        let xv = _mm256_loadu_ps(xc[j].add(32 * (b - b0) + 8 * q));
                                        for i in 0..$rr {
                                            acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
                                        }
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
                    out[row * p.nc + p.j0 + j] = hsum8(buf[i * C + j]) * scale;
                }
            }
            g0 += gr;
        }
    }
}

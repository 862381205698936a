//! The prefill GEMM (n > 16 columns) under AVX-512 VNNI for weight formats whose 32-element
//! blocks are `d * value` with small integer values, against Q8_0 activations: Q4_0, Q5_0,
//! Q8_0, IQ4_NL and MXFP4.
//!
//! Why a separate path. The tile kernels (`z512`, `avx512`) decode a weight block and then, per
//! column, reduce it against the column's activations and scale the block's integer sum: a
//! `vcvtdq2ps` and two float operations for every 32 or 64 multiply-adds, so on many columns
//! they run at about a quarter of the `vpdpbusd` rate. Here the 16 lanes of a register are 16
//! *columns* instead:
//!
//! * The activations of a call are rearranged once into a *panel*: per group of 16 columns and
//!   per block, the 32 quants as 8 vectors of 16 columns x 4 bytes, then a vector of the
//!   columns' integer corrections (`-(sum of the block's quants) << s`) and a vector of their
//!   scales `d_a` ([`Panel`]).
//! * A row is unpacked once per call into unsigned codes `value + 2^s` (one byte per element)
//!   and one f32 scale per block ([`GemmFormat::unpack`]).
//! * Per block, for 4 rows x 2 column groups: the integer accumulator starts at the correction
//!   and takes 8 `vpdpbusd` (code quad of the row broadcast to all lanes, times the columns'
//!   quads), which leaves the exact `sum(value * q_a)` of each column; then one `vcvtdq2ps`
//!   and one FMA with `d_w * d_a` per 16 columns: 32 multiply-adds per lane per 11 operations.
//!
//! Arithmetic and bound. Every lane integer is exact: `|sum((value + 2^s) * q_a)| <= 32 * 255 *
//! 128 < 2^21` and it converts to f32 exactly. Output `(r, j)` is, in block order,
//! `acc = fma(sumi_b, d_w[b] * d_a[b], acc)` from `acc = 0`: each term carries one product
//! rounding and at most `K / 32` accumulation roundings, so `|y - y_exact| <= c * K * 2^-24 *
//! sum|t|` with **c = 1** (DESIGN.md). Not bit-identical to the tile kernels (their lanes
//! split blocks differently), so `tests/prefill.rs` checks these formats against the
//! reference bound instead of against the tiles.
//!
//! Layout sources: ggml `block_q4_0`, `block_q5_0`, `block_q8_0`, `block_iq4_nl`,
//! `block_mxfp4` (ggml/src/ggml-common.h) and their value tables, as in the core.
//!
//! What must not live here: threading and the row split (`crate::matmul`), the tile kernels.

#![allow(clippy::incompatible_msrv)]
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use half::f16;
use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::iq::tables::KVALUES_IQ4NL;
use lowbit_core::format::ggml::mxfp4::KVALUES_MXFP4;
use lowbit_core::scalar::try_ue8m0_to_f32_half;
use lowbit_core::{Error, FormatId};

use crate::act::{ActData, Acts, Layout};
use crate::kernels::GemmKernel;

/// Rows per register block of the micro-kernel.
const R: usize = 4;
/// Columns per lane group.
const LANES: usize = 16;
/// 64-byte vectors per (column group, block) in the panel: 8 quant quads, correction, scale.
const REC: usize = 10;

/// One 64-byte, 64-byte-aligned vector of the panel.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct V64([u8; 64]);

/// The activations of one call in the GEMM's column-interleaved layout (see the module doc),
/// for one weight format's code offset `2^shift`.
pub(crate) struct Panel {
    recs: Vec<V64>,
    /// Blocks per column.
    nb: usize,
    /// Columns.
    n: usize,
    shift: u32,
}

/// How a weight format unpacks for the GEMM.
struct GemmFormat {
    /// Bytes per 32-element block.
    bb: usize,
    /// Codes are `value + 2^shift`, in 0..=255.
    shift: u32,
    /// Unpacks whole rows of validated blocks into codes (32 per block) and block scales.
    unpack: UnpackFn,
}

/// `(row bytes, codes out, scales out)`; the caller guarantees the lengths (`nb` blocks).
type UnpackFn = unsafe fn(&[u8], &mut [u8], &mut [f32]);

/// One format's block unpacking, run by [`unpack_row`].
trait Unpack {
    const BB: usize;
    const SHIFT: u32;
    /// Writes the 32 codes of the block at `p` to `out` and returns its scale.
    ///
    /// # Safety
    /// `p .. p + BB` is readable, `out .. out + 32` writable; SSE4.1 is available.
    unsafe fn block(p: *const u8, out: *mut u8) -> f32;
}

fn gemm_format(format: FormatId) -> Option<GemmFormat> {
    fn g<U: Unpack>() -> Option<GemmFormat> {
        Some(GemmFormat { bb: U::BB, shift: U::SHIFT, unpack: unpack_row::<U> })
    }
    match format {
        FormatId::Q4_0 => g::<Q4_0>(),
        FormatId::Q5_0 => g::<Q5_0>(),
        FormatId::Q8_0 => g::<Q8_0>(),
        FormatId::Iq4Nl => g::<Iq4Nl>(),
        FormatId::Mxfp4 => g::<Mxfp4>(),
        _ => None,
    }
}

/// The GEMM for `format`, if this module runs it (the caller checks for AVX-512 VNNI).
pub(crate) fn kernel(format: FormatId) -> Option<GemmKernel> {
    gemm_format(format)?;
    Some(GemmKernel { name: "avx512-vnni-gemm", panel: build_panel, f: run })
}

/// Every block of `row` into `codes` and `scales`.
///
/// # Safety
/// AVX-512 F/BW/VL are available; `row` holds `nb` whole blocks of `U::BB` bytes, `codes` at
/// least `32 * nb` bytes and `scales` at least `nb` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,sse4.1")]
unsafe fn unpack_row<U: Unpack>(row: &[u8], codes: &mut [u8], scales: &mut [f32]) {
    let nb = row.len() / U::BB;
    for b in 0..nb {
        // SAFETY: block `b < nb` lies inside `row`, its 32 codes inside `codes` (caller).
        scales[b] =
            unsafe { U::block(row.as_ptr().add(b * U::BB), codes.as_mut_ptr().add(32 * b)) };
    }
}

fn f16_at(p: *const u8) -> f32 {
    // SAFETY: callers pass a pointer to 2 readable bytes.
    f16::from_bits(unsafe { std::ptr::read_unaligned(p.cast::<u16>()) }).to_f32()
}

/// The 16 nibble bytes at `p` as (low nibbles, high nibbles).
///
/// # Safety
/// `p .. p + 16` is readable; SSE2 is available.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> (__m128i, __m128i) {
    // SAFETY: one 16-byte read (caller); register-only operations.
    unsafe {
        let x = _mm_loadu_si128(p.cast());
        let m = _mm_set1_epi8(0x0F);
        (_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16::<4>(x), m))
    }
}

/// Stores `lo` to `out` and `hi` to `out + 16`.
///
/// # Safety
/// `out .. out + 32` is writable; SSE2 is available.
#[inline(always)]
unsafe fn store2(out: *mut u8, lo: __m128i, hi: __m128i) {
    // SAFETY: two 16-byte writes (caller).
    unsafe {
        _mm_storeu_si128(out.cast(), lo);
        _mm_storeu_si128(out.add(16).cast(), hi);
    }
}

/// Q4_0: `d` f16, 16 bytes of nibbles (element `i` low nibble of byte `i`, element `16 + i`
/// high nibble); value `q - 8`, so the stored nibble is the code for `2^3`.
struct Q4_0;
impl Unpack for Q4_0 {
    const BB: usize = 18;
    const SHIFT: u32 = 3;
    #[inline(always)]
    unsafe fn block(p: *const u8, out: *mut u8) -> f32 {
        // SAFETY: reads inside the block, writes the 32 codes (caller).
        unsafe {
            let (lo, hi) = nibbles(p.add(2));
            store2(out, lo, hi);
        }
        f16_at(p)
    }
}

/// Q5_0: `d` f16, `qh` u32 (bit `i` = bit 4 of element `i`), 16 nibble bytes; value `q - 16`.
struct Q5_0;
impl Unpack for Q5_0 {
    const BB: usize = 22;
    const SHIFT: u32 = 4;
    #[inline(always)]
    unsafe fn block(p: *const u8, out: *mut u8) -> f32 {
        // SAFETY: reads inside the block, writes the 32 codes (caller); AVX-512 BW/VL are
        // available ([`unpack_row`]).
        unsafe {
            let qh = std::ptr::read_unaligned(p.add(2).cast::<u32>());
            let (lo, hi) = nibbles(p.add(6));
            let b4 = _mm_set1_epi8(0x10);
            let lo = _mm_or_si128(lo, _mm_maskz_mov_epi8(qh as u16, b4));
            let hi = _mm_or_si128(hi, _mm_maskz_mov_epi8((qh >> 16) as u16, b4));
            store2(out, lo, hi);
        }
        f16_at(p)
    }
}

/// Q8_0: `d` f16, 32 signed quants; code `q + 128`.
struct Q8_0;
impl Unpack for Q8_0 {
    const BB: usize = 34;
    const SHIFT: u32 = 7;
    #[inline(always)]
    unsafe fn block(p: *const u8, out: *mut u8) -> f32 {
        // SAFETY: reads inside the block, writes the 32 codes (caller).
        unsafe {
            let flip = _mm_set1_epi8(-128);
            let lo = _mm_xor_si128(_mm_loadu_si128(p.add(2).cast()), flip);
            let hi = _mm_xor_si128(_mm_loadu_si128(p.add(18).cast()), flip);
            store2(out, lo, hi);
        }
        f16_at(p)
    }
}

/// A 16-entry table of signed values, as codes `value + off`, for `pshufb`.
///
/// # Safety
/// SSE2 is available.
#[inline(always)]
unsafe fn table(values: &[i8; 16], off: i8) -> __m128i {
    let mut t = [0u8; 16];
    for (d, &v) in t.iter_mut().zip(values) {
        *d = v.wrapping_add(off) as u8;
    }
    // SAFETY: a 16-byte read of a local array.
    unsafe { _mm_loadu_si128(t.as_ptr().cast()) }
}

/// IQ4_NL: `d` f16, nibbles as Q4_0 indexing the signed table; code `value + 128`.
struct Iq4Nl;
impl Unpack for Iq4Nl {
    const BB: usize = 18;
    const SHIFT: u32 = 7;
    #[inline(always)]
    unsafe fn block(p: *const u8, out: *mut u8) -> f32 {
        // SAFETY: reads inside the block, writes the 32 codes (caller); SSSE3 (`pshufb`) is
        // implied by the features of [`unpack_row`].
        unsafe {
            let t = table(&KVALUES_IQ4NL, -128);
            let (lo, hi) = nibbles(p.add(2));
            store2(out, _mm_shuffle_epi8(t, lo), _mm_shuffle_epi8(t, hi));
        }
        f16_at(p)
    }
}

/// MXFP4: `e` (UE8M0, scale `2^(e - 128)`), nibbles as Q4_0 indexing the doubled E2M1 table
/// (-12..=12); code `value + 16`. Blocks were validated at upload (`e != 0xFF`).
struct Mxfp4;
impl Unpack for Mxfp4 {
    const BB: usize = 17;
    const SHIFT: u32 = 4;
    #[inline(always)]
    unsafe fn block(p: *const u8, out: *mut u8) -> f32 {
        // SAFETY: as [`Iq4Nl::block`].
        unsafe {
            let t = table(&KVALUES_MXFP4, 16);
            let (lo, hi) = nibbles(p.add(1));
            store2(out, _mm_shuffle_epi8(t, lo), _mm_shuffle_epi8(t, hi));
            try_ue8m0_to_f32_half(*p).unwrap_or(0.0)
        }
    }
}

/// Builds the panel of every column of `acts` for `format`.
fn build_panel(format: FormatId, acts: &Acts) -> Result<Layout, Error> {
    let gf = gemm_format(format)
        .ok_or(Error::Unsupported { format, op: "the AVX-512 VNNI prefill GEMM" })?;
    let ActData::Q8_0 { blocks, d } = &acts.data else {
        return Err(Error::WrongActivation {
            format,
            expected: format.info().activation,
            got: acts.row(0).format(),
        });
    };
    let nb = acts.k / 32;
    let n = acts.n;
    if blocks.len() != n * nb || d.len() != blocks.len() {
        return Err(Error::Length {
            format,
            buffer: Buffer::Activations,
            got: blocks.len(),
            expected: n * nb,
        });
    }
    let groups = n.div_ceil(LANES);
    let mut recs = vec![V64([0; 64]); groups * nb * REC];
    for j in 0..n {
        let (g, lane) = (j / LANES, j % LANES);
        for b in 0..nb {
            let blk = &blocks[j * nb + b];
            let rec = &mut recs[(g * nb + b) * REC..][..REC];
            for q in 0..8 {
                for e in 0..4 {
                    rec[q].0[4 * lane + e] = blk.qs[4 * q + e] as u8;
                }
            }
            let sum: i32 = blk.qs.iter().map(|&v| i32::from(v)).sum();
            rec[8].0[4 * lane..4 * lane + 4].copy_from_slice(&(-(sum << gf.shift)).to_le_bytes());
            rec[9].0[4 * lane..4 * lane + 4].copy_from_slice(&d[j * nb + b].to_le_bytes());
        }
    }
    let panel = Panel { recs, nb, n, shift: gf.shift };
    Ok(Layout(std::sync::Arc::new(panel)))
}

/// Rows `w` (whole rows of `rb` bytes) against every column of the panel; `out` is
/// column-major `n x rows` (`out[j * rows + r]`).
fn run(
    format: FormatId,
    w: &[u8],
    rb: usize,
    layout: &Layout,
    out: &mut [f32],
) -> Result<(), Error> {
    let gf = gemm_format(format)
        .ok_or(Error::Unsupported { format, op: "the AVX-512 VNNI prefill GEMM" })?;
    let Some(p) = layout.0.downcast_ref::<Panel>() else {
        return Err(Error::Unsupported { format, op: "a GEMM panel built for another kernel" });
    };
    let nb = p.nb;
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let ok = rb == nb * gf.bb
        && p.shift == gf.shift
        && w.len() == rows * rb
        && out.len() == rows * p.n
        && p.recs.len() == p.n.div_ceil(LANES) * nb * REC;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Encoded,
            got: w.len(),
            expected: rows * rb,
        });
    }
    let k = nb * 32;
    let mut codes = vec![0u8; R * k];
    let mut scales = vec![0f32; R * nb];
    let mut r0 = 0;
    while r0 < rows {
        let here = (rows - r0).min(R);
        for i in 0..R {
            // Rows past the end repeat the last one (results discarded).
            let row = &w[(r0 + i.min(here - 1)) * rb..][..rb];
            // SAFETY: as for `tile` below (the same detection); `row` is `nb` whole blocks,
            // the code and scale slices hold `32 * nb` and `nb` entries.
            unsafe { (gf.unpack)(row, &mut codes[i * k..][..k], &mut scales[i * nb..][..nb]) };
        }
        let groups = p.n.div_ceil(LANES);
        let mut g = 0;
        while g < groups {
            let cg = (groups - g).min(2);
            let mut acc = [[0f32; LANES]; 2 * R];
            // SAFETY: reachable only through `kernel`, which `x86::extras` offers only for
            // `Isa::Avx512Vnni` after `available()` detected AVX-512 F/BW/VL and VNNI; `codes`
            // holds `R * k` bytes, `scales` `R * nb` values, and the panel's records of groups
            // `g .. g + cg` exist (`g + cg <= groups`, checked length above).
            unsafe {
                let recs = p.recs.as_ptr().add(g * nb * REC);
                if cg == 2 {
                    tile::<2>(&codes, &scales, recs, nb, &mut acc);
                } else {
                    tile::<1>(&codes, &scales, recs, nb, &mut acc);
                }
            }
            for c in 0..cg {
                for lane in 0..LANES {
                    let j = (g + c) * LANES + lane;
                    if j >= p.n {
                        break;
                    }
                    for i in 0..here {
                        out[j * rows + r0 + i] = acc[c * R + i][lane];
                    }
                }
            }
            g += cg;
        }
        r0 += R;
    }
    Ok(())
}

/// `R` rows (codes and scales) against `CG` column groups whose records start at `recs`;
/// `acc[c * R + i]` receives row `i` x group `c`'s 16 columns.
///
/// # Safety
/// AVX-512 F/BW/VL and VNNI are available; `codes` holds `R * 32 * nb` bytes, `scales`
/// `R * nb` values and `recs` `CG * nb * REC` vectors.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<const CG: usize>(
    codes: &[u8],
    scales: &[f32],
    recs: *const V64,
    nb: usize,
    acc: &mut [[f32; LANES]; 2 * R],
) {
    let k = 32 * nb;
    // SAFETY: every read is inside the buffers the caller sized (block `b < nb`, quad `q < 8`,
    // group `c < CG`, row `i < R`).
    unsafe {
        let mut facc = [[_mm512_setzero_ps(); CG]; R];
        let cp = codes.as_ptr();
        for b in 0..nb {
            let mut iacc = [[_mm512_setzero_si512(); CG]; R];
            let mut rec = [recs; CG];
            for c in 0..CG {
                rec[c] = recs.add((c * nb + b) * REC);
                let corr = _mm512_load_si512(rec[c].add(8).cast());
                for i in 0..R {
                    iacc[i][c] = corr;
                }
            }
            for q in 0..8 {
                let mut av = [_mm512_setzero_si512(); CG];
                for c in 0..CG {
                    av[c] = _mm512_load_si512(rec[c].add(q).cast());
                }
                for i in 0..R {
                    let wq = std::ptr::read_unaligned(cp.add(i * k + 32 * b + 4 * q).cast::<i32>());
                    let wv = _mm512_set1_epi32(wq);
                    for c in 0..CG {
                        iacc[i][c] = _mm512_dpbusd_epi32(iacc[i][c], wv, av[c]);
                    }
                }
            }
            for c in 0..CG {
                let da = _mm512_load_ps(rec[c].add(9).cast());
                for i in 0..R {
                    let dw = _mm512_set1_ps(*scales.get_unchecked(i * nb + b));
                    facc[i][c] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(iacc[i][c]),
                        _mm512_mul_ps(dw, da),
                        facc[i][c],
                    );
                }
            }
        }
        for c in 0..CG {
            for i in 0..R {
                _mm512_storeu_ps(acc[c * R + i].as_mut_ptr(), facc[i][c]);
            }
        }
    }
}

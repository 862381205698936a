//! AVX-512 (F/BW/VL) kernels for the older ggml formats with a minimum or a fifth bit: Q4_1
//! and Q5_1 (against Q8_1 activations) and Q5_0 (against Q8_0 activations); also Q8_1
//! weights (against Q8_1 activations).
//!
//! Layout (as `super::z512`'s Q4_0). Rows are read in groups of 4 blocks (128 elements). A
//! group decodes into two registers of unsigned codes, one 128-bit lane per block: `lo`
//! holds elements 0..16 of each block (low nibbles), `hi` elements 16..32 (high nibbles);
//! for Q5_x the fifth bit is added as 16 under a 64-bit byte mask built from the four `qh`
//! words. The activations of the tile are rearranged once per kernel call into per-column
//! records of 5 vectors per group: `[a_lo, a_hi, off * asum, d_a, s_a]` where lane
//! `4t + u` of `asum` is the sum of block `t`'s activations at `4u..4u+4` and `16+4u..20+4u`
//! (exactly the activations that meet i32 lane `4t + u`), `d_a` is block `t`'s scale in
//! lanes `4t..4t+4`, and `s_a` holds the Q8_1 block's stored `s = f16(d_a * sum q)` in lane
//! `4t` only (zero elsewhere, and zero for Q8_0 activations). The records of all columns are
//! built once per matmul call ([`extras`]); a kernel call without them builds its own.
//!
//! Per column and group: `i = madd(maddubs(lo, a_lo) + maddubs(hi, a_hi), 1) - off * asum`
//! (exact: i16 lanes <= 2 * 2 * 31 * 128 < 2^15, `off` = 16 for Q5_0, 128 for Q8_1, else 0;
//! Q8_1 weights are flipped to `q + 128 = l + 16 h`, two nibble planes each for `lo` and
//! `hi`, and the `h` plane's i16 pairs are summed by `madd(.., 16)`), then
//! `acc = fma(cvt(i), d_w * d_a, acc)` and, for formats with a minimum,
//! `acc = fma(m_w, s_a, acc)`: the reference's expression per block
//! (`(d_w * d_a) * sumi + m_w * s`, ggml `ggml_vec_dot_q4_1_q8_1`), with the block sum split
//! over 4 lanes.
//!
//! Bound. Every i32 is exact and converts exactly (|i| < 2^24). Lane `l` receives per group
//! one rounded scale product and two FMA roundings; at the end the 16 lanes are summed by a
//! fixed tree (`lo256 + hi256`, then [`hsum_ps`]): each term carries at most
//! `3 + 2 * ceil(K / 128) + 4 <= K` roundings, so `|y - y_exact| <= c * K * 2^-24 * sum|t|`
//! with **c = 1**, where `y_exact` uses the stored `s` as the reference does.
//!
//! Q4_1 rows are repacked at upload ([`repack_q4_1`]): each whole group's 8 f16 scales and
//! minima come first, then its 64 code bytes, so a group decodes from one 128-bit and one
//! 512-bit load instead of eight 2-byte reads and four 16-byte inserts (the decode, not the
//! arithmetic, bounded this kernel). The arithmetic and its order are unchanged.
//!
//! Block layouts (ggml/src/ggml-common.h `block_q4_1`, `block_q5_0`, `block_q5_1`, as in the
//! core): Q4_1 `d, m` (f16), 16 nibble bytes (20 bytes); Q5_0 `d`, `qh` (u32, bit `j` = bit 4
//! of element `j`), 16 nibble bytes (22); Q5_1 `d, m, qh`, 16 nibble bytes (24); Q8_1 `d, s`
//! (f16; `s` unused by the weight side of the dot product, as in the core's reference), 32
//! signed bytes (36).
//!
//! What must not live here: other formats, the Q8_0/Q4_0 kernels, threading.

#![allow(clippy::incompatible_msrv)]
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::{BlockQ8_0, BlockQ8_1};
use lowbit_core::{Error, FormatId};

use super::z512::hsum16;
use crate::act::{ActData, Acts, Layout};
use crate::isa::Isa;
use crate::kernels::{Extras, Kernel, MAX_TILE};

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q4_1 => Some(Kernel { name: "avx512-q4_1", f: run::<Q4_1, false> }),
        FormatId::Q5_0 => Some(Kernel { name: "avx512-q5_0", f: run::<Q5_0, false> }),
        FormatId::Q5_1 => Some(Kernel { name: "avx512-q5_1", f: run::<Q5_1, false> }),
        FormatId::Q8_1 => Some(Kernel { name: "avx512-q8_1", f: run::<Q8_1, false> }),
        _ => None,
    }
}

/// The kernel for `format` with AVX-512 VNNI (`Isa::Avx512Vnni` only): each group's
/// `vpmaddubsw` pairs and `vpmaddwd` by ones become `vpdpbusd`, the same exact i32 lane sums.
pub(crate) fn kernel_vnni(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q4_1 => Some(Kernel { name: "avx512-vnni-q4_1", f: run::<Q4_1, true> }),
        FormatId::Q5_0 => Some(Kernel { name: "avx512-vnni-q5_0", f: run::<Q5_0, true> }),
        FormatId::Q5_1 => Some(Kernel { name: "avx512-vnni-q5_1", f: run::<Q5_1, true> }),
        _ => None,
    }
}

/// The once-per-call activation hook of `format`'s kernel (AVX-512 only): the records of
/// every column, so row chunks do not rebuild them.
pub(crate) fn extras(isa: Isa, format: FormatId) -> Extras {
    let prep: crate::kernels::PrepFn = match (isa, format) {
        (Isa::Avx512, FormatId::Q4_1) => prep_call::<Q4_1>,
        (Isa::Avx512, FormatId::Q5_0) => prep_call::<Q5_0>,
        (Isa::Avx512, FormatId::Q5_1) => prep_call::<Q5_1>,
        (Isa::Avx512, FormatId::Q8_1) => prep_call::<Q8_1>,
        _ => return Extras::default(),
    };
    let repack: Option<crate::kernels::RepackFn> =
        if format == FormatId::Q4_1 { Some(repack_q4_1) } else { None };
    Extras { repack, prep: Some(prep), gemm: None }
}

/// Bytes of one Q4_1 group (4 blocks), canonical and packed alike.
const Q4_1_GROUP: usize = 80;

/// Rewrites one validated canonical Q4_1 row into the packed layout the AVX-512 kernel reads:
/// every whole group of 4 blocks `(d_t, m_t, qs_t)` becomes `d_0..d_3, m_0..m_3` (8 f16, 16
/// bytes) followed by `qs_0..qs_3` (64 bytes), so one 128-bit load brings the group's 8 scales
/// and one 512-bit load its 128 codes (one 128-bit lane per block, as the canonical decode
/// builds with four inserts). A partial last group (fewer than 4 blocks) stays canonical.
fn repack_q4_1(row: &mut [u8]) {
    for g in row.chunks_exact_mut(Q4_1_GROUP) {
        let mut packed = [0u8; Q4_1_GROUP];
        for (t, b) in g.chunks_exact(20).enumerate() {
            packed[2 * t..2 * t + 2].copy_from_slice(&b[0..2]);
            packed[8 + 2 * t..8 + 2 * t + 2].copy_from_slice(&b[2..4]);
            packed[16 + 16 * t..32 + 16 * t].copy_from_slice(&b[4..20]);
        }
        g.copy_from_slice(&packed);
    }
}

/// Records of all `n` columns, built once per matmul call; `bb` names the format.
struct Shared {
    bb: usize,
    nb: usize,
    recs: Vec<V64>,
}

fn prep_call<F: Legacy>(acts: &Acts) -> Option<Layout> {
    let nb = acts.k / 32;
    let act = match (&acts.data, F::Q8_1) {
        (ActData::Q8_0 { blocks, d }, false) => Act::Q8_0(blocks, d),
        (ActData::Q8_1(b), true) => Act::Q8_1(b),
        _ => return None,
    };
    let recs = prep::<F>(act, nb, &(0..acts.n));
    Some(Layout(std::sync::Arc::new(Shared { bb: F::BB, nb, recs })))
}

/// One weight format of this module.
trait Legacy {
    /// Block bytes.
    const BB: usize;
    /// Byte offset of the nibbles in a block.
    const QS: usize;
    /// Byte offset of `qh` (Q5_x), if any.
    const QH: Option<usize>;
    /// Byte offset of the f16 minimum, if any.
    const M: Option<usize>;
    /// The code offset subtracted from every code (Q5_0: 16).
    const OFF: i32;
    /// Whether the activations are Q8_1 (else Q8_0).
    const Q8_1: bool;
    /// Whether the codes are signed bytes (Q8_1 weights), split into two nibble planes.
    const BYTES: bool = false;
    /// Whether whole groups are in the packed layout of [`repack_q4_1`] (Q4_1 only).
    const PACKED: bool = false;
}

struct Q4_1;
impl Legacy for Q4_1 {
    const BB: usize = 20;
    const QS: usize = 4;
    const QH: Option<usize> = None;
    const M: Option<usize> = Some(2);
    const OFF: i32 = 0;
    const Q8_1: bool = true;
    const PACKED: bool = true;
}

struct Q5_0;
impl Legacy for Q5_0 {
    const BB: usize = 22;
    const QS: usize = 6;
    const QH: Option<usize> = Some(2);
    const M: Option<usize> = None;
    const OFF: i32 = 16;
    const Q8_1: bool = false;
}

struct Q5_1;
impl Legacy for Q5_1 {
    const BB: usize = 24;
    const QS: usize = 8;
    const QH: Option<usize> = Some(4);
    const M: Option<usize> = Some(2);
    const OFF: i32 = 0;
    const Q8_1: bool = true;
}

struct Q8_1;
impl Legacy for Q8_1 {
    const BB: usize = 36;
    const QS: usize = 4;
    const QH: Option<usize> = None;
    const M: Option<usize> = None;
    const OFF: i32 = 128;
    const Q8_1: bool = true;
    const BYTES: bool = true;
}

/// 64-byte aligned vector of a record.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct V64([u8; 64]);

/// Vectors per record (one group of 4 blocks, one column).
const REC: usize = 5;

/// One activation block: quants, scale, stored `s` (0 for Q8_0).
type ABlock<'a> = (&'a [i8; 32], f32, f32);

/// The activations a kernel reads.
#[derive(Clone, Copy)]
enum Act<'a> {
    Q8_0(&'a [BlockQ8_0], &'a [f32]),
    Q8_1(&'a [BlockQ8_1]),
}

impl<'a> Act<'a> {
    fn block(self, i: usize) -> Option<ABlock<'a>> {
        match self {
            Act::Q8_0(b, d) => Some((&b.get(i)?.qs, *d.get(i)?, 0.0)),
            Act::Q8_1(b) => {
                let b = b.get(i)?;
                Some((&b.qs, b.d.to_f32(), b.s.to_f32()))
            }
        }
    }
}

/// Checks that `w` is whole rows of `rb = nb * F::BB` bytes with `nb * 32 == acts.k`, the tile
/// is 1..=16 columns inside `acts`, `out` holds `rows * tile` values and the activations are
/// of `F`'s kind with `n * nb` blocks; any violation is an internal error.
fn check<'a, F: Legacy>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &'a Acts,
    cols: &Range<usize>,
    out: &[f32],
) -> Result<(Act<'a>, usize), Error> {
    let (act, have) = match (&acts.data, F::Q8_1) {
        (ActData::Q8_0 { blocks, d }, false) if d.len() == blocks.len() => {
            (Act::Q8_0(blocks, d), blocks.len())
        }
        (ActData::Q8_1(b), true) => (Act::Q8_1(b), b.len()),
        _ => {
            return Err(Error::WrongActivation {
                format,
                expected: format.info().activation,
                got: acts.row(0).format(),
            })
        }
    };
    let nb = rb / F::BB;
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nc = cols.len();
    let ok = rb != 0
        && rb == nb * F::BB
        && nb * 32 == acts.k
        && w.len() == rows * rb
        && (1..=MAX_TILE).contains(&nc)
        && cols.end <= acts.n
        && have == acts.n * nb
        && out.len() == rows * nc;
    if !ok {
        let e =
            Error::Length { format, buffer: Buffer::Activations, got: have, expected: acts.n * nb };
        return Err(e);
    }
    Ok((act, nb))
}

fn run<F: Legacy, const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let (act, nb) = check::<F>(format, w, rb, acts, &cols, out)?;
    let per = nb.div_ceil(4) * REC;
    let shared = acts.layout.as_ref().and_then(|l| l.0.downcast_ref::<Shared>());
    let local;
    let recs = match shared {
        Some(s) if s.bb == F::BB && s.nb == nb && s.recs.len() == acts.n * per => {
            &s.recs[cols.start * per..cols.end * per]
        }
        _ => {
            local = prep::<F>(act, nb, &cols);
            &local[..]
        }
    };
    // SAFETY: reachable only through `kernel`, which `KernelTable::new` reaches only for
    // `Isa::Avx512` after `Isa::Avx512.available()` detected AVX-512 F/BW/VL, AVX2, FMA and
    // F16C; `check` checked the lengths; `recs` holds the `cols.len() * ceil(nb / 4)`
    // records of the tile's columns (a shared layout is used only at that length). With `V`
    // the wrapper is reachable only through `kernel_vnni`, which `super::kernel` calls only
    // for `Isa::Avx512Vnni` after `Isa::Avx512Vnni.available()` also detected AVX-512 VNNI.
    unsafe {
        if V {
            entry_vnni::<F>(w, rb, nb, recs, cols.len(), out)
        } else {
            entry::<F>(w, rb, nb, recs, cols.len(), out)
        }
    };
    Ok(())
}

/// The records of every column of the tile (scalar: K values per column, once per call).
fn prep<F: Legacy>(act: Act<'_>, nb: usize, cols: &Range<usize>) -> Vec<V64> {
    let ng = nb.div_ceil(4);
    let mut recs = vec![V64([0; 64]); cols.len() * ng * REC];
    for (c, j) in cols.clone().enumerate() {
        for g in 0..ng {
            let at = (c * ng + g) * REC;
            let [alo, ahi, corr, da, sa] = &mut recs[at..at + REC] else { continue };
            for t in 0..4 {
                let i = 4 * g + t;
                if i >= nb {
                    break;
                }
                let Some((q, d, s)) = act.block(j * nb + i) else { continue };
                for e in 0..16 {
                    alo.0[16 * t + e] = q[e] as u8;
                    ahi.0[16 * t + e] = q[16 + e] as u8;
                }
                for u in 0..4 {
                    let sum: i32 = (0..4)
                        .map(|e| i32::from(q[4 * u + e]) + i32::from(q[16 + 4 * u + e]))
                        .sum();
                    let l = 4 * (4 * t + u);
                    corr.0[l..l + 4].copy_from_slice(&(F::OFF * sum).to_le_bytes());
                    da.0[l..l + 4].copy_from_slice(&d.to_le_bytes());
                }
                sa.0[16 * t..16 * t + 4].copy_from_slice(&s.to_le_bytes());
            }
        }
    }
    recs
}

/// One decoded group of 4 blocks: codes `lo`, `hi`, scales and minima per lane.
#[derive(Clone, Copy)]
struct Dec {
    lo: __m512i,
    hi: __m512i,
    /// Q8_1 weights: the high nibble planes of `lo`'s and `hi`'s elements.
    lo2: __m512i,
    hi2: __m512i,
    d: __m512,
    m: __m512,
}

/// Four f16 at `p`, `p + bb`, `p + 2bb`, `p + 3bb`, each in 4 consecutive lanes.
///
/// # Safety
/// The 4 reads are in bounds; AVX-512F and F16C are available.
#[inline(always)]
unsafe fn f16x4(p: *const u8, bb: usize) -> __m512 {
    // SAFETY: the caller guarantees the reads; register-only operations. (No closures in
    // this module's SIMD code: a closure does not inherit `entry`'s target features, so the
    // intrinsics called from one are not inlined.)
    unsafe {
        let mut v = 0u64;
        for t in 0..4 {
            v |= u64::from(ptr::read_unaligned(p.add(t * bb).cast::<u16>())) << (16 * t);
        }
        let dv = _mm_cvtph_ps(_mm_cvtsi64_si128(v as i64));
        let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dv))
    }
}

/// Decodes the 4 blocks at `p`.
///
/// # Safety
/// `p .. p + 4 * F::BB` is readable; the features of [`entry`] are available.
#[inline(always)]
unsafe fn decode<F: Legacy>(p: *const u8) -> Dec {
    // SAFETY: every read lies inside the 4 blocks (caller); register-only operations.
    unsafe {
        let x = _mm512_castsi128_si512(_mm_loadu_si128(p.add(F::QS).cast()));
        let x = _mm512_inserti32x4::<1>(x, _mm_loadu_si128(p.add(F::BB + F::QS).cast()));
        let x = _mm512_inserti32x4::<2>(x, _mm_loadu_si128(p.add(2 * F::BB + F::QS).cast()));
        let x = _mm512_inserti32x4::<3>(x, _mm_loadu_si128(p.add(3 * F::BB + F::QS).cast()));
        let m4 = _mm512_set1_epi8(0x0F);
        let mut lo = _mm512_and_si512(x, m4);
        let mut hi = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4);
        let (mut lo2, mut hi2) = (lo, hi);
        if F::BYTES {
            // x: elements 0..16 of each block; y: 16..32. Codes q + 128 = l + 16 h.
            let o = F::QS + 16;
            let y = _mm512_castsi128_si512(_mm_loadu_si128(p.add(o).cast()));
            let y = _mm512_inserti32x4::<1>(y, _mm_loadu_si128(p.add(F::BB + o).cast()));
            let y = _mm512_inserti32x4::<2>(y, _mm_loadu_si128(p.add(2 * F::BB + o).cast()));
            let y = _mm512_inserti32x4::<3>(y, _mm_loadu_si128(p.add(3 * F::BB + o).cast()));
            let flip = _mm512_set1_epi8(-128);
            let (x, y) = (_mm512_xor_si512(x, flip), _mm512_xor_si512(y, flip));
            lo = _mm512_and_si512(x, m4);
            hi = _mm512_and_si512(y, m4);
            lo2 = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4);
            hi2 = _mm512_and_si512(_mm512_srli_epi16::<4>(y), m4);
        }
        if let Some(o) = F::QH {
            let (mut klo, mut khi) = (0u64, 0u64);
            for t in 0..4 {
                let qh = u64::from(ptr::read_unaligned(p.add(t * F::BB + o).cast::<u32>()));
                klo |= (qh & 0xFFFF) << (16 * t);
                khi |= (qh >> 16) << (16 * t);
            }
            let b4 = _mm512_set1_epi8(0x10);
            lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(klo, b4));
            hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(khi, b4));
        }
        let d = f16x4(p, F::BB);
        let m = match F::M {
            Some(o) => f16x4(p.add(o), F::BB),
            None => _mm512_setzero_ps(),
        };
        Dec { lo, hi, lo2, hi2, d, m }
    }
}

/// Decodes one whole group in the packed Q4_1 layout ([`repack_q4_1`]) at `p`.
///
/// # Safety
/// `p .. p + 80` is readable; the features of [`entry`] are available.
#[inline(always)]
unsafe fn decode_packed(p: *const u8) -> Dec {
    // SAFETY: reads bytes 0..80 at `p` (caller); register-only operations.
    unsafe {
        let x = _mm512_loadu_si512(p.add(16).cast());
        let m4 = _mm512_set1_epi8(0x0F);
        let lo = _mm512_and_si512(x, m4);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m4);
        let dm = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(p.cast())));
        let di = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        let mi = _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
        let d = _mm512_permutexvar_ps(di, dm);
        let m = _mm512_permutexvar_ps(mi, dm);
        Dec { lo, hi, lo2: lo, hi2: hi, d, m }
    }
}

/// Decodes the whole group at `p`: packed or canonical, as `F` says.
///
/// # Safety
/// As [`decode`].
#[inline(always)]
unsafe fn decode_group<F: Legacy>(p: *const u8) -> Dec {
    // SAFETY: forwarded from the caller (a whole group is 4 * F::BB = 80 bytes when packed).
    unsafe {
        if F::PACKED {
            decode_packed(p)
        } else {
            decode::<F>(p)
        }
    }
}

/// `acc` plus one group's contribution for the column whose record is at `a`.
///
/// # Safety
/// `a .. a + REC` is readable; the features of [`entry`] are available.
#[inline(always)]
unsafe fn dot<F: Legacy, const V: bool>(w: &Dec, a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: aligned reads of the record's vectors (caller); register-only operations;
    // with `V`, AVX-512 VNNI is available (caller).
    unsafe {
        let alo = _mm512_load_si512(a.cast());
        let ahi = _mm512_load_si512(a.add(1).cast());
        let mut s = if V && !F::BYTES {
            let s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.lo, alo);
            _mm512_dpbusd_epi32(s, w.hi, ahi)
        } else {
            let p =
                _mm512_add_epi16(_mm512_maddubs_epi16(w.lo, alo), _mm512_maddubs_epi16(w.hi, ahi));
            _mm512_madd_epi16(p, _mm512_set1_epi16(1))
        };
        if F::BYTES {
            let h = _mm512_add_epi16(
                _mm512_maddubs_epi16(w.lo2, alo),
                _mm512_maddubs_epi16(w.hi2, ahi),
            );
            s = _mm512_add_epi32(s, _mm512_madd_epi16(h, _mm512_set1_epi16(16)));
        }
        if F::OFF != 0 {
            s = _mm512_sub_epi32(s, _mm512_load_si512(a.add(2).cast()));
        }
        let da = _mm512_load_ps(a.add(3).cast());
        let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.d, da), acc);
        if F::M.is_some() {
            _mm512_fmadd_ps(w.m, _mm512_load_ps(a.add(4).cast()), acc)
        } else {
            acc
        }
    }
}

/// Rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column repeated, extra
/// results discarded); a partial last group of blocks is decoded from a zero-padded copy.
///
/// # Safety
/// The features of [`entry`] are available; `w` is whole rows of `rb = nb * F::BB` bytes;
/// `recs` holds `ncols * ceil(nb / 4) * REC` vectors; `out.len() == rows * ncols`;
/// `ncols >= 1`.
#[inline(always)]
unsafe fn drive<F: Legacy, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    let gbytes = 4 * F::BB;
    let full = nb / 4;
    let ng = nb.div_ceil(4);
    let per_col = ng * REC;
    let nrows = w.len() / rb;
    let pf = super::Prefetch::DEFAULT.one_group_ahead(R * rb);
    // SAFETY: row pointers are clamped to `nrows - 1`, groups `< full` lie inside the row, the
    // partial group is copied into a padded buffer first; record pointers are clamped to the
    // last column and stay inside `recs`; the prefetch hint never faults.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let here = (nrows - r0).min(R);
            let mut rp = [w.as_ptr(); R];
            for i in 0..R {
                rp[i] = w.as_ptr().add((r0 + i.min(here - 1)) * rb);
            }
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut ap = [recs.as_ptr(); CT];
                for jj in 0..CT {
                    ap[jj] = recs.as_ptr().add((c0 + jj.min(nc - 1)) * per_col);
                }
                let mut acc = [[_mm512_setzero_ps(); CT]; R];
                for g in 0..full {
                    let mut dec = [decode_group::<F>(rp[0].add(g * gbytes)); R];
                    for i in 0..R {
                        let p = rp[i].add(g * gbytes);
                        pf.span(p, gbytes);
                        if i > 0 {
                            dec[i] = decode_group::<F>(p);
                        }
                    }
                    for jj in 0..CT {
                        let a = ap[jj].add(g * REC);
                        for i in 0..R {
                            acc[i][jj] = dot::<F, V>(&dec[i], a, acc[i][jj]);
                        }
                    }
                }
                if full < ng {
                    let tail = (nb - full * 4) * F::BB;
                    let mut buf = [[0u8; 4 * 36]; R];
                    for i in 0..R {
                        ptr::copy_nonoverlapping(
                            rp[i].add(full * gbytes),
                            buf[i].as_mut_ptr(),
                            tail,
                        );
                    }
                    let mut dec = [decode::<F>(buf[0].as_ptr()); R];
                    for i in 1..R {
                        dec[i] = decode::<F>(buf[i].as_ptr());
                    }
                    for jj in 0..CT {
                        let a = ap[jj].add(full * REC);
                        for i in 0..R {
                            acc[i][jj] = dot::<F, V>(&dec[i], a, acc[i][jj]);
                        }
                    }
                }
                for i in 0..here {
                    for jj in 0..nc {
                        out[(r0 + i) * ncols + c0 + jj] = hsum16(acc[i][jj]);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// Column-count dispatch.
///
/// # Safety
/// As [`drive`], plus AVX-512 F/BW/VL, AVX2, FMA and F16C are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn entry<F: Legacy>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe { by_columns::<F, false>(w, rb, nb, recs, ncols, out) }
}

/// [`entry`] with AVX-512 VNNI as well ([`dot`] uses `vpdpbusd`).
///
/// # Safety
/// As [`entry`], plus AVX-512 VNNI is available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn entry_vnni<F: Legacy>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe { by_columns::<F, true>(w, rb, nb, recs, ncols, out) }
}

/// The row-group and column-tile sizes per column count.
///
/// # Safety
/// As [`drive`] (with `V`: AVX-512 VNNI is available).
#[inline(always)]
unsafe fn by_columns<F: Legacy, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match ncols {
            1 => drive::<F, 4, 1, V>(w, rb, nb, recs, ncols, out),
            2 => drive::<F, 4, 2, V>(w, rb, nb, recs, ncols, out),
            3 | 4 => drive::<F, 2, 4, V>(w, rb, nb, recs, ncols, out),
            _ => drive::<F, 2, 8, V>(w, rb, nb, recs, ncols, out),
        }
    }
}

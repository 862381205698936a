//! The AVX512_BF16 kernel of the HFP4 family (HFP4G32, MFP4G32, MFP4G32P), run under
//! `Isa::Avx512Vnni` where the CPU also has AVX512_BF16 ([`crate::isa::has_avx512_bf16`]):
//! weights decoded straight to bf16 from an upload-time repacked layout, f32 activations split
//! once per call into bf16 parts, products summed by `vdpbf16ps`.
//!
//! **Layout ([`repack_row`]).** A row keeps its length `16 + 17 nb` and its f16 row scale at 0:
//! * header bytes 8..10 and 10..12 (reserved, zero in canonical rows): `q` and `h` (i16 LE),
//!   the row's weight range over blocks with a nonzero code: every weight is a multiple of
//!   `2^q` and below `2^h` in magnitude (`i16::MAX` / `i16::MIN` for an all-zero row);
//! * each full group `g` of 4 blocks, at `16 + 68 g`: 32 little-endian u16 words, word `j`
//!   holding element `j` of block `4g + t` in bits `4t..4t + 4`, then the 4 scale bytes;
//! * each of the last `nb % 4` blocks `b`, at `16 + 17 b`: 16 bytes, byte `j` = element `j` |
//!   element `j + 16` << 4, then its scale byte.
//!
//! So the bytes of block `b` stay within its group's `68` bytes and a row is one stream, as
//! in the canonical layout.
//!
//! **Decode.** One 64-byte load gives a group's words; `vpsrlw` by `4t` and one `vpermw` on the
//! block's 32-word bf16 table (`vpermw` reads bits 0..4 of a word: the 16-entry table is
//! stored twice, so the bit above the nibble does not matter) give its 32 weights in element
//! order. The tables (`E2M1 * factor`, per scale byte, built once) are exact in bf16: a 2-bit
//! significand times a power of two (UE8M0) or a 4-bit one (E4M3); -0 is stored as +0.
//!
//! **Bodies.** One column with two parts and whole groups runs [`one_col8`]: rows in groups
//! of 8 share each load of the column's parts (the loads, not the `vdpbf16ps`, bounded the
//! 4-row body: a 64-byte table, the parts and a code load per row-block), each row's block is
//! decoded and at once dotted, and a row's 4 scale bytes come in one `u32`. Everything else
//! (three parts, tail blocks, leftover rows, 2..16 columns) runs the general [`body`].
//!
//! **Activations.** Per call each column is split into `P` bf16 parts, `x = p0 + p1 (+ p2)`
//! with `p_i = RNE_bf16(x - p0 - ... - p_{i-1})` (each residual exact in f32): three parts are
//! exact for a normal `x`; two leave `|x - p0 - p1| <= 2^-16 |x|`. `P = 2` only for `K >= 1024`.
//!
//! **Arithmetic and bound.** Measured on the project's Zen 4 (`tools/vdpbf16ps_check.rs`,
//! docs/BENCHMARKS.md "Session 9 (bf16)"); Intel's pseudocode says the same: `vdpbf16ps` lane `i` computes `(acc + a[2i+1] b[2i+1]) + a[2i] b[2i]`, each add rounded
//! to nearest-even in f32 (the products of two bf16 are exact), with denormal inputs and
//! results flushed to zero. Flushes are ruled out per call and row ([`call_range`],
//! [`row_ok`]): every part is a multiple of `ulp(x) >= 2^-126`, every weight a multiple of
//! `2^q`, so with `q + e_min - 23 >= -126` every product and every partial sum is a multiple
//! of `2^-126` (zero or normal), and `h + e_max + 1 + log2 K + 2 <= 127` keeps every sum
//! finite; a call with a NaN, an infinity or a tiny activation, and a row outside the
//! range, run the f32 kernel (`hfp4_512`) on the canonical bytes instead ([`fallback`]).
//! Then a term passes through at most `K/16` roundings in its lane (one column: one
//! accumulator per part, 2 adds per block and lane; several columns: `P K / 16`), `P - 1` adds
//! joining the parts' accumulators, 4 levels of the lane tree and the row-scale multiply:
//! `d <= P K / 16 + 5`; with the split error, `|y - y_exact| <= (s + d) u sum|terms| (1 +
//! 2^-7)` (`u = 2^-24`, `s = 0` for `P = 3`, `s = 2^8` for `P = 2`). `P = 3`: `3K/16 + 5 <=
//! K/2` for `K >= 32`; `P = 2`, `K >= 1024`: `256 + K/8 + 5 <= 0.39 K`. So **c = 0.5**, as
//! for the f32 kernel (`hfp4.rs`).
//!
//! What must not live here: the f32 kernels (`hfp4.rs`, `hfp4_512.rs`), other formats.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::cell::Cell;
use std::ops::Range;
use std::sync::OnceLock;

use lowbit_core::format::hipfire::block::block_factor;
use lowbit_core::scalar::E2M1_VALUES;
use lowbit_core::{Error, FormatId};

use super::hfp4::{row_scale, tile_rows, ACC_VECS, BLOCK, HEADER};
use crate::act::{ActData, Acts};
use crate::kernels::Kernel;
use crate::shape::check_hfp4;

/// The kernel for `format` (HFP4 family only), if this CPU has AVX512_BF16 (the caller has
/// checked `Isa::Avx512Vnni.available()`).
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    if !crate::isa::has_avx512_bf16() {
        return None;
    }
    match format {
        FormatId::Hfp4G32 => Some(Kernel { name: "avx512-bf16-hfp4g32", f: run }),
        FormatId::Mfp4G32 => Some(Kernel { name: "avx512-bf16-mfp4g32", f: run }),
        FormatId::Mfp4G32P => Some(Kernel { name: "avx512-bf16-mfp4g32p", f: run }),
        _ => None,
    }
}

/// Blocks per code group (one 64-byte load).
const GROUP: usize = 4;

/// Header offsets of the row's weight range `q`, `h` (i16 LE, see the module doc).
const META_Q: usize = 8;
const META_H: usize = 10;

/// Most rows whose ranges are checked ([`row_ok`]) before they run: the check reads each
/// row's first line, which the body then reads while it is still cached (checking every row
/// of a task first read them all twice from memory).
const ROW_RUN: usize = 64;

/// Smallest `K` that runs with two activation parts (see the module doc's bound).
pub(crate) const K_TWO_PARTS: usize = 1024;

/// `(q, h)` of one block's factor: the weights `E2M1 * f` are multiples of `2^q` (`q` = the
/// exponent of `f`'s lowest set bit, minus 1 for E2M1's 0.5) and below `2^h` (`6 f < 2^(e+3)`
/// for `f` in `[2^e, 2^(e+1))`). `f > 0` (legal bytes only).
fn factor_range(f: f32) -> (i32, i32) {
    let b = f.to_bits();
    let (exp, man) = ((b >> 23) as i32 & 255, b & 0x7f_ffff);
    if exp == 0 {
        // Subnormal: value man * 2^-149.
        let lsb = -149 + man.trailing_zeros() as i32;
        let top = -149 + (31 - man.leading_zeros() as i32);
        (lsb - 1, top + 3)
    } else {
        let lsb = exp - 127 - 23 + (man | 0x80_0000).trailing_zeros() as i32;
        (lsb - 1, exp - 127 + 3)
    }
}

/// Rewrites one validated canonical row of `16 + 17 nb` bytes into the layout of the module
/// doc (a `RepackFn`).
pub(crate) fn repack_row(row: &mut [u8]) {
    let nb = (row.len() - HEADER) / BLOCK;
    let canon = row.to_vec();
    let blk = |b: usize| &canon[HEADER + BLOCK * b..HEADER + BLOCK * (b + 1)];
    let code = |b: usize, i: usize| (blk(b)[1 + i / 2] >> (4 * (i % 2))) & 15;
    let full = nb / GROUP * GROUP;
    for g in 0..full / GROUP {
        let dst = &mut row[HEADER + 68 * g..HEADER + 68 * (g + 1)];
        for j in 0..32 {
            let mut word = 0u16;
            for t in 0..GROUP {
                word |= u16::from(code(GROUP * g + t, j)) << (4 * t);
            }
            dst[2 * j..2 * j + 2].copy_from_slice(&word.to_le_bytes());
        }
        for t in 0..GROUP {
            dst[64 + t] = blk(GROUP * g + t)[0];
        }
    }
    for b in full..nb {
        let dst = &mut row[HEADER + BLOCK * b..HEADER + BLOCK * (b + 1)];
        for (j, d) in dst[..16].iter_mut().enumerate() {
            *d = code(b, j) | code(b, j + 16) << 4;
        }
        dst[16] = blk(b)[0];
    }
    // A `RepackFn` is not told the format: the range is stored for both scale kinds (UE8M0
    // at 8..12, E4M3 at 12..16; `row_ok` reads its format's).
    let (qu, hu) = row_meta(&canon, nb, FormatId::Hfp4G32);
    let (qe, he) = row_meta(&canon, nb, FormatId::Mfp4G32P);
    let put = |row: &mut [u8], at: usize, v: i32| {
        let v = v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        row[at..at + 2].copy_from_slice(&v.to_le_bytes());
    };
    put(row, META_Q, qu);
    put(row, META_H, hu);
    put(row, META_Q + 4, qe);
    put(row, META_H + 4, he);
}

/// `(q, h)` of a canonical row read with `format`'s block factors (blocks whose codes are all
/// zero, or whose byte the format refuses, do not count).
fn row_meta(canon: &[u8], nb: usize, format: FormatId) -> (i32, i32) {
    let (mut q, mut h) = (i32::from(i16::MAX), i32::from(i16::MIN));
    for b in 0..nb {
        let blk = &canon[HEADER + BLOCK * b..HEADER + BLOCK * (b + 1)];
        if blk[1..].iter().all(|&c| c & 0x77 == 0) {
            continue;
        }
        let Ok(f) = block_factor(format, blk[0]) else { continue };
        if f > 0.0 && f.is_finite() {
            let (bq, bh) = factor_range(f);
            q = q.min(bq);
            h = h.max(bh);
        } else {
            // Unrepresentable (not reached for validated rows): never the bf16 path.
            q = i32::from(i16::MIN);
        }
    }
    (q, h)
}

/// The canonical bytes of a repacked row (`src`, `dst` of the same length; header bytes
/// 8..16 come back zero, as validation found them).
fn unrepack_row(src: &[u8], dst: &mut [u8]) {
    let nb = (src.len() - HEADER) / BLOCK;
    dst[..HEADER].copy_from_slice(&src[..HEADER]);
    dst[8..HEADER].fill(0);
    let full = nb / GROUP * GROUP;
    let code = |b: usize, i: usize| -> u8 {
        if b < full {
            let (g, t) = (b / GROUP, b % GROUP);
            let at = HEADER + 68 * g + 2 * i;
            let word = u16::from_le_bytes([src[at], src[at + 1]]);
            ((word >> (4 * t)) & 15) as u8
        } else {
            (src[HEADER + BLOCK * b + i % 16] >> (4 * (i / 16))) & 15
        }
    };
    let scale = |b: usize| {
        if b < full {
            src[HEADER + 68 * (b / GROUP) + 64 + b % GROUP]
        } else {
            src[HEADER + BLOCK * b + 16]
        }
    };
    for b in 0..nb {
        let blk = &mut dst[HEADER + BLOCK * b..HEADER + BLOCK * (b + 1)];
        blk[0] = scale(b);
        for i in 0..16 {
            blk[1 + i] = code(b, 2 * i) | code(b, 2 * i + 1) << 4;
        }
    }
}

/// The 32-word bf16 tables (16 E2M1 values times the factor, twice) of every scale byte.
#[repr(C, align(64))]
struct LutBf(pub [[u16; 32]; 256]);

/// The table of `format`, built once per process. Bytes the format refuses, and factors whose
/// weights are not normal finite bf16, get whatever the truncation gives: rows using them
/// never reach the bf16 body ([`row_ok`]), and zero codes read 0 in every table.
fn lut(format: FormatId) -> &'static LutBf {
    static UE8M0: OnceLock<Box<LutBf>> = OnceLock::new();
    static E4M3: OnceLock<Box<LutBf>> = OnceLock::new();
    let (cell, f) = if format == FormatId::Mfp4G32P {
        (&E4M3, FormatId::Mfp4G32P)
    } else {
        (&UE8M0, FormatId::Hfp4G32)
    };
    cell.get_or_init(|| {
        Box::new(LutBf(core::array::from_fn(|e| {
            let fac = block_factor(f, e as u8).unwrap_or(0.0);
            core::array::from_fn(|i| {
                let v = E2M1_VALUES[i % 16] * fac;
                if v == 0.0 {
                    0
                } else {
                    (v.to_bits() >> 16) as u16
                }
            })
        })))
    })
}

/// The exponent range of a call's activations: the smallest exponent of a nonzero value and
/// the largest exponent (unbiased), and whether any value is NaN or infinite.
#[derive(Clone, Copy, Debug)]
struct Range32 {
    e_min: i32,
    e_max: i32,
    nonfinite: bool,
}

/// The [`Range32`] of `x` (a subnormal gives `e_min = -127`, which fails [`call_ok`]).
///
/// # Safety
/// AVX-512 F is available; `x.len()` is a multiple of 16.
#[target_feature(enable = "avx512f")]
unsafe fn call_range(x: &[f32]) -> Range32 {
    // SAFETY: 16-value reads at `16 i < x.len()`; AVX-512 F is available (caller).
    let (lo, hi) = unsafe {
        let abs = _mm512_set1_epi32(0x7fff_ffff);
        let (mut lo, mut hi) = (_mm512_set1_epi32(255), _mm512_setzero_si512());
        for c in x.chunks_exact(16) {
            let b = _mm512_and_si512(_mm512_loadu_si512(c.as_ptr().cast()), abs);
            let e = _mm512_srli_epi32::<23>(b);
            hi = _mm512_max_epu32(hi, e);
            let nz = _mm512_test_epi32_mask(b, b);
            lo = _mm512_mask_min_epu32(lo, nz, lo, e);
        }
        (_mm512_reduce_min_epu32(lo), _mm512_reduce_max_epu32(hi))
    };
    Range32 { e_min: lo as i32 - 127, e_max: hi as i32 - 127, nonfinite: hi == 255 }
}

/// Whether a call with activations in `r` may run the bf16 body at all: finite, and every
/// part a multiple of `ulp >= 2^-126` (normal bf16 or zero).
fn call_ok(r: &Range32) -> bool {
    !r.nonfinite && r.e_min - 23 >= -126
}

/// Whether a repacked `row` (of `k` columns) may run the bf16 body against activations in `r`
/// (module doc): weights normal and finite in bf16, products multiples of `2^-126`, sums
/// finite.
fn row_ok(row: &[u8], format: FormatId, k: usize, r: &Range32) -> bool {
    let off = if format == FormatId::Mfp4G32P { 4 } else { 0 };
    let rd = |at: usize| i32::from(i16::from_le_bytes([row[at + off], row[at + off + 1]]));
    let (q, h) = (rd(META_Q), rd(META_H));
    if q == i32::from(i16::MAX) {
        return true; // no nonzero code
    }
    let log2k = usize::BITS as i32 - (k - 1).leading_zeros() as i32;
    q >= -126 && h <= 128 && q + r.e_min - 23 >= -126 && h + r.e_max + 1 + log2k + 2 <= 127
}

thread_local! {
    /// The split activation columns of a call [`prep`] did not stage (reused across calls).
    static XBF: Cell<Vec<u16>> = const { Cell::new(Vec::new()) };
    /// Canonical copies of fallback rows.
    static CANON: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// A call's activations as the body reads them: their [`Range32`] and, when [`call_ok`], the
/// columns split by [`stage`] (empty otherwise).
struct Staged {
    range: Range32,
    x: Vec<u16>,
    sb: usize,
    parts: usize,
}

impl Staged {
    /// Ranges and stages the `nc` columns `xt` of `k = 32 nb` values each.
    fn new(xt: &[f32], k: usize, nc: usize, mut x: Vec<u16>) -> Staged {
        let nb = k / 32;
        let (parts, sb) = (if k >= K_TWO_PARTS { 2 } else { 3 }, slice_blocks(nc, nb));
        // SAFETY: `Isa::Avx512Vnni.available()` detected AVX-512 F/BW/VL (`KernelTable::new`)
        // and `kernel` / `prep` checked AVX512_BF16 before this runs; `xt` holds `nc` columns
        // of `k` values, `k` a multiple of 32 (checked by the caller).
        let range = unsafe { call_range(xt) };
        if call_ok(&range) {
            // SAFETY: as above.
            unsafe { stage(xt, k, nc, sb, parts, &mut x) };
        } else {
            x.clear();
        }
        Staged { range, x, sb, parts }
    }
}

/// The [`crate::kernels::PrepFn`] of the bf16 kernel: ranges and stages every column of a call
/// of up to [`crate::kernels::MAX_TILE`] columns once, so that the row tasks of the call share
/// it instead of each staging the same columns again ([`run`] still stages for itself when it
/// finds no layout, or one for other columns).
pub(crate) fn prep(acts: &Acts) -> Option<crate::act::Layout> {
    let ActData::F32(x) = &acts.data else { return None };
    let (k, n) = (acts.k, acts.n);
    let ok = crate::isa::has_avx512_bf16()
        && (1..=crate::kernels::MAX_TILE).contains(&n)
        && k != 0
        && k % 32 == 0
        && x.len() == n * k;
    ok.then(|| crate::act::Layout(std::sync::Arc::new(Staged::new(x, k, n, Vec::new()))))
}

fn run(
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
    let shared = match &acts.layout {
        Some(l) if cols == (0..acts.n) => l.0.downcast_ref::<Staged>(),
        _ => None,
    };
    match shared {
        Some(st) => run_staged(format, w, rb, acts, &cols, nb, st, out),
        None => {
            let own = Staged::new(&x[cols.start * k..cols.end * k], k, nc, XBF.take());
            let result = run_staged(format, w, rb, acts, &cols, nb, &own, out);
            XBF.set(own.x);
            result
        }
    }
}

/// [`run`] once the activations are staged.
#[allow(clippy::too_many_arguments)]
fn run_staged(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: &Range<usize>,
    nb: usize,
    st: &Staged,
    out: &mut [f32],
) -> Result<(), Error> {
    let (k, nc, rows) = (acts.k, cols.len(), w.len() / rb);
    let range = &st.range;
    if !call_ok(range) {
        return fallback(format, w, rb, acts, cols, out, 0..rows);
    }
    let (buf, sb, parts) = (&st.x, st.sb, st.parts);
    let table = lut(format);
    let mut r0 = 0;
    while r0 < rows {
        let good = row_ok(&w[r0 * rb..(r0 + 1) * rb], format, k, range);
        let mut r1 = r0 + 1;
        let lim = (r0 + ROW_RUN).min(rows);
        while r1 < lim && row_ok(&w[r1 * rb..(r1 + 1) * rb], format, k, range) == good {
            r1 += 1;
        }
        if good {
            let pass = PassBf { nb, x: buf, sb, ncp: nc, parts };
            let (wr, o) = (&w[r0 * rb..r1 * rb], &mut out[r0 * nc..r1 * nc]);
            // SAFETY: features as above; `wr` holds whole repacked rows of `rb = 16 + 17 nb`
            // bytes (`check_hfp4`; repacked at upload, as `CpuBackend::matmul` checked),
            // `buf` the `nc` columns staged by `stage` with `parts` parts and slices of `sb`
            // blocks (a multiple of 4, or all), `o.len() == (r1 - r0) * nc`.
            unsafe { entry(wr, rb, table, &pass, o) };
        } else {
            fallback(format, w, rb, acts, cols, out, r0..r1)?;
        }
        r0 = r1;
    }
    Ok(())
}

/// Runs rows `rows` of the repacked `w` through the f32 AVX-512 kernel, a batch of canonical
/// copies at a time.
fn fallback(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: &Range<usize>,
    out: &mut [f32],
    rows: Range<usize>,
) -> Result<(), Error> {
    let nc = cols.len();
    let mut canon = CANON.take();
    let mut r0 = rows.start;
    let mut res = Ok(());
    while r0 < rows.end && res.is_ok() {
        let r1 = (r0 + 32).min(rows.end);
        canon.resize((r1 - r0) * rb, 0);
        for (s, d) in w[r0 * rb..r1 * rb].chunks_exact(rb).zip(canon.chunks_exact_mut(rb)) {
            unrepack_row(s, d);
        }
        res = super::hfp4::run_avx512(
            format,
            &canon,
            rb,
            acts,
            cols.clone(),
            &mut out[r0 * nc..r1 * nc],
        );
        r0 = r1;
    }
    CANON.set(canon);
    res
}

/// Blocks per activation slice: all for one column, else a multiple of 4 that keeps a slice
/// of `ncp` columns (128 bytes per block and column for two parts) within about 12 KiB.
fn slice_blocks(ncp: usize, nb: usize) -> usize {
    if ncp == 1 {
        nb.max(1)
    } else {
        ((12288 / (ncp * 128)) / GROUP * GROUP).max(GROUP)
    }
}

/// Splits `ncp` columns of `k` values (`src`) into `parts` bf16 parts, slice-major as
/// `hfp4.rs`'s `stage` lays out f32 columns: for each slice of `sb` blocks, the slice of
/// column 0, then column 1, ...; within a column's slice, block after block, each block `parts`
/// vectors of 32 words (part 0, 1, ...), element order.
///
/// # Safety
/// AVX-512 F/BW and AVX512_BF16 are available; `src.len() == ncp * k`, `k` a multiple of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn stage(src: &[f32], k: usize, ncp: usize, sb: usize, parts: usize, dst: &mut Vec<u16>) {
    let nb = k / 32;
    dst.resize(ncp * k * parts, 0);
    let mut off = 0;
    let mut b0 = 0;
    while b0 < nb {
        let len = sb.min(nb - b0);
        for j in 0..ncp {
            for b in b0..b0 + len {
                let s = &src[j * k + 32 * b..][..32];
                let d = &mut dst[off..off + 32 * parts];
                for h in 0..2 {
                    // SAFETY: 16-value reads inside `s` (32 values), 16-word writes inside `d`
                    // (`32 parts` words); AVX-512 F and BF16 are available (caller).
                    unsafe {
                        let mut r = _mm512_loadu_ps(s.as_ptr().add(16 * h));
                        for p in 0..parts {
                            let v: __m256i = core::mem::transmute(_mm512_cvtneps_pbh(r));
                            _mm256_storeu_si256(d.as_mut_ptr().add(32 * p + 16 * h).cast(), v);
                            let back = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(v));
                            r = _mm512_sub_ps(r, _mm512_castsi512_ps(back));
                        }
                    }
                }
                off += 32 * parts;
            }
        }
        b0 += len;
    }
}

/// What the bf16 body needs besides the weights and the table.
struct PassBf<'a> {
    /// Blocks per row.
    nb: usize,
    /// The staged parts ([`stage`]).
    x: &'a [u16],
    /// Blocks per slice.
    sb: usize,
    /// Columns (1..=16).
    ncp: usize,
    /// Activation parts (2 or 3).
    parts: usize,
}

/// Entry: runs the body for the tile.
///
/// # Safety
/// AVX-512 F/BW/VL and AVX512_BF16 are available; `w` holds whole repacked rows of `rb = 16 +
/// 17 p.nb` bytes; `p.x` holds `p.ncp` (1..=16) columns staged by [`stage`] with `p.parts`
/// parts and slices of `p.sb` blocks (all of them, or a multiple of 4); `out.len() == rows *
/// p.ncp`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn entry(w: &[u8], rb: usize, lut: &LutBf, p: &PassBf, out: &mut [f32]) {
    macro_rules! go {
        ($p:literal) => {
            // SAFETY: forwarded from the caller.
            unsafe {
                match p.ncp {
                    1 if $p == 2 && p.nb % GROUP == 0 => {
                        let rows8 = w.len() / rb / 8 * 8;
                        let (w8, wr) = w.split_at(rows8 * rb);
                        let (o8, or) = out.split_at_mut(rows8);
                        one_col8(w8, rb, lut, p, o8);
                        body::<$p, $p, 4, 1>(wr, rb, lut, p, or)
                    }
                    1 => body::<$p, $p, 4, 1>(w, rb, lut, p, out),
                    2 => body::<$p, 1, 2, 2>(w, rb, lut, p, out),
                    3 => body::<$p, 1, 2, 3>(w, rb, lut, p, out),
                    4 => body::<$p, 1, 2, 4>(w, rb, lut, p, out),
                    5 | 6 => body::<$p, 1, 1, 6>(w, rb, lut, p, out),
                    7 | 8 => body::<$p, 1, 1, 8>(w, rb, lut, p, out),
                    9..=12 => body::<$p, 1, 1, 12>(w, rb, lut, p, out),
                    _ => body::<$p, 1, 1, 16>(w, rb, lut, p, out),
                }
            }
        };
    }
    if p.parts == 2 {
        go!(2)
    } else {
        go!(3)
    }
}

/// The one-column body for two parts and whole groups (`p.nb % 4 == 0`): rows in groups of 8
/// sharing each load of the column's parts, each row's block decoded and at once dotted with
/// both parts, the 8 rows' scale bytes read once per group (a `u32` each). The same `vdpbf16ps`
/// per accumulator in the same order as [`body`] with one column (`A = P = 2`), so the same
/// bits; rows past the last whole group of 8 are left to the caller.
///
/// # Safety
/// As [`entry`], with `p.ncp == 1`, `p.parts == 2`, `p.nb % 4 == 0` and `out.len() == rows`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn one_col8(w: &[u8], rb: usize, lut: &LutBf, p: &PassBf, out: &mut [f32]) {
    const R: usize = 8;
    let nrows = w.len() / rb;
    let groups = p.nb / GROUP;
    // Prefetch into L2 one row group ahead (as `body`).
    let pf = R * rb;
    let lb = lut.0.as_ptr().cast::<u8>();
    // SAFETY: weight reads: 68-byte groups at `16 + 68 g` (`g < nb / 4`) of rows `< nrows`
    // (`nrows` a multiple of 8), inside `w`; table reads at `64 e` (`e < 256`) inside `lut`;
    // activation reads: 64 words per block, `64 nb` words in all, inside `p.x` (one column,
    // two parts, one slice); prefetches never fault; the caller guarantees the features.
    unsafe {
        let mut g0 = 0;
        while g0 + R <= nrows {
            let rp: [*const u8; R] =
                core::array::from_fn(|i| w.as_ptr().add((g0 + i) * rb + HEADER));
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            let mut xb = p.x.as_ptr();
            for g in 0..groups {
                let off = 68 * g;
                let mut q = [_mm512_setzero_si512(); R];
                let mut sc = [0u32; R];
                for i in 0..R {
                    let src = rp[i].add(off);
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf).cast());
                    _mm_prefetch::<_MM_HINT_T1>(src.wrapping_add(pf + 67).cast());
                    q[i] = _mm512_loadu_si512(src.cast());
                    sc[i] = src.add(64).cast::<u32>().read_unaligned();
                }
                for t in 0..GROUP {
                    let x0: __m512bh = core::mem::transmute(_mm512_loadu_si512(xb.cast()));
                    let x1: __m512bh = core::mem::transmute(_mm512_loadu_si512(xb.add(32).cast()));
                    for i in 0..R {
                        let e = ((sc[i] >> (8 * t)) & 255) as usize;
                        let tb = _mm512_load_si512(lb.add(e << 6).cast());
                        let idx = match t {
                            0 => q[i],
                            1 => _mm512_srli_epi16::<4>(q[i]),
                            2 => _mm512_srli_epi16::<8>(q[i]),
                            _ => _mm512_srli_epi16::<12>(q[i]),
                        };
                        let wv: __m512bh = core::mem::transmute(_mm512_permutexvar_epi16(idx, tb));
                        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], wv, x0);
                        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], wv, x1);
                    }
                    xb = xb.add(64);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                let row = g0 + i;
                let scale = row_scale(&w[row * rb..(row + 1) * rb]);
                out[row] = _mm512_reduce_add_ps(_mm512_add_ps(a[0], a[1])) * scale;
            }
            g0 += R;
        }
    }
}

/// The body: `P` activation parts, `A` accumulators per (row, column) (`P` for one column,
/// else 1; part `p` goes to accumulator `p % A`), rows in groups of `R` (then single rows),
/// `C >= p.ncp` columns (extra ones repeat the last column and are not stored).
///
/// # Safety
/// As [`entry`], with `p.parts == P`.
#[inline(always)]
unsafe fn body<const P: usize, const A: usize, const R: usize, const C: usize>(
    w: &[u8],
    rb: usize,
    lut: &LutBf,
    p: &PassBf,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let nb = p.nb;
    let full = nb / GROUP * GROUP;
    // One column: one group of rows per tile (one slice); several: `A == 1`.
    let rs = if C == 1 { R } else { tile_rows(C, R, 64) };
    // Prefetch distance as `hfp4_512.rs` (one column: into L2, one row group ahead, 8 KiB at
    // least; two and three groups ahead were within noise, 16384 x 14336, one thread).
    let pf = if C == 1 { (R * rb).max(8 << 10) } else { 2 * R * rb };
    // SAFETY: weight reads: 68-byte groups at `16 + 17 b` (`b` a multiple of 4, `b + 4 <=
    // full`) and 17-byte tail blocks at `16 + 17 b` (`full <= b < nb`) of rows `< nrows`,
    // inside `w`; table reads `lut.0[byte]` (256 entries); activation reads
    // `32 P` words per block of a column's slice inside `p.x`; `buf` indices `< rs * C * A
    // <= ACC_VECS` (`R * A <= 12` for one column, `tile_rows` with `A == 1` else); prefetches never fault; the caller guarantees the features.
    unsafe {
        let mut buf = [_mm512_setzero_ps(); ACC_VECS];
        let mut g0 = 0;
        while g0 < nrows {
            let gr = rs.min(nrows - g0);
            buf[..gr * C * A].fill(_mm512_setzero_ps());
            let mut b0 = 0;
            while b0 < nb {
                let b1 = (b0 + p.sb).min(nb);
                let xc: [*const u16; C] = core::array::from_fn(|j| {
                    let j = j.min(p.ncp - 1);
                    p.x.as_ptr().add(32 * P * (b0 * p.ncp + j * (b1 - b0)))
                });
                let mut r = 0;
                while r < gr {
                    let here = if r + R <= gr { R } else { 1 };
                    macro_rules! group {
                        ($rr:expr) => {{
                            let rp: [*const u8; $rr] =
                                core::array::from_fn(|i| w.as_ptr().add((g0 + r + i) * rb));
                            let mut acc: [[[__m512; A]; C]; $rr] = core::array::from_fn(|i| {
                                core::array::from_fn(|j| {
                                    core::array::from_fn(|a| buf[((r + i) * C + j) * A + a])
                                })
                            });
                            macro_rules! dot {
                                ($wv:expr, $b:expr) => {{
                                    for j in 0..C {
                                        let xb = xc[j].add(32 * P * ($b - b0));
                                        for pp in 0..P {
                                            let xv: __m512bh = core::mem::transmute(
                                                _mm512_loadu_si512(xb.add(32 * pp).cast()),
                                            );
                                            for i in 0..$rr {
                                                acc[i][j][pp % A] =
                                                    _mm512_dpbf16_ps(acc[i][j][pp % A], $wv[i], xv);
                                            }
                                        }
                                    }
                                }};
                            }
                            let gend = b1.min(full);
                            let mut b = b0;
                            while b < gend {
                                let mut q = [_mm512_setzero_si512(); $rr];
                                let mut src_e = [core::ptr::null::<u8>(); $rr];
                                for i in 0..$rr {
                                    let src = rp[i].add(HEADER + BLOCK * b);
                                    // Both lines a 68-byte group may touch.
                                    let (p0, p1) =
                                        (src.wrapping_add(pf), src.wrapping_add(pf + 67));
                                    if C == 1 {
                                        _mm_prefetch::<_MM_HINT_T1>(p0.cast());
                                        _mm_prefetch::<_MM_HINT_T1>(p1.cast());
                                    } else {
                                        _mm_prefetch::<_MM_HINT_T0>(p0.cast());
                                        _mm_prefetch::<_MM_HINT_T0>(p1.cast());
                                    }
                                    q[i] = _mm512_loadu_si512(src.cast());
                                    src_e[i] = src.add(64);
                                }
                                for t in 0..GROUP {
                                    let mut wv = [_mm512_setzero_si512(); $rr];
                                    for i in 0..$rr {
                                        let e = *src_e[i].add(t);
                                        let tb = _mm512_load_si512(
                                            lut.0[usize::from(e)].as_ptr().cast(),
                                        );
                                        let idx = match t {
                                            0 => q[i],
                                            1 => _mm512_srli_epi16::<4>(q[i]),
                                            2 => _mm512_srli_epi16::<8>(q[i]),
                                            _ => _mm512_srli_epi16::<12>(q[i]),
                                        };
                                        wv[i] = _mm512_permutexvar_epi16(idx, tb);
                                    }
                                    let wv: [__m512bh; $rr] =
                                        core::array::from_fn(|i| core::mem::transmute(wv[i]));
                                    dot!(wv, b + t);
                                }
                                b += GROUP;
                            }
                            while b < b1 {
                                // Tail blocks (the last `nb % 4` of the row).
                                let mut wv = [_mm512_setzero_si512(); $rr];
                                for i in 0..$rr {
                                    let v = _mm_loadu_si128(rp[i].add(HEADER + BLOCK * b).cast());
                                    let y = _mm256_inserti128_si256::<1>(
                                        _mm256_castsi128_si256(v),
                                        _mm_srli_epi16::<4>(v),
                                    );
                                    let e = *rp[i].add(HEADER + BLOCK * b + 16);
                                    let tb =
                                        _mm512_load_si512(lut.0[usize::from(e)].as_ptr().cast());
                                    wv[i] = _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(y), tb);
                                }
                                let wv: [__m512bh; $rr] =
                                    core::array::from_fn(|i| core::mem::transmute(wv[i]));
                                dot!(wv, b);
                                b += 1;
                            }
                            for i in 0..$rr {
                                for j in 0..C {
                                    for a in 0..A {
                                        buf[((r + i) * C + j) * A + a] = acc[i][j][a];
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
                    r += here;
                }
                b0 = b1;
            }
            for i in 0..gr {
                let row = g0 + i;
                let scale = row_scale(&w[row * rb..(row + 1) * rb]);
                for j in 0..p.ncp {
                    let mut s = buf[(i * C + j) * A];
                    for a in 1..A {
                        s = _mm512_add_ps(s, buf[(i * C + j) * A + a]);
                    }
                    out[row * p.ncp + j] = _mm512_reduce_add_ps(s) * scale;
                }
            }
            g0 += gr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repack_round_trips() {
        let mut s = 7u64;
        for nb in [1usize, 2, 3, 4, 5, 7, 8, 33] {
            let rb = HEADER + BLOCK * nb;
            let mut row: Vec<u8> = (0..rb)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect();
            row[8..HEADER].fill(0);
            let mut packed = row.clone();
            repack_row(&mut packed);
            let mut back = vec![0u8; rb];
            unrepack_row(&packed, &mut back);
            assert_eq!(back, row, "nb = {nb}");
        }
    }

    #[test]
    fn factor_ranges() {
        // 2^-127 (subnormal f32): weights multiples of 2^-128, below 6 * 2^-127 < 2^-124.
        assert_eq!(factor_range(f32::from_bits(1 << 22)), (-128, -124));
        assert_eq!(factor_range(1.0), (-1, 3));
        // E4M3 1.125 = 9 * 2^-3: multiples of 2^-4, below 6.75 < 2^3.
        assert_eq!(factor_range(1.125), (-4, 3));
        // 2^-9 (E4M3 smallest subnormal, normal in f32).
        assert_eq!(factor_range(2f32.powi(-9)), (-10, -6));
    }
}

//! AVX-512 (F/BW/VL) "one row per register" kernels for MXFP4 and IQ4_NL (against Q8_0
//! activations) and TQ2_0, Q2_K, Q4_K, Q5_K and Q6_K (against Q8_K activations), and the
//! drivers of every format in this layout. Q4_0 rows are repacked at upload into lane order
//! and run `super::q4_0pack`'s types: [`Q4_0`]'s arithmetic (four lanes per block, also the
//! dot of MXFP4, IQ4_NL and NVFP4) for one column and `super::q4_0x16`'s one block per lane
//! for 2..=16; Q8_0 likewise `super::q8x16` for 3..=16 (and 2 on long rows);
//! PQ2_0 rows are repacked at upload into lane order and run `super::pq2pack`'s type
//! (`super::pq2x4`'s one-activation-block-per-lane arithmetic);
//! tiles of 2..16 columns on long rows take `super::zseg`'s segmented driver.
//!
//! Layout. The activations of the tile are first rearranged, once per kernel call, into
//! per-column *records* (a few 64-byte vectors per weight group, [`Lanes::prep`]) whose byte
//! order matches the order in which a weight group unpacks into 512-bit registers with the
//! fewest operations (nibble planes, 2-bit planes, ...), together with the exact integer
//! corrections each format needs (activation sums for offset codes) and the activation scales
//! as f32 lanes. A weight group of one row is then decoded once into registers
//! ([`Lanes::decode`]) and reused for every column of the sub-tile ([`Lanes::dot`]): per
//! column, `vpmaddubsw` (unsigned weight codes x signed activations), `vpmaddwd` (by ones, or
//! by the per-sub-block scales for the K-quants), an exact i32 correction, one `vcvtdq2ps` and
//! one FMA into 16 f32 lanes. Nothing is reduced across lanes before the end of the row.
//!
//! Arithmetic and bound. Every i32 lane sum is exact (the overflow margins are stated at each
//! format). Lane `l` of a row's accumulator receives, per group in order, `fma(s_l, sc_l, acc_l)`
//! where `s_l` is an exact integer (converted exactly while |s_l| < 2^24, which only extreme
//! Q6_K blocks can exceed, at the cost of one more rounding) and `sc_l` is one rounded product
//! of the weight and activation scales (Q4_K, Q2_K: a second FMA subtracts the min term); at
//! the end the 16 lanes are summed by a fixed tree (`(lo256 + hi256)`, then
//! [`super::avx2::hsum_ps`]). Every lane's integer is a sum of its own elements' terms only
//! (per-lane activation-sum corrections), so each term carries at most `3 + 2 * groups + 4`
//! roundings, fewer than K, and `|y - y_exact| <= c * K * 2^-24 * sum|w_i a_i|` holds with
//! **c = 1** for every format here (not bit-identical to the reference, whose order differs).
//! Where `sum|w_i a_i|` itself exceeds f32 (MXFP4 scales near 2^127), a lane may overflow.
//!
//! VNNI. Under `Isa::Avx512Vnni` the formats of [`kernel_vnni`] run [`Lanes::dot_vnni`]
//! (compiled in [`entry_vnni`] with AVX-512 VNNI enabled): `vpdpbusd` adds the four u8 x i8
//! products of each i32 lane directly, starting from the negated correction, which is the same
//! exact lane integer as the `vpmaddubsw` / `vpmaddwd` pair, so results are identical. Q4_K,
//! Q5_K and Q6_K are the exception: their VNNI forms group the same exact block sum into lanes
//! differently ([`Q4k`], [`Q6k`]), so they agree with the plain forms within the bound, not bit
//! for bit.
//!
//! What must not live here: length checks (`super::check_q8_0`, `super::ext::check`), the
//! AVX2 kernels, other formats (the other files in `z512`'s layout: `super::iq512`,
//! `super::q3k512`, `super::tq1_512`, `super::nvfp4_512`).

#![allow(clippy::incompatible_msrv)]
// Plane, row and column indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;
use std::ptr;

use lowbit_core::format::ggml::iq::tables::KVALUES_IQ4NL;
use lowbit_core::{Error, FormatId};

use super::avx2::hsum_ps;
use super::ext::{self, ActSlice, W_PQ2, W_Q2K, W_Q4K, W_Q5K, W_Q6K, W_TQ2};
use crate::act::{ActData, Acts, Layout};
use crate::kernels::{Extras, Kernel, PrepFn};

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Q4_0 => Some(Kernel { name: "avx512-q4_0", f: run_q4_0::<false> }),
        FormatId::Q8_0 => Some(Kernel { name: "avx512-q8_0", f: run_q8::<false> }),
        FormatId::Mxfp4 => Some(Kernel { name: "avx512-mxfp4", f: run_q8_0::<Mxfp4, false> }),
        FormatId::Iq4Nl => Some(Kernel { name: "avx512-iq4_nl", f: run_q8_0::<Iq4Nl, false> }),
        FormatId::Tq2_0 => Some(Kernel { name: "avx512-tq2_0", f: run_ext::<Tq2, W_TQ2> }),
        FormatId::Pq2_0 => {
            Some(Kernel { name: "avx512-pq2_0", f: run_ext::<super::pq2pack::Pq2Pk, W_PQ2> })
        }
        FormatId::Q4K => Some(Kernel { name: "avx512-q4_k", f: run_ext::<Q4k, W_Q4K> }),
        FormatId::Q6K => Some(Kernel { name: "avx512-q6_k", f: run_ext::<Q6k, W_Q6K> }),
        FormatId::Q2K => Some(Kernel { name: "avx512-q2_k", f: run_ext::<Q2k, W_Q2K> }),
        FormatId::Q5K => Some(Kernel { name: "avx512-q5_k", f: run_ext::<Q5k, W_Q5K> }),
        FormatId::Q3K => {
            Some(Kernel { name: "avx512-q3_k", f: run_ext::<super::q3k512::Q3k, { ext::W_Q3K }> })
        }
        FormatId::Tq1_0 => {
            Some(Kernel { name: "avx512-tq1_0", f: run_ext::<super::tq1_512::Tq1, { ext::W_TQ1 }> })
        }
        FormatId::Ptq1_0 => Some(Kernel {
            name: "avx512-ptq1_0",
            f: run_ext::<super::tq1_512::Ptq1, { ext::W_PTQ1 }>,
        }),
        FormatId::Nvfp4 => Some(Kernel {
            name: "avx512-nvfp4",
            f: run_ext::<super::nvfp4_512::Nvfp4, { ext::W_NVFP4 }>,
        }),
        _ => super::iq512::kernel(format),
    }
}

/// One 64-byte activation vector of a record.
#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
pub(crate) struct V64(pub [u8; 64]);

impl V64 {
    pub(super) fn put_i8(&mut self, i: usize, v: i8) {
        self.0[i] = v as u8;
    }
    pub(super) fn put_i32(&mut self, i: usize, v: i32) {
        self.0[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub(super) fn put_f32(&mut self, i: usize, v: f32) {
        self.0[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// A weight format in the one-row-per-register layout.
pub(crate) trait Lanes {
    /// Bytes of one weight block.
    const BB: usize;
    /// Weight blocks per group (one decode).
    const GB: usize;
    /// 64-byte vectors per activation record (one group, one column).
    const REC: usize;
    /// Whether a decoded group fills so many registers (K-quants: 9-10) that two-column
    /// tiles use row groups of 2 instead of 4 (measured faster; one column: [`drive1`]).
    const WIDE: bool = false;
    /// Whether rows go in groups of 2 for every tile of 2..=4 columns (and 1 row for wider
    /// tiles), overriding [`Lanes::WIDE`]: for decoded groups of about 9 registers, where
    /// two rows sharing each activation-record load beat one row (the record loads bound
    /// the one-row form at n = 4).
    const PAIRS: bool = false;
    /// How [`drive`] and [`drive1`] prefetch each row stream (see [`super::Prefetch`]).
    const PREFETCH: super::Prefetch = super::Prefetch::DEFAULT;
    /// One row's decoded group.
    type W: Copy;
    /// Writes the record of group `g` of column `j` into `rec` (`REC` vectors). Blocks past
    /// `nb` (a partial last group) get zero activations.
    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]);
    /// [`Lanes::prep`] for a whole group (`g < nb / GB`), with vector instructions.
    ///
    /// # Safety
    /// The AVX-512 set of [`entry`] is available.
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Self::prep(act, nb, j, g, rec);
    }
    /// Decodes the group at `p`.
    ///
    /// # Safety
    /// `p .. p + GB * BB` is readable; the AVX-512 set of [`entry`] is available.
    unsafe fn decode(p: *const u8) -> Self::W;
    /// Decodes a row's partial last group from the zero-padded copy of its bytes at `p`
    /// (`GB * BB` readable bytes). The default is [`Lanes::decode`]; a format whose upload
    /// repack leaves the partial group canonical (`super::q4_0pack`) decodes that here.
    ///
    /// # Safety
    /// As [`Lanes::decode`].
    #[inline(always)]
    unsafe fn decode_tail(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller.
        unsafe { Self::decode(p) }
    }
    /// `acc` plus the contribution of a row's partial last group (the `tail < GB * BB` bytes
    /// at `p`) for the one column whose record is at `a`, as [`drive1`] runs it. The default
    /// decodes a zero-padded copy ([`Lanes::decode_tail`]) and runs [`dot_v`]; a format may
    /// take the tail another way (`super::q4_0pack::Q4_0Pk4`: in its canonical 4-block groups)
    /// as long as its records for the partial group match.
    ///
    /// # Safety
    /// `p .. p + tail` is readable, `a` points at `REC` readable vectors; the AVX-512 set of
    /// [`entry`] is available (`V`: of [`entry_vnni`]).
    #[inline(always)]
    unsafe fn dot_tail1<const V: bool>(
        p: *const u8,
        tail: usize,
        a: *const V64,
        acc: __m512,
    ) -> __m512
    where
        Self: Sized,
    {
        // SAFETY: copies the `tail <= TAIL_BYTES` readable bytes at `p` (caller) into the
        // buffer, which `decode_tail` may read whole; the rest is forwarded from the caller.
        unsafe {
            let mut buf = [0u8; TAIL_BYTES];
            ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), tail);
            let d = Self::decode_tail(buf.as_ptr());
            dot_v::<Self, V>(&d, a, acc)
        }
    }
    /// `acc` plus this group's contribution for the column whose record is at `a`.
    ///
    /// # Safety
    /// `a` points at `REC` readable vectors; the AVX-512 set of [`entry`] is available.
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512;
    /// [`Lanes::dot`] with AVX-512 VNNI (formats listed in [`kernel_vnni`] override it): the same exact i32 lane sums (`vpdpbusd` adds the
    /// four u8 x i8 products of each lane without the i16 step), so the same result.
    ///
    /// # Safety
    /// As [`Lanes::dot`], plus AVX-512 VNNI is available ([`entry_vnni`]).
    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Self::dot(w, a, acc) }
    }
    /// One group of a whole tile: `acc[i][jj]` plus the dot of row `i`'s decoded group and the
    /// record at `a[jj]`, what [`dot_v`] gives for each pair. The default runs [`dot_v`] pair
    /// by pair, columns outer; a format may order the instructions of the pairs differently
    /// (`super::q4_0x16` interleaves them) as long as every pair gets exactly [`dot_v`]'s
    /// result, so the drivers' results do not depend on it.
    ///
    /// # Safety
    /// As [`Lanes::dot`] for every `a[jj]` (`V`: as [`Lanes::dot_vnni`]).
    #[inline(always)]
    unsafe fn dot_tile<const R: usize, const CT: usize, const V: bool>(
        dec: &[Self::W; R],
        a: &[*const V64; CT],
        acc: &mut [[__m512; CT]; R],
    ) where
        Self: Sized,
    {
        for jj in 0..CT {
            for i in 0..R {
                // SAFETY: forwarded from the caller.
                acc[i][jj] = unsafe { dot_v::<Self, V>(&dec[i], a[jj], acc[i][jj]) };
            }
        }
    }
}

/// [`Lanes::dot`], or [`Lanes::dot_vnni`] when `V`.
///
/// # Safety
/// As [`Lanes::dot`] (`V`: as [`Lanes::dot_vnni`]).
#[inline(always)]
pub(super) unsafe fn dot_v<F: Lanes, const V: bool>(
    w: &F::W,
    a: *const V64,
    acc: __m512,
) -> __m512 {
    // SAFETY: forwarded from the caller.
    unsafe {
        if V {
            F::dot_vnni(w, a, acc)
        } else {
            F::dot(w, a, acc)
        }
    }
}

/// Loads vector `i` of the record at `a`.
///
/// # Safety
/// `a + i` is a readable [`V64`]; AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn ld(a: *const V64, i: usize) -> __m512i {
    // SAFETY: the caller guarantees the read; `V64` is 64-byte aligned.
    unsafe { _mm512_load_si512(a.add(i).cast()) }
}

/// Loads vector `i` of the record at `a` as f32 lanes.
///
/// # Safety
/// As [`ld`].
#[inline(always)]
pub(super) unsafe fn ldps(a: *const V64, i: usize) -> __m512 {
    // SAFETY: the caller guarantees the read; `V64` is 64-byte aligned.
    unsafe { _mm512_load_ps(a.add(i).cast()) }
}

/// One f16 at `p` as f32, broadcast to 16 lanes.
///
/// # Safety
/// `p .. p + 2` is readable; AVX-512F and F16C are available.
#[inline(always)]
pub(super) unsafe fn f16_bcast(p: *const u8) -> __m512 {
    // SAFETY: reads 2 bytes at `p` (caller); register-only operations.
    unsafe {
        let h = ptr::read_unaligned(p.cast::<u16>());
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h)));
        _mm512_broadcastss_ps(v)
    }
}

/// The sum of the 16 lanes of `v`: `hsum_ps(lo256 + hi256)`.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
pub(super) unsafe fn hsum16(v: __m512) -> f32 {
    // SAFETY: register-only operations.
    unsafe {
        let lo = _mm512_castps512_ps256(v);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        hsum_ps(_mm256_add_ps(lo, hi))
    }
}

/// Bytes of the zero-padded copy a row's partial last group is decoded from (at least
/// `GB * BB` of every [`Lanes`] type: checked at compile time in the drivers).
pub(super) const TAIL_BYTES: usize = 576;

/// The driver (row and column group sizes per [`entry`]): rows in groups of `R`, columns in sub-tiles of `CT` (the last row / column
/// repeated, extra results discarded), groups of `F::GB` blocks (a partial last group is
/// decoded from a zero-padded copy).
///
/// # Safety
/// The AVX-512 set of [`entry`] is available; `w` is whole rows of `rb = nb * F::BB` bytes;
/// `recs` holds `ncols * ng * F::REC` vectors (`ng = ceil(nb / F::GB)`);
/// `out.len() == rows * ncols`; `ncols >= 1`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn drive<F: Lanes, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    const { assert!(F::GB * F::BB <= TAIL_BYTES) };
    let gbytes = F::GB * F::BB;
    let full = nb / F::GB;
    let ng = nb.div_ceil(F::GB);
    let per_col = ng * F::REC;
    let nrows = w.len() / rb;
    // SAFETY: row pointers are clamped to `nrows - 1`, groups `< full` lie inside the row, the
    // partial group is copied into a padded buffer first; record pointers are clamped to the
    // last column and stay inside `recs`; the prefetch hint never faults.
    let pfx = F::PREFETCH.one_group_ahead(R * rb);
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = ext::row_ptrs::<R>(w, rb, nrows, r0);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut ap = [recs.as_ptr(); CT];
                for jj in 0..CT {
                    ap[jj] = recs.as_ptr().add((c0 + jj.min(nc - 1)) * per_col);
                }
                let mut acc = [[_mm512_setzero_ps(); CT]; R];
                for g in 0..full {
                    let mut dec = [F::decode(rp[0].add(g * gbytes)); R];
                    for i in 0..R {
                        let p = rp[i].add(g * gbytes);
                        pfx.span(p, gbytes);
                        if i > 0 {
                            dec[i] = F::decode(p);
                        }
                    }
                    let mut a = ap;
                    for jj in 0..CT {
                        a[jj] = ap[jj].add(g * F::REC);
                    }
                    F::dot_tile::<R, CT, V>(&dec, &a, &mut acc);
                }
                if full < ng {
                    let tail = (nb - full * F::GB) * F::BB;
                    let mut buf = [[0u8; TAIL_BYTES]; R];
                    for i in 0..R {
                        ptr::copy_nonoverlapping(
                            rp[i].add(full * gbytes),
                            buf[i].as_mut_ptr(),
                            tail,
                        );
                    }
                    let mut dec = [F::decode_tail(buf[0].as_ptr()); R];
                    for i in 1..R {
                        dec[i] = F::decode_tail(buf[i].as_ptr());
                    }
                    let mut a = ap;
                    for jj in 0..CT {
                        a[jj] = ap[jj].add(full * F::REC);
                    }
                    F::dot_tile::<R, CT, V>(&dec, &a, &mut acc);
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

/// The single-column driver: rows in groups of `R`; per group of blocks, each row's group is
/// decoded and at once dotted with the column's record, so one decoded row is live at a time
/// (in [`drive`] all `R` rows are decoded before the dots: for the K-quants' 9-11 registers
/// per row that spilled to the stack at `R = 4`, which is why they ran rows in pairs). Each
/// row's accumulator receives the same FMAs in the same order as in [`drive`] with one
/// column, so the same bits.
///
/// Why 4 rows. One thread streaming weights from memory needs enough reads in flight; four
/// row streams, each prefetched one row group ahead, kept the read rate up where the old
/// pairs did not, and one row (a single stream) was far slower. Measured (`lowbit bench
/// --n 1 --threads 1`, old and new alternated in one run, 2026-12-02, docs/BENCHMARKS.md
/// "Session 10 (n1)"), Q6_K, µs: 4096 x 14336 2610-3282 -> 2027-2123, 14336 x 4096 2666-2769
/// -> 2022-2080; 3 and 6 rows no better than 4.
///
/// # Safety
/// As [`drive`] with `ncols == 1`: `recs` holds the column's `ceil(nb / F::GB) * F::REC`
/// vectors, `out.len() == rows`.
#[inline(always)]
unsafe fn drive1<F: Lanes, const R: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    out: &mut [f32],
) {
    const { assert!(F::GB * F::BB <= TAIL_BYTES) };
    let gbytes = F::GB * F::BB;
    let full = nb / F::GB;
    let ng = nb.div_ceil(F::GB);
    let nrows = w.len() / rb;
    let pfx = F::PREFETCH.one_group_ahead(R * rb);
    // SAFETY: as in `drive`: row pointers are clamped to `nrows - 1`, groups `< full` lie
    // inside the row, the partial group is copied into a padded buffer first, the record
    // pointers stay inside the column's records; the prefetch hint never faults.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = ext::row_ptrs::<R>(w, rb, nrows, r0);
            let mut acc = [_mm512_setzero_ps(); R];
            for g in 0..full {
                let a = recs.as_ptr().add(g * F::REC);
                for i in 0..R {
                    let p = rp[i].add(g * gbytes);
                    pfx.span(p, gbytes);
                    let d = F::decode(p);
                    acc[i] = dot_v::<F, V>(&d, a, acc[i]);
                }
            }
            if full < ng {
                let tail = (nb - full * F::GB) * F::BB;
                let a = recs.as_ptr().add(full * F::REC);
                for i in 0..R {
                    acc[i] = F::dot_tail1::<V>(rp[i].add(full * gbytes), tail, a, acc[i]);
                }
            }
            for i in 0..here {
                out[r0 + i] = hsum16(acc[i]);
            }
            r0 += R;
        }
    }
}

/// [`drive`], or [`super::zseg::drive_seg`] when a sub-tile's records of a whole row do not
/// fit the L1 budget (the same arithmetic per (row, column), so the same bits).
///
/// # Safety
/// As [`drive`].
#[inline(always)]
unsafe fn drive_any<F: Lanes, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    recs: &[V64],
    ncols: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller (both drivers have the same contract).
    unsafe {
        if super::zseg::segmented::<F, CT>(nb) {
            super::zseg::drive_seg::<F, R, CT, V>(w, rb, nb, recs, ncols, out)
        } else {
            drive::<F, R, CT, V>(w, rb, nb, recs, ncols, out)
        }
    }
}

/// Rearranges the activations of the tile's columns into records.
///
/// # Safety
/// The AVX-512 set of [`entry`] is available.
#[inline(always)]
unsafe fn prep_all<F: Lanes>(act: ActSlice<'_>, nb: usize, cols: &Range<usize>) -> Vec<V64> {
    let ng = nb.div_ceil(F::GB);
    let full = nb / F::GB;
    let mut recs = vec![V64([0; 64]); cols.len() * ng * F::REC];
    for (c, j) in cols.clone().enumerate() {
        for g in 0..ng {
            let at = (c * ng + g) * F::REC;
            let rec = &mut recs[at..at + F::REC];
            if g < full {
                // SAFETY: forwarded from the caller.
                unsafe { F::prep_fast(act, nb, j, g, rec) };
            } else {
                F::prep(act, nb, j, g, rec);
            }
        }
    }
    recs
}

/// Column-count dispatch (`V`: the VNNI dot products).
///
/// # Safety
/// As [`drive`] (with `recs` built here from `act` for `cols`), plus the features of
/// [`entry`] (`V`: of [`entry_vnni`]) are available.
#[inline(always)]
unsafe fn dispatch<F: Lanes, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    act: ActSlice<'_>,
    shared: Option<&[V64]>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    let ncols = cols.len();
    // SAFETY: forwarded from the caller; `recs` holds the records of `ncols` columns (the
    // caller's `shared` slice has that length, [`shared_recs`]).
    unsafe {
        let local;
        let recs = match shared {
            Some(r) => r,
            None => {
                local = prep_all::<F>(act, nb, &cols);
                &local[..]
            }
        };
        if ncols == 1 {
            return drive1::<F, 4, V>(w, rb, nb, recs, out);
        }
        if F::PAIRS {
            return match ncols {
                2 => drive_any::<F, 2, 2, V>(w, rb, nb, recs, ncols, out),
                3..=4 => drive_any::<F, 2, 4, V>(w, rb, nb, recs, ncols, out),
                _ => drive_any::<F, 1, 8, V>(w, rb, nb, recs, ncols, out),
            };
        }
        match (F::WIDE, ncols) {
            (false, 2) => drive_any::<F, 4, 2, V>(w, rb, nb, recs, ncols, out),
            (true, 2) => drive_any::<F, 2, 2, V>(w, rb, nb, recs, ncols, out),
            (true, 3..=4) => drive_any::<F, 1, 4, V>(w, rb, nb, recs, ncols, out),
            (true, _) => drive_any::<F, 1, 8, V>(w, rb, nb, recs, ncols, out),
            (_, 1..=4) => drive_any::<F, 2, 4, V>(w, rb, nb, recs, ncols, out),
            _ => drive_any::<F, 2, 8, V>(w, rb, nb, recs, ncols, out),
        }
    }
}

/// [`dispatch`] with AVX-512 F/BW/VL, AVX2, FMA and F16C enabled.
///
/// # Safety
/// As [`dispatch`]; those features are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn entry<F: Lanes>(
    w: &[u8],
    rb: usize,
    nb: usize,
    act: ActSlice<'_>,
    shared: Option<&[V64]>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe { dispatch::<F, false>(w, rb, nb, act, shared, cols, out) }
}

/// [`dispatch`] with [`entry`]'s features plus AVX-512 VNNI, running [`Lanes::dot_vnni`].
///
/// # Safety
/// As [`dispatch`]; those features are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn entry_vnni<F: Lanes>(
    w: &[u8],
    rb: usize,
    nb: usize,
    act: ActSlice<'_>,
    shared: Option<&[V64]>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe { dispatch::<F, true>(w, rb, nb, act, shared, cols, out) }
}

/// [`entry_vnni`] with AVX-512 VBMI enabled too, for the formats whose decode uses `vpermi2b`
/// (`super::tq1_512`'s `VB` forms).
///
/// # Safety
/// As [`dispatch`]; those features are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")]
unsafe fn entry_vnni_vbmi<F: Lanes>(
    w: &[u8],
    rb: usize,
    nb: usize,
    act: ActSlice<'_>,
    shared: Option<&[V64]>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe { dispatch::<F, true>(w, rb, nb, act, shared, cols, out) }
}

/// Whether this CPU has AVX-512 VBMI (checked once per kernel-table build, before any
/// [`entry_vnni_vbmi`] kernel is handed out).
fn has_vbmi() -> bool {
    std::is_x86_feature_detected!("avx512vbmi")
}

/// [`run_ext_v`] (VNNI) through [`entry_vnni_vbmi`].
fn run_ext_vbmi<F: Lanes + 'static, const C: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = ext::check::<C>(format, w, rb, acts, &cols, out)?;
    let shared = shared_recs::<F>(acts, s.nb, &cols);
    // SAFETY: handed out only by `kernel_vnni` (reached for `Isa::Avx512Vnni` after
    // `available()` detected AVX-512 F/BW/VL and VNNI, AVX2, FMA and F16C) when `has_vbmi()`
    // detected AVX-512 VBMI; `ext::check` checked the lengths as in `run_ext_v`.
    unsafe { entry_vnni_vbmi::<F>(w, rb, s.nb, s.act, shared, cols, out) };
    Ok(())
}

/// [`entry`] or (`V`) [`entry_vnni`].
///
/// # Safety
/// As the one called.
#[inline(always)]
unsafe fn entry_v<F: Lanes, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    act: ActSlice<'_>,
    shared: Option<&[V64]>,
    cols: Range<usize>,
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if V {
            entry_vnni::<F>(w, rb, nb, act, shared, cols, out)
        } else {
            entry::<F>(w, rb, nb, act, shared, cols, out)
        }
    }
}

/// Q4_0 weights, repacked at upload into lane order (`super::q4_0pack`, [`extras`]): 2..=16
/// columns one block per lane (`Q4_0Pk16`), one column four lanes per block (`Q4_0Pk4`,
/// [`Q4_0`]'s arithmetic). Results are the same bits as those of the canonical-layout types
/// they replaced (`super::q4_0x16::Q4_0x16`, [`Q4_0`]; tested in `super::q4_0pack`).
pub(super) fn run_q4_0<const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    use super::q4_0pack::{Q4_0Pk16, Q4_0Pk4};
    if acts.n > 1 {
        // 2..=16 columns: one block per lane (`super::q4_0x16`), a third less time at n = 4
        // and half at n = 8 and 16 (than `super::avx512`'s paired-row body, which wide tiles
        // ran before: 4096 x 14336, one thread, `kcols` minimum of 6, 2026-12-01, µs: n = 8
        // 12476 -> 7774, n = 16 21409 -> 10413); single columns keep the four-lanes-per-block
        // arithmetic, which streamed long rows faster (4096 x 14336, one thread, 2026-12-01:
        // 2263 vs 2934 µs).
        return run_q8_0::<Q4_0Pk16, V>(format, w, rb, acts, cols, out);
    }
    run_q8_0::<Q4_0Pk4, V>(format, w, rb, acts, cols, out)
}

/// The canonical-layout Q4_0 kernel the lane-order one replaced (n = 1: [`Q4_0`], 2..=16:
/// `super::q4_0x16::Q4_0x16`), on canonical rows: the oracle of `super::q4_0pack`'s
/// bit-for-bit test.
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C are available, and VNNI when `V`.
#[cfg(test)]
pub(super) unsafe fn run_q4_0_canonical<const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    use super::q4_0x16::Q4_0x16;
    if acts.n > 1 {
        return run_q8_0::<Q4_0x16, V>(format, w, rb, acts, cols, out);
    }
    run_q8_0::<Q4_0, V>(format, w, rb, acts, cols, out)
}

/// Whether Q8_0 calls of `n` (at most 16) columns of `k` elements run one block per lane
/// ([`super::q8x16`]): one conversion, product and FMA per 16 blocks and column instead of per
/// two, for a transpose per row shared by the columns. Measured (`kcols`, one thread, minimum
/// of 15 calls, weights 62 MB, 2026-12-01): n = 4, µs, 4096 x 14336: 4496 -> 3251 and 5061 ->
/// 3956, 14336 x 4096: 5854 -> 3534 and 5650 -> 3467; n = 2 gains on long rows (3190 -> 2777,
/// 3085 -> 2709) and loses on 4096-long ones (2266 -> 2776, 2575 -> 2825), so two columns
/// take it only for rows longer than 8192.
fn q8x16_for(n: usize, k: usize) -> bool {
    n >= 3 || (n == 2 && k > 8192)
}

/// Q8_0 weights: [`super::q8x16::Q8x16`] where [`q8x16_for`] says, else
/// [`super::q8_512::Q8`]. Tiles of 5..=16 columns ran `super::avx512`'s paired-row body
/// until session 8; one block per lane halved them (4096 x 14336, one thread, `kcols` minimum
/// of 6, 2026-12-01, µs: n = 8 11121 -> 5598, n = 16 20719 -> 10648; 14336 x 4096: n = 8
/// 21803 -> 6082).
fn run_q8<const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    if q8x16_for(acts.n, acts.k) {
        return run_q8_0::<super::q8x16::Q8x16, V>(format, w, rb, acts, cols, out);
    }
    run_q8_0::<super::q8_512::Q8, V>(format, w, rb, acts, cols, out)
}

fn run_q8_0<F: Lanes + 'static, const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let ck = super::check_q8_0(format, w, rb, acts, &cols, out, F::BB)?;
    let shared = shared_recs::<F>(acts, ck.nb, &cols);
    // SAFETY: reachable only through `kernel` (V = false), which `KernelTable::new` reaches
    // only for `Isa::Avx512` / `Isa::Avx512Vnni` after `available()` detected the features,
    // or `kernel_vnni` (V = true), reached only for `Isa::Avx512Vnni` after
    // `Isa::Avx512Vnni.available()` also detected AVX-512 VNNI (or the test hooks above,
    // whose callers state the same); `check_q8_0` checked the lengths (the activation records
    // are built inside `dispatch`). Q4_0's lane-order types read rows that the table's
    // `repack` rewrote at upload (`CpuBackend::matmul` refuses a matrix repacked for
    // another kernel).
    unsafe { entry_v::<F, V>(w, rb, ck.nb, ActSlice::Q8_0(ck.a, ck.ad), shared, cols, out) };
    Ok(())
}

pub(super) fn run_ext<F: Lanes + 'static, const C: u8>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    run_ext_v::<F, C, false>(format, w, rb, acts, cols, out)
}

pub(super) fn run_ext_v<F: Lanes + 'static, const C: u8, const V: bool>(
    format: FormatId,
    w: &[u8],
    rb: usize,
    acts: &Acts,
    cols: Range<usize>,
    out: &mut [f32],
) -> Result<(), Error> {
    let s = ext::check::<C>(format, w, rb, acts, &cols, out)?;
    // SAFETY: as in `run_q8_0`; `ext::check` checked the lengths for weight code `C`, whose
    // block size is `F::BB` (`F::GB` blocks per group, a partial last group padded).
    let shared = shared_recs::<F>(acts, s.nb, &cols);
    unsafe { entry_v::<F, V>(w, rb, s.nb, s.act, shared, cols, out) };
    Ok(())
}

/// The activation records of every column of one matmul call ([`layout`]), shared by all of
/// the call's kernel calls (row chunks and column tiles) instead of rebuilt by each.
pub(crate) struct Records {
    /// The [`Lanes`] type that built them.
    tag: std::any::TypeId,
    /// Weight blocks per row they were built for.
    nb: usize,
    /// Vectors per column (`ceil(nb / GB) * REC`).
    per_col: usize,
    /// Column after column.
    v: Vec<V64>,
}

/// The records of columns `cols` from the call's shared [`Records`], when they were built by
/// `F` for `nb` blocks per row and every column (else `None`: the kernel builds its own).
fn shared_recs<'a, F: Lanes + 'static>(
    acts: &'a Acts,
    nb: usize,
    cols: &Range<usize>,
) -> Option<&'a [V64]> {
    let r = acts.layout.as_ref()?.0.downcast_ref::<Records>()?;
    let per = nb.div_ceil(F::GB) * F::REC;
    let ok = r.tag == std::any::TypeId::of::<F>()
        && r.nb == nb
        && r.per_col == per
        && r.v.len() == acts.n * per
        && cols.end <= acts.n;
    ok.then(|| &r.v[cols.start * per..cols.end * per])
}

/// Builds the [`Records`] of every column for `F` (weight blocks of `QK` elements; a wrong
/// `QK` only wastes the work: [`shared_recs`] then finds `nb` different), once per
/// matmul call (`Extras::prep`), columns in parallel.
fn layout<F: Lanes + 'static, const QK: usize>(acts: &Acts) -> Option<Layout> {
    use rayon::prelude::*;
    if acts.k == 0 || acts.k % QK != 0 {
        return None;
    }
    let act = match &acts.data {
        ActData::Q8K(b) => ActSlice::Q8K(b),
        ActData::Q8_0 { blocks, d } if d.len() == blocks.len() => ActSlice::Q8_0(blocks, d),
        _ => return None,
    };
    let nb = acts.k / QK;
    let per_col = nb.div_ceil(F::GB) * F::REC;
    let mut v = vec![V64([0; 64]); acts.n * per_col];
    v.par_chunks_mut(per_col).enumerate().for_each(|(j, rec)| {
        // SAFETY: this hook is installed ([`extras`]) only for `Isa::Avx512` /
        // `Isa::Avx512Vnni` tables, which `KernelTable::new` builds only after `available()`
        // detected the features of [`prep_col`].
        unsafe { prep_col::<F>(act, nb, j, rec) }
    });
    Some(Layout(std::sync::Arc::new(Records { tag: std::any::TypeId::of::<F>(), nb, per_col, v })))
}

/// [`layout`] for the Q4_0 and Q8_0 kernels: none for calls wider than one tile (prefill,
/// which runs the GEMM).
fn layout_le4<F: Lanes + 'static, const QK: usize>(acts: &Acts) -> Option<Layout> {
    if acts.n > crate::kernels::MAX_TILE {
        return None;
    }
    layout::<F, QK>(acts)
}

/// [`layout_le4`] for Q4_0's kernel: the records of `super::q4_0pack::Q4_0Pk4` for one
/// column, of `super::q4_0pack::Q4_0Pk16` for 2..=16 (as `run_q4_0` picks).
fn layout_q4_0(acts: &Acts) -> Option<Layout> {
    if acts.n == 1 {
        layout_le4::<super::q4_0pack::Q4_0Pk4, 32>(acts)
    } else {
        layout_le4::<super::q4_0pack::Q4_0Pk16, 32>(acts)
    }
}

/// [`layout_le4`] for Q8_0's kernel: the records of `super::q8x16::Q8x16` where
/// [`q8x16_for`] picks it (as `run_q8` does), else of `super::q8_512::Q8`.
fn layout_q8_0(acts: &Acts) -> Option<Layout> {
    if q8x16_for(acts.n, acts.k) {
        layout_le4::<super::q8x16::Q8x16, 32>(acts)
    } else {
        layout_le4::<super::q8_512::Q8, 32>(acts)
    }
}

/// The records of column `j` (`rec`: `ceil(nb / GB) * REC` vectors, zeroed), as
/// [`prep_all`] builds them.
///
/// # Safety
/// The features named here are available.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn prep_col<F: Lanes>(act: ActSlice<'_>, nb: usize, j: usize, rec: &mut [V64]) {
    let full = nb / F::GB;
    for (g, r) in rec.chunks_exact_mut(F::REC).enumerate() {
        if g < full {
            // SAFETY: the features are available (caller).
            unsafe { F::prep_fast(act, nb, j, g, r) };
        } else {
            F::prep(act, nb, j, g, r);
        }
    }
}

/// The once-per-call activation hook of `format`'s kernel here ([`layout`]), for the
/// `Isa::Avx512` and `Isa::Avx512Vnni` tables.
pub(crate) fn extras(format: FormatId) -> Extras {
    use super::nvfp4_512::Nvfp4;
    use super::q3k512::Q3k;
    use super::tq1_512::{Ptq1, Tq1};
    let prep: PrepFn = match format {
        FormatId::Q4_0 => layout_q4_0,
        FormatId::Q8_0 => layout_q8_0,
        FormatId::Mxfp4 => layout::<Mxfp4, 32>,
        FormatId::Iq4Nl => layout::<Iq4Nl, 32>,
        FormatId::Nvfp4 => layout::<Nvfp4, 64>,
        FormatId::Pq2_0 => layout::<super::pq2pack::Pq2Pk, 128>,
        FormatId::Ptq1_0 => layout::<Ptq1, 128>,
        FormatId::Tq2_0 => layout::<Tq2, 256>,
        FormatId::Tq1_0 => layout::<Tq1, 256>,
        FormatId::Q2K => layout::<Q2k, 256>,
        FormatId::Q3K => layout::<Q3k, 256>,
        FormatId::Q4K => layout::<Q4k, 256>,
        FormatId::Q5K => layout::<Q5k, 256>,
        FormatId::Q6K => layout::<Q6k, 256>,
        FormatId::Iq2Xxs => layout::<super::iq512::Iq2Xxs, 256>,
        FormatId::Iq2Xs => layout::<super::iq512::Iq2Xs, 256>,
        FormatId::Iq2S => layout::<super::iq512::Iq2S, 256>,
        FormatId::Iq3Xxs => layout::<super::iq512::Iq3Xxs, 256>,
        FormatId::Iq3S => layout::<super::iq512::Iq3S, 256>,
        FormatId::Iq4Xs => layout::<super::iq512::Iq4Xs, 256>,
        FormatId::Iq1S => layout::<super::iq512::Iq1S, 256>,
        FormatId::Iq1M => layout::<super::iq512::Iq1M, 256>,
        _ => return Extras::default(),
    };
    // Q4_0's and PQ2_0's kernels read lane-order rows (`super::q4_0pack`, `super::pq2pack`).
    let repack: Option<crate::kernels::RepackFn> = match format {
        FormatId::Q4_0 => Some(super::q4_0pack::repack_row),
        FormatId::Pq2_0 => Some(super::pq2pack::repack_row),
        _ => None,
    };
    Extras { repack, prep: Some(prep), gemm: None }
}

/// The once-per-call activation hook of `format`'s `Isa::Avx512Vnni` kernel: [`extras`], with
/// the records of the VBMI forms and of [`Iq4NlU`] ([`kernel_vnni`]) where those run (records
/// are matched to their kernel's type; [`Iq4NlU`]'s also carry `128 * asum`).
pub(crate) fn extras_vnni(format: FormatId) -> Extras {
    use super::tq1_512::{Ptq1, Tq1};
    let prep: PrepFn = match format {
        FormatId::Ptq1_0 if has_vbmi() => layout::<Ptq1<true>, 128>,
        FormatId::Tq1_0 if has_vbmi() => layout::<Tq1<true>, 256>,
        FormatId::Iq2Xxs if has_vbmi() => layout::<super::iq512::Iq2XxsVbmi, 256>,
        FormatId::Iq2S if has_vbmi() => layout::<super::iq512::Iq2SVbmi, 256>,
        FormatId::Iq4Nl => layout::<Iq4NlU, 32>,
        _ => return extras(format),
    };
    Extras { repack: None, prep: Some(prep), gemm: None }
}

/// The `Isa::Avx512Vnni` kernel for `format`, if it has a VNNI form here (the caller falls
/// back to [`kernel`] otherwise).
pub(crate) fn kernel_vnni(format: FormatId) -> Option<Kernel> {
    use super::nvfp4_512::Nvfp4;
    use super::tq1_512::{Ptq1, Tq1};
    let k = |name, f| Some(Kernel { name, f });
    match format {
        FormatId::Q4_0 => k("avx512-vnni-q4_0", run_q4_0::<true>),
        FormatId::Q8_0 => k("avx512-vnni-q8_0", run_q8::<true>),
        FormatId::Mxfp4 => k("avx512-vnni-mxfp4", run_q8_0::<Mxfp4, true>),
        FormatId::Iq4Nl => k("avx512-vnni-iq4_nl", run_q8_0::<Iq4NlU, true>),
        FormatId::Q4K => k("avx512-vnni-q4_k", run_ext_v::<Q4k, W_Q4K, true>),
        FormatId::Q5K => k("avx512-vnni-q5_k", run_ext_v::<Q5k, W_Q5K, true>),
        FormatId::Q6K => k("avx512-vnni-q6_k", run_ext_v::<Q6k, W_Q6K, true>),
        FormatId::Tq2_0 => k("avx512-vnni-tq2_0", run_ext_v::<Tq2, W_TQ2, true>),
        FormatId::Pq2_0 => k("avx512-vnni-pq2_0", run_ext_v::<super::pq2pack::Pq2Pk, W_PQ2, true>),
        FormatId::Tq1_0 if has_vbmi() => {
            k("avx512-vnni-vbmi-tq1_0", run_ext_vbmi::<Tq1<true>, { ext::W_TQ1 }>)
        }
        FormatId::Ptq1_0 if has_vbmi() => {
            k("avx512-vnni-vbmi-ptq1_0", run_ext_vbmi::<Ptq1<true>, { ext::W_PTQ1 }>)
        }
        FormatId::Iq2Xxs if has_vbmi() => k(
            "avx512-vnni-vbmi-iq2_xxs",
            run_ext_vbmi::<super::iq512::Iq2XxsVbmi, { ext::W_IQ2XXS }>,
        ),
        FormatId::Iq2S if has_vbmi() => {
            k("avx512-vnni-vbmi-iq2_s", run_ext_vbmi::<super::iq512::Iq2SVbmi, { ext::W_IQ2S }>)
        }
        FormatId::Tq1_0 => k("avx512-vnni-tq1_0", run_ext_v::<Tq1, { ext::W_TQ1 }, true>),
        FormatId::Ptq1_0 => k("avx512-vnni-ptq1_0", run_ext_v::<Ptq1, { ext::W_PTQ1 }, true>),
        FormatId::Nvfp4 => k("avx512-vnni-nvfp4", run_ext_v::<Nvfp4, { ext::W_NVFP4 }, true>),
        _ => None,
    }
}

/// The Q8_0 activation block `i` of column `j` (`nbq` blocks per column) and its scale, or
/// `None` past the column's end.
pub(super) fn q8_0_block<'a>(
    act: ActSlice<'a>,
    nbq: usize,
    j: usize,
    i: usize,
) -> Option<(&'a [i8; 32], f32)> {
    let ActSlice::Q8_0(a, ad) = act else { return None };
    if i >= nbq {
        return None;
    }
    Some((&a.get(j * nbq + i)?.qs, *ad.get(j * nbq + i)?))
}

/// The Q8_K activation block `b` of column `j` (`nb` blocks per column).
pub(super) fn q8_k_block(
    act: ActSlice<'_>,
    nb: usize,
    j: usize,
    b: usize,
) -> Option<&lowbit_core::format::ggml::BlockQ8K> {
    let ActSlice::Q8K(a) = act else { return None };
    a.get(j * nb + b)
}

/// Q4_0: groups of 4 blocks (72 bytes). Register: the four blocks' 16 quant bytes side by side
/// (one per 128-bit lane); low nibbles (elements 0..16 of each block) and high nibbles
/// (16..32) as two vectors of unsigned codes 0..=15. Record: `[a_lo, a_hi, 8 * asum, d_a]`,
/// `asum` lane `4t + u` = the sum of block `t`'s activations at `4u..4u+4` and `16+4u..20+4u`.
/// Per column: `madd(maddubs(lo, a_lo) + maddubs(hi, a_hi), 1) - 8 * asum` = exact
/// `sum((q - 8) * a)` per lane (i16 pairs <= 2 * 2 * 15 * 127 < 2^15).
/// Layout source: ggml `block_q4_0` (ggml/src/ggml-common.h), as in the core.
pub(crate) struct Q4_0;

impl Lanes for Q4_0 {
    const BB: usize = 18;
    const GB: usize = 4;
    const REC: usize = 4;
    type W = (__m512i, __m512i, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let [alo, ahi, a8, da] = rec else { return };
        for t in 0..4 {
            let Some((q, d)) = q8_0_block(act, nb, j, 4 * g + t) else { continue };
            for e in 0..16 {
                alo.put_i8(16 * t + e, q[e]);
                ahi.put_i8(16 * t + e, q[16 + e]);
            }
            for u in 0..4 {
                let s: i32 =
                    (0..4).map(|e| i32::from(q[4 * u + e]) + i32::from(q[16 + 4 * u + e])).sum();
                a8.put_i32(4 * t + u, 8 * s);
                da.put_f32(4 * t + u, d);
            }
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let ActSlice::Q8_0(a, ad) = act else { return };
        let i0 = j * nb + 4 * g;
        let (Some(b), Some(d), [r0, r1, r2, r3]) = (a.get(i0..i0 + 4), ad.get(i0..i0 + 4), rec)
        else {
            return;
        };
        // SAFETY: reads the 4 blocks' quants and scales (bounds-checked slices); writes the
        // 4 record vectors.
        unsafe {
            // Written out (no closure): a closure is compiled without the caller's target
            // features, so its intrinsics became out-of-line calls (a fifth of a small call).
            let mut lohi = [_mm512_setzero_si512(); 2];
            for (h, v) in lohi.iter_mut().enumerate() {
                let mut x =
                    _mm512_castsi128_si512(_mm_loadu_si128(b[0].qs.as_ptr().add(16 * h).cast()));
                x = _mm512_inserti32x4::<1>(
                    x,
                    _mm_loadu_si128(b[1].qs.as_ptr().add(16 * h).cast()),
                );
                x = _mm512_inserti32x4::<2>(
                    x,
                    _mm_loadu_si128(b[2].qs.as_ptr().add(16 * h).cast()),
                );
                *v = _mm512_inserti32x4::<3>(
                    x,
                    _mm_loadu_si128(b[3].qs.as_ptr().add(16 * h).cast()),
                );
            }
            let [lo, hi] = lohi;
            let one = _mm512_set1_epi8(1);
            let p = _mm512_add_epi16(_mm512_maddubs_epi16(one, lo), _mm512_maddubs_epi16(one, hi));
            let a8 = _mm512_slli_epi32::<3>(_mm512_madd_epi16(p, _mm512_set1_epi16(1)));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            let dv = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_loadu_ps(d.as_ptr())));
            _mm512_store_si512((r0 as *mut V64).cast(), lo);
            _mm512_store_si512((r1 as *mut V64).cast(), hi);
            _mm512_store_si512((r2 as *mut V64).cast(), a8);
            _mm512_store_ps((r3 as *mut V64).cast(), dv);
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..72 at `p` (caller); register-only operations.
        unsafe {
            let x = _mm512_castsi128_si512(_mm_loadu_si128(p.add(2).cast()));
            let x = _mm512_inserti32x4::<1>(x, _mm_loadu_si128(p.add(20).cast()));
            let x = _mm512_inserti32x4::<2>(x, _mm_loadu_si128(p.add(38).cast()));
            let x = _mm512_inserti32x4::<3>(x, _mm_loadu_si128(p.add(56).cast()));
            let m = _mm512_set1_epi8(0x0F);
            let lo = _mm512_and_si512(x, m);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(x), m);
            let h = |o: usize| u64::from(ptr::read_unaligned(p.add(o).cast::<u16>()));
            let d4 = h(0) | h(18) << 16 | h(36) << 32 | h(54) << 48;
            let dv = _mm_cvtph_ps(_mm_cvtsi64_si128(d4 as i64));
            let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            (lo, hi, _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(dv)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 4 record vectors (caller); register-only operations.
        unsafe {
            let p = _mm512_add_epi16(
                _mm512_maddubs_epi16(w.0, ld(a, 0)),
                _mm512_maddubs_epi16(w.1, ld(a, 1)),
            );
            let s = _mm512_sub_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 2));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.2, ldps(a, 3)), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 4 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let s = _mm512_sub_epi32(_mm512_setzero_si512(), ld(a, 2));
            let s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s, w.0, ld(a, 0)), w.1, ld(a, 1));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.2, ldps(a, 3)), acc)
        }
    }
}

/// TQ2_0 (66-byte blocks of 256, codes `c` with value `c - 1`; element `i` is bits
/// `2 * ((i / 32) % 4)` of byte `32 * (i / 128) + i % 32`, `d` f16 at byte 64; layout from
/// ggml `block_tq2_0`, as in the core). Register: the 64 code bytes shifted by 0, 2, 4, 6 and
/// masked to 0..=3 (plane `s` holds elements `32s..32s+32` and `128+32s..`). Record: the four
/// matching activation planes, `-asum` (lane `l`: minus the sum of the 16 activations that
/// meet lane `l`, so every lane is an exact sum of its own terms), `d_a` in every lane. Per
/// column: `madd(sum_s maddubs(c_s, a_s), 1) + (-asum)` = exact `sum((c - 1) * a)` (i16 lanes
/// <= 4 * 2 * 3 * 128 < 2^15); under VNNI the four `vpdpbusd` start from `-asum` (stored
/// negated since session 11, so no subtraction is left per block and column: one 512-bit
/// operation of about 15 fewer, a change within this VM's noise, docs/BENCHMARKS.md "Session
/// 11 (t1)").
pub(crate) struct Tq2;

impl Lanes for Tq2 {
    const BB: usize = 66;
    const GB: usize = 1;
    const REC: usize = 6;
    type W = ([__m512i; 4], f32);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        for s in 0..4 {
            for l in 0..32 {
                rec[s].put_i8(l, blk.qs[32 * s + l]);
                rec[s].put_i8(32 + l, blk.qs[128 + 32 * s + l]);
            }
        }
        for l in 0..16 {
            let sum: i32 = (0..4)
                .flat_map(|s| (0..4).map(move |e| (s, 4 * l + e)))
                .map(|(s, b)| i32::from(rec[s].0[b] as i8))
                .sum();
            rec[4].put_i32(l, -sum);
        }
        for l in 0..16 {
            rec[5].put_f32(l, blk.d);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 6) else { return };
        let q = blk.qs.as_ptr();
        let r = rec.as_mut_ptr();
        // SAFETY: reads the block's 256 quants; writes the 6 record vectors.
        unsafe {
            let one = _mm512_set1_epi8(1);
            let mut p = _mm512_setzero_si512();
            for s in 0..4 {
                let v = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_loadu_si256(q.add(32 * s).cast())),
                    _mm256_loadu_si256(q.add(128 + 32 * s).cast()),
                );
                p = _mm512_add_epi16(p, _mm512_maddubs_epi16(one, v));
                _mm512_store_si512(r.add(s).cast(), v);
            }
            // `-asum` = `madd(p, -1)` (i16 pair sums of at most 2 * 4 * 128, exact).
            _mm512_store_si512(r.add(4).cast(), _mm512_madd_epi16(p, _mm512_set1_epi16(-1)));
            _mm512_store_ps(r.add(5).cast(), _mm512_set1_ps(blk.d));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..66 at `p` (caller); register-only operations.
        unsafe {
            let x = _mm512_loadu_si512(p.cast());
            let m = _mm512_set1_epi8(3);
            let c = [
                _mm512_and_si512(x, m),
                _mm512_and_si512(_mm512_srli_epi16::<2>(x), m),
                _mm512_and_si512(_mm512_srli_epi16::<4>(x), m),
                _mm512_and_si512(_mm512_srli_epi16::<6>(x), m),
            ];
            (c, super::tq1_512::f16_scalar(p.add(64)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 6 record vectors (caller); register-only operations.
        unsafe {
            let p01 = _mm512_add_epi16(
                _mm512_maddubs_epi16(w.0[0], ld(a, 0)),
                _mm512_maddubs_epi16(w.0[1], ld(a, 1)),
            );
            let p23 = _mm512_add_epi16(
                _mm512_maddubs_epi16(w.0[2], ld(a, 2)),
                _mm512_maddubs_epi16(w.0[3], ld(a, 3)),
            );
            let p = _mm512_add_epi16(p01, p23);
            let s = _mm512_add_epi32(_mm512_madd_epi16(p, _mm512_set1_epi16(1)), ld(a, 4));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), super::tq1_512::scaled(w.1, a, 5), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 6 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let mut s = ld(a, 4);
            for k in 0..4 {
                s = _mm512_dpbusd_epi32(s, w.0[k], ld(a, k));
            }
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), super::tq1_512::scaled(w.1, a, 5), acc)
        }
    }
}

/// Q4_K (144-byte blocks of 256: `d`, `dmin` f16, 12 bytes of 6-bit scales/mins, 128 bytes
/// of nibbles; chunk `c` of 32 bytes holds sub-block `2c` in its low and `2c + 1` in its high
/// nibbles; layout and the 6-bit packing from ggml `block_q4_K` / `get_scale_min_k4`, as in
/// the core's `scales_mins_k4`).
///
/// Register `v_k`: low (k even) or high nibbles of `qs[64 (k / 2) ..][..64]`, i.e. sub-blocks
/// `4 (k / 2) + k % 2` (low 256 bits) and `+ 2` (high); its i16 scale vector repeats those two
/// scales. The 16 scale/min bytes are unpacked in one 128-bit register with a byte shuffle, a
/// per-dword shift, masks and an OR (`[sc0..3, m0..3, sc4..7, m4..7]`), then broadcast once
/// and picked per register (`vpshufb`). Record: the four matching activation planes, the
/// sub-block sums `bsums[2s] + bsums[2s + 1]` (8 x i16, exact: |.| <= 64 * 128), `d_a`.
///
/// Per column: `S = sum_k madd(maddubs(v_k, a_k), sc_k)` (exact: pairs <= 2 * 15 * 128, times
/// scale <= 63, |S_l| < 2^21), `M = madd(mins, bsum32)` (4 lanes, exact), then lane `l`:
/// `g_l = fl(S_l * d - [l < 4] fl(M_l * dmin))` (one FMA) and `acc_l = fl(g_l * d_a + acc_l)`.
/// Under VNNI: `vpdpbusd` gives the exact i32 sum of each 4 elements (|.| <= 4 * 15 * 128, so
/// `vpackssdw` of two registers' sums is exact), and `vpdpwssd` applies the scales to those
/// words: the same exact dot product per block, grouped into lanes differently, so the results
/// differ from the plain AVX-512 ones in rounding only (both within the bound).
pub(crate) struct Q4k;

impl Lanes for Q4k {
    const BB: usize = 144;
    const GB: usize = 1;
    const WIDE: bool = true;
    const REC: usize = 6;
    type W = ([__m512i; 4], [__m512i; 4], __m128i, __m512, __m128, [__m512i; 2]);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        for k in 0..4 {
            let base = 128 * (k / 2) + 32 * (k % 2);
            for l in 0..32 {
                rec[k].put_i8(l, blk.qs[base + l]);
                rec[k].put_i8(32 + l, blk.qs[base + 64 + l]);
            }
        }
        rec[4] = V64([0; 64]);
        for s in 0..8 {
            let v = blk.bsums[2 * s] + blk.bsums[2 * s + 1];
            rec[4].0[2 * s..2 * s + 2].copy_from_slice(&v.to_le_bytes());
        }
        for l in 0..16 {
            rec[5].put_f32(l, blk.d);
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 6) else { return };
        let q = blk.qs.as_ptr();
        let r = rec.as_mut_ptr();
        // SAFETY: reads the block's 256 quants and 16 bsums; writes the 6 record vectors.
        unsafe {
            for k in 0..4 {
                let base = 128 * (k / 2) + 32 * (k % 2);
                let v = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_loadu_si256(q.add(base).cast())),
                    _mm256_loadu_si256(q.add(base + 64).cast()),
                );
                _mm512_store_si512(r.add(k).cast(), v);
            }
            // Pairwise sums of the 16 bsums (exact in i16: |bsums| <= 16 * 128).
            let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
            let b32 = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
            let b32 =
                _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256::<1>(b32));
            _mm512_store_si512(r.add(4).cast(), _mm512_zextsi128_si512(b32));
            _mm512_store_ps(r.add(5).cast(), _mm512_set1_ps(blk.d));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: forwarded from the caller (bytes 0..144).
        unsafe { k4_decode(p, 16) }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 6 record vectors (caller); register-only operations.
        unsafe {
            let t = |k: usize| _mm512_madd_epi16(_mm512_maddubs_epi16(w.0[k], ld(a, k)), w.1[k]);
            let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
            k4_finish(w, s, a, acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 6 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let z = _mm512_setzero_si512();
            let p = |k: usize| _mm512_dpbusd_epi32(z, w.0[k], ld(a, k));
            let p01 = _mm512_packs_epi32(p(0), p(1));
            let p23 = _mm512_packs_epi32(p(2), p(3));
            let s = _mm512_dpwssd_epi32(_mm512_madd_epi16(p01, w.5[0]), p23, w.5[1]);
            k4_finish(w, s, a, acc)
        }
    }
}

/// The float part of [`Q4k::dot`]: `acc + (S * d - zext(M * dmin)) * d_a` (module doc of
/// [`Q4k`]), `M` from the record's sub-block sums.
///
/// # Safety
/// As [`Lanes::dot`].
#[inline(always)]
unsafe fn k4_finish(w: &<Q4k as Lanes>::W, s: __m512i, a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads record vectors 4 (first 16 bytes) and 5 (caller); register-only operations.
    unsafe {
        let m = _mm_madd_epi16(w.2, _mm_load_si128(a.add(4).cast()));
        let mf = _mm_mul_ps(_mm_cvtepi32_ps(m), w.4);
        let g = _mm512_fmsub_ps(_mm512_cvtepi32_ps(s), w.3, _mm512_zextps128_ps512(mf));
        _mm512_fmadd_ps(g, ldps(a, 5), acc)
    }
}

/// Q4_K-style decode (shared by Q4_K and Q5_K): `d`, `dmin`, the 12 scale/min bytes at 4, the
/// 128 nibble bytes at `qoff`.
///
/// # Safety
/// `p .. p + qoff + 128` is readable; the AVX-512 set of [`entry`] is available.
#[inline(always)]
unsafe fn k4_decode(p: *const u8, qoff: usize) -> <Q4k as Lanes>::W {
    // SAFETY: reads bytes 0..16 and `qoff..qoff + 128` at `p` (caller); register-only
    // operations.
    unsafe {
        let m = _mm512_set1_epi8(0x0F);
        let x0 = _mm512_loadu_si512(p.add(qoff).cast());
        let x1 = _mm512_loadu_si512(p.add(qoff + 64).cast());
        let v = [
            _mm512_and_si512(x0, m),
            _mm512_and_si512(_mm512_srli_epi16::<4>(x0), m),
            _mm512_and_si512(x1, m),
            _mm512_and_si512(_mm512_srli_epi16::<4>(x1), m),
        ];
        // Bytes 0..16: d, dmin, q[0..12]. With a = q[0..8] and u = q[8..12] (ggml's
        // get_scale_min_k4): sc0..3 = a[0..4] & 63, m0..3 = a[4..8] & 63, sc4..7 =
        // (u & 15) | (a[0..4] >> 6) << 4, m4..7 = (u >> 4) | (a[4..8] >> 6) << 4.
        let h = _mm_loadu_si128(p.cast());
        let y = _mm_shuffle_epi8(
            h,
            _mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15),
        );
        let lo = _mm_and_si128(
            _mm_srlv_epi32(y, _mm_setr_epi32(0, 0, 0, 4)),
            _mm_set_epi64x(0x0F0F_0F0F_0F0F_0F0F, 0x3F3F_3F3F_3F3F_3F3F),
        );
        let hi = _mm_and_si128(
            _mm_srli_epi16::<2>(_mm_unpacklo_epi64(y, y)),
            _mm_set_epi64x(0x3030_3030_3030_3030, 0),
        );
        // [sc0..3, m0..3, sc4..7, m4..7]
        let sm = _mm_or_si128(lo, hi);
        let smz = _mm512_broadcast_i32x4(sm);
        // Scale of sub-block `s` (byte `s` for s < 4, `s + 4` otherwise) as i16 in every word
        // of the 256-bit half it covers.
        let z = 0xFFu8;
        let pick = |a: u8, b: u8| {
            let (wa, wb) = (i32::from_le_bytes([a, z, a, z]), i32::from_le_bytes([b, z, b, z]));
            _mm512_shuffle_epi8(
                smz,
                _mm512_setr_epi32(wa, wa, wa, wa, wa, wa, wa, wa, wb, wb, wb, wb, wb, wb, wb, wb),
            )
        };
        let sc = [pick(0, 2), pick(1, 3), pick(8, 10), pick(9, 11)];
        // For the VNNI form: per 128-bit lane, words 0..4 the scale of register `2j`'s
        // sub-block there and words 4..8 that of register `2j + 1` (the `vpackssdw` order).
        let pick2 = |a0: u8, a1: u8, b0: u8, b1: u8| {
            let w = |x: u8| i32::from_le_bytes([x, z, x, z]);
            let (a0, a1, b0, b1) = (w(a0), w(a1), w(b0), w(b1));
            _mm512_shuffle_epi8(
                smz,
                _mm512_setr_epi32(a0, a0, a1, a1, a0, a0, a1, a1, b0, b0, b1, b1, b0, b0, b1, b1),
            )
        };
        let sc2 = [pick2(0, 1, 2, 3), pick2(8, 9, 10, 11)];
        let mins = _mm_shuffle_epi8(
            sm,
            _mm_setr_epi8(4, -1, 5, -1, 6, -1, 7, -1, 12, -1, 13, -1, 14, -1, 15, -1),
        );
        let dd = _mm_cvtph_ps(h);
        (v, sc, mins, _mm512_broadcastss_ps(dd), _mm_permute_ps::<0x55>(dd), sc2)
    }
}

/// Q5_K (176-byte blocks: Q4_K's `d`, `dmin`, scales, then `qh[32]` at 16 and the nibbles at
/// 48; element `64c + l` / `64c + 32 + l` takes bit `2c` / `2c + 1` of `qh[l]` as its fifth
/// bit; layout from ggml `block_q5_K` / `dequantize_row_q5_K`, as in the core). As [`Q4k`],
/// with the fifth bits moved to bit 4 per 256-bit half (`vpsllvw` / `vpsrlvw`) and merged
/// (`vpternlogd`): codes 0..=31 (pairs <= 2 * 31 * 128 < 2^15, times scale <= 63).
pub(crate) struct Q5k;

impl Lanes for Q5k {
    const BB: usize = 176;
    const GB: usize = 1;
    const WIDE: bool = true;
    const REC: usize = 6;
    type W = <Q4k as Lanes>::W;

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Q4k::prep(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { Q4k::prep_fast(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..176 at `p` (caller); register-only operations.
        unsafe {
            let mut w = k4_decode(p, 48);
            let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(16).cast()));
            let sh = |a: i16, b: i16| {
                _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi16(a)),
                    _mm256_set1_epi16(b),
                )
            };
            let m10 = _mm512_set1_epi8(0x10);
            let hb = [
                _mm512_sllv_epi16(qh, sh(4, 2)),
                _mm512_sllv_epi16(qh, sh(3, 1)),
                _mm512_srlv_epi16(qh, sh(0, 2)),
                _mm512_srlv_epi16(qh, sh(1, 3)),
            ];
            for k in 0..4 {
                // v | (hb & 0x10): ternary-logic table 0xF8 = A | (B & C).
                w.0[k] = _mm512_ternarylogic_epi32::<0xF8>(w.0[k], hb[k], m10);
            }
            w
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller; the same arithmetic as Q4_K's.
        unsafe { Q4k::dot(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller; the same arithmetic as Q4_K's.
        unsafe { Q4k::dot_vnni(w, a, acc) }
    }
}

/// Q6_K (210-byte blocks of 256: `ql[128]`, `qh[64]`, 16 i8 scales, `d` f16; layout from ggml
/// `block_q6_K`, as in the core). Half `h` (128 elements): `ql[64h..][..64]` low nibbles are
/// elements `128h + 0..64`, high nibbles `128h + 64..128`; the two high bits come from
/// `qh[32h..][..32]` (bits `2r` for quarter `r`), shifted per 256-bit half with `vpsllvw` /
/// `vpsrlvw` to bits 4..6 and merged (`vpternlogd`): unsigned `u = q + 32` (0..=63) in plain
/// element order. Scales (16 elements each): one `vpshufb` puts scale `s` in the high byte of
/// every word it covers, an arithmetic shift sign-extends it. Record: the activations in
/// order (4 vectors), `32 * (a_e + a_e')` per i16 pair (4 vectors), `d_a`. Per column:
/// `sum_k madd(maddubs(u_k, a_k) - a32_k, sc_k)`, i.e. exact `sum(sc * q * a)` per lane with
/// every pair already `q a + q' a'` (pairs <= 2 * 63 * 128 < 2^15 before, <= 2 * 32 * 128
/// after the correction), FMA by `d * d_a`. Under VNNI: `vpdpbusd` sums each 4 `u a`
/// (|.| <= 4 * 63 * 127 < 2^15), `vpackssdw` packs two registers' sums (exact), the record's
/// `-32 * (sum of the 4 activations)` in the same order is added (exact, |.| <= 4 * 32 * 127),
/// and `vpdpwssd` applies the scales: the same exact block sum in other lanes, so within the
/// bound of the plain form, not bit-identical to it. Record vectors 9 and 10 hold those
/// corrections.
pub(crate) struct Q6k;

impl Lanes for Q6k {
    const BB: usize = 210;
    const GB: usize = 1;
    const WIDE: bool = true;
    const REC: usize = 11;
    type W = ([__m512i; 4], [__m512i; 4], __m512, [__m512i; 2]);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        for k in 0..4 {
            for l in 0..64 {
                rec[k].put_i8(l, blk.qs[64 * k + l]);
            }
            for pr in 0..32 {
                let v = 32
                    * (i16::from(blk.qs[64 * k + 2 * pr]) + i16::from(blk.qs[64 * k + 2 * pr + 1]));
                rec[4 + k].0[2 * pr..2 * pr + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        for l in 0..16 {
            rec[8].put_f32(l, blk.d);
        }
        // VNNI corrections: -32 * (sum of each 4 activations), in `vpackssdw` order of
        // registers (0, 1) and (2, 3).
        for (c, pair) in [(9usize, 0usize), (10, 2)] {
            for lane in 0..4 {
                for (h, k) in [pair, pair + 1].into_iter().enumerate() {
                    for t in 0..4 {
                        let e = 64 * k + 16 * lane + 4 * t;
                        let v: i16 = -32 * (0..4).map(|i| i16::from(blk.qs[e + i])).sum::<i16>();
                        let at = 16 * lane + 8 * h + 2 * t;
                        rec[c].0[at..at + 2].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 11) else { return };
        let q = blk.qs.as_ptr();
        let r = rec.as_mut_ptr();
        // SAFETY: reads the block's 256 quants; writes the 9 record vectors.
        unsafe {
            let c32 = _mm512_set1_epi8(32);
            let one = _mm512_set1_epi8(1);
            let mut c4 = [_mm512_setzero_si512(); 4];
            for k in 0..4 {
                let v = _mm512_loadu_si512(q.add(64 * k).cast());
                _mm512_store_si512(r.add(k).cast(), v);
                _mm512_store_si512(r.add(4 + k).cast(), _mm512_maddubs_epi16(c32, v));
                c4[k] = _mm512_madd_epi16(_mm512_maddubs_epi16(one, v), _mm512_set1_epi16(-32));
            }
            _mm512_store_ps(r.add(8).cast(), _mm512_set1_ps(blk.d));
            _mm512_store_si512(r.add(9).cast(), _mm512_packs_epi32(c4[0], c4[1]));
            _mm512_store_si512(r.add(10).cast(), _mm512_packs_epi32(c4[2], c4[3]));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..210 at `p` (caller); register-only operations.
        unsafe {
            let m4 = _mm512_set1_epi8(0x0F);
            let m30 = _mm512_set1_epi8(0x30);
            let sh = |a: i16, b: i16| {
                _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi16(a)),
                    _mm256_set1_epi16(b),
                )
            };
            let mut u = [_mm512_setzero_si512(); 4];
            for h in 0..2 {
                let x = _mm512_loadu_si512(p.add(64 * h).cast());
                let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(128 + 32 * h).cast()));
                let h01 = _mm512_and_si512(_mm512_sllv_epi16(qh, sh(4, 2)), m30);
                let h23 = _mm512_and_si512(_mm512_srlv_epi16(qh, sh(0, 2)), m30);
                // (x & 0x0F) | h: ternary-logic table 0xEA = (A & B) | C with A = x, B = m4, C = h.
                u[2 * h] = _mm512_ternarylogic_epi32::<0xEA>(x, m4, h01);
                u[2 * h + 1] =
                    _mm512_ternarylogic_epi32::<0xEA>(_mm512_srli_epi16::<4>(x), m4, h23);
            }
            let sb = _mm512_broadcast_i32x4(_mm_loadu_si128(p.add(192).cast()));
            let z = 0xFFu8;
            let pick = |k: u8| {
                let b = |l: u8| i32::from_le_bytes([z, 4 * k + l, z, 4 * k + l]);
                #[rustfmt::skip]
                let idx = _mm512_setr_epi32(
                    b(0), b(0), b(0), b(0), b(1), b(1), b(1), b(1),
                    b(2), b(2), b(2), b(2), b(3), b(3), b(3), b(3),
                );
                _mm512_srai_epi16::<8>(_mm512_shuffle_epi8(sb, idx))
            };
            let sc = [pick(0), pick(1), pick(2), pick(3)];
            // VNNI: per 128-bit lane L, words 0..4 the scale of register 2j's lane (4 (2j) + L)
            // and words 4..8 that of register 2j + 1 (the `vpackssdw` order).
            let pick2 = |j: u8| {
                let b = |s: u8| i32::from_le_bytes([z, s, z, s]);
                let (a, c) = (8 * j, 8 * j + 4);
                #[rustfmt::skip]
                let idx = _mm512_setr_epi32(
                    b(a), b(a), b(c), b(c), b(a + 1), b(a + 1), b(c + 1), b(c + 1),
                    b(a + 2), b(a + 2), b(c + 2), b(c + 2), b(a + 3), b(a + 3), b(c + 3), b(c + 3),
                );
                _mm512_srai_epi16::<8>(_mm512_shuffle_epi8(sb, idx))
            };
            (u, sc, f16_bcast(p.add(208)), [pick2(0), pick2(1)])
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 9 record vectors (caller); register-only operations.
        unsafe {
            let t = |k: usize| {
                let pr = _mm512_sub_epi16(_mm512_maddubs_epi16(w.0[k], ld(a, k)), ld(a, 4 + k));
                _mm512_madd_epi16(pr, w.1[k])
            };
            let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.2, ldps(a, 8)), acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 11 record vectors (caller); register-only operations; VNNI is
        // available (caller).
        unsafe {
            let z = _mm512_setzero_si512();
            let p = |k: usize| _mm512_dpbusd_epi32(z, w.0[k], ld(a, k));
            let p01 = _mm512_add_epi16(_mm512_packs_epi32(p(0), p(1)), ld(a, 9));
            let p23 = _mm512_add_epi16(_mm512_packs_epi32(p(2), p(3)), ld(a, 10));
            let s = _mm512_dpwssd_epi32(_mm512_madd_epi16(p01, w.3[0]), p23, w.3[1]);
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.2, ldps(a, 8)), acc)
        }
    }
}

/// Q2_K (84-byte blocks of 256: 16 bytes of 4-bit scale | 4-bit min per 16 elements, 64
/// bytes of 2-bit codes in TQ2_0's plane order, `d`, `dmin` f16 at 80, 82; layout from ggml
/// `block_q2_K` / `dequantize_row_q2_K`, as in the core's `format::ggml::kquant::q2_k`).
/// Codes as [`Tq2`]'s planes; per plane an i16 scale vector (128-bit lane `L` of plane `j`
/// covers elements `16 * (8 (L / 2) + 2j + L % 2)..+16`, whose scale one `vpshufb` picks);
/// the mins in element order meet `bsums` directly. Record: [`Tq2`]'s planes, `bsums`,
/// `d_a`; per column [`dot_k_mins16`] (pairs <= 2 * 3 * 128, times scale <= 15).
pub(crate) struct Q2k;

impl Lanes for Q2k {
    const BB: usize = 84;
    const GB: usize = 1;
    const WIDE: bool = true;
    const REC: usize = 6;
    type W = ([__m512i; 4], [__m512i; 4], __m256i, __m512, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        Tq2::prep(act, nb, j, g, rec);
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        rec[4] = V64([0; 64]);
        for (i, v) in blk.bsums.iter().enumerate() {
            rec[4].0[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 6) else { return };
        // SAFETY: forwarded from the caller; then writes record vector 4 (bsums, 32 bytes,
        // rest zero).
        unsafe {
            Tq2::prep_fast(act, nb, j, g, rec);
            let bs = _mm256_loadu_si256(blk.bsums.as_ptr().cast());
            _mm512_store_si512(rec.as_mut_ptr().add(4).cast(), _mm512_zextsi256_si512(bs));
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..84 at `p` (caller); register-only operations.
        unsafe {
            let x = _mm512_loadu_si512(p.add(16).cast());
            let m = _mm512_set1_epi8(3);
            let c = [
                _mm512_and_si512(x, m),
                _mm512_and_si512(_mm512_srli_epi16::<2>(x), m),
                _mm512_and_si512(_mm512_srli_epi16::<4>(x), m),
                _mm512_and_si512(_mm512_srli_epi16::<6>(x), m),
            ];
            let s = _mm_loadu_si128(p.cast());
            let sc = _mm512_broadcast_i32x4(_mm_and_si128(s, _mm_set1_epi8(0x0F)));
            let z = 0xFFu8;
            let pick = |j: u8| {
                let b = |i: u8| i32::from_le_bytes([i, z, i, z]);
                let (a0, a1, a2, a3) = (b(2 * j), b(2 * j + 1), b(8 + 2 * j), b(9 + 2 * j));
                #[rustfmt::skip]
                let idx = _mm512_setr_epi32(
                    a0, a0, a0, a0, a1, a1, a1, a1, a2, a2, a2, a2, a3, a3, a3, a3,
                );
                _mm512_shuffle_epi8(sc, idx)
            };
            let scv = [pick(0), pick(1), pick(2), pick(3)];
            let mins =
                _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(s), _mm_set1_epi8(0x0F)));
            (c, scv, mins, f16_bcast(p.add(80)), f16_bcast(p.add(82)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { dot_k_mins16(w, a, acc) }
    }
}

/// The per-column arithmetic of [`Q2k`] (and `super::q3k512::Q3k`): `sum_k madd(maddubs(v_k,
/// a_k), sc_k)` (exact), FMA by `d * d_a`; then the min term `madd(mins, bsums)` (16 mins
/// against the 16 bsums) FMA'd negatively by `dmin * d_a` into the same lanes.
///
/// # Safety
/// As [`Lanes::dot`], with [`Q2k`]'s record (6 vectors).
#[inline(always)]
pub(super) unsafe fn dot_k_mins16(w: &<Q2k as Lanes>::W, a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads the 6 record vectors (caller); register-only operations.
    unsafe {
        let t = |k: usize| _mm512_madd_epi16(_mm512_maddubs_epi16(w.0[k], ld(a, k)), w.1[k]);
        let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
        let da = ldps(a, 5);
        let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.3, da), acc);
        let bs = _mm512_castsi512_si256(ld(a, 4));
        let m = _mm512_zextsi256_si512(_mm256_madd_epi16(w.2, bs));
        _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(w.4, da), acc)
    }
}

/// The 16-byte table at `t` looked up (`vpshufb`, per 128-bit lane) by the low and by the
/// high nibble of every byte of `x`: the decode step of the nibble-table formats ([`Mxfp4`],
/// [`Iq4Nl`], [`Iq4NlU`]).
///
/// # Safety
/// AVX-512 F/BW are available; `t` points to 16 readable bytes.
#[inline(always)]
unsafe fn nib_lut(x: __m512i, t: *const u8) -> (__m512i, __m512i) {
    // SAFETY: reads the 16 table bytes (caller); register-only operations.
    unsafe {
        let m = _mm512_set1_epi8(0x0F);
        let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(t.cast()));
        let lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(x, m));
        let hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(x), m));
        (lo, hi)
    }
}

/// The 16 quant bytes of each of 4 consecutive `bb`-byte blocks at `p + off`, one block per
/// 128-bit lane.
///
/// # Safety
/// `p .. p + 3 * bb + off + 16` is readable; AVX-512F is available.
#[inline(always)]
unsafe fn join4(p: *const u8, off: usize, bb: usize) -> __m512i {
    // SAFETY: reads 4 x 16 bytes inside the caller's range; register-only operations.
    unsafe {
        let q = |t: usize| _mm_loadu_si128(p.add(off + t * bb).cast());
        let x = _mm512_castsi128_si512(q(0));
        let x = _mm512_inserti32x4::<1>(x, q(1));
        let x = _mm512_inserti32x4::<2>(x, q(2));
        _mm512_inserti32x4::<3>(x, q(3))
    }
}

/// Scales of 4 blocks (one f32 per block) repeated over each block's 4 i32 lanes.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
unsafe fn spread4(d: __m128) -> __m512 {
    // SAFETY: register-only operations.
    unsafe {
        let idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(d))
    }
}

/// `2^(e - 128)` for every UE8M0 byte `e` (ggml `ggml_e8m0_to_fp32_half`; entry 0xFF, rejected
/// at upload, is 0). A test checks every legal byte against the core.
pub(super) static E8M0_HALF: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut e = 0;
    while e < 255 {
        let bits: u32 = match e {
            0 => 1 << 21,
            1 => 1 << 22,
            _ => ((e - 1) as u32) << 23,
        };
        t[e] = f32::from_bits(bits);
        e += 1;
    }
    t
};

/// MXFP4 (17-byte blocks: UE8M0 `e`, then Q4_0's nibble order; values `kvalues_mxfp4[c] *
/// 2^(e - 128)`, `|kvalues| <= 12`; layout and table from ggml `block_mxfp4` /
/// `kvalues_mxfp4`, as in the core's `format::ggml::mxfp4`). As [`Q4_0`], with the codes
/// looked up (`vpshufb`) as `kvalues + 12` (0..=24, unsigned) and `12 * asum` subtracted
/// (i16 pairs <= 2 * 2 * 24 * 127 < 2^15).
pub(crate) struct Mxfp4;

/// `kvalues_mxfp4[c] + 12` (see [`Mxfp4`]).
const MXFP4_U: [i8; 16] = [12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0];

impl Lanes for Mxfp4 {
    const BB: usize = 17;
    const GB: usize = 4;
    const REC: usize = 4;
    type W = (__m512i, __m512i, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        prep_nib(act, nb, j, g, rec, 12);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { prep_nib_fast(act, nb, j, g, rec, 12) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..68 at `p` (caller); register-only operations.
        unsafe {
            let x = join4(p, 1, 17);
            let (lo, hi) = nib_lut(x, MXFP4_U.as_ptr().cast());
            let e = |t: usize| E8M0_HALF[usize::from(*p.add(17 * t))];
            (lo, hi, spread4(_mm_setr_ps(e(0), e(1), e(2), e(3))))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller; the same arithmetic as Q4_0's.
        unsafe { Q4_0::dot(w, a, acc) }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { Q4_0::dot_vnni(w, a, acc) }
    }
}

/// IQ4_NL (18-byte blocks: `d` f16, then Q4_0's nibble order; values `kvalues_iq4nl[c] * d`,
/// signed in -127..=113; layout and table from ggml `block_iq4_nl` / `kvalues_iq4nl`, as in
/// the core's `format::ggml::iq::iq4_nl`). Register: the looked-up levels' absolute values
/// and sign masks; per column the activations are negated where the level is negative
/// (masked `vpsubb`), so `maddubs(|v|, ±a)` is exact `v * a` per pair (<= 2 * 127 * 127 <
/// 2^15); low and high nibble planes are widened (`vpmaddwd`) separately. Record: `a_lo`,
/// `a_hi`, `d_a`.
pub(crate) struct Iq4Nl;

impl Lanes for Iq4Nl {
    const BB: usize = 18;
    const GB: usize = 4;
    const REC: usize = 4;
    type W = (__m512i, __m512i, __mmask64, __mmask64, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        prep_nib(act, nb, j, g, rec, 0);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { prep_nib_fast(act, nb, j, g, rec, 0) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..72 at `p` (caller); register-only operations.
        unsafe {
            let x = join4(p, 2, 18);
            let (lo, hi) = nib_lut(x, KVALUES_IQ4NL.as_ptr().cast());
            let h = |o: usize| u64::from(ptr::read_unaligned(p.add(o).cast::<u16>()));
            let d4 = h(0) | h(18) << 16 | h(36) << 32 | h(54) << 48;
            let dv = spread4(_mm_cvtph_ps(_mm_cvtsi64_si128(d4 as i64)));
            let (nl, nh) = (_mm512_movepi8_mask(lo), _mm512_movepi8_mask(hi));
            (_mm512_abs_epi8(lo), _mm512_abs_epi8(hi), nl, nh, dv)
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the record's vectors 0, 1, 3 (caller); register-only operations.
        unsafe {
            let z = _mm512_setzero_si512();
            let (al, ah) = (ld(a, 0), ld(a, 1));
            let sl = _mm512_mask_sub_epi8(al, w.2, z, al);
            let sh = _mm512_mask_sub_epi8(ah, w.3, z, ah);
            let one = _mm512_set1_epi16(1);
            let s = _mm512_add_epi32(
                _mm512_madd_epi16(_mm512_maddubs_epi16(w.0, sl), one),
                _mm512_madd_epi16(_mm512_maddubs_epi16(w.1, sh), one),
            );
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.4, ldps(a, 3)), acc)
        }
    }
}

/// IQ4_NL's table shifted to unsigned bytes, `KVALUES_IQ4NL[i] + 128` (1..=241), for
/// `vpdpbusd` (unsigned x signed).
const KVALUES_IQ4NL_U: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (KVALUES_IQ4NL[i] as i16 + 128) as u8;
        i += 1;
    }
    t
};

/// IQ4_NL for VNNI: the register holds each code's table value plus 128 as an unsigned byte
/// ([`KVALUES_IQ4NL_U`]), the record carries `128 * asum` ([`prep_nib`] with `off = 128`), and
/// [`Q4_0::dot_vnni`] (two `vpdpbusd` from `-128 * asum`) gives the exact lane sums
/// `sum(kvalue * a)`: `vpdpbusd` does not saturate and `|lane| <= 4 * 2 * 241 * 127 + 128 *
/// 8 * 127 < 2^31`. [`Iq4Nl`]'s sign trick is not needed, so a group costs two instructions
/// per column where it cost seven. `dot` (not used by the kernel tables, which run this type
/// only under VNNI) recovers the signed values and takes [`Iq4Nl`]'s path, so it is exact too.
/// Same lane integers as [`Iq4Nl`], hence the same results.
pub(crate) struct Iq4NlU;

impl Lanes for Iq4NlU {
    const BB: usize = 18;
    const GB: usize = 4;
    const REC: usize = 4;
    type W = (__m512i, __m512i, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        prep_nib(act, nb, j, g, rec, 128);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { prep_nib_fast(act, nb, j, g, rec, 128) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..72 at `p` (caller); register-only operations.
        unsafe {
            let x = join4(p, 2, 18);
            let (lo, hi) = nib_lut(x, KVALUES_IQ4NL_U.as_ptr().cast());
            let h = |o: usize| u64::from(ptr::read_unaligned(p.add(o).cast::<u16>()));
            let d4 = h(0) | h(18) << 16 | h(36) << 32 | h(54) << 48;
            (lo, hi, spread4(_mm_cvtph_ps(_mm_cvtsi64_si128(d4 as i64))))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the record's vectors 0, 1, 3 (caller); register-only operations.
        unsafe {
            let flip = _mm512_set1_epi8(-128);
            let (lo, hi) = (_mm512_xor_si512(w.0, flip), _mm512_xor_si512(w.1, flip));
            let signed = (
                _mm512_abs_epi8(lo),
                _mm512_abs_epi8(hi),
                _mm512_movepi8_mask(lo),
                _mm512_movepi8_mask(hi),
                w.2,
            );
            Iq4Nl::dot(&signed, a, acc)
        }
    }

    #[inline(always)]
    unsafe fn dot_vnni(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller (same record layout as Q4_0's).
        unsafe { Q4_0::dot_vnni(w, a, acc) }
    }
}

/// The Q4_0-order record (`a_lo`, `a_hi`, `off * asum`, `d_a`) of Q8_0 blocks `4g..4g+4` of
/// column `j`, blocks past `nb` zero (scalar; partial groups).
fn prep_nib(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64], off: i32) {
    let [alo, ahi, ao, da] = rec else { return };
    for t in 0..4 {
        let Some((q, d)) = q8_0_block(act, nb, j, 4 * g + t) else { continue };
        for e in 0..16 {
            alo.put_i8(16 * t + e, q[e]);
            ahi.put_i8(16 * t + e, q[16 + e]);
        }
        for u in 0..4 {
            let s: i32 =
                (0..4).map(|e| i32::from(q[4 * u + e]) + i32::from(q[16 + 4 * u + e])).sum();
            ao.put_i32(4 * t + u, off * s);
            da.put_f32(4 * t + u, d);
        }
    }
}

/// [`prep_nib`] for a whole group, with vector instructions.
///
/// # Safety
/// The AVX-512 set of [`entry`] is available.
#[inline(always)]
unsafe fn prep_nib_fast(
    act: ActSlice<'_>,
    nb: usize,
    j: usize,
    g: usize,
    rec: &mut [V64],
    off: i32,
) {
    let ActSlice::Q8_0(a, ad) = act else { return };
    let i0 = j * nb + 4 * g;
    let (Some(b), Some(d), true) = (a.get(i0..i0 + 4), ad.get(i0..i0 + 4), rec.len() == 4) else {
        return;
    };
    let r = rec.as_mut_ptr();
    // SAFETY: reads the 4 blocks' quants and scales (bounds-checked slices); writes the 4
    // record vectors.
    unsafe {
        let p = b.as_ptr().cast::<u8>();
        let (lo, hi) = (join4(p, 2, 34), join4(p, 18, 34));
        let one = _mm512_set1_epi8(1);
        let s = _mm512_add_epi16(_mm512_maddubs_epi16(one, lo), _mm512_maddubs_epi16(one, hi));
        let s = _mm512_madd_epi16(s, _mm512_set1_epi16(1));
        _mm512_store_si512(r.cast(), lo);
        _mm512_store_si512(r.add(1).cast(), hi);
        _mm512_store_si512(r.add(2).cast(), _mm512_mullo_epi32(s, _mm512_set1_epi32(off)));
        _mm512_store_ps(r.add(3).cast(), spread4(_mm_loadu_ps(d.as_ptr())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every format with a once-per-call record hook builds records for its own block count
    /// (so its kernels use them rather than building their own).
    #[test]
    fn call_records_match_the_weight_block_count() {
        if !(is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl"))
        {
            return;
        }
        let k = 1024;
        let x: Vec<f32> = (0..2 * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0).collect();
        let mut hooked = 0;
        for format in FormatId::ALL {
            let Some(prep) = extras(format).prep else { continue };
            hooked += 1;
            let acts = Acts::prepare(format, &x, 2, k).unwrap();
            let layout = prep(&acts).unwrap_or_else(|| panic!("{format}: no records"));
            let r = layout.0.downcast_ref::<Records>().unwrap();
            assert_eq!(r.nb, k / format.geometry().block_elems, "{format}");
            assert_eq!(r.v.len(), 2 * r.per_col, "{format}");
        }
        assert_eq!(hooked, 22);
    }

    /// `prep_fast` (vector) and `prep` (scalar) build the same records for the Q8_K formats
    /// whose records carry derived sums (Q4_K's sub-block sums, Q6_K's corrections).
    #[test]
    fn k_quant_records_fast_equals_scalar() {
        if !(is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl"))
        {
            return;
        }
        let mut st = 0x9E37_79B9_7F4A_7C15u64;
        let mut blocks = Vec::new();
        for case in 0..8 {
            let mut qs = [0i8; 256];
            for q in qs.iter_mut() {
                st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *q = match case {
                    0 => 127,
                    1 => -127,
                    _ => (((st >> 33) % 255) as i32 - 127) as i8,
                };
            }
            let mut bsums = [0i16; 16];
            for (b, c) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
                *b = c.iter().map(|&q| i16::from(q)).sum();
            }
            blocks.push(lowbit_core::format::ggml::BlockQ8K { d: 0.5 + case as f32, qs, bsums });
        }
        let act = ActSlice::Q8K(&blocks);
        for g in 0..blocks.len() {
            let (mut a, mut b) = ([V64([0; 64]); 6], [V64([0; 64]); 6]);
            Q4k::prep(act, blocks.len(), 0, g, &mut a);
            // SAFETY: the AVX-512 features were detected above.
            unsafe { Q4k::prep_fast(act, blocks.len(), 0, g, &mut b) };
            assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0), "Q4_K block {g}");
            let (mut a, mut b) = ([V64([0; 64]); 11], [V64([0; 64]); 11]);
            Q6k::prep(act, blocks.len(), 0, g, &mut a);
            // SAFETY: as above.
            unsafe { Q6k::prep_fast(act, blocks.len(), 0, g, &mut b) };
            assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0), "Q6_K block {g}");
        }
    }

    #[test]
    fn e8m0_half_table_matches_core() {
        for e in 0u8..=0xFE {
            let want = lowbit_core::scalar::try_ue8m0_to_f32_half(e).unwrap();
            assert_eq!(E8M0_HALF[usize::from(e)].to_bits(), want.to_bits(), "byte {e:#04x}");
        }
    }

    #[test]
    fn mxfp4_offset_table_matches_core() {
        for (u, k) in MXFP4_U.iter().zip(lowbit_core::format::ggml::mxfp4::KVALUES_MXFP4) {
            assert_eq!(i32::from(*u), i32::from(k) + 12);
        }
    }
}

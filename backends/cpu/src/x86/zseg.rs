//! The K-segmented driver of [`super::z512`]'s one-row-per-register kernels, for tiles of
//! 2..16 columns on long rows.
//!
//! Why. A sub-tile's activation records are 1.5-3 bytes per weight and column (Q8_0: 3,
//! Q4_0: 2, TQ2_0 and ROCmFP-like 2-bit formats: 1.5), so for `CT` columns and a 14336-wide
//! row they are 86-172 KiB: more than the 32 KiB L1. [`super::z512`]'s `drive` walks whole
//! rows, so every group of `R` rows re-reads all of them from L2, several times the weight
//! bytes it streams from memory (measured: n = 4 on 256 x 14336 took 20-35% longer than on
//! 896 x 4096, the same weight bytes, 2026-12-01).
//!
//! How. When a row's records exceed [`ROW_RECORD_BYTES`], rows are taken in blocks of [`BLOCK_GROUPS`] row groups, and each block's rows are
//! walked segment by segment: a segment is as many weight groups as keep the sub-tile's
//! records within [`SEG_RECORD_BYTES`] (L1). Each row group's accumulators are kept in a
//! small buffer between segments. Every (row, column) lane receives exactly the same FMAs in
//! the same order as in `drive` (only the loop order around them changes), so the results
//! are the same bits; [`super::z512`]'s bound (c = 1) applies unchanged.
//!
//! Prefetch. Every weight group is prefetched into L2 at the same place of the next block
//! (`R * BLOCK_GROUPS * rb` bytes ahead): the block is consumed segment-wise, so "the next
//! bytes of the row" are not the next bytes read, but the next block is read in the same
//! order as this one.
//!
//! What must not live here: format decoders and records (`super::z512` and the files in its
//! layout), the one-pass `drive` for whole rows.

#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;
use std::ptr;

use super::z512::{hsum16, Lanes, TAIL_BYTES, V64};

/// Record bytes of one sub-tile's segment: half the 32 KiB L1, leaving the rest to the
/// weight lines in flight and the accumulator buffer.
pub(super) const SEG_RECORD_BYTES: usize = 16 << 10;

/// Row groups per block (the accumulator buffer holds `BLOCK_GROUPS * R * CT` vectors).
pub(super) const BLOCK_GROUPS: usize = 8;

/// Weight groups per segment for `CT` columns of `F`'s records (at least 1).
#[inline(always)]
pub(super) const fn seg_groups<F: Lanes, const CT: usize>() -> usize {
    let g = SEG_RECORD_BYTES / (CT * F::REC * 64);
    if g == 0 {
        1
    } else {
        g
    }
}

/// Records of a whole row (for a sub-tile) above which the segmented driver runs: the 32 KiB
/// L1. Rows whose records fit it ran about 5% faster unsegmented (14336 x 4096, n = 4,
/// ROCmFP2, ROCmFP3 and TQ2_0 at 24 KiB of records, one thread, 2026-12-01), rows of 14336
/// about 7-13% slower (and the K-quants and Q8_0 up to 2x slower).
pub(super) const ROW_RECORD_BYTES: usize = 32 << 10;

/// Whether rows of `nb` blocks take the segmented driver for `CT` columns of `F`: more than
/// one column, and more than [`ROW_RECORD_BYTES`] of records per row.
#[inline(always)]
pub(super) fn segmented<F: Lanes, const CT: usize>(nb: usize) -> bool {
    CT > 1 && nb.div_ceil(F::GB) * CT * F::REC * 64 > ROW_RECORD_BYTES
}

/// The segmented driver (see the module doc): rows in groups of `R` and blocks of
/// [`BLOCK_GROUPS`] groups, columns in sub-tiles of `CT` (the last row / column repeated,
/// extra results discarded), weight groups of `F::GB` blocks in segments of
/// [`seg_groups`] (a partial last group decoded from a zero-padded copy).
///
/// # Safety
/// As `super::z512`'s `drive`: the AVX-512 set of its `entry` is available (plus VNNI when
/// `V`); `w` is whole rows of `rb = nb * F::BB` bytes; `recs` holds `ncols * ng * F::REC`
/// vectors (`ng = ceil(nb / F::GB)`); `out.len() == rows * ncols`; `ncols >= 1`.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub(super) unsafe fn drive_seg<F: Lanes, const R: usize, const CT: usize, const V: bool>(
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
    let seg = seg_groups::<F, CT>();
    let block_rows = R * BLOCK_GROUPS;
    let pf = super::Prefetch::L2(block_rows * rb);
    // SAFETY: row pointers are clamped to `nrows - 1`, groups `< full` lie inside the row, the
    // partial group is copied into a padded buffer first; record pointers are clamped to the
    // last column and stay inside `recs`; prefetch hints never fault.
    unsafe {
        let mut accs = [[[_mm512_setzero_ps(); CT]; R]; BLOCK_GROUPS];
        let mut b0 = 0;
        while b0 < nrows {
            let nq = (nrows - b0).min(block_rows).div_ceil(R);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut ap = [recs.as_ptr(); CT];
                for jj in 0..CT {
                    ap[jj] = recs.as_ptr().add((c0 + jj.min(nc - 1)) * per_col);
                }
                for q in 0..nq {
                    accs[q] = [[_mm512_setzero_ps(); CT]; R];
                }
                let mut g0 = 0;
                while g0 < ng {
                    let g1 = (g0 + seg).min(ng);
                    for q in 0..nq {
                        let r0 = b0 + q * R;
                        let here = (nrows - r0).min(R);
                        let mut rp = [w.as_ptr(); R];
                        for i in 0..R {
                            rp[i] = w.as_ptr().add((r0 + i.min(here - 1)) * rb);
                        }
                        let mut acc = accs[q];
                        for g in g0..g1.min(full) {
                            let mut dec = [F::decode(rp[0].add(g * gbytes)); R];
                            for i in 0..R {
                                let p = rp[i].add(g * gbytes);
                                if c0 == 0 {
                                    pf.span(p, gbytes);
                                }
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
                        if g1 == ng && full < ng {
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
                        accs[q] = acc;
                    }
                    g0 = g1;
                }
                for q in 0..nq {
                    let r0 = b0 + q * R;
                    let here = (nrows - r0).min(R);
                    for i in 0..here {
                        for jj in 0..nc {
                            out[(r0 + i) * ncols + c0 + jj] = hsum16(accs[q][i][jj]);
                        }
                    }
                }
                c0 += CT;
            }
            b0 += block_rows;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pq2x4::Pq2x4;
    use super::super::q4_0x16::Q4_0x16;
    use super::super::q8_512::Q8;
    use super::super::q8x16::Q8x16;
    use super::super::tq1_512::{Ptq1, Tq1};
    use super::super::z512::{Iq4Nl, Q4k, Q6k, Tq2, Q4_0};
    use super::*;

    /// `tests/matmul.rs` (`long_rows_segmented_tiles`) relies on its shapes taking this driver
    /// for every segmented column tile (2, 4, 8 columns), and on short rows not taking it.
    #[test]
    fn long_test_rows_are_segmented() {
        fn check<F: Lanes>(nb_long: usize, nb_short: usize) {
            assert!(segmented::<F, 2>(nb_long) && segmented::<F, 4>(nb_long));
            assert!(segmented::<F, 8>(nb_long));
            assert!(!segmented::<F, 1>(nb_long) && !segmented::<F, 2>(nb_short));
        }
        // 14432 = 451 blocks of 32; 14336 = 56 of 256, 112 of 128; 1024-wide rows stay whole.
        check::<Q4_0>(451, 32);
        check::<Q4_0x16>(451, 32);
        check::<Q8>(451, 32);
        check::<Q8x16>(451, 32);
        check::<Iq4Nl>(451, 32);
        check::<Pq2x4>(112, 8);
        check::<Tq2>(56, 4);
        check::<Q4k>(56, 4);
        check::<Q6k>(56, 4);
        check::<Tq1>(56, 4);
        check::<Ptq1>(112, 8);
    }
}

//! The ROCmFPX kernel bodies (AVX-512 and AVX2) against Q8_0 activations in the [`Group`]
//! layout, generic over the weight format's [`Codec`] (ROCmFP2: [`super::fp2`], ROCmFP3:
//! [`super::fp3`]): the codec decodes one group of 8 blocks of a row, in its upload-time
//! repacked layout, into four vectors of offset levels `w + 4` in `0..=8` (vector `t` holds in
//! byte `j` of qword `b` the level of element `4j + t` of block `b`) and the 16 half-block
//! scales divided by 2^7 (lane `2b + h`, see [`super::fp2`]).
//!
//! * **Dot.** Per column: `vpmaddubsw(w_t + 4, a_t)` for t = 0..4 summed in i16 (each pair
//!   sum is at most 2 * 8 * 127 = 2032 in magnitude, four of them 8128 < 2^15), one `vpmaddwd`
//!   by 1 gives per lane `2b + h` the exact sum of the 16 products of that half-block, minus
//!   `a4 = 4 * sum(a)` (exact i32: `sum((w + 4) a) - 4 sum(a) = sum(w a)`). Then
//!   `acc = fma(float(sum), s * d, acc)`: `s * d` is exact (4 + 11 significant bits) and so
//!   is the product inside the FMA, so each (row, column, lane) rounds once per group.
//! * **VNNI.** Under `Isa::Avx512Vnni` four chained `vpdpbusd`, starting from `-a4`, give the
//!   same exact lane integers (each lane sums its four u8 x i8 products in i32): 4 instructions
//!   per (row, column, group) instead of 9, the same results bit for bit.
//! * **Loops.** `R` rows share each activation load (n = 1: 4 rows on AVX-512); a group of
//!   `R` rows is decoded once and reused for the `CT` columns of a sub-tile.
//!
//! Accumulation order and bound: lane `2b + h` of the accumulator of a (row, column) receives,
//! group after group, the exact half-block value `s_bh * d_b * sum_bh` with one rounding each;
//! after the last group the 16 (AVX2: 8) lanes are summed by a fixed tree. So each half-block
//! value carries at most `nb / 8 + 5` roundings, and with u = 2^-24
//! `|y - y_exact| <= (nb / 8 + 5) * u * sum|w_i a_i| <= c * K * u * sum|w_i a_i|` with
//! **c = 1** (`K / 256 + 5 <= K` for `K >= 32`), against the exact sum of decoded weights
//! times decoded activations. Integer block sums are exact. The result of a row does not
//! depend on the rows or columns it is computed with (each (row, column) has its own lanes).
//!
//! Memory safety: a full group reads exactly its `C::GB` bytes (the codec's loads stay inside
//! them); a row's last, partial group is rewritten by the codec from a zero-padded canonical
//! copy into a local buffer first (zero bytes decode to zero scales, so they contribute
//! exactly 0, and the activation groups are zero there too).
//!
//! What must not live here: format-specific decoding and layouts.

use std::arch::x86_64::*;

use super::prep::{Group, GROUP};

/// The largest group of any codec (ROCmFP3: 8 x 14 bytes).
pub(crate) const MAX_GB: usize = 112;

/// A ROCmFPX weight format as the bodies see it: its repacked group layout and its decoders.
pub(crate) trait Codec {
    /// Bytes of one block (32 weights).
    const BLOCK: usize;
    /// Bytes of one group of 8 blocks (`8 * BLOCK <= MAX_GB`).
    const GB: usize;
    /// The least distance in bytes at which [`body512`] prefetches (into L2); it prefetches
    /// one row group ahead, and at least the 8 KiB of `Prefetch::DEFAULT`.
    const PF_MIN: usize = 0;
    /// Rewrites 8 canonical blocks (`src`, `GB` bytes) into the repacked layout (`dst`).
    fn repack_group(src: &[u8], dst: &mut [u8]);
}

/// A [`Codec`] whose layout the AVX-512 body ([`body512`]) decodes.
pub(crate) trait Codec512: Codec {
    /// One repacked group: the offset levels `w[t]` and the scales / 2^7 in lane `2b + h`.
    ///
    /// # Safety
    /// AVX-512 F/BW, AVX2 and F16C are available; `p .. p + GB` is readable.
    unsafe fn decode512(p: *const u8) -> ([__m512i; 4], __m512);
}

/// A [`Codec`] whose layout the AVX2 body ([`body256`]) decodes.
pub(crate) trait Codec256: Codec {
    /// Half `h` (blocks `4h .. 4h + 4`) of one repacked group, for AVX2: the offset levels
    /// `w[t]` of those blocks (as [`Codec512::decode512`]'s 256-bit half `h`) and their scales
    /// / 2^7.
    ///
    /// # Safety
    /// AVX2 and F16C are available; `p .. p + GB` is readable; `h < 2`.
    unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256);
}

/// The upload-time repack of one validated canonical row (a whole number of blocks): every
/// full group of 8 blocks into the codec's layout, in place; a partial last group stays
/// canonical. A bijection on the row's bytes.
pub(crate) fn repack_row<C: Codec>(row: &mut [u8]) {
    let mut tmp = [0u8; MAX_GB];
    for g in row.chunks_exact_mut(C::GB) {
        C::repack_group(g, &mut tmp[..C::GB]);
        g.copy_from_slice(&tmp[..C::GB]);
    }
}

/// Pointers to the `R` rows starting at `r0` (the last row repeated past `nrows`) and, for a
/// row whose length is not a whole number of groups, its last (canonical, partial) group
/// rewritten into `tail` in the repacked layout, zero-padded (`tail` is left alone otherwise).
///
/// # Safety
/// `w` holds `nrows > r0` rows of `rb = nb * C::BLOCK` bytes.
#[inline(always)]
unsafe fn rows<C: Codec, const R: usize>(
    w: &[u8],
    rb: usize,
    nrows: usize,
    r0: usize,
    tail: &mut [[u8; MAX_GB]; R],
) -> ([*const u8; R], usize) {
    let here = (nrows - r0).min(R);
    let full = rb / C::GB * C::GB;
    let mut rp = [w.as_ptr(); R];
    for (i, p) in rp.iter_mut().enumerate() {
        let start = (r0 + i.min(here - 1)) * rb;
        let row = &w[start..start + rb];
        *p = row.as_ptr();
        if rb > full {
            let mut canon = [0u8; MAX_GB];
            canon[..rb - full].copy_from_slice(&row[full..]);
            C::repack_group(&canon[..C::GB], &mut tail[i][..C::GB]);
        }
    }
    (rp, here)
}

/// The sum of the 16 lanes of `v` (a fixed tree).
///
/// # Safety
/// AVX-512 F is available.
#[inline(always)]
unsafe fn hsum512(v: __m512) -> f32 {
    // SAFETY: register-only AVX-512/AVX operations; the caller has AVX-512 F.
    unsafe {
        let lo = _mm512_castps512_ps256(v);
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        hsum256(_mm256_add_ps(lo, hi))
    }
}

/// The sum of the 8 lanes of `v` (a fixed tree).
///
/// # Safety
/// AVX is available.
#[inline(always)]
unsafe fn hsum256(v: __m256) -> f32 {
    // SAFETY: register-only AVX operations; the caller has AVX.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// One group `gi` of `R` rows (`ps`: each row's 80 bytes) against `CT` columns (`gp`: each
/// column's groups), accumulated into `acc[row][column]` (see the module doc); `V`: the
/// `vpdpbusd` form (the same exact i32 lane sums, so the same result).
///
/// # Safety
/// AVX-512 F/BW, AVX2, FMA and F16C are available (`V`: AVX-512 VNNI too); every `ps[i] .. ps[i] + C::GB` is readable;
/// every `gp[j].add(gi)` points to a group.
#[inline(always)]
unsafe fn step512<C: Codec512, const R: usize, const CT: usize, const V: bool>(
    ps: [*const u8; R],
    gp: [*const Group; CT],
    gi: usize,
    acc: &mut [[__m512; CT]; R],
) {
    // SAFETY: reads only the bytes and groups the caller guarantees; register-only otherwise.
    unsafe {
        let ones = _mm512_set1_epi16(1);
        let mut wv = [[_mm512_setzero_si512(); 4]; R];
        let mut s = [_mm512_setzero_ps(); R];
        for i in 0..R {
            (wv[i], s[i]) = C::decode512(ps[i]);
        }
        for jj in 0..CT {
            let ag = &*gp[jj].add(gi);
            let d = _mm512_load_ps(ag.d.as_ptr());
            let a4 = _mm512_load_si512(ag.a4.as_ptr().cast());
            let av = [
                _mm512_load_si512(ag.q[0].as_ptr().cast()),
                _mm512_load_si512(ag.q[1].as_ptr().cast()),
                _mm512_load_si512(ag.q[2].as_ptr().cast()),
                _mm512_load_si512(ag.q[3].as_ptr().cast()),
            ];
            for i in 0..R {
                let si = if V {
                    // The same exact lane sums: each `vpdpbusd` adds the four u8 x i8
                    // products of a lane, starting from `-a4`.
                    let mut s = _mm512_sub_epi32(_mm512_setzero_si512(), a4);
                    for t in 0..4 {
                        s = _mm512_dpbusd_epi32(s, wv[i][t], av[t]);
                    }
                    s
                } else {
                    let p01 = _mm512_add_epi16(
                        _mm512_maddubs_epi16(wv[i][0], av[0]),
                        _mm512_maddubs_epi16(wv[i][1], av[1]),
                    );
                    let p23 = _mm512_add_epi16(
                        _mm512_maddubs_epi16(wv[i][2], av[2]),
                        _mm512_maddubs_epi16(wv[i][3], av[3]),
                    );
                    let p16 = _mm512_add_epi16(p01, p23);
                    _mm512_sub_epi32(_mm512_madd_epi16(p16, ones), a4)
                };
                let sd = _mm512_mul_ps(s[i], d);
                acc[i][jj] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), sd, acc[i][jj]);
            }
        }
    }
}

/// The AVX-512 body: `R` rows per group of rows, `CT` columns per sub-tile (columns past the
/// tile's end repeat its last column; their results are discarded); `V`: the `vpdpbusd` dot.
///
/// # Safety
/// AVX-512 F/BW, AVX2, FMA and F16C are available (`V`: AVX-512 VNNI too); `w` is whole rows of `rb = nb * C::BLOCK` bytes in
/// the layout of `C::repack_group`
/// (`nb >= 1`); `g` holds `ncols * nb.div_ceil(8)` groups (column-major, see
/// [`super::prep::build`]); `out.len() == rows * ncols`, `ncols >= 1`.
#[inline(always)]
pub(crate) unsafe fn body512<C: Codec512, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    g: &[Group],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let pf = super::super::Prefetch::DEFAULT.one_group_ahead((R * rb).max(C::PF_MIN));
    let ng = nb.div_ceil(GROUP);
    let full = nb / GROUP;
    let mut tail = [[0u8; MAX_GB]; R];
    // SAFETY: row pointers come from `rows` (inside `w`); group `gi < full` of a row reads
    // bytes `GB gi .. GB (gi + 1) <= rb`; the partial group reads the local `tail` copy; the
    // activation groups are indexed `col * ng + gi` with `col < ncols`, `gi < ng`, inside `g`
    // (checked by the caller's length invariant); prefetches never fault; features available.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = rows::<C, R>(w, rb, nrows, r0, &mut tail);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut gp = [g.as_ptr(); CT];
                for (jj, p) in gp.iter_mut().enumerate() {
                    *p = g.as_ptr().add((c0 + jj.min(nc - 1)) * ng);
                }
                let mut acc = [[_mm512_setzero_ps(); CT]; R];
                for gi in 0..full {
                    let mut ps = rp;
                    for p in ps.iter_mut() {
                        *p = p.add(gi * C::GB);
                        pf.span(*p, C::GB);
                    }
                    step512::<C, R, CT, V>(ps, gp, gi, &mut acc);
                }
                if full < ng {
                    let tp: [*const u8; R] = std::array::from_fn(|i| tail[i].as_ptr());
                    step512::<C, R, CT, V>(tp, gp, full, &mut acc);
                }
                for (i, acci) in acc.iter().enumerate().take(here) {
                    for (jj, a) in acci.iter().enumerate().take(nc) {
                        out[(r0 + i) * ncols + c0 + jj] = hsum512(*a);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

/// Activation-group bytes of one sub-tile's segment in [`body512_seg`]: half the 32 KiB L1
/// (as `super::super::zseg::SEG_RECORD_BYTES`).
const SEG_GROUP_BYTES: usize = 16 << 10;

/// Row groups per block in [`body512_seg`].
const BLOCK_GROUPS: usize = 8;

/// Weight groups per segment for `CT` columns (at least 1).
const fn seg_groups<const CT: usize>() -> usize {
    let g = SEG_GROUP_BYTES / (CT * std::mem::size_of::<Group>());
    if g == 0 {
        1
    } else {
        g
    }
}

/// Whether rows of `nb` blocks take [`body512_seg`] for `CT` columns: more than one column,
/// and a row's activation groups over the 32 KiB L1 (as `super::super::zseg`'s
/// `ROW_RECORD_BYTES`, measured there).
pub(crate) const fn segmented<const CT: usize>(nb: usize) -> bool {
    CT > 1 && nb.div_ceil(GROUP) * CT * std::mem::size_of::<Group>() > 32 << 10
}

/// [`body512`] walked in K segments (the loop order of `super::super::zseg`): rows in blocks
/// of [`BLOCK_GROUPS`] groups of `R`, each block segment by segment, so a sub-tile's
/// activation groups of one segment ([`SEG_GROUP_BYTES`]) stay in L1 while every row of the
/// block uses them; the accumulators wait in a buffer between segments. Every (row, column)
/// lane receives the same FMAs in the same order as in [`body512`]: the same bits. Weight
/// groups are prefetched into L2 at the same place of the next block.
///
/// # Safety
/// As [`body512`].
#[inline(always)]
pub(crate) unsafe fn body512_seg<C: Codec512, const R: usize, const CT: usize, const V: bool>(
    w: &[u8],
    rb: usize,
    nb: usize,
    g: &[Group],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let ng = nb.div_ceil(GROUP);
    let full = nb / GROUP;
    let seg = seg_groups::<CT>();
    let block_rows = R * BLOCK_GROUPS;
    let pf = super::super::Prefetch::L2(block_rows * rb);
    let mut tails = [[[0u8; MAX_GB]; R]; BLOCK_GROUPS];
    // SAFETY: as in `body512` (row pointers from `rows`, groups `< full` inside the row, the
    // partial group from the block's local `tails` copy, activation groups `col * ng + gi`
    // with `col < ncols`, `gi < ng`); prefetches never fault; features available.
    unsafe {
        let mut accs = [[[_mm512_setzero_ps(); CT]; R]; BLOCK_GROUPS];
        let mut rps = [[w.as_ptr(); R]; BLOCK_GROUPS];
        let mut heres = [0usize; BLOCK_GROUPS];
        let mut b0 = 0;
        while b0 < nrows {
            let nq = (nrows - b0).min(block_rows).div_ceil(R);
            for q in 0..nq {
                (rps[q], heres[q]) = rows::<C, R>(w, rb, nrows, b0 + q * R, &mut tails[q]);
            }
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut gp = [g.as_ptr(); CT];
                for (jj, p) in gp.iter_mut().enumerate() {
                    *p = g.as_ptr().add((c0 + jj.min(nc - 1)) * ng);
                }
                for a in accs.iter_mut().take(nq) {
                    *a = [[_mm512_setzero_ps(); CT]; R];
                }
                let mut g0 = 0;
                while g0 < ng {
                    let g1 = (g0 + seg).min(ng);
                    for q in 0..nq {
                        let mut acc = accs[q];
                        for gi in g0..g1.min(full) {
                            let mut ps = rps[q];
                            for p in ps.iter_mut() {
                                *p = p.add(gi * C::GB);
                                if c0 == 0 {
                                    pf.span(*p, C::GB);
                                }
                            }
                            step512::<C, R, CT, V>(ps, gp, gi, &mut acc);
                        }
                        if g1 == ng && full < ng {
                            let tp: [*const u8; R] = std::array::from_fn(|i| tails[q][i].as_ptr());
                            step512::<C, R, CT, V>(tp, gp, full, &mut acc);
                        }
                        accs[q] = acc;
                    }
                    g0 = g1;
                }
                for q in 0..nq {
                    for (i, acci) in accs[q].iter().enumerate().take(heres[q]) {
                        for (jj, a) in acci.iter().enumerate().take(nc) {
                            out[(b0 + q * R + i) * ncols + c0 + jj] = hsum512(*a);
                        }
                    }
                }
                c0 += CT;
            }
            b0 += block_rows;
        }
    }
}

/// The AVX2 body: as [`body512`] with 256-bit vectors, each group handled as two halves of 4
/// blocks.
///
/// # Safety
/// AVX2, FMA and F16C are available; the invariants of [`body512`] hold.
#[inline(always)]
pub(crate) unsafe fn body256<C: Codec256, const R: usize, const CT: usize>(
    w: &[u8],
    rb: usize,
    nb: usize,
    g: &[Group],
    ncols: usize,
    out: &mut [f32],
) {
    let nrows = w.len() / rb;
    let pf = super::super::Prefetch::DEFAULT;
    let ng = nb.div_ceil(GROUP);
    let full = nb / GROUP;
    let mut tail = [[0u8; MAX_GB]; R];
    // SAFETY: as in `body512`.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = rows::<C, R>(w, rb, nrows, r0, &mut tail);
            let mut c0 = 0;
            while c0 < ncols {
                let nc = (ncols - c0).min(CT);
                let mut gp = [g.as_ptr(); CT];
                for (jj, p) in gp.iter_mut().enumerate() {
                    *p = g.as_ptr().add((c0 + jj.min(nc - 1)) * ng);
                }
                let mut acc = [[_mm256_setzero_ps(); CT]; R];
                for gi in 0..ng {
                    for i in 0..R {
                        let p = if gi < full {
                            let p = rp[i].add(gi * C::GB);
                            pf.span(p, C::GB);
                            p
                        } else {
                            tail[i].as_ptr()
                        };
                        for h in 0..2 {
                            let (wv, s) = C::decode256(p, h);
                            for jj in 0..CT {
                                let ag = &*gp[jj].add(gi);
                                let d = _mm256_load_ps(ag.d.as_ptr().add(8 * h));
                                let sd = _mm256_mul_ps(s, d);
                                let mut p16 = _mm256_setzero_si256();
                                for (t, wt) in wv.iter().enumerate() {
                                    let av = _mm256_load_si256(ag.q[t].as_ptr().add(32 * h).cast());
                                    p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(*wt, av));
                                }
                                let a4 = _mm256_load_si256(ag.a4.as_ptr().add(8 * h).cast());
                                let si = _mm256_sub_epi32(_mm256_madd_epi16(p16, ones), a4);
                                acc[i][jj] =
                                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), sd, acc[i][jj]);
                            }
                        }
                    }
                }
                for (i, acci) in acc.iter().enumerate().take(here) {
                    for (jj, a) in acci.iter().enumerate().take(nc) {
                        out[(r0 + i) * ncols + c0 + jj] = hsum256(*a);
                    }
                }
                c0 += CT;
            }
            r0 += R;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tests/matmul.rs` (`long_rows_segmented_tiles`, 451 blocks) takes [`body512_seg`] for
    /// every multi-column tile; 1024-wide rows (32 blocks) and single columns do not.
    #[test]
    fn long_test_rows_are_segmented() {
        assert!(segmented::<2>(451) && segmented::<4>(451) && segmented::<16>(451));
        assert!(!segmented::<1>(451) && !segmented::<2>(32));
    }
}

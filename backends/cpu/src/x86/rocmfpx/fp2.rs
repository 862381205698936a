//! ROCmFP2 kernel bodies (AVX-512 and AVX2) against Q8_0 activations in the [`Group`] layout,
//! on weight rows in the repacked layout of [`repack_row`].
//!
//! Work unit: one group of 8 consecutive blocks (80 bytes) of one row, decoded once and reused
//! for every column of the tile and (through the activation loads) shared by `R` rows.
//!
//! * **Layout (upload-time repack, [`repack_row`]).** Each full group of 8 blocks of a row is
//!   stored as the eight 8-byte code words (block `b` at bytes `8b..8b+8`) followed by the 16
//!   scale bytes (`e[h]` of block `b` at byte `64 + 2b + h`); a row's last, partial group stays
//!   canonical. The canonical layout (FORMATS.md section 3: `qs[8], e[2]` per 10-byte block,
//!   weight `4j + t` in bits `2t+1..2t` of `qs[j]`) is validated before the repack.
//! * **Codes.** One 64-byte load gives every code word of the group, block `b` in qword `b`.
//!   Its low nibbles (`q & 0x0F`) hold the codes of elements `4j` and `4j + 1` of each byte
//!   `j`, its high nibbles (`(q >> 4) & 0x0F`) those of `4j + 2` and `4j + 3`; two 16-entry
//!   `vpshufb` tables, one reading the nibble's low code and one its high code, map each
//!   nibble straight to the offset level `w + 4` in `{0, 3, 5, 8}` (codes 0..3 = -4, -1, +1,
//!   +4). So vector `t` (t = 0..4) holds in byte `j` of qword `b` the offset level of element
//!   `4j + t` of block `b`: 1 shift, 2 masks and 4 `vpshufb` per 256 weights. The activations
//!   are permuted to the same order once per matmul call ([`super::prep`]).
//! * **Scales.** The 16 scale bytes are zero-extended to 16 bits (`vpmovzxbw`), shifted left
//!   by 7 and widened by `vcvtph2ps`: UE4M3-b8 `e = E:M` read as an f16 with exponent field
//!   `E` and mantissa `M << 7` is exactly `scale(e) / 2^7`, subnormals included (E = 0:
//!   `M * 2^-17` vs `M * 2^-10`; E > 0: `(1 + M/8) 2^(E-15)` vs `(1 + M/8) 2^(E-8)`). The 2^7
//!   is folded into the activation scale (`Group::d`). Lane `2b + h` holds the scale of half
//!   `h` of block `b`.
//! * **Dot.** Per column: `vpmaddubsw(w_t + 4, a_t)` for t = 0..4 summed in i16 (each pair
//!   sum is at most 2 * 8 * 128 = 2048 in magnitude, four of them 8192 < 2^15), one `vpmaddwd`
//!   by 1 gives per lane `2b + h` the exact sum of the 16 products of that half-block, minus
//!   `a4 = 4 * sum(a)` (exact i32: `sum((w + 4) a) - 4 sum(a) = sum(w a)`). Then
//!   `acc = fma(float(sum), s * d, acc)`: `s * d` is exact (4 + 11 significant bits) and so
//!   is the product inside the FMA, so each (row, column, lane) rounds once per group.
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
//! Memory safety: a full group reads exactly its 80 bytes (one 64-byte and one 16-byte load
//! for AVX-512; 32 + 8 bytes per half for AVX2); a row's last, partial group is rewritten into
//! a zero-padded local buffer first (zero codes with zero scales contribute exactly 0, and the
//! activation groups are zero there too).

use std::arch::x86_64::*;

use super::prep::{Group, GROUP};

/// Bytes of one group of 8 ROCmFP2 blocks.
pub(crate) const GROUP_BYTES: usize = 10 * GROUP;

/// Bytes ahead of the current group that each row stream prefetches.
const PREFETCH: usize = 640;

/// Rewrites one canonical group of 8 blocks (`src`, 80 bytes) into the repacked layout
/// (`dst`): code words first, then the scale bytes (see the module doc).
fn repack_group(src: &[u8], dst: &mut [u8]) {
    for (b, blk) in src.chunks_exact(10).enumerate() {
        dst[8 * b..8 * b + 8].copy_from_slice(&blk[..8]);
        dst[64 + 2 * b..66 + 2 * b].copy_from_slice(&blk[8..10]);
    }
}

/// The upload-time repack of one validated canonical row (a whole number of 10-byte
/// blocks): every full group of 8 blocks into the kernel layout, in place; a partial last
/// group stays canonical. A bijection on the row's bytes.
pub(crate) fn repack_row(row: &mut [u8]) {
    let mut tmp = [0u8; GROUP_BYTES];
    for g in row.chunks_exact_mut(GROUP_BYTES) {
        repack_group(g, &mut tmp);
        g.copy_from_slice(&tmp);
    }
}

/// Pointers to the `R` rows starting at `r0` (the last row repeated past `nrows`) and, for a
/// row whose length is not a whole number of groups, its last (canonical, partial) group
/// rewritten into `tail` in the repacked layout, zero-padded.
///
/// # Safety
/// `w` holds `nrows > r0` rows of `rb = nb * 10` bytes.
#[inline(always)]
unsafe fn rows<const R: usize>(
    w: &[u8],
    rb: usize,
    nrows: usize,
    r0: usize,
    tail: &mut [[u8; GROUP_BYTES]; R],
) -> ([*const u8; R], usize) {
    let here = (nrows - r0).min(R);
    let full = rb / GROUP_BYTES * GROUP_BYTES;
    let mut rp = [w.as_ptr(); R];
    for (i, p) in rp.iter_mut().enumerate() {
        let start = (r0 + i.min(here - 1)) * rb;
        let row = &w[start..start + rb];
        *p = row.as_ptr();
        let mut canon = [0u8; GROUP_BYTES];
        canon[..rb - full].copy_from_slice(&row[full..]);
        repack_group(&canon, &mut tail[i]);
    }
    (rp, here)
}

/// `vpshufb` table: a nibble holding codes `c0 | c1 << 2` -> the offset level `w + 4` of
/// `c0` (levels 0, 3, 5, 8 for codes 0..3).
#[rustfmt::skip]
const LUT_LO: [i8; 16] = [0, 3, 5, 8, 0, 3, 5, 8, 0, 3, 5, 8, 0, 3, 5, 8];

/// `vpshufb` table: a nibble holding codes `c0 | c1 << 2` -> the offset level of `c1`.
#[rustfmt::skip]
const LUT_HI: [i8; 16] = [0, 0, 0, 0, 3, 3, 3, 3, 5, 5, 5, 5, 8, 8, 8, 8];

/// One repacked group of one row, decoded: `w[t]` (offset levels, see the module doc) and the
/// scales divided by 2^7 in lane `2b + h`.
///
/// # Safety
/// AVX-512 F/BW and AVX2/F16C are available; `p .. p + 80` is readable.
#[inline(always)]
unsafe fn decode512(p: *const u8) -> ([__m512i; 4], __m512) {
    // SAFETY: the loads read p .. p + 64 and p + 64 .. p + 80, inside the 80 bytes the caller
    // guarantees; the rest is register-only.
    unsafe {
        let q = _mm512_loadu_si512(p.cast());
        let m = _mm512_set1_epi8(0x0F);
        let lo = _mm512_and_si512(q, m);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m);
        let la = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
        let lb = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
        let w = [
            _mm512_shuffle_epi8(la, lo),
            _mm512_shuffle_epi8(lb, lo),
            _mm512_shuffle_epi8(la, hi),
            _mm512_shuffle_epi8(lb, hi),
        ];
        let e = _mm_loadu_si128(p.add(64).cast());
        let h = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(e));
        (w, _mm512_cvtph_ps(h))
    }
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
/// column's groups), accumulated into `acc[row][column]` (see the module doc).
///
/// # Safety
/// AVX-512 F/BW, AVX2, FMA and F16C are available; every `ps[i] .. ps[i] + 80` is readable;
/// every `gp[j].add(gi)` points to a group.
#[inline(always)]
unsafe fn step512<const R: usize, const CT: usize>(
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
            (wv[i], s[i]) = decode512(ps[i]);
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
                let p01 = _mm512_add_epi16(
                    _mm512_maddubs_epi16(wv[i][0], av[0]),
                    _mm512_maddubs_epi16(wv[i][1], av[1]),
                );
                let p23 = _mm512_add_epi16(
                    _mm512_maddubs_epi16(wv[i][2], av[2]),
                    _mm512_maddubs_epi16(wv[i][3], av[3]),
                );
                let p16 = _mm512_add_epi16(p01, p23);
                let si = _mm512_sub_epi32(_mm512_madd_epi16(p16, ones), a4);
                let sd = _mm512_mul_ps(s[i], d);
                acc[i][jj] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), sd, acc[i][jj]);
            }
        }
    }
}

/// The AVX-512 body: `R` rows per group of rows, `CT` columns per sub-tile (columns past the
/// tile's end repeat its last column; their results are discarded).
///
/// # Safety
/// AVX-512 F/BW, AVX2, FMA and F16C are available; `w` is whole rows of `rb = nb * 10` bytes
/// (`nb >= 1`); `g` holds `ncols * nb.div_ceil(8)` groups (column-major, see
/// [`super::prep::build`]); `out.len() == rows * ncols`, `ncols >= 1`.
#[inline(always)]
pub(crate) unsafe fn body512<const R: usize, const CT: usize>(
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
    let mut tail = [[0u8; GROUP_BYTES]; R];
    // SAFETY: row pointers come from `rows` (inside `w`); group `gi < full` of a row reads
    // bytes `80 gi .. 80 gi + 80 <= rb`; the partial group reads the local `tail` copy; the
    // activation groups are indexed `col * ng + gi` with `col < ncols`, `gi < ng`, inside `g`
    // (checked by the caller's length invariant); prefetches never fault; features available.
    unsafe {
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = rows::<R>(w, rb, nrows, r0, &mut tail);
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
                        *p = p.add(gi * GROUP_BYTES);
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                    }
                    step512(ps, gp, gi, &mut acc);
                }
                if full < ng {
                    let tp: [*const u8; R] = std::array::from_fn(|i| tail[i].as_ptr());
                    step512(tp, gp, full, &mut acc);
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

/// One half group (blocks `4h .. 4h + 4`) of one repacked group, decoded for AVX2: `w[t]`
/// and the scales divided by 2^7 in lane `2b + h'` (b = 0..4 within the half).
///
/// # Safety
/// AVX2 and F16C are available; `p .. p + 80` is readable; `h < 2`.
#[inline(always)]
unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256) {
    // SAFETY: the loads read p + 32h .. p + 32h + 32 and p + 64 + 8h .. p + 72 + 8h, inside
    // the 80 bytes the caller guarantees; the rest is register-only.
    unsafe {
        let q = _mm256_loadu_si256(p.add(32 * h).cast());
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_and_si256(q, m);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m);
        let la = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_LO.as_ptr().cast()));
        let lb = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT_HI.as_ptr().cast()));
        let w = [
            _mm256_shuffle_epi8(la, lo),
            _mm256_shuffle_epi8(lb, lo),
            _mm256_shuffle_epi8(la, hi),
            _mm256_shuffle_epi8(lb, hi),
        ];
        let e = _mm_loadl_epi64(p.add(64 + 8 * h).cast());
        let x = _mm_slli_epi16::<7>(_mm_cvtepu8_epi16(e));
        (w, _mm256_cvtph_ps(x))
    }
}

/// The AVX2 body: as [`body512`] with 256-bit vectors, each group handled as two halves of 4
/// blocks.
///
/// # Safety
/// AVX2, FMA and F16C are available; the invariants of [`body512`] hold.
#[inline(always)]
pub(crate) unsafe fn body256<const R: usize, const CT: usize>(
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
    let mut tail = [[0u8; GROUP_BYTES]; R];
    // SAFETY: as in `body512`.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut r0 = 0;
        while r0 < nrows {
            let (rp, here) = rows::<R>(w, rb, nrows, r0, &mut tail);
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
                            let p = rp[i].add(gi * GROUP_BYTES);
                            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                            p
                        } else {
                            tail[i].as_ptr()
                        };
                        for h in 0..2 {
                            let (wv, s) = decode256(p, h);
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

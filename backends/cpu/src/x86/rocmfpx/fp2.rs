//! ROCmFP2 kernel bodies (AVX-512 and AVX2) against Q8_0 activations in the [`Group`] layout.
//!
//! Work unit: one group of 8 consecutive blocks (80 bytes) of one row, decoded once and reused
//! for every column of the tile.
//!
//! * **Codes.** The eight 8-byte code words are gathered into one vector, block `b` in qword
//!   `b` (AVX-512: two `vpermt2d` on four overlapping loads, the even blocks' words being
//!   dword-aligned at the group start and the odd blocks' two bytes further, then one
//!   `vpermt2q`; AVX2: two `vpermd` + `vpblendd` per four blocks). Vector `t` (t = 0..4) is
//!   that vector shifted right by `2t` bits (one uniform `vpsrlq`) and masked with `0x03`:
//!   byte `j` of qword `b` is then the code of element `4j + t` of block `b`, which one
//!   `vpshufb` maps to the offset level `w + 4` in `{0, 3, 5, 8}` (codes 0..3 = -4, -1, +1, +4,
//!   FORMATS.md section 3). The activations were permuted to the same order once per call
//!   ([`super::prep`]).
//! * **Scales.** The two scale bytes of each block are gathered (one more `vpermt2d`/`vpermq`),
//!   placed in the high byte of 16-bit lanes by `vpshufb`, shifted right by 1 (`e << 7`) and
//!   widened by `vcvtph2ps`: UE4M3-b8 `e = E:M` read as an f16 with exponent field `E` and
//!   mantissa `M << 7` is exactly `scale(e) / 2^7`, subnormals included (E = 0: `M * 2^-17` vs
//!   `M * 2^-10`; E > 0: `(1 + M/8) 2^(E-15)` vs `(1 + M/8) 2^(E-8)`). The 2^7 is folded into the
//!   activation scale (`Group::d`). Lane `2b + h` holds the scale of half `h` of block `b`.
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
//! times decoded activations. Integer block sums are exact.
//!
//! Memory safety: a full group reads exactly its 80 bytes (the loads at offsets 0, 2, 6, 8, 14,
//! 16, 40, 46, 48 end at or before byte 80); a row's last, partial group is copied into a
//! zero-padded local buffer first (zero codes and zero scales contribute exactly 0, and the
//! activation groups are zero there too).

use std::arch::x86_64::*;

use super::prep::{Group, GROUP};

/// Bytes of one group of 8 ROCmFP2 blocks.
pub(crate) const GROUP_BYTES: usize = 10 * GROUP;

/// Bytes ahead of the current group that each row stream prefetches.
const PREFETCH: usize = 640;

/// Pointers to the `R` rows starting at `r0` (the last row repeated past `nrows`) and, for a
/// row whose length is not a whole number of groups, its last group copied into `tail`.
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
        let rest = &row[full..];
        tail[i][..rest.len()].copy_from_slice(rest);
        tail[i][rest.len()..].iter_mut().for_each(|b| *b = 0);
    }
    (rp, here)
}

/// The offset levels `w + 4` at codes 0..3 (repeated per 128-bit lane).
#[rustfmt::skip]
const LUT: [i8; 16] = [0, 3, 5, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// `vpshufb` pattern: per lane, dwords of blocks (b0: low half, b1: high half, b2: low, b3:
/// high) -> 16-bit lanes `[0, e]` for (b0 h0, b0 h1, b1 h0, ..., b3 h1).
#[rustfmt::skip]
const SCALE_PAT: [i8; 16] = [-1, 0, -1, 1, -1, 6, -1, 7, -1, 8, -1, 9, -1, 14, -1, 15];

/// One group of one row, decoded: `w[t]` (offset levels, see the module doc) and the scales
/// divided by 2^7 in lane `2b + h`.
///
/// # Safety
/// AVX-512 F/BW and AVX2/F16C are available; `p .. p + 80` is readable.
#[inline(always)]
unsafe fn decode512(p: *const u8) -> ([__m512i; 4], __m512) {
    // SAFETY: the four loads read p .. p + 64, p + 16 .. p + 80, p + 2 .. p + 66 and
    // p + 14 .. p + 78, inside the 80 bytes the caller guarantees; the rest is register-only.
    unsafe {
        let a = _mm512_loadu_si512(p.cast());
        let b = _mm512_loadu_si512(p.add(16).cast());
        let c = _mm512_loadu_si512(p.add(2).cast());
        let e = _mm512_loadu_si512(p.add(14).cast());
        // Even blocks at bytes 0, 20, 40 (in `a`) and 60 (`b` + 44); odd blocks at 10, 30, 50
        // (`c` + 8, 28, 48) and 70 (`e` + 56).
        let ie = _mm512_setr_epi32(0, 1, 5, 6, 10, 11, 27, 28, 0, 0, 0, 0, 0, 0, 0, 0);
        let io = _mm512_setr_epi32(2, 3, 7, 8, 12, 13, 30, 31, 0, 0, 0, 0, 0, 0, 0, 0);
        let qe = _mm512_permutex2var_epi32(a, ie, b);
        let qo = _mm512_permutex2var_epi32(c, io, e);
        let q = _mm512_permutex2var_epi64(qe, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), qo);
        let m3 = _mm512_set1_epi8(3);
        let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(LUT.as_ptr().cast()));
        let w = [
            _mm512_shuffle_epi8(lut, _mm512_and_si512(q, m3)),
            _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi64::<2>(q), m3)),
            _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi64::<4>(q), m3)),
            _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi64::<6>(q), m3)),
        ];
        // Scale pairs: dwords at bytes 8, 16 (high half), 28, 36 (high), 48, 56 (high) in `a`,
        // 68 and 76 (high) in `b`.
        let is = _mm512_setr_epi32(2, 4, 7, 9, 12, 14, 29, 31, 0, 0, 0, 0, 0, 0, 0, 0);
        let sd = _mm512_castsi512_si256(_mm512_permutex2var_epi32(a, is, b));
        let pat = _mm256_broadcastsi128_si256(_mm_loadu_si128(SCALE_PAT.as_ptr().cast()));
        let h = _mm256_srli_epi16::<1>(_mm256_shuffle_epi8(sd, pat));
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
        let ones = _mm512_set1_epi16(1);
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
                for gi in 0..ng {
                    for i in 0..R {
                        let p = if gi < full {
                            let p = rp[i].add(gi * GROUP_BYTES);
                            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                            p
                        } else {
                            tail[i].as_ptr()
                        };
                        let (wv, s) = decode512(p);
                        for jj in 0..CT {
                            let ag = &*gp[jj].add(gi);
                            let sd = _mm512_mul_ps(s, _mm512_load_ps(ag.d.as_ptr()));
                            let mut p16 = _mm512_setzero_si512();
                            for (t, wt) in wv.iter().enumerate() {
                                let av = _mm512_load_si512(ag.q[t].as_ptr().cast());
                                p16 = _mm512_add_epi16(p16, _mm512_maddubs_epi16(*wt, av));
                            }
                            let a4 = _mm512_load_si512(ag.a4.as_ptr().cast());
                            let si = _mm512_sub_epi32(_mm512_madd_epi16(p16, ones), a4);
                            acc[i][jj] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), sd, acc[i][jj]);
                        }
                    }
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

/// One half group (blocks `4h .. 4h + 4`) of one row, decoded for AVX2: `w[t]` and the scales
/// divided by 2^7 in lane `2b + h'` (b = 0..4 within the half).
///
/// # Safety
/// AVX2 and F16C are available; `p .. p + 80` is readable.
#[inline(always)]
unsafe fn decode256(p: *const u8, h: usize) -> ([__m256i; 4], __m256) {
    // SAFETY: the loads read p + 40h + {0, 6} .. + 32 and p + 8 .. p + 40, p + 48 .. p + 80,
    // inside the 80 bytes the caller guarantees; the rest is register-only.
    unsafe {
        let p0 = p.add(40 * h);
        // Blocks 0, 2 of the half at bytes 0, 20 (dwords 0-1, 5-6); blocks 1, 3 at 10, 30
        // (dwords 1-2, 6-7 of the load at +6).
        let l0 = _mm256_loadu_si256(p0.cast());
        let l1 = _mm256_loadu_si256(p0.add(6).cast());
        let ia = _mm256_setr_epi32(0, 1, 0, 0, 5, 6, 0, 0);
        let ib = _mm256_setr_epi32(0, 0, 1, 2, 0, 0, 6, 7);
        let q = _mm256_blend_epi32::<0b1100_1100>(
            _mm256_permutevar8x32_epi32(l0, ia),
            _mm256_permutevar8x32_epi32(l1, ib),
        );
        let m3 = _mm256_set1_epi8(3);
        let lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(LUT.as_ptr().cast()));
        let w = [
            _mm256_shuffle_epi8(lut, _mm256_and_si256(q, m3)),
            _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi64::<2>(q), m3)),
            _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi64::<4>(q), m3)),
            _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi64::<6>(q), m3)),
        ];
        // Scale pairs of blocks 0..4 of the half at bytes 8, 18 (lane 0 of the load at +8:
        // offsets 0, 10) and 28, 38 (lane 1: offsets 4, 14).
        let m = _mm256_loadu_si256(p0.add(8).cast());
        #[rustfmt::skip]
        let pat = _mm256_setr_epi8(
            -1, 0, -1, 1, -1, 10, -1, 11, -1, -1, -1, -1, -1, -1, -1, -1,
            -1, 4, -1, 5, -1, 14, -1, 15, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let x = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(m, pat));
        let s = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_srli_epi16::<1>(x)));
        (w, s)
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

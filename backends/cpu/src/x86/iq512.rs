//! AVX-512 (F/BW/VL) kernels for the grid-coded i-quants against Q8_K activations: IQ2_XXS,
//! IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, in [`super::z512`]'s one-row-per-register layout (its
//! driver, records and column reuse: a weight block is decoded once per row and reused for
//! every column of the tile).
//!
//! Decode. Every one of these formats stores, per group of 8 (IQ2) or 4 (IQ3) elements, an
//! index into a grid of non-negative magnitudes (ggml `iq2xxs_grid`, `iq2xs_grid`,
//! `iq2s_grid`, `iq3xxs_grid`, `iq3s_grid`: the core's `format::ggml::iq::tables`), one sign
//! bit per element (IQ2_XXS, IQ2_XS, IQ3_XXS: 7 stored bits per 8 elements, the eighth the
//! parity, ggml `ksigns_iq2xs`), a 4-bit sub-block scale `ls` (per 32 or 16 elements) used as
//! the odd integer `2 ls + 1`, and an f16 `d` times a power of two (1/8, 1/4 or 1). Layouts
//! from ggml `block_iq2_xxs` .. `block_iq3_s` and `dequantize_row_iq*` (ggml-quants.c), as in
//! the core. A block decodes into four 64-byte registers of unsigned grid magnitudes in
//! element order (scalar table loads assembled into vectors, measured faster than `vpgatherqq` / `vpgatherdd` on Zen 4), four 64-bit sign masks and four i16
//! scale vectors (scale of the sub-block each word pair belongs to, one `vpermw`).
//!
//! Per column (record: the Q8_K block's 256 activations in element order and `d_a`): the
//! activations are negated where the weight sign is set (masked `vpsubb`; Q8_K activations lie
//! in -127..=127, so negation is exact), `vpmaddubsw` with the magnitudes (pairs <= 2 * 62 *
//! 127 < 2^15), `vpmaddwd` with the scales, three adds, one `vcvtdq2ps` and one FMA by
//! `d * 2^-k * d_a`. Every i32 lane is an exact sum of its own 16 terms (<= 16 * 62 * 127 * 31
//! < 2^22, converted exactly), so the bound argument of [`super::z512`] holds unchanged:
//! `|y - y_exact| <= c * K * 2^-24 * sum|w_i a_i|` with **c = 1**.
//!
//! IQ4_XS (no grid: ggml `block_iq4_xs`, 136 bytes: `d` f16, `scales_h` u16, `scales_l[4]`,
//! `qs[128]`; sub-block `ib` of 32 has the 6-bit scale `ls` (low nibble from `scales_l`, two
//! high bits from `scales_h`) used as `ls - 32`, low nibbles of `qs[16 ib..]` are elements
//! `32 ib + j`, high nibbles `32 ib + 16 + j`, values `kvalues_iq4nl`) decodes as
//! [`super::z512::Iq4Nl`] does (levels' absolute values and sign masks) with the i16 scale of
//! each 128-bit lane's sub-block; the same per-column arithmetic (pairs <= 2 * 127 * 127 <
//! 2^15; lanes <= 4 * 2 * 32258 * 32 < 2^24, exact), c = 1.
//!
//! IQ1_S (ggml `block_iq1_s`, 50 bytes: `d` f16, `qs[32]` low index bytes, `qh[8]` u16 per
//! sub-block of 32: three index high bits per group of 8, the 3-bit scale `ls` at bits 12..15
//! (used as `2 ls + 1`), the delta sign at bit 15; values `d (2 ls + 1) (grid + delta)`,
//! `delta = -+1/8`; grid `iq1s_grid` of bytes -1, 0, 1). Registers: the grid bytes' absolute
//! values and sign masks, as above; the delta term is Q4_K's "min" term: `ls * sign` per
//! sub-block against the Q8_K `bsums` (two per sub-block), FMA'd by `d * d_a / 8`. Lanes: the
//! main sum <= 16 * 127 * 15, the delta sum <= 2 * 15 * 2032, exact; c = 1.
//!
//! IQ1_M (ggml `block_iq1_m`, 56 bytes: `qs[32]` low index bytes, `qh[16]` a nibble per group
//! of 8 (three index high bits, bit 3 the delta sign), `scales[8]` four u16 holding 3-bit
//! scales per 16 elements (`2 ls + 1`) and, in their top nibbles, the f16 `d`; values
//! `d (2 ls + 1) (grid + delta)`, `delta = -+1/8` per group of 8). The delta changes per group
//! of 8, finer than the Q8_K `bsums`, so it is folded into the weights: `8 grid + sign`
//! (-9..=9, never 0) goes through [`grid_dot`]'s sign-mask arithmetic with `d / 8` (pairs
//! <= 2 * 9 * 127, lanes <= 16 * 9 * 127 * 15, exact); c = 1.
//!
//! VBMI forms (`Iq2XxsVbmi`, `Iq2SVbmi`, the `Isa::Avx512Vnni` table when the CPU has AVX-512
//! VBMI): the same registers, values and arithmetic (so the same bits), built without scalar
//! grid loads: each grid entry's eight levels as a 16-bit code (2 bits per element) looked up
//! in registers by `vpermi2b`, spread to bytes by `vpermb` + `vpmultishiftqb` + `vpermb`.
//!
//! What must not live here: the driver and the other formats (`super::z512`), length checks
//! (`super::ext::check`).

#![allow(clippy::incompatible_msrv)]
// Register, sub-block and column indices address several arrays at once.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ptr;

use lowbit_core::format::ggml::iq::tables::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS,
    KVALUES_IQ4NL,
};
use lowbit_core::FormatId;

use super::ext::{ActSlice, W_IQ1M, W_IQ1S, W_IQ2S, W_IQ2XS, W_IQ2XXS, W_IQ3S, W_IQ3XXS, W_IQ4XS};
use super::z512::{f16_bcast, ld, ldps, q8_k_block, run_ext, Lanes, V64};
use crate::kernels::Kernel;

/// The kernel for `format`, if this module has one.
pub(crate) fn kernel(format: FormatId) -> Option<Kernel> {
    match format {
        FormatId::Iq2Xxs => Some(Kernel { name: "avx512-iq2_xxs", f: run_ext::<Iq2Xxs, W_IQ2XXS> }),
        FormatId::Iq2Xs => Some(Kernel { name: "avx512-iq2_xs", f: run_ext::<Iq2Xs, W_IQ2XS> }),
        FormatId::Iq2S => Some(Kernel { name: "avx512-iq2_s", f: run_ext::<Iq2S, W_IQ2S> }),
        FormatId::Iq3Xxs => Some(Kernel { name: "avx512-iq3_xxs", f: run_ext::<Iq3Xxs, W_IQ3XXS> }),
        FormatId::Iq3S => Some(Kernel { name: "avx512-iq3_s", f: run_ext::<Iq3S, W_IQ3S> }),
        FormatId::Iq4Xs => Some(Kernel { name: "avx512-iq4_xs", f: run_ext::<Iq4Xs, W_IQ4XS> }),
        FormatId::Iq1S => Some(Kernel { name: "avx512-iq1_s", f: run_ext::<Iq1S, W_IQ1S> }),
        FormatId::Iq1M => Some(Kernel { name: "avx512-iq1_m", f: run_ext::<Iq1M, W_IQ1M> }),
        _ => None,
    }
}

/// A decoded block: grid magnitudes (4 x 64 elements), sign masks, i16 scales per word, and
/// `d` times the format's power of two in every lane.
type Grid = ([__m512i; 4], [__mmask64; 4], [__m512i; 4], __m512);

/// `parity(i) << 7` for every nibble `i`.
const PARITY7: [i8; 16] = {
    let mut t = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = if (i as u32).count_ones() % 2 == 1 { i8::MIN } else { 0 };
        i += 1;
    }
    t
};

/// The sign masks of the 32 groups whose 7 stored sign bits are the bytes of `s7`: each byte
/// gets its parity as bit 7 (ggml's `ksigns_iq2xs`, by two nibble lookups; a test checks all 128 entries), then every 8
/// bytes form one register's 64-bit mask (bit `8 l + j` = element `j` of group `l`).
///
/// # Safety
/// AVX2 is available.
#[inline(always)]
unsafe fn sign_masks(s7: __m256i) -> [u64; 4] {
    // SAFETY: register-only operations and a store into a local array.
    unsafe {
        let par = _mm256_broadcastsi128_si256(_mm_loadu_si128(PARITY7.as_ptr().cast()));
        let m = _mm256_set1_epi8(0x0F);
        let lo = _mm256_shuffle_epi8(par, _mm256_and_si256(s7, m));
        let hi = _mm256_shuffle_epi8(par, _mm256_and_si256(_mm256_srli_epi16::<4>(s7), m));
        let s8 = _mm256_or_si256(s7, _mm256_xor_si256(lo, hi));
        let mut out = [0u64; 4];
        _mm256_storeu_si256(out.as_mut_ptr().cast(), s8);
        out
    }
}

/// The 32 bytes `(a[s] >> 7 l) & 127` (byte `4 s + l`) of the eight dwords `a[s]` at dword
/// positions `first + step * s` of `x`.
///
/// # Safety
/// The AVX-512 set of `z512::entry` is available.
#[inline(always)]
unsafe fn fields7(x: __m512i, first: i32, step: i32) -> __m256i {
    // SAFETY: register-only operations.
    unsafe {
        let sh = _mm512_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21);
        let m = _mm512_set1_epi32(127);
        let half = |s0: i32| {
            let d = |s: i32| first + step * (s0 + s);
            #[rustfmt::skip]
            let idx = _mm512_setr_epi32(
                d(0), d(0), d(0), d(0), d(1), d(1), d(1), d(1),
                d(2), d(2), d(2), d(2), d(3), d(3), d(3), d(3),
            );
            let y = _mm512_permutexvar_epi32(idx, x);
            _mm512_cvtepi32_epi8(_mm512_and_si512(_mm512_srlv_epi32(y, sh), m))
        };
        _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(half(0)), half(4))
    }
}

/// `vpermw` indices: word `i` of register `v` takes source word `mul * (grp * v + i / per) +
/// off` (the scale of the sub-block that word's element pair lies in).
const fn perm(grp: usize, per: usize, mul: usize, off: usize) -> [[i16; 32]; 4] {
    let mut t = [[0i16; 32]; 4];
    let mut v = 0;
    while v < 4 {
        let mut i = 0;
        while i < 32 {
            t[v][i] = (mul * (grp * v + i / per) + off) as i16;
            i += 1;
        }
        v += 1;
    }
    t
}

/// Per-16 scales (IQ2_XS, IQ2_S): source word `h` is sub-block `h`'s scale.
static PERM_16: [[i16; 32]; 4] = perm(4, 8, 1, 0);
/// IQ2_XXS: the scale of sub-block `s` is in the low word of dword `2s + 1`.
static PERM_XXS: [[i16; 32]; 4] = perm(2, 16, 4, 2);
/// IQ3_XXS: the scale of sub-block `s` is in the low word of dword `s`.
static PERM_DW: [[i16; 32]; 4] = perm(2, 16, 2, 0);
/// IQ3_S: source word `s` is sub-block `s`'s scale.
static PERM_W: [[i16; 32]; 4] = perm(2, 16, 1, 0);

/// The four scale registers: `src` permuted by `t`.
///
/// # Safety
/// AVX-512 F/BW are available.
#[inline(always)]
unsafe fn spread_scales(src: __m512i, t: &[[i16; 32]; 4]) -> [__m512i; 4] {
    // SAFETY: reads the 64-byte rows of `t`; register-only operations.
    unsafe {
        let p = |v: usize| _mm512_permutexvar_epi16(_mm512_loadu_si512(t[v].as_ptr().cast()), src);
        [p(0), p(1), p(2), p(3)]
    }
}

/// `2 * ls + 1` for the 16 nibbles of the 8 bytes at `q` (byte `i` low nibble = scale `2i`,
/// high = `2i + 1`), as 16 words in the low 256 bits.
///
/// # Safety
/// `q .. q + 8` is readable; the AVX-512 set of `z512::entry` is available.
#[inline(always)]
unsafe fn nibble_scales(q: *const u8) -> __m512i {
    // SAFETY: reads 8 bytes at `q` (caller); register-only operations.
    unsafe {
        let s = _mm_loadl_epi64(q.cast());
        let m = _mm_set1_epi8(0x0F);
        let b = _mm_unpacklo_epi8(_mm_and_si128(s, m), _mm_and_si128(_mm_srli_epi16::<4>(s), m));
        let w = _mm256_cvtepu8_epi16(b);
        let w = _mm256_add_epi16(_mm256_add_epi16(w, w), _mm256_set1_epi16(1));
        _mm512_castsi256_si512(w)
    }
}

/// The record: the block's activations in element order (4 vectors) and `d_a` in every lane.
fn prep_plain(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
    let Some(blk) = q8_k_block(act, nb, j, g) else { return };
    for (k, r) in rec.iter_mut().take(4).enumerate() {
        for l in 0..64 {
            r.0[l] = blk.qs[64 * k + l] as u8;
        }
    }
    if let Some(r) = rec.get_mut(4) {
        for l in 0..16 {
            r.0[4 * l..4 * l + 4].copy_from_slice(&blk.d.to_le_bytes());
        }
    }
}

/// [`prep_plain`] with vector instructions.
///
/// # Safety
/// The AVX-512 set of `z512::entry` is available.
#[inline(always)]
unsafe fn prep_plain_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
    let (Some(blk), true) = (q8_k_block(act, nb, j, g), rec.len() == 5) else { return };
    let q = blk.qs.as_ptr();
    let r = rec.as_mut_ptr();
    // SAFETY: reads the block's 256 quants; writes the 5 record vectors.
    unsafe {
        for k in 0..4 {
            _mm512_store_si512(r.add(k).cast(), _mm512_loadu_si512(q.add(64 * k).cast()));
        }
        _mm512_store_ps(r.add(4).cast(), _mm512_set1_ps(blk.d));
    }
}

/// The shared per-column arithmetic (module doc).
///
/// # Safety
/// `a` points at 5 readable record vectors; the AVX-512 set of `z512::entry` is available.
#[inline(always)]
unsafe fn grid_dot(w: &Grid, a: *const V64, acc: __m512) -> __m512 {
    // SAFETY: reads the 5 record vectors (caller); register-only operations.
    unsafe {
        let z = _mm512_setzero_si512();
        let t = |k: usize| {
            let x = ld(a, k);
            let sx = _mm512_mask_sub_epi8(x, w.1[k], z, x);
            _mm512_madd_epi16(_mm512_maddubs_epi16(w.0[k], sx), w.2[k])
        };
        let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.3, ldps(a, 4)), acc)
    }
}

/// A grid-coded block format whose decode fills a [`Grid`]: everything else of its
/// [`Lanes`] form is shared (one block per group, the plain 5-vector record, [`grid_dot`]).
pub(crate) trait GridBlock {
    /// Bytes of one block.
    const BB: usize;
    /// Decodes the block at `p`.
    ///
    /// # Safety
    /// `p .. p + BB` is readable; the AVX-512 set of `z512::entry` is available.
    unsafe fn decode(p: *const u8) -> Grid;
}

impl<F: GridBlock> Lanes for F {
    const BB: usize = F::BB;
    const GB: usize = 1;
    const REC: usize = 5;
    const WIDE: bool = true;
    type W = Grid;

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        prep_plain(act, nb, j, g, rec);
    }

    #[inline(always)]
    unsafe fn prep_fast(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        // SAFETY: forwarded from the caller.
        unsafe { prep_plain_fast(act, nb, j, g, rec) }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: forwarded from the caller (`GB * BB` = `F::BB` bytes are readable).
        unsafe { F::decode(p) }
    }

    #[inline(always)]
    unsafe fn dot(w: &Grid, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: forwarded from the caller.
        unsafe { grid_dot(w, a, acc) }
    }
}

/// Eight 8-byte grid entries of `grid` at `idx`, by scalar loads.
///
/// # Safety
/// Every index is below `grid.len()`; AVX-512F is available.
#[inline(always)]
unsafe fn load8(grid: &[u64], idx: [usize; 8]) -> __m512i {
    // SAFETY: the caller bounds the indices; register-only operations otherwise.
    unsafe {
        let e = |i: usize| *grid.get_unchecked(idx[i]) as i64;
        let x0 = _mm_set_epi64x(e(1), e(0));
        let x1 = _mm_set_epi64x(e(3), e(2));
        let x2 = _mm_set_epi64x(e(5), e(4));
        let x3 = _mm_set_epi64x(e(7), e(6));
        let y0 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x0), x1);
        let y1 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x2), x3);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y0), y1)
    }
}

/// Sixteen 4-byte grid entries of `grid` at the 16 indices, by scalar loads.
///
/// # Safety
/// Every index is below `grid.len()`; AVX-512F is available.
#[inline(always)]
unsafe fn load16(grid: &[u32], idx: impl Fn(usize) -> usize) -> __m512i {
    // SAFETY: the caller bounds the indices; register-only operations otherwise.
    unsafe {
        let e = |i: usize| *grid.get_unchecked(idx(i)) as i32;
        let x = |b: usize| _mm_setr_epi32(e(b), e(b + 1), e(b + 2), e(b + 3));
        let y0 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(0)), x(4));
        let y1 = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(x(8)), x(12));
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y0), y1)
    }
}

/// IQ2_XXS (66 bytes: `d` f16, then per sub-block of 32 a u32 of four 8-bit grid indices and
/// a u32 of four 7-bit sign fields and the 4-bit scale in bits 28..32; `d / 8`).
pub(crate) struct Iq2Xxs;

impl GridBlock for Iq2Xxs {
    const BB: usize = 66;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..66 at `p` (caller); grid indices are bytes (< 256 =
        // `IQ2XXS_GRID.len()`); register-only operations otherwise.
        unsafe {
            let q = p.add(2);
            let x = _mm512_loadu_si512(q.cast());
            let ls = _mm512_srli_epi32::<28>(x);
            let ls = _mm512_add_epi32(_mm512_add_epi32(ls, ls), _mm512_set1_epi32(1));
            let sc = spread_scales(ls, &PERM_XXS);
            let mut g = [_mm512_setzero_si512(); 4];
            for v in 0..4 {
                let b = |i: usize| usize::from(*q.add(16 * v + i));
                g[v] = load8(&IQ2XXS_GRID, [b(0), b(1), b(2), b(3), b(8), b(9), b(10), b(11)]);
            }
            let m = sign_masks(fields7(x, 1, 2));
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.125)))
        }
    }
}

/// The 2-bit level code of every element of an IQ2 grid entry (bytes 0x08, 0x19, 0x2b: codes
/// 0, 1, 2; element `j` at bits `2j, 2j + 1`), split into the low byte (`[0]`) and the high
/// byte (`[1]`) of each entry's 16-bit code, for the `vpermi2b` decode ([`Iq2XxsVbmi`]).
#[repr(C, align(64))]
struct GridCodes([[u8; 256]; 2]);

/// [`GridCodes`] of ggml's `iq2xxs_grid` (the core's `IQ2XXS_GRID`).
static XXS_CODES: GridCodes = GridCodes(grid_codes(&IQ2XXS_GRID));

/// The 16-bit level codes of every entry of an IQ2 grid (levels 0x08, 0x19, 0x2b: codes 0, 1,
/// 2; element `j` at bits `2j, 2j + 1`), as `[low bytes, high bytes]`.
const fn grid_codes<const N: usize>(grid: &[u64; N]) -> [[u8; N]; 2] {
    let mut t = [[0u8; N]; 2];
    let mut e = 0;
    while e < N {
        let mut c = 0u16;
        let mut j = 0;
        while j < 8 {
            let b = (grid[e] >> (8 * j)) as u8;
            let l: u16 = if b == 0x08 {
                0
            } else if b == 0x19 {
                1
            } else {
                2
            };
            c |= l << (2 * j);
            j += 1;
        }
        t[0][e] = c as u8;
        t[1][e] = (c >> 8) as u8;
        e += 1;
    }
    t
}

/// The byte-shuffle constants of [`Iq2XxsVbmi`], one 64-byte row each.
#[repr(C, align(64))]
struct XxsShuffles {
    /// Byte `2g + t` (`t` < 2) takes the grid index of group `g`: qs byte `8 (g / 4) + g % 4`.
    idx_dup: [u8; 64],
    /// Per register `v`, bytes `8q`, `8q + 1` take word `8v + q` (group `8v + q`'s code).
    compose: [[u8; 64]; 4],
    /// Per register `v`, the 8 bytes of qword `q` take the sign byte of group `g = 8v + q`
    /// (byte `8 (g / 4) + g % 4` of the looked-up signs).
    signs: [[u8; 64]; 4],
    /// `vpmultishiftqb` controls: byte `j` of each qword takes bits `2j ..` (element `j`'s code).
    code_shift: [u8; 64],
    /// `vpmultishiftqb` controls: byte `l` (and `4 + l`) of qword `s` takes bits `32 + 7l ..`
    /// (sign field `l` of sub-block `s`).
    sign_shift: [u8; 64],
    /// Byte `i`: the grid magnitude of code `i % 4` (8, 25, 43; code 3 never occurs).
    levels: [u8; 64],
    /// Byte `8q + j`: `1 << j`.
    bits: [u8; 64],
}

static XXS_SHUF: XxsShuffles = {
    let mut s = XxsShuffles {
        idx_dup: [0; 64],
        compose: [[0; 64]; 4],
        signs: [[0; 64]; 4],
        code_shift: [0; 64],
        sign_shift: [0; 64],
        levels: [0; 64],
        bits: [0; 64],
    };
    let mut i = 0;
    while i < 64 {
        let g = i / 2;
        s.idx_dup[i] = (8 * (g / 4) + g % 4) as u8;
        let (q, j) = (i / 8, i % 8);
        let mut v = 0;
        while v < 4 {
            s.compose[v][i] = (2 * (8 * v + q) + j % 2) as u8;
            let g = 8 * v + q;
            s.signs[v][i] = (8 * (g / 4) + g % 4) as u8;
            v += 1;
        }
        s.code_shift[i] = (2 * j) as u8;
        s.sign_shift[i] = (32 + 7 * (j % 4)) as u8;
        s.levels[i] = [8u8, 25, 43, 0][i % 4];
        s.bits[i] = 1 << j;
        i += 1;
    }
    s
};

/// IQ2_XXS with AVX-512 VBMI: the same registers as [`Iq2Xxs`], built without scalar loads.
/// The 32 grid indices (each twice) are looked up in [`XXS_CODES`] (two `vpermi2b` per
/// 128 entries, blends on bit 7 and on the byte's parity) as 32 16-bit codes; per register one
/// `vpermb` puts group `8v + q`'s code in qword `q`, one `vpmultishiftqb` moves element `j`'s
/// code to the low bits of byte `j`, one `vpermb` maps it to its magnitude. The 7-bit sign
/// fields (one `vpmultishiftqb`) index ggml's `ksigns_iq2xs` (one `vpermi2b`), and per register
/// a `vpermb` and a `vptestmb` give the 64-bit mask.
pub(crate) struct Iq2XxsVbmi;

impl GridBlock for Iq2XxsVbmi {
    const BB: usize = 66;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..66 at `p` (caller) and the 64-byte-aligned rows of the static
        // tables; register-only operations otherwise. Only reached through
        // `z512::entry_vnni_vbmi` (AVX-512 VBMI enabled).
        unsafe {
            let q = p.add(2);
            let x = _mm512_loadu_si512(q.cast());
            let ls = _mm512_srli_epi32::<28>(x);
            let ls = _mm512_add_epi32(_mm512_add_epi32(ls, ls), _mm512_set1_epi32(1));
            let sc = spread_scales(ls, &PERM_XXS);
            let s = &XXS_SHUF;
            // A macro, not a closure: a closure's body is compiled without the caller's features.
            macro_rules! ldc {
                ($r:expr) => {
                    _mm512_load_si512($r.as_ptr().cast())
                };
            }
            let idx = _mm512_permutexvar_epi8(ldc!(&s.idx_dup), x);
            let hi7 = _mm512_movepi8_mask(idx);
            let mut half = [_mm512_setzero_si512(); 2];
            for t in 0..2 {
                let c = XXS_CODES.0[t].as_ptr();
                let lo = _mm512_permutex2var_epi8(
                    _mm512_load_si512(c.cast()),
                    idx,
                    _mm512_load_si512(c.add(64).cast()),
                );
                let up = _mm512_permutex2var_epi8(
                    _mm512_load_si512(c.add(128).cast()),
                    idx,
                    _mm512_load_si512(c.add(192).cast()),
                );
                half[t] = _mm512_mask_blend_epi8(hi7, lo, up);
            }
            let codes = _mm512_mask_blend_epi8(0xAAAA_AAAA_AAAA_AAAA, half[0], half[1]);
            let sf = _mm512_multishift_epi64_epi8(ldc!(&s.sign_shift), x);
            let ks = KSIGNS_IQ2XS.as_ptr();
            let sb = _mm512_permutex2var_epi8(
                _mm512_loadu_si512(ks.cast()),
                sf,
                _mm512_loadu_si512(ks.add(64).cast()),
            );
            let mut g = [_mm512_setzero_si512(); 4];
            let mut m = [0u64; 4];
            for v in 0..4 {
                let cq = _mm512_permutexvar_epi8(ldc!(&s.compose[v]), codes);
                let cb = _mm512_multishift_epi64_epi8(ldc!(&s.code_shift), cq);
                g[v] = _mm512_permutexvar_epi8(cb, ldc!(&s.levels));
                let sv = _mm512_permutexvar_epi8(ldc!(&s.signs[v]), sb);
                m[v] = _mm512_test_epi8_mask(sv, ldc!(&s.bits));
            }
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.125)))
        }
    }
}

/// IQ2_XS (74 bytes: `d` f16, 32 u16 of a 9-bit grid index and a 7-bit sign field per group
/// of 8, 8 bytes of 4-bit scales per 16 elements; `d / 8`).
pub(crate) struct Iq2Xs;

impl GridBlock for Iq2Xs {
    const BB: usize = 74;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..74 at `p` (caller); grid indices are masked to 9 bits
        // (< 512 = `IQ2XS_GRID.len()`); register-only operations otherwise.
        unsafe {
            let q = p.add(2);
            let mut g = [_mm512_setzero_si512(); 4];
            for v in 0..4 {
                let w = |i: usize| {
                    usize::from(ptr::read_unaligned(q.add(16 * v + 2 * i).cast::<u16>()) & 511)
                };
                g[v] = load8(&IQ2XS_GRID, [w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7)]);
            }
            let x = _mm512_loadu_si512(q.cast());
            let m = sign_masks(_mm512_cvtepi16_epi8(_mm512_srli_epi16::<9>(x)));
            let sc = spread_scales(nibble_scales(p.add(66)), &PERM_16);
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.125)))
        }
    }
}

/// IQ2_S (82 bytes: `d` f16, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit index high
/// parts (four groups per byte), 8 bytes of 4-bit scales per 16 elements; `d / 8`).
pub(crate) struct Iq2S;

impl GridBlock for Iq2S {
    const BB: usize = 82;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..82 at `p` (caller); grid indices are a byte plus 2 bits
        // shifted to bits 8..10 (< 1024 = `IQ2S_GRID.len()`); register-only otherwise.
        unsafe {
            let mut g = [_mm512_setzero_si512(); 4];
            let mut m = [0u64; 4];
            for v in 0..4 {
                let h =
                    usize::from(u16::from_le(ptr::read_unaligned(p.add(66 + 2 * v).cast::<u16>())));
                let i = |l: usize| usize::from(*p.add(2 + 8 * v + l)) | ((h >> (2 * l)) & 3) << 8;
                g[v] = load8(&IQ2S_GRID, [i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7)]);
                m[v] = u64::from_le(ptr::read_unaligned(p.add(34 + 8 * v).cast::<u64>()));
            }
            let sc = spread_scales(nibble_scales(p.add(74)), &PERM_16);
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.125)))
        }
    }
}

/// [`GridCodes`] for ggml's 1024-entry `iq2s_grid` (the core's `IQ2S_GRID`): `[0]` low bytes,
/// `[1]` high bytes of the 16-bit codes.
#[repr(C, align(64))]
struct GridCodes1k([[u8; 1024]; 2]);

static S_CODES: GridCodes1k = GridCodes1k(grid_codes(&IQ2S_GRID));

/// Shuffle constants of [`Iq2SVbmi`]: byte `2g + t` takes low index byte `g` (`dup`), and the
/// `vpmultishiftqb` control moving group `g`'s two high index bits (bits `2g` of `qh`) to the
/// low bits of bytes `2g`, `2g + 1` (`high`).
#[repr(C, align(64))]
struct SShuffles {
    dup: [u8; 64],
    high: [u8; 64],
}

static S_SHUF: SShuffles = {
    let mut s = SShuffles { dup: [0; 64], high: [0; 64] };
    let mut i = 0;
    while i < 64 {
        s.dup[i] = (i / 2) as u8;
        s.high[i] = (2 * (i / 2)) as u8;
        i += 1;
    }
    s
};

/// IQ2_S with AVX-512 VBMI: [`Iq2XxsVbmi`]'s decode over the 1024-entry grid (eight 128-entry
/// `vpermi2b` lookups per code byte, blended on index bits 7, 8 and 9); the sign bytes are the
/// masks as stored.
pub(crate) struct Iq2SVbmi;

impl GridBlock for Iq2SVbmi {
    const BB: usize = 82;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..82 at `p` (caller) and the 64-byte-aligned rows of the static
        // tables; register-only operations otherwise. Only reached through
        // `z512::entry_vnni_vbmi` (AVX-512 VBMI enabled).
        unsafe {
            macro_rules! ldc {
                ($r:expr) => {
                    _mm512_load_si512($r.as_ptr().cast())
                };
            }
            let x = _mm512_loadu_si512(p.add(2).cast());
            let idx = _mm512_permutexvar_epi8(ldc!(&S_SHUF.dup), x);
            let qh = _mm512_set1_epi64(ptr::read_unaligned(p.add(66).cast::<i64>()));
            let hb = _mm512_multishift_epi64_epi8(ldc!(&S_SHUF.high), qh);
            let k7 = _mm512_movepi8_mask(idx);
            let k8 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(1));
            let k9 = _mm512_test_epi8_mask(hb, _mm512_set1_epi8(2));
            let mut half = [_mm512_setzero_si512(); 2];
            for t in 0..2 {
                let c = S_CODES.0[t].as_ptr();
                let mut r = [_mm512_setzero_si512(); 8];
                for k in 0..8 {
                    r[k] = _mm512_permutex2var_epi8(
                        _mm512_load_si512(c.add(128 * k).cast()),
                        idx,
                        _mm512_load_si512(c.add(128 * k + 64).cast()),
                    );
                }
                let b0 = _mm512_mask_blend_epi8(k7, r[0], r[1]);
                let b1 = _mm512_mask_blend_epi8(k7, r[2], r[3]);
                let b2 = _mm512_mask_blend_epi8(k7, r[4], r[5]);
                let b3 = _mm512_mask_blend_epi8(k7, r[6], r[7]);
                let c0 = _mm512_mask_blend_epi8(k8, b0, b1);
                let c1 = _mm512_mask_blend_epi8(k8, b2, b3);
                half[t] = _mm512_mask_blend_epi8(k9, c0, c1);
            }
            let codes = _mm512_mask_blend_epi8(0xAAAA_AAAA_AAAA_AAAA, half[0], half[1]);
            let s = &XXS_SHUF;
            let mut g = [_mm512_setzero_si512(); 4];
            let mut m = [0u64; 4];
            for v in 0..4 {
                let cq = _mm512_permutexvar_epi8(ldc!(&s.compose[v]), codes);
                let cb = _mm512_multishift_epi64_epi8(ldc!(&s.code_shift), cq);
                g[v] = _mm512_permutexvar_epi8(cb, ldc!(&s.levels));
                m[v] = u64::from_le(ptr::read_unaligned(p.add(34 + 8 * v).cast::<u64>()));
            }
            let sc = spread_scales(nibble_scales(p.add(74)), &PERM_16);
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.125)))
        }
    }
}

/// IQ3_XXS (98 bytes: `d` f16, 64 grid index bytes (4 elements each), then per sub-block of
/// 32 a u32 of four 7-bit sign fields and the 4-bit scale in bits 28..32; `d / 4`).
pub(crate) struct Iq3Xxs;

impl GridBlock for Iq3Xxs {
    const BB: usize = 98;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..98 at `p` (caller); grid indices are bytes (< 256 =
        // `IQ3XXS_GRID.len()`); register-only operations otherwise.
        unsafe {
            let aux = p.add(66);
            let x = _mm256_loadu_si256(aux.cast());
            let ls = _mm256_srli_epi32::<28>(x);
            let ls = _mm256_add_epi32(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1));
            let sc = spread_scales(_mm512_castsi256_si512(ls), &PERM_DW);
            let mut g = [_mm512_setzero_si512(); 4];
            for v in 0..4 {
                g[v] = load16(&IQ3XXS_GRID, |i| usize::from(*p.add(2 + 16 * v + i)));
            }
            let m = sign_masks(fields7(_mm512_castsi256_si512(x), 0, 1));
            (g, m, sc, _mm512_mul_ps(f16_bcast(p), _mm512_set1_ps(0.25)))
        }
    }
}

/// IQ3_S (110 bytes: `d` f16, 64 low index bytes (4 elements each), 8 bytes of index bit 8
/// (bit `i % 8` of byte `i / 8`), 32 sign bytes, 4 bytes of 4-bit scales per 32 elements;
/// factor 1).
pub(crate) struct Iq3S;

impl GridBlock for Iq3S {
    const BB: usize = 110;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..110 at `p` (caller); grid indices are a byte plus bit 8
        // (< 512 = `IQ3S_GRID.len()`); register-only operations otherwise.
        unsafe {
            let s = _mm_cvtsi32_si128(ptr::read_unaligned(p.add(106).cast::<i32>()));
            let m4 = _mm_set1_epi8(0x0F);
            let b =
                _mm_unpacklo_epi8(_mm_and_si128(s, m4), _mm_and_si128(_mm_srli_epi16::<4>(s), m4));
            let w = _mm_cvtepu8_epi16(b);
            let w = _mm_add_epi16(_mm_add_epi16(w, w), _mm_set1_epi16(1));
            let sc = spread_scales(_mm512_castsi128_si512(w), &PERM_W);
            let b256 = _mm512_set1_epi32(256);
            let mut g = [_mm512_setzero_si512(); 4];
            let mut m = [0u64; 4];
            for v in 0..4 {
                let lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(2 + 16 * v).cast()));
                let h = u16::from_le(ptr::read_unaligned(p.add(66 + 2 * v).cast::<u16>()));
                let mut idx = [0u32; 16];
                let iv = _mm512_mask_or_epi32(lo, h, lo, b256);
                _mm512_storeu_si512(idx.as_mut_ptr().cast(), iv);
                g[v] = load16(&IQ3S_GRID, |i| idx[i] as usize);
                m[v] = u64::from_le(ptr::read_unaligned(p.add(74 + 8 * v).cast::<u64>()));
            }
            (g, m, sc, f16_bcast(p))
        }
    }
}

/// IQ4_XS (module doc).
pub(crate) struct Iq4Xs;

/// `vpermw` indices: every word of 128-bit lane `L` of register `r` (0: sub-blocks 0..4,
/// 1: 4..8) takes source word `4 r + L`.
static PERM_XS4: [[i16; 32]; 2] = {
    let mut t = [[0i16; 32]; 2];
    let mut r = 0;
    while r < 2 {
        let mut w = 0;
        while w < 32 {
            t[r][w] = (4 * r + w / 8) as i16;
            w += 1;
        }
        r += 1;
    }
    t
};

impl Lanes for Iq4Xs {
    const BB: usize = 136;
    const GB: usize = 1;
    const REC: usize = 5;
    const WIDE: bool = true;
    type W = ([__m512i; 4], [__mmask64; 4], [__m512i; 2], __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        let q: &[u8] = bytemuck::cast_slice(&blk.qs[..]);
        for (k, r) in rec.iter_mut().take(4).enumerate() {
            let (half, nib) = (k / 2, k % 2);
            for l in 0..4 {
                let src = 128 * half + 32 * l + 16 * nib;
                r.0[16 * l..16 * l + 16].copy_from_slice(&q[src..src + 16]);
            }
        }
        if let Some(r) = rec.get_mut(4) {
            for l in 0..16 {
                r.0[4 * l..4 * l + 4].copy_from_slice(&blk.d.to_le_bytes());
            }
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..136 at `p` (caller); register-only operations otherwise.
        unsafe {
            let h = u32::from(u16::from_le(ptr::read_unaligned(p.add(2).cast::<u16>())));
            let ls = |ib: usize| {
                let lo = u32::from(*p.add(4 + ib / 2) >> (4 * (ib % 2))) & 15;
                (lo | ((h >> (2 * ib)) & 3) << 4) as i16 - 32
            };
            let sc = _mm512_castsi128_si512(_mm_setr_epi16(
                ls(0),
                ls(1),
                ls(2),
                ls(3),
                ls(4),
                ls(5),
                ls(6),
                ls(7),
            ));
            let pick = |r: usize| {
                _mm512_permutexvar_epi16(_mm512_loadu_si512(PERM_XS4[r].as_ptr().cast()), sc)
            };
            let m = _mm512_set1_epi8(0x0F);
            let lut = _mm512_broadcast_i32x4(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
            let mut v = [_mm512_setzero_si512(); 4];
            let mut k = [0u64; 4];
            for r in 0..2 {
                let x = _mm512_loadu_si512(p.add(8 + 64 * r).cast());
                let lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(x, m));
                let hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(x), m));
                k[2 * r] = _mm512_movepi8_mask(lo);
                k[2 * r + 1] = _mm512_movepi8_mask(hi);
                v[2 * r] = _mm512_abs_epi8(lo);
                v[2 * r + 1] = _mm512_abs_epi8(hi);
            }
            (v, k, [pick(0), pick(1)], f16_bcast(p))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 5 record vectors (caller); register-only operations.
        unsafe {
            let z = _mm512_setzero_si512();
            let t = |k: usize| {
                let x = ld(a, k);
                let sx = _mm512_mask_sub_epi8(x, w.1[k], z, x);
                _mm512_madd_epi16(_mm512_maddubs_epi16(w.0[k], sx), w.2[k / 2])
            };
            let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.3, ldps(a, 4)), acc)
        }
    }
}

/// IQ1_S (module doc).
pub(crate) struct Iq1S;

impl Lanes for Iq1S {
    const BB: usize = 50;
    const GB: usize = 1;
    const REC: usize = 6;
    const WIDE: bool = true;
    type W = ([__m512i; 4], [__mmask64; 4], [__m512i; 4], __m256i, __m512, __m512);

    fn prep(act: ActSlice<'_>, nb: usize, j: usize, g: usize, rec: &mut [V64]) {
        let Some(blk) = q8_k_block(act, nb, j, g) else { return };
        prep_plain(act, nb, j, g, &mut rec[..5]);
        rec[4] = V64([0; 64]);
        for (i, v) in blk.bsums.iter().enumerate() {
            rec[4].0[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
        for l in 0..16 {
            rec[5].put_f32(l, blk.d);
        }
    }

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Self::W {
        // SAFETY: reads bytes 0..50 at `p` (caller); grid indices are a byte plus 3 bits
        // shifted to bits 8..11 (< 2048 = `IQ1S_GRID.len()`); register-only otherwise.
        unsafe {
            let qh = _mm_loadu_si128(p.add(34).cast());
            let ls = _mm_and_si128(_mm_srli_epi16::<12>(qh), _mm_set1_epi16(7));
            let ls = _mm_add_epi16(_mm_add_epi16(ls, ls), _mm_set1_epi16(1));
            let sgn = _mm_or_si128(_mm_srai_epi16::<15>(qh), _mm_set1_epi16(1));
            let lsd = _mm_mullo_epi16(ls, sgn);
            let mins = _mm256_set_m128i(_mm_unpackhi_epi16(lsd, lsd), _mm_unpacklo_epi16(lsd, lsd));
            let sc = spread_scales(_mm512_castsi128_si512(ls), &PERM_W);
            let mut v = [_mm512_setzero_si512(); 4];
            let mut k = [0u64; 4];
            for r in 0..4 {
                let i = |l: usize| {
                    let g = 8 * r + l;
                    let h = usize::from(u16::from_le(ptr::read_unaligned(
                        p.add(34 + 2 * (g / 4)).cast::<u16>(),
                    )));
                    usize::from(*p.add(2 + g)) | ((h >> (3 * (g % 4))) & 7) << 8
                };
                let gv = load8(&IQ1S_GRID, [i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7)]);
                k[r] = _mm512_movepi8_mask(gv);
                v[r] = _mm512_abs_epi8(gv);
            }
            let d = f16_bcast(p);
            (v, k, sc, mins, d, _mm512_mul_ps(d, _mm512_set1_ps(0.125)))
        }
    }

    #[inline(always)]
    unsafe fn dot(w: &Self::W, a: *const V64, acc: __m512) -> __m512 {
        // SAFETY: reads the 6 record vectors (caller); register-only operations.
        unsafe {
            let z = _mm512_setzero_si512();
            let t = |k: usize| {
                let x = ld(a, k);
                let sx = _mm512_mask_sub_epi8(x, w.1[k], z, x);
                _mm512_madd_epi16(_mm512_maddubs_epi16(w.0[k], sx), w.2[k])
            };
            let s = _mm512_add_epi32(_mm512_add_epi32(t(0), t(1)), _mm512_add_epi32(t(2), t(3)));
            let da = ldps(a, 5);
            let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w.4, da), acc);
            let bs = _mm512_castsi512_si256(ld(a, 4));
            let m = _mm512_zextsi256_si512(_mm256_madd_epi16(w.3, bs));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(w.5, da), acc)
        }
    }
}

/// IQ1_M (module doc).
pub(crate) struct Iq1M;

impl GridBlock for Iq1M {
    const BB: usize = 56;

    #[inline(always)]
    unsafe fn decode(p: *const u8) -> Grid {
        // SAFETY: reads bytes 0..56 at `p` (caller); grid indices are a byte plus 3 bits
        // shifted to bits 8..11 (< 2048 = `IQ1S_GRID.len()`); register-only otherwise.
        unsafe {
            let sc = _mm_loadl_epi64(p.add(48).cast());
            let w = |k: usize| u16::from_le(ptr::read_unaligned(p.add(48 + 2 * k).cast::<u16>()));
            let dbits =
                (w(0) >> 12) | ((w(1) >> 8) & 0x00F0) | ((w(2) >> 4) & 0x0F00) | (w(3) & 0xF000);
            let d = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(dbits)));
            let d = _mm512_mul_ps(_mm512_broadcastss_ps(d), _mm512_set1_ps(0.125));
            // Word h = sc[h / 4] >> 3 (h % 4), masked to 3 bits: the scale of elements 16h..
            let sw = _mm256_permutexvar_epi16(
                _mm256_setr_epi16(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                _mm256_castsi128_si256(sc),
            );
            let sh = _mm256_setr_epi16(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9);
            let ls = _mm256_and_si256(_mm256_srlv_epi16(sw, sh), _mm256_set1_epi16(7));
            let ls = _mm256_add_epi16(_mm256_add_epi16(ls, ls), _mm256_set1_epi16(1));
            let scv = spread_scales(_mm512_castsi256_si512(ls), &PERM_16);
            // 8 * grid by nibble lookup (grid bytes -1, 0, 1: nibbles 15, 0, 1).
            #[rustfmt::skip]
            let lut8 = _mm512_broadcast_i32x4(_mm_setr_epi8(
                0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -8,
            ));
            // Lane L of a register (groups 2L, 2L + 1) tests bit 3, then bit 7, of qh byte L.
            let spread = _mm512_setr_epi32(
                0,
                0,
                0,
                0,
                0x0101_0101,
                0x0101_0101,
                0x0101_0101,
                0x0101_0101,
                0x0202_0202,
                0x0202_0202,
                0x0202_0202,
                0x0202_0202,
                0x0303_0303,
                0x0303_0303,
                0x0303_0303,
                0x0303_0303,
            );
            let bits = _mm512_broadcast_i32x4(_mm_setr_epi32(
                0x0808_0808,
                0x0808_0808,
                0x8080_8080u32 as i32,
                0x8080_8080u32 as i32,
            ));
            let (one, m15) = (_mm512_set1_epi8(1), _mm512_set1_epi8(15));
            let mut v = [_mm512_setzero_si512(); 4];
            let mut k = [0u64; 4];
            for r in 0..4 {
                let u = u32::from_le(ptr::read_unaligned(p.add(32 + 4 * r).cast::<u32>()));
                let idx = |l: usize| {
                    usize::from(*p.add(8 * r + l)) | (((u >> (4 * l)) & 7) as usize) << 8
                };
                let g = load8(
                    &IQ1S_GRID,
                    [idx(0), idx(1), idx(2), idx(3), idx(4), idx(5), idx(6), idx(7)],
                );
                let neg = _mm512_test_epi8_mask(
                    _mm512_shuffle_epi8(_mm512_set1_epi32(u as i32), spread),
                    bits,
                );
                let g8 = _mm512_shuffle_epi8(lut8, _mm512_and_si512(g, m15));
                let wv = _mm512_mask_sub_epi8(_mm512_add_epi8(g8, one), neg, g8, one);
                k[r] = _mm512_movepi8_mask(wv);
                v[r] = _mm512_abs_epi8(wv);
            }
            (v, k, scv, d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_masks_are_ksigns_iq2xs() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        for i in 0..128u8 {
            let mut s7 = [0u8; 32];
            for (b, v) in s7.iter_mut().enumerate() {
                *v = if b % 5 == 0 { i } else { i.wrapping_mul(b as u8).wrapping_add(3) & 127 };
            }
            // SAFETY: AVX2 was detected; the load reads the 32 bytes of `s7`.
            let m = unsafe { sign_masks(_mm256_loadu_si256(s7.as_ptr().cast())) };
            for (b, v) in s7.iter().enumerate() {
                let got = (m[b / 8] >> (8 * (b % 8))) as u8;
                assert_eq!(got, KSIGNS_IQ2XS[usize::from(*v)], "entry {v} byte {b}");
            }
        }
    }

    #[test]
    fn scale_permutations_pick_their_sub_block() {
        assert_eq!(PERM_16[1][0..8], [4; 8]);
        assert_eq!(PERM_16[3][24..32], [15; 8]);
        assert_eq!(PERM_XXS[2][16], 4 * 5 + 2);
        assert_eq!(PERM_DW[3][31], 2 * 7);
        assert_eq!(PERM_W[0][16], 1);
    }
}

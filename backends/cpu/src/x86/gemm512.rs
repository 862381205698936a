//! The prefill GEMM (n > 16 columns) under AVX-512 VNNI for weight formats whose sub-blocks
//! are `scale * value (+ min)` with small integer values: Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4
//! against Q8_0 activations and Q4_1, Q5_1 (with a min) against Q8_1 (sub-block = block of
//! 32), Q2_K, Q3_K, Q6_K, IQ2_S (sub-blocks of
//! 16), Q4_K, Q5_K (sub-blocks of 32, with a min) and IQ3_S (32) against Q8_K activations.
//!
//! Why a separate path. The tile kernels (`z512`, `avx512`) decode a weight block and then, per
//! column, reduce it against the column's activations and scale the block's integer sum: a
//! `vcvtdq2ps` and two float operations for every 32 or 64 multiply-adds, so on many columns
//! they run at about a quarter of the `vpdpbusd` rate. Here the 16 lanes of a register are 16
//! *columns* instead:
//!
//! * The activations of a call are rearranged once into a *panel*: per group of 16 columns and
//!   per sub-block, its quants as vectors of 16 columns x 4 bytes, then a vector of the
//!   columns' integer corrections (`-off * (sum of the sub-block's quants)`), one of their
//!   scales `d_a` (the Q8_0 block's, or the Q8_K super-block's) and, for formats with a min,
//!   one of `d_a * (sum of the sub-block's quants)` ([`Panel`]).
//! * A row is unpacked once per call into unsigned codes `value + off` (one byte per element),
//!   one f32 scale per sub-block (`d`, or `d * sub-scale`: exact products) and, for formats
//!   with a min, one f32 min per sub-block (`-(dmin * min)`) ([`GemmFormat::unpack`]).
//! * Per sub-block, for 4 rows x 2 column groups: the integer accumulator starts at the
//!   correction and takes one `vpdpbusd` per 4 elements (code quad of the row broadcast to all
//!   lanes, times the columns' quads), which leaves the exact `sum(value * q_a)` of each
//!   column; then one `vcvtdq2ps` and one FMA with `scale * d_a` per 16 columns (a second FMA
//!   adds `min * d_a * sum q_a`): for a block of 32, 32 multiply-adds per lane per 11
//!   operations.
//!
//! Arithmetic and bound. Every lane integer is exact: `|sum((value + off) * q_a)| <= 32 * 255 *
//! 128 < 2^21` and it converts to f32 exactly. Output `(r, j)` is, in sub-block order,
//! `acc = fma(sumi_b, scale_w[b] * d_a[b], acc)` (then `acc = fma(min_w[b], d_a[b] * asum_b,
//! acc)`) from `acc = 0`: each term carries at most two product roundings and `K / 16`
//! accumulation roundings, so `|y - y_exact| <= c * K * 2^-24 * sum|t|` with **c = 1**
//! (DESIGN.md), as the tile kernels of `z512`. Not bit-identical to the tile kernels (their lanes
//! split blocks differently), so `tests/prefill.rs` checks these formats against the
//! reference bound instead of against the tiles.
//!
//! Layout sources: ggml `block_q4_0`, `block_q5_0`, `block_q8_0`, `block_iq4_nl`,
//! `block_mxfp4`, `block_q2_K` .. `block_q6_K`, `block_q8_K` (ggml/src/ggml-common.h) and
//! their value tables, as in the core (the K-quants unpack through the core's block types).
//!
//! What must not live here: threading and the row split (`crate::matmul`), the tile kernels.

#![allow(clippy::incompatible_msrv)]
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use bytemuck::Pod;
use half::f16;
use lowbit_core::error::Buffer;
use lowbit_core::format::ggml::iq::tables::{IQ2S_GRID, IQ3S_GRID, KVALUES_IQ4NL};
use lowbit_core::format::ggml::iq::{BlockIq2S, BlockIq3S};
use lowbit_core::format::ggml::kquant::scales::{q3k_scales, scales_mins_k4};
use lowbit_core::format::ggml::kquant::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use lowbit_core::format::ggml::mxfp4::KVALUES_MXFP4;
use lowbit_core::scalar::try_ue8m0_to_f32_half;
use lowbit_core::{Error, FormatId};

use crate::act::{ActData, Acts, Layout};
use crate::kernels::GemmKernel;

/// Rows per register block of the micro-kernel.
const R: usize = 4;
/// Columns per lane group.
const LANES: usize = 16;
/// 64-byte vectors per (column group, sub-block) in the panel: up to 8 quant quads, then the
/// correction, `d_a` and `d_a * asum` ([`Q_CORR`], [`Q_DA`], [`Q_DSUM`]).
const REC: usize = 11;
const Q_CORR: usize = 8;
const Q_DA: usize = 9;
const Q_DSUM: usize = 10;
/// Panel bytes one K block of every column group may span (see `run`): about half a core's L2.
const PANEL_BLOCK_BYTES: usize = 512 * 1024;

/// One 64-byte, 64-byte-aligned vector of the panel.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct V64([u8; 64]);

/// The activations of one call in the GEMM's column-interleaved layout (see the module doc),
/// for one weight format (its sub-block size and code offset).
pub(crate) struct Panel {
    recs: Vec<V64>,
    /// Sub-blocks per column.
    nsub: usize,
    /// Columns.
    n: usize,
    format: FormatId,
}

/// The activation kind a format's GEMM reads.
#[derive(Clone, Copy, PartialEq)]
enum ActKind {
    Q8_0,
    Q8_1,
    Q8K,
}

/// How a weight format unpacks for the GEMM.
struct GemmFormat {
    /// Bytes and elements per weight block.
    bb: usize,
    be: usize,
    /// Elements per sub-block (one scale each): 16 or 32.
    sub: usize,
    /// Codes are `value + off`, in 0..=255.
    off: i32,
    /// Whether sub-blocks have a min term.
    min: bool,
    act: ActKind,
    /// Unpacks whole rows of validated blocks.
    unpack: UnpackFn,
}

/// `(row bytes, codes out (K), scales out (K / sub), mins out (K / sub))`; the caller
/// guarantees the lengths.
type UnpackFn = unsafe fn(&[u8], &mut [u8], &mut [f32], &mut [f32]);

/// One 32-element format's block unpacking, run by [`unpack_row`].
trait Unpack {
    const BB: usize;
    const OFF: i32;
    /// Writes the 32 codes of the block at `p` to `out` and returns its scale.
    ///
    /// # Safety
    /// `p .. p + BB` is readable, `out .. out + 32` writable; AVX-512 F/BW/VL are available.
    unsafe fn block(p: *const u8, out: *mut u8) -> f32;
}

/// One K-quant's super-block unpacking (through the core's block type), run by
/// [`unpack_kquant`]: 256 codes, and per sub-block a scale and a min.
trait UnpackK: Pod {
    const SUB: usize;
    const OFF: i32;
    const MIN: bool;
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]);
}

fn gemm_format(format: FormatId) -> Option<GemmFormat> {
    fn g<U: Unpack>() -> Option<GemmFormat> {
        let unpack = unpack_row::<U>;
        Some(GemmFormat {
            bb: U::BB,
            be: 32,
            sub: 32,
            off: U::OFF,
            min: false,
            act: ActKind::Q8_0,
            unpack,
        })
    }
    fn k<U: UnpackK>() -> Option<GemmFormat> {
        Some(GemmFormat {
            bb: std::mem::size_of::<U>(),
            be: 256,
            sub: U::SUB,
            off: U::OFF,
            min: U::MIN,
            act: ActKind::Q8K,
            unpack: unpack_kquant::<U>,
        })
    }
    match format {
        FormatId::Q4_0 => Some(GemmFormat { unpack: unpack_q4_0_lanes, ..g::<Q4_0>()? }),
        FormatId::Q5_0 => g::<Q5_0>(),
        FormatId::Q8_0 => g::<Q8_0>(),
        FormatId::Iq4Nl => g::<Iq4Nl>(),
        FormatId::Mxfp4 => g::<Mxfp4>(),
        FormatId::Q2K => k::<BlockQ2K>(),
        FormatId::Q3K => k::<BlockQ3K>(),
        FormatId::Q4K => k::<BlockQ4K>(),
        FormatId::Q5K => k::<BlockQ5K>(),
        FormatId::Q6K => k::<BlockQ6K>(),
        FormatId::Q4_1 => Some(GemmFormat {
            bb: 20,
            be: 32,
            sub: 32,
            off: 0,
            min: true,
            act: ActKind::Q8_1,
            unpack: unpack_q4_1_packed,
        }),
        FormatId::Q5_1 => Some(GemmFormat {
            bb: 24,
            be: 32,
            sub: 32,
            off: 0,
            min: true,
            act: ActKind::Q8_1,
            unpack: unpack_q5_1,
        }),
        FormatId::Iq2S => k::<BlockIq2S>(),
        FormatId::Iq3S => k::<BlockIq3S>(),
        _ => None,
    }
}

/// The GEMM for `format` under AVX-512 VNNI (`vnni`; the caller checks the features) or plain
/// AVX-512 F/BW/VL, if this module runs it. Without VNNI each `vpdpbusd` becomes `vpmaddubsw`,
/// `vpmaddwd` and `vpaddd`, exact only while a pair of products fits i16: codes <= 127
/// against quants in -128..=127 (`2 * 127 * 128 < 2^15`), so Q8_0 and IQ4_NL (codes up to
/// 255) have no plain-AVX-512 GEMM.
pub(crate) fn kernel(format: FormatId, vnni: bool) -> Option<GemmKernel> {
    let gf = gemm_format(format)?;
    if vnni {
        return Some(GemmKernel { name: "avx512-vnni-gemm", panel: build_panel, f: run::<true> });
    }
    let wide_codes = gf.off >= 128;
    (!wide_codes).then_some(GemmKernel { name: "avx512-gemm", panel: build_panel, f: run::<false> })
}

/// Every block of `row` into `codes` and `scales` (no mins).
///
/// # Safety
/// AVX-512 F/BW/VL are available; `row` holds `nb` whole blocks of `U::BB` bytes, `codes` at
/// least `32 * nb` bytes and `scales` at least `nb` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,sse4.1")]
unsafe fn unpack_row<U: Unpack>(row: &[u8], codes: &mut [u8], scales: &mut [f32], _: &mut [f32]) {
    let nb = row.len() / U::BB;
    for b in 0..nb {
        // SAFETY: block `b < nb` lies inside `row`, its 32 codes inside `codes` (caller).
        scales[b] =
            unsafe { U::block(row.as_ptr().add(b * U::BB), codes.as_mut_ptr().add(32 * b)) };
    }
}

/// Every super-block of `row` into `codes`, `scales` and `mins`.
///
/// # Safety
/// AVX-512 F/BW/VL are available (the byte loops vectorize with them); lengths as
/// [`UnpackFn`] says (`row` whole blocks, `codes` 256 and `scales`/`mins` `256 / SUB` per
/// block: checked by the slicing).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn unpack_kquant<U: UnpackK>(
    row: &[u8],
    codes: &mut [u8],
    scales: &mut [f32],
    mins: &mut [f32],
) {
    let per = 256 / U::SUB;
    let bb = std::mem::size_of::<U>();
    for (b, blk) in row.chunks_exact(bb).enumerate() {
        let x: U = bytemuck::pod_read_unaligned(blk);
        x.unpack(
            &mut codes[256 * b..][..256],
            &mut scales[per * b..][..per],
            &mut mins[per * b..][..per],
        );
    }
}

/// The 8 grid bytes of `grid` with the signs of bits `first..first + 8` of `signs` (bit set:
/// negative), as codes `value + off`, into `out`.
#[inline(always)]
fn put_signed(out: &mut [u8], grid: u64, signs: u8, first: usize, off: i32) {
    for (j, o) in out.iter_mut().enumerate() {
        let v = i32::from((grid >> (8 * j)) as u8);
        let neg = (signs >> (first + j)) & 1 != 0;
        *o = (if neg { off - v } else { off + v }) as u8;
    }
}

/// IQ2_S: grid bytes (8, 25 or 43) with signs as codes `+ 64`; 16 sub-blocks of 16 with
/// `d * (2 ls + 1) / 8`, equal to the core's `d * (0.5 + ls) * 0.25` (both exact).
impl UnpackK for BlockIq2S {
    const SUB: usize = 16;
    const OFF: i32 = 64;
    const MIN: bool = false;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], _: &mut [f32]) {
        for g in 0..32 {
            let hi = (usize::from(self.qh[g / 4]) >> (2 * (g % 4))) & 3;
            let grid = IQ2S_GRID[usize::from(self.qs[g]) | hi << 8];
            put_signed(&mut codes[8 * g..][..8], grid, self.qs[32 + g], 0, Self::OFF);
        }
        let d = f16v(self.d);
        for (h, s) in scales.iter_mut().enumerate().take(16) {
            let ls = (self.scales[h / 2] >> (4 * (h % 2))) & 15;
            *s = d * f32::from(2 * ls + 1) * 0.125;
        }
    }
}

/// IQ3_S: grid bytes (odd, 1..=15) with signs as codes `+ 16`; 8 sub-blocks of 32 with
/// `d * (1 + 2 ls)`.
impl UnpackK for BlockIq3S {
    const SUB: usize = 32;
    const OFF: i32 = 16;
    const MIN: bool = false;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], _: &mut [f32]) {
        for i in 0..64 {
            let hi = (usize::from(self.qh[i / 8]) >> (i % 8)) & 1;
            let grid = u64::from(IQ3S_GRID[usize::from(self.qs[i]) | hi << 8]);
            let signs = self.signs[i / 2];
            let out = &mut codes[4 * i..][..4];
            put_signed(out, grid, signs, 4 * (i % 2), Self::OFF);
        }
        let d = f16v(self.d);
        for (ib, s) in scales.iter_mut().enumerate().take(8) {
            let ls = (self.scales[ib / 2] >> (4 * (ib % 2))) & 15;
            *s = d * f32::from(1 + 2 * ls);
        }
    }
}

/// Q4_1 rows in `legacy512`'s packed layout (the only layout Q4_1 has under AVX-512): each
/// whole group of 4 blocks is `d_0..d_3, m_0..m_3` (f16) then the 4 blocks' 16 nibble bytes; a
/// partial last group stays canonical (`d, m`, 16 nibble bytes). Codes are the nibbles (value
/// `d * q + m`: no offset; the min term is `m * s_a`, as the reference's).
///
/// # Safety
/// AVX-512 F/BW/VL are available; lengths as [`UnpackFn`] says.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,sse4.1")]
unsafe fn unpack_q4_1_packed(row: &[u8], codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
    let nb = row.len() / 20;
    let full = nb / 4;
    // SAFETY: every read lies inside `row` (whole groups, then whole canonical blocks), every
    // write inside `codes` (32 per block; caller's lengths).
    unsafe {
        for g in 0..full {
            let p = row.as_ptr().add(80 * g);
            for t in 0..4 {
                let b = 4 * g + t;
                scales[b] = f16_at(p.add(2 * t));
                mins[b] = f16_at(p.add(8 + 2 * t));
                let (lo, hi) = nibbles(p.add(16 + 16 * t));
                store2(codes.as_mut_ptr().add(32 * b), lo, hi);
            }
        }
        for b in 4 * full..nb {
            let p = row.as_ptr().add(20 * b);
            scales[b] = f16_at(p);
            mins[b] = f16_at(p.add(2));
            let (lo, hi) = nibbles(p.add(4));
            store2(codes.as_mut_ptr().add(32 * b), lo, hi);
        }
    }
}

/// Q4_0 rows in `super::q4_0pack`'s lane order (the only layout Q4_0 has under AVX-512): each
/// whole group of 16 blocks is put back in canonical order ([`super::q4_0pack::canonical_group`])
/// and unpacked as canonical blocks; a partial last group is canonical already.
///
/// # Safety
/// AVX-512 F/BW/VL are available; lengths as [`UnpackFn`] says.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,sse4.1")]
unsafe fn unpack_q4_0_lanes(row: &[u8], codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
    use super::q4_0pack::{canonical_group, GROUP_BLOCKS, GROUP_BYTES};
    let full = row.len() / GROUP_BYTES;
    for (g, chunk) in row.chunks_exact(GROUP_BYTES).enumerate() {
        let mut packed = [0u8; GROUP_BYTES];
        packed.copy_from_slice(chunk);
        let group = canonical_group(&packed);
        let (b0, b1) = (g * GROUP_BLOCKS, (g + 1) * GROUP_BLOCKS);
        // SAFETY: features as the caller states; `group` is 16 whole blocks, and the slices
        // hold their 512 codes and 16 scales (`row`'s blocks `b0..b1`; caller's lengths).
        unsafe {
            unpack_row::<Q4_0>(&group, &mut codes[32 * b0..32 * b1], &mut scales[b0..b1], mins)
        };
    }
    let b0 = full * GROUP_BLOCKS;
    // SAFETY: as above, for the canonical blocks after the whole groups.
    unsafe {
        unpack_row::<Q4_0>(
            &row[full * GROUP_BYTES..],
            &mut codes[32 * b0..],
            &mut scales[b0..],
            mins,
        )
    };
}

/// Q5_1: `d, m` (f16), `qh` (u32, bit `i` = bit 4 of element `i`), 16 nibble bytes; codes
/// `q` (0..=31, no offset), value `d * q + m`.
///
/// # Safety
/// AVX-512 F/BW/VL are available; lengths as [`UnpackFn`] says.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,sse4.1")]
unsafe fn unpack_q5_1(row: &[u8], codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
    let nb = row.len() / 24;
    // SAFETY: block `b < nb` lies inside `row`, its 32 codes inside `codes` (caller).
    unsafe {
        for b in 0..nb {
            let p = row.as_ptr().add(24 * b);
            scales[b] = f16_at(p);
            mins[b] = f16_at(p.add(2));
            let qh = std::ptr::read_unaligned(p.add(4).cast::<u32>());
            let (lo, hi) = nibbles(p.add(8));
            let b4 = _mm_set1_epi8(0x10);
            let lo = _mm_or_si128(lo, _mm_maskz_mov_epi8(qh as u16, b4));
            let hi = _mm_or_si128(hi, _mm_maskz_mov_epi8((qh >> 16) as u16, b4));
            store2(codes.as_mut_ptr().add(32 * b), lo, hi);
        }
    }
}

/// Blocks were validated at upload, so their scales are finite.
fn f16v(h: f16) -> f32 {
    h.to_f32()
}

/// Q2_K: codes 0..=3 (no offset), 16 sub-blocks with `d * (sc & 15)` and min
/// `-(dmin * (sc >> 4))`.
impl UnpackK for BlockQ2K {
    const SUB: usize = 16;
    const OFF: i32 = 0;
    const MIN: bool = true;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
        // Element `128h + 32j + l`: bits `2j` of byte `32h + l` (the core's `quants`).
        for h in 0..2 {
            for j in 0..4 {
                for l in 0..32 {
                    codes[128 * h + 32 * j + l] = (self.qs[32 * h + l] >> (2 * j)) & 3;
                }
            }
        }
        let (d, dmin) = (f16v(self.d), f16v(self.dmin));
        for j in 0..16 {
            scales[j] = d * f32::from(self.scales[j] & 15);
            mins[j] = -(dmin * f32::from(self.scales[j] >> 4));
        }
    }
}

/// Q3_K: values -4..=3 as codes `+ 4`, 16 sub-blocks with `d * scale` (signed 6-bit).
impl UnpackK for BlockQ3K {
    const SUB: usize = 16;
    const OFF: i32 = 4;
    const MIN: bool = false;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], _: &mut [f32]) {
        // Element `128h + 32j + l`: bits `2j` of byte `32h + l`, plus bit `4h + j` of
        // `hmask[l]` as 4 (the core's `quants`, before its `- 4`).
        for h in 0..2 {
            for j in 0..4 {
                for l in 0..32 {
                    let low = (self.qs[32 * h + l] >> (2 * j)) & 3;
                    let high = (self.hmask[l] >> (4 * h + j)) & 1;
                    codes[128 * h + 32 * j + l] = low | (high << 2);
                }
            }
        }
        let d = f16v(self.d);
        for (s, &v) in scales.iter_mut().zip(&q3k_scales(&self.scales)) {
            *s = d * f32::from(v);
        }
    }
}

/// Q4_K and Q5_K: codes 0..=15 / 0..=31 (no offset), 8 sub-blocks of 32 with `d * scale` and
/// min `-(dmin * min)` (6-bit, packed). Element `64c + 32h + l` is nibble `h` of byte
/// `32c + l` (the core's `nibbles`), plus (Q5_K) bit `2c + h` of `qh[l]` as 16.
#[inline(always)]
fn unpack_k45(
    qs: &[u8; 128],
    qh: Option<&[u8; 32]>,
    (d, dmin, packed): (f16, f16, &[u8; 12]),
    (codes, scales, mins): (&mut [u8], &mut [f32], &mut [f32]),
) {
    for c in 0..4 {
        for h in 0..2 {
            for l in 0..32 {
                let mut v = (qs[32 * c + l] >> (4 * h)) & 15;
                if let Some(qh) = qh {
                    v |= ((qh[l] >> (2 * c + h)) & 1) << 4;
                }
                codes[64 * c + 32 * h + l] = v;
            }
        }
    }
    let (sc, m) = scales_mins_k4(packed);
    let (d, dmin) = (f16v(d), f16v(dmin));
    for j in 0..8 {
        scales[j] = d * f32::from(sc[j]);
        mins[j] = -(dmin * f32::from(m[j]));
    }
}

impl UnpackK for BlockQ4K {
    const SUB: usize = 32;
    const OFF: i32 = 0;
    const MIN: bool = true;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
        unpack_k45(&self.qs, None, (self.d, self.dmin, &self.scales), (codes, scales, mins));
    }
}

impl UnpackK for BlockQ5K {
    const SUB: usize = 32;
    const OFF: i32 = 0;
    const MIN: bool = true;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], mins: &mut [f32]) {
        let qh = Some(&self.qh);
        unpack_k45(&self.qs, qh, (self.d, self.dmin, &self.scales), (codes, scales, mins));
    }
}

/// Q6_K: values -32..=31 as codes `+ 32`, 16 sub-blocks with `d * scale` (signed 8-bit).
impl UnpackK for BlockQ6K {
    const SUB: usize = 16;
    const OFF: i32 = 32;
    const MIN: bool = false;
    #[inline(always)]
    fn unpack(&self, codes: &mut [u8], scales: &mut [f32], _: &mut [f32]) {
        // Half `h`, `l < 32`: elements `128h + 32t + l` take the low (t = 0, 1) or high (t = 2,
        // 3) nibble of `ql[64h + l + 32 (t % 2)]` and bits `2t` of `qh[32h + l]` as bits 4-5
        // (ggml `dequantize_row_q6_K`; the core's `quants` before its `- 32`).
        for h in 0..2 {
            for t in 0..4 {
                for l in 0..32 {
                    let lo = (self.ql[64 * h + l + 32 * (t % 2)] >> (4 * (t / 2))) & 15;
                    let hi = (self.qh[32 * h + l] >> (2 * t)) & 3;
                    codes[128 * h + 32 * t + l] = lo | (hi << 4);
                }
            }
        }
        let d = f16v(self.d);
        for (s, &v) in scales.iter_mut().zip(&self.scales) {
            *s = d * f32::from(v);
        }
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
/// high nibble); value `q - 8`, so the stored nibble is the code (offset 8).
struct Q4_0;
impl Unpack for Q4_0 {
    const BB: usize = 18;
    const OFF: i32 = 8;
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
    const OFF: i32 = 16;
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
    const OFF: i32 = 128;
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
    const OFF: i32 = 128;
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
    const OFF: i32 = 16;
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
    let n = acts.n;
    let nsub = acts.k / gf.sub;
    let groups = n.div_ceil(LANES);
    let mut recs = vec![V64([0; 64]); groups * nsub * REC];
    let bad = |got: usize, expected: usize| Error::Length {
        format,
        buffer: Buffer::Activations,
        got,
        expected,
    };
    // Writes sub-block `s` of column `j`: quants `qs` (`gf.sub` of them), scale `da`, and for
    // the min term `dsum` (`d_a * sum(qs)`, or Q8_1's stored `s`) if given.
    let mut put = |j: usize, s: usize, qs: &[i8], da: f32, dsum: Option<f32>| {
        let (g, lane) = (j / LANES, j % LANES);
        let rec = &mut recs[(g * nsub + s) * REC..][..REC];
        for q in 0..gf.sub / 4 {
            for e in 0..4 {
                rec[q].0[4 * lane + e] = qs[4 * q + e] as u8;
            }
        }
        let sum: i32 = qs.iter().map(|&v| i32::from(v)).sum();
        let at = 4 * lane..4 * lane + 4;
        rec[Q_CORR].0[at.clone()].copy_from_slice(&(-(sum * gf.off)).to_le_bytes());
        rec[Q_DA].0[at.clone()].copy_from_slice(&da.to_le_bytes());
        let dsum = dsum.unwrap_or(da * sum as f32);
        rec[Q_DSUM].0[at].copy_from_slice(&dsum.to_le_bytes());
    };
    match (&acts.data, gf.act) {
        (ActData::Q8_0 { blocks, d }, ActKind::Q8_0) => {
            if blocks.len() != n * nsub || d.len() != blocks.len() {
                return Err(bad(blocks.len(), n * nsub));
            }
            for j in 0..n {
                for s in 0..nsub {
                    put(j, s, &blocks[j * nsub + s].qs, d[j * nsub + s], None);
                }
            }
        }
        (ActData::Q8_1(blocks), ActKind::Q8_1) => {
            if blocks.len() != n * nsub {
                return Err(bad(blocks.len(), n * nsub));
            }
            for j in 0..n {
                for s in 0..nsub {
                    let blk = &blocks[j * nsub + s];
                    put(j, s, &blk.qs, blk.d.to_f32(), Some(blk.s.to_f32()));
                }
            }
        }
        (ActData::Q8K(blocks), ActKind::Q8K) => {
            let nb = acts.k / 256;
            let per = 256 / gf.sub;
            if blocks.len() != n * nb || nsub != nb * per {
                return Err(bad(blocks.len(), n * nb));
            }
            for j in 0..n {
                for b in 0..nb {
                    let blk = &blocks[j * nb + b];
                    for t in 0..per {
                        put(j, b * per + t, &blk.qs[t * gf.sub..][..gf.sub], blk.d, None);
                    }
                }
            }
        }
        _ => {
            return Err(Error::WrongActivation {
                format,
                expected: format.info().activation,
                got: acts.row(0).format(),
            })
        }
    }
    let panel = Panel { recs, nsub, n, format };
    Ok(Layout(std::sync::Arc::new(panel)))
}

/// Rows `w` (whole rows of `rb` bytes) against every column of the panel; `out` is
/// column-major `n x rows` (`out[j * rows + r]`).
fn run<const V: bool>(
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
    let nsub = p.nsub;
    let k = nsub * gf.sub;
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let ok = p.format == format
        && k % gf.be == 0
        && rb == k / gf.be * gf.bb
        && w.len() == rows * rb
        && out.len() == rows * p.n
        && p.recs.len() == p.n.div_ceil(LANES) * nsub * REC;
    if !ok {
        return Err(Error::Length {
            format,
            buffer: Buffer::Encoded,
            got: w.len(),
            expected: rows * rb,
        });
    }
    // Every row of the chunk unpacked once (rows padded to a multiple of R by repeating the
    // last one; their results are discarded).
    let padded = rows.div_ceil(R) * R;
    let mut codes = vec![0u8; padded * k];
    let mut scales = vec![0f32; padded * nsub];
    let mut mins = vec![0f32; padded * nsub];
    for r in 0..padded {
        let row = &w[r.min(rows.saturating_sub(1)) * rb..][..rb];
        // SAFETY: as for `tile` below (the same detection); `row` is whole blocks, the code,
        // scale and min slices hold `k` and `nsub` entries.
        unsafe {
            (gf.unpack)(
                row,
                &mut codes[r * k..][..k],
                &mut scales[r * nsub..][..nsub],
                &mut mins[r * nsub..][..nsub],
            )
        };
    }
    // Sub-blocks per K block: the panel's slice of one K block for all column groups stays
    // within [`PANEL_BLOCK_BYTES`]; the accumulators of every (row, column) carry over from
    // one K block to the next through `accs` (stored and reloaded exactly, so the result is
    // the same as one pass over K).
    let groups = p.n.div_ceil(LANES);
    let per_sub = groups * REC * std::mem::size_of::<V64>();
    let kb = (PANEL_BLOCK_BYTES / per_sub).clamp(1, nsub);
    let mut accs = vec![[[0f32; LANES]; 2 * R]; padded / R * groups.div_ceil(2)];
    let mut b0 = 0;
    while b0 < nsub {
        let b1 = (b0 + kb).min(nsub);
        for (rg, row_accs) in accs.chunks_exact_mut(groups.div_ceil(2)).enumerate() {
            let r0 = rg * R;
            let w = Weights {
                codes: &codes[r0 * k..][..R * k],
                scales: &scales[r0 * nsub..][..R * nsub],
                mins: &mins[r0 * nsub..][..R * nsub],
                nsub,
                subs: b0..b1,
            };
            for (gp, acc) in row_accs.iter_mut().enumerate() {
                let g = 2 * gp;
                let cg = (groups - g).min(2);
                // SAFETY: reachable only through `kernel`, which `x86::extras` offers only for
                // `Isa::Avx512Vnni` (V) or `Isa::Avx512` (!V) after `available()` detected
                // AVX-512 F/BW/VL (and VNNI); `w` holds `R` rows of `k` codes and `nsub`
                // scales and mins, its sub-blocks `b0..b1 <= nsub`; the panel's records of
                // groups `g .. g + cg` exist (`g + cg <= groups`, checked length above).
                unsafe {
                    let recs = p.recs.as_ptr().add(g * nsub * REC);
                    match (cg, gf.sub, gf.min) {
                        (2, 32, false) => tile_v::<2, 8, false, V>(&w, recs, acc),
                        (2, 32, true) => tile_v::<2, 8, true, V>(&w, recs, acc),
                        (2, _, false) => tile_v::<2, 4, false, V>(&w, recs, acc),
                        (2, _, true) => tile_v::<2, 4, true, V>(&w, recs, acc),
                        (_, 32, false) => tile_v::<1, 8, false, V>(&w, recs, acc),
                        (_, 32, true) => tile_v::<1, 8, true, V>(&w, recs, acc),
                        (_, _, false) => tile_v::<1, 4, false, V>(&w, recs, acc),
                        (_, _, true) => tile_v::<1, 4, true, V>(&w, recs, acc),
                    }
                }
            }
        }
        b0 = b1;
    }
    for (rg, row_accs) in accs.chunks_exact(groups.div_ceil(2)).enumerate() {
        let r0 = rg * R;
        let here = rows.saturating_sub(r0).min(R);
        for (gp, acc) in row_accs.iter().enumerate() {
            for c in 0..(groups - 2 * gp).min(2) {
                for lane in 0..LANES {
                    let j = (2 * gp + c) * LANES + lane;
                    if j >= p.n {
                        break;
                    }
                    for i in 0..here {
                        out[j * rows + r0 + i] = acc[c * R + i][lane];
                    }
                }
            }
        }
    }
    Ok(())
}

/// `R` unpacked rows: codes (`32 * nsub` or `16 * nsub` each), scales and mins per sub-block.
struct Weights<'a> {
    codes: &'a [u8],
    scales: &'a [f32],
    mins: &'a [f32],
    nsub: usize,
    /// The sub-blocks this call runs (one K block).
    subs: std::ops::Range<usize>,
}

/// [`tile`] with `vpdpbusd` (`V`) or its plain AVX-512 form.
///
/// # Safety
/// As [`tile`]; with `V`, AVX-512 VNNI is available.
#[inline(always)]
unsafe fn tile_v<const CG: usize, const SQ: usize, const MIN: bool, const V: bool>(
    w: &Weights<'_>,
    recs: *const V64,
    acc: &mut [[f32; LANES]; 2 * R],
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if V {
            tile::<CG, SQ, MIN>(w, recs, acc)
        } else {
            tile_plain::<CG, SQ, MIN>(w, recs, acc)
        }
    }
}

/// [`tile`] compiled without VNNI (`vpmaddubsw` + `vpmaddwd` per quad).
///
/// # Safety
/// As [`tile`], without the VNNI requirement; codes are <= 127 ([`kernel`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn tile_plain<const CG: usize, const SQ: usize, const MIN: bool>(
    w: &Weights<'_>,
    recs: *const V64,
    acc: &mut [[f32; LANES]; 2 * R],
) {
    // SAFETY: forwarded from the caller.
    unsafe { tile_body::<CG, SQ, MIN, false>(w, recs, acc) }
}

/// `R` rows against `CG` column groups whose records start at `recs`, sub-blocks of `4 * SQ`
/// elements (`MIN`: with the min term), over the sub-blocks `w.subs`: `acc[c * R + i]` holds
/// row `i` x group `c`'s 16 columns, accumulated further.
///
/// # Safety
/// AVX-512 F/BW/VL and VNNI are available; `w` holds `R` rows of `4 * SQ * nsub` codes and
/// `nsub` scales and mins, `w.subs` lies in `0..nsub`; `recs` holds `CG * nsub * REC` vectors.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<const CG: usize, const SQ: usize, const MIN: bool>(
    w: &Weights<'_>,
    recs: *const V64,
    acc: &mut [[f32; LANES]; 2 * R],
) {
    // SAFETY: forwarded from the caller.
    unsafe { tile_body::<CG, SQ, MIN, true>(w, recs, acc) }
}

/// The body of [`tile`] and [`tile_plain`] (`V`: `vpdpbusd`).
///
/// # Safety
/// As [`tile`] (with `V`) or [`tile_plain`].
#[inline(always)]
unsafe fn tile_body<const CG: usize, const SQ: usize, const MIN: bool, const V: bool>(
    w: &Weights<'_>,
    recs: *const V64,
    acc: &mut [[f32; LANES]; 2 * R],
) {
    let nsub = w.nsub;
    let k = 4 * SQ * nsub;
    // SAFETY: every read is inside the buffers the caller sized (sub-block `b < nsub`, quad
    // `q < SQ`, group `c < CG`, row `i < R`).
    unsafe {
        let mut facc = [[_mm512_setzero_ps(); CG]; R];
        for c in 0..CG {
            for i in 0..R {
                facc[i][c] = _mm512_loadu_ps(acc[c * R + i].as_ptr());
            }
        }
        let cp = w.codes.as_ptr();
        for b in w.subs.clone() {
            let mut iacc = [[_mm512_setzero_si512(); CG]; R];
            let mut rec = [recs; CG];
            for c in 0..CG {
                rec[c] = recs.add((c * nsub + b) * REC);
                let corr = _mm512_load_si512(rec[c].add(Q_CORR).cast());
                for i in 0..R {
                    iacc[i][c] = corr;
                }
            }
            for q in 0..SQ {
                let mut av = [_mm512_setzero_si512(); CG];
                for c in 0..CG {
                    av[c] = _mm512_load_si512(rec[c].add(q).cast());
                }
                for i in 0..R {
                    let at = cp.add(i * k + 4 * SQ * b + 4 * q);
                    let wv = _mm512_set1_epi32(std::ptr::read_unaligned(at.cast::<i32>()));
                    for c in 0..CG {
                        iacc[i][c] = if V {
                            _mm512_dpbusd_epi32(iacc[i][c], wv, av[c])
                        } else {
                            let p = _mm512_maddubs_epi16(wv, av[c]);
                            _mm512_add_epi32(iacc[i][c], _mm512_madd_epi16(p, _mm512_set1_epi16(1)))
                        };
                    }
                }
            }
            for c in 0..CG {
                let da = _mm512_load_ps(rec[c].add(Q_DA).cast());
                let dsum = _mm512_load_ps(rec[c].add(Q_DSUM).cast());
                for i in 0..R {
                    let dw = _mm512_set1_ps(*w.scales.get_unchecked(i * nsub + b));
                    let s = _mm512_mul_ps(dw, da);
                    facc[i][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[i][c]), s, facc[i][c]);
                    if MIN {
                        let m = _mm512_set1_ps(*w.mins.get_unchecked(i * nsub + b));
                        facc[i][c] = _mm512_fmadd_ps(m, dsum, facc[i][c]);
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The GEMM's unpack of Q4_0 rows in `super::q4_0pack`'s lane order gives the same codes
    /// and scales as the canonical unpack of the same rows (so the GEMM's results are the
    /// canonical ones, bit for bit), for rows of whole 16-block groups, with a partial last
    /// group, and shorter than one group.
    #[test]
    fn q4_0_lane_order_unpack_is_the_canonical_one() {
        if !crate::isa::Isa::Avx512.available() {
            return;
        }
        for nb in [16, 128, 451, 35, 3] {
            let mut row: Vec<u8> = (0..18 * nb).map(|i| (i * 131 + i / 5) as u8).collect();
            for b in row.chunks_exact_mut(18) {
                // Finite scales (exponent below 31).
                b[1] &= 0x7B;
            }
            let mut packed = row.clone();
            super::super::q4_0pack::repack_row(&mut packed);
            let (mut c0, mut c1) = (vec![0u8; 32 * nb], vec![1u8; 32 * nb]);
            let (mut s0, mut s1) = (vec![0f32; nb], vec![1f32; nb]);
            let mut m = vec![0f32; nb];
            // SAFETY: AVX-512 F/BW/VL were detected above; the buffers hold `nb` blocks' codes
            // and scales.
            unsafe {
                unpack_row::<Q4_0>(&row, &mut c0, &mut s0, &mut m);
                unpack_q4_0_lanes(&packed, &mut c1, &mut s1, &mut m);
            }
            assert_eq!(c0, c1, "nb = {nb}");
            assert_eq!(
                s0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                s1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "nb = {nb}"
            );
        }
    }
}

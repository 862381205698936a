//! NEON weight decoders for the ternary formats (the body is [`super::int`]): PQ2_0 and PTQ1_0
//! (128-element blocks, four Q8_0 activation blocks each) and TQ2_0 and TQ1_0 (256-element
//! blocks, one Q8_K activation block each). Every decoder yields `code - 1` as signed bytes
//! (PQ2_0 and TQ2_0 code 3 counts +2, as the core decodes it) and the block's f16 scale.
//!
//! Layouts (facts from the core's block types and their sources):
//! * PQ2_0 (PrismML-Eng/llama.cpp `ggml-common.h` `block_pq2_0`): f16 `d`, then 32 code bytes,
//!   element `j` at bits `2(j % 4)` of byte `j / 4`; sub-block `t` uses bytes `8t..8t+8`
//!   (decoded like ROCmFP2's codes, [`super::q8::codes2`]).
//! * TQ2_0 (ggml `block_tq2_0`): 64 code bytes, then f16 `d`; element `i` at bits
//!   `2((i / 32) % 4)` of byte `32(i / 128) + i % 32`: sub-block `t` is bytes
//!   `32(t / 4)..+32` shifted right by `2(t % 4)`.
//! * TQ1_0 (ggml `block_tq1_0`: `qs[48]`, `qh[4]`, f16 `d`) and PTQ1_0 (Prism `block_ptq1_0`:
//!   `qs[24]`, `qh[2]`, f16 `d`): base-3 digits, digit `n` of a byte read as
//!   `((u8)(byte * 3^n) * 3) >> 8`. Element placement: TQ1_0 `qs[m]` (m < 32) holds elements
//!   `m + 32n`, `qs[32 + m]` (m < 16) elements `160 + m + 16n`, `qh[j]` elements
//!   `240 + j + 4n`; PTQ1_0 uses the core's [`PTQ1_0_PLACEMENT`]. For each 16-element half of
//!   a sub-block, a table gives the byte of each element (gathered with `tbl` from the block's
//!   bytes loaded as overlapping 16-byte vectors, all inside the block) and its multiplier
//!   `3^n`; `mul` (wrapping), `umull` by 3 and a narrowing shift by 8 give the digits.
//!   Unit tests check these tables against the core's `code()` / `trits()` for every element.
//!
//! What must not live here: the kernel body, non-ternary formats.

use std::arch::aarch64::*;

use lowbit_core::format::prism::PTQ1_0_PLACEMENT;

use super::int::{f16_to_f32, IntFormat};
use super::q8::codes2;

/// PQ2_0 weights.
pub(crate) struct Pq2;
/// PTQ1_0 weights.
pub(crate) struct Ptq1;
/// TQ2_0 weights.
pub(crate) struct Tq2;
/// TQ1_0 weights.
pub(crate) struct Tq1;

/// The f16 at byte `off` of `p`, widened.
///
/// # Safety
/// `p + off .. p + off + 2` is readable.
#[inline(always)]
unsafe fn f16_at(p: *const u8, off: usize) -> f32 {
    // SAFETY: the caller guarantees the two reads.
    unsafe { f16_to_f32(u16::from_le_bytes([*p.add(off), *p.add(off + 1)])) }
}

impl IntFormat for Pq2 {
    const BYTES: usize = 34;
    const SUB: usize = 4;
    const Q8K: bool = false;

    #[inline(always)]
    unsafe fn decode(p: *const u8, t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        const LUT: [i8; 16] = [-1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        // SAFETY: reads bytes 0..2 and `2 + 8t .. 2 + 8t + 8` (t < 4) of the 34-byte block at
        // `p` (caller); NEON is available.
        unsafe {
            let (w0, w1) = codes2(p.add(2 + 8 * t), vld1q_s8(LUT.as_ptr()));
            (w0, w1, vdupq_n_f32(f16_at(p, 0)))
        }
    }
}

impl IntFormat for Tq2 {
    const BYTES: usize = 66;
    const SUB: usize = 8;
    const Q8K: bool = true;

    #[inline(always)]
    unsafe fn decode(p: *const u8, t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        // SAFETY: reads bytes `32(t / 4) .. + 32` (t < 8) and 64..66 of the 66-byte block at `p`
        // (caller); NEON is available.
        unsafe {
            let q = p.add(32 * (t / 4));
            let sh = vdupq_n_s8(-2 * (t % 4) as i8);
            let m = vdupq_n_u8(3);
            let one = vdupq_n_s8(1);
            let c0 = vandq_u8(vshlq_u8(vld1q_u8(q), sh), m);
            let c1 = vandq_u8(vshlq_u8(vld1q_u8(q.add(16)), sh), m);
            let w0 = vsubq_s8(vreinterpretq_s8_u8(c0), one);
            let w1 = vsubq_s8(vreinterpretq_s8_u8(c1), one);
            (w0, w1, vdupq_n_f32(f16_at(p, 64)))
        }
    }
}

/// `digit - 1` of each byte of `bytes` for the multipliers `mul` (`3^n`).
///
/// # Safety
/// NEON is available.
#[inline(always)]
unsafe fn trits(bytes: uint8x16_t, mul: uint8x16_t) -> int8x16_t {
    // SAFETY: register-only NEON operations.
    unsafe {
        let x = vmulq_u8(bytes, mul);
        let lo = vshrn_n_u16::<8>(vmull_u8(vget_low_u8(x), vdup_n_u8(3)));
        let d = vshrn_high_n_u16::<8>(lo, vmull_high_u8(x, vdupq_n_u8(3)));
        vsubq_s8(vreinterpretq_s8_u8(d), vdupq_n_s8(1))
    }
}

/// Gather indices and multipliers of a base-3 format: for each 16-element half `v` of the
/// block, `(table index of the byte holding element 16v + m, 3^digit)`.
struct TritTables<const V: usize> {
    idx: [[u8; 16]; V],
    mul: [[u8; 16]; V],
}

/// `place` is the element placement; code byte `b` sits at table index `b` below `split` and
/// `b + shift` from `split` on.
const fn trit_tables<const V: usize>(place: &[(u8, u8)], split: u8, shift: u8) -> TritTables<V> {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let mut t = TritTables { idx: [[0; 16]; V], mul: [[0; 16]; V] };
    let mut e = 0;
    while e < 16 * V {
        let (byte, n) = place[e];
        t.idx[e / 16][e % 16] = if byte < split { byte } else { byte + shift };
        t.mul[e / 16][e % 16] = POW3[n as usize];
        e += 1;
    }
    t
}

/// TQ1_0 element placement `(code byte, digit)`: code bytes 0..48 are `qs`, 48..52 `qh`.
const TQ1_0_PLACEMENT: [(u8, u8); 256] = {
    let mut p = [(0u8, 0u8); 256];
    let mut e = 0;
    while e < 256 {
        p[e] = if e < 160 {
            ((e % 32) as u8, (e / 32) as u8)
        } else if e < 240 {
            ((32 + (e - 160) % 16) as u8, ((e - 160) / 16) as u8)
        } else {
            ((48 + (e - 240) % 4) as u8, ((e - 240) / 4) as u8)
        };
        e += 1;
    }
    p
};

/// TQ1_0: the four vectors are block bytes 0..16, 16..32, 32..48 and 38..54, so byte `b >= 48`
/// sits at table index `48 + (b - 38) = b + 10`.
static TQ1: TritTables<16> = trit_tables(&TQ1_0_PLACEMENT, 48, 10);
/// PTQ1_0: the two vectors are block bytes 0..16 and 12..28, so byte `b >= 16` sits at table
/// index `16 + (b - 12) = b + 4`.
static PTQ1: TritTables<8> = trit_tables(&PTQ1_0_PLACEMENT, 16, 4);

impl IntFormat for Tq1 {
    const BYTES: usize = 54;
    const SUB: usize = 8;
    const Q8K: bool = true;

    #[inline(always)]
    unsafe fn decode(p: *const u8, t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        // SAFETY: reads bytes 0..48 and 38..54 of the 54-byte block at `p` (caller) and rows
        // `2t`, `2t + 1` (t < 8) of the 16-row tables; NEON is available.
        unsafe {
            let tab = uint8x16x4_t(
                vld1q_u8(p),
                vld1q_u8(p.add(16)),
                vld1q_u8(p.add(32)),
                vld1q_u8(p.add(38)),
            );
            let half = |v: usize| {
                let b = vqtbl4q_u8(tab, vld1q_u8(TQ1.idx[v].as_ptr()));
                trits(b, vld1q_u8(TQ1.mul[v].as_ptr()))
            };
            (half(2 * t), half(2 * t + 1), vdupq_n_f32(f16_at(p, 52)))
        }
    }
}

impl IntFormat for Ptq1 {
    const BYTES: usize = 28;
    const SUB: usize = 4;
    const Q8K: bool = false;

    #[inline(always)]
    unsafe fn decode(p: *const u8, t: usize) -> (int8x16_t, int8x16_t, float32x4_t) {
        // SAFETY: reads bytes 0..16 and 12..28 of the 28-byte block at `p` (caller) and rows
        // `2t`, `2t + 1` (t < 4) of the 8-row tables; NEON is available.
        unsafe {
            let tab = uint8x16x2_t(vld1q_u8(p), vld1q_u8(p.add(12)));
            let half = |v: usize| {
                let b = vqtbl2q_u8(tab, vld1q_u8(PTQ1.idx[v].as_ptr()));
                trits(b, vld1q_u8(PTQ1.mul[v].as_ptr()))
            };
            (half(2 * t), half(2 * t + 1), vdupq_n_f32(f16_at(p, 26)))
        }
    }
}

#[cfg(test)]
mod tests {
    use lowbit_core::format::ggml::tq1_0::BlockTq1_0;
    use lowbit_core::format::prism::BlockPtq1_0;

    use super::*;

    /// Pseudo-random bytes (a fixed LCG) for the decoder tests.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    /// Every element of `SUB` sub-blocks, as `decode` gives it.
    fn decoded<F: IntFormat>(blk: &[u8]) -> Vec<i8> {
        let mut out = vec![0i8; 32 * F::SUB];
        for t in 0..F::SUB {
            // SAFETY: `blk` holds one whole block; NEON is baseline on aarch64.
            unsafe {
                let (w0, w1, _) = F::decode(blk.as_ptr(), t);
                vst1q_s8(out.as_mut_ptr().add(32 * t), w0);
                vst1q_s8(out.as_mut_ptr().add(32 * t + 16), w1);
            }
        }
        out
    }

    #[test]
    fn tq1_0_digits_match_core() {
        for seed in 0..64 {
            let mut blk = bytes(seed, 54);
            blk[52..].copy_from_slice(&half::f16::ONE.to_bits().to_le_bytes());
            let core: BlockTq1_0 = bytemuck::pod_read_unaligned(&blk);
            let got = decoded::<Tq1>(&blk);
            for (i, g) in got.iter().enumerate() {
                assert_eq!(i32::from(*g), i32::from(core.code(i)) - 1, "seed {seed} element {i}");
            }
        }
    }

    #[test]
    fn ptq1_0_digits_match_core() {
        for seed in 0..64 {
            let mut blk = bytes(seed, 28);
            blk[26..].copy_from_slice(&half::f16::ONE.to_bits().to_le_bytes());
            let core: BlockPtq1_0 = bytemuck::pod_read_unaligned(&blk);
            let mut want = [0i8; 128];
            core.trits(&mut want);
            assert_eq!(decoded::<Ptq1>(&blk), want.to_vec(), "seed {seed}");
        }
    }
}

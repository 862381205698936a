//! ggml TQ1_0 (GGUF type 34): 256 ternary weights packed five trits per byte, f16 scale,
//! 54 bytes (1.6875 bpw).
//!
//! Layout (ggml `ggml/src/ggml-common.h` `block_tq1_0`): `qs[48]`, `qh[4]`, then `d` (f16)
//! LAST. Trits t = code ∈ {0, 1, 2} (value code - 1), five per byte, the first most
//! significant: a byte holds `ceil(v * 256 / 243)` for the base-3 number `v` of its trits
//! (`(v * 256 + 242) / 243` in integers), and trit `n` (0-based from the most significant) is
//! read back as `((u8)(byte * 3^n) * 3) >> 8` (ggml `dequantize_row_tq1_0`, gguf-py `TQ1_0`).
//! Element order (ggml `quantize_row_tq1_0_ref`):
//! * `qs[m]`, m < 32: elements `m + 32n`, n < 5 (elements 0..160);
//! * `qs[32 + m]`, m < 16: elements `160 + m + 16n`, n < 5 (elements 160..240);
//! * `qh[j]`, j < 4: elements `240 + j + 4n`, n < 4, as the first four trits (fifth trit 0).
//!
//! Every byte decodes to trits in 0..=2, so no byte of `qs` / `qh` is illegal (bytes no encoder
//! writes still decode as ggml decodes them). A NaN or infinite `d` is
//! [`crate::Error::NonFiniteScale`].

use half::f16;

use super::tq2_0::{decode_ternary, dot_ternary, encode_blocks, Ternary};
use crate::assert_block_size;
use crate::block::Block;
use crate::codec::{ActRow, EncodeOptions};
use crate::error::Result;
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Tq1_0;

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// ggml `block_tq1_0`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockTq1_0 {
    /// Five trits per byte (elements 0..240).
    pub qs: [u8; 48],
    /// Four trits per byte (elements 240..256).
    pub qh: [u8; 4],
    /// Scale.
    pub d: f16,
}
assert_block_size!(BlockTq1_0, FormatId::Tq1_0);

/// Trit `n` (0 = most significant) of a packed byte, as ggml reads it: 0, 1 or 2.
#[inline]
pub fn trit(byte: u8, n: usize) -> u8 {
    let q = byte.wrapping_mul(POW3[n % 5]);
    ((u16::from(q) * 3) >> 8) as u8
}

/// Packs up to five trits (the first most significant; missing trailing trits are 0) into a
/// byte: `ceil(v * 256 / 243)`.
#[inline]
pub fn pack_trits(t: &[u8]) -> u8 {
    let mut v = 0u16;
    for n in 0..5 {
        v = v * 3 + u16::from(t.get(n).copied().unwrap_or(0).min(2));
    }
    (v * 256).div_ceil(243) as u8
}

/// (byte index in `qs ++ qh`, trit position) of every element, in element order.
const fn layout() -> [(u8, u8); 256] {
    let mut t = [(0u8, 0u8); 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 160 {
            ((i % 32) as u8, (i / 32) as u8)
        } else if i < 240 {
            ((32 + (i - 160) % 16) as u8, ((i - 160) / 16) as u8)
        } else {
            ((48 + (i - 240) % 4) as u8, ((i - 240) / 4) as u8)
        };
        i += 1;
    }
    t
}
const LAYOUT: [(u8, u8); 256] = layout();

impl BlockTq1_0 {
    /// Byte offset of `d` in the block.
    pub const D_OFFSET: usize = 52;

    /// The code (0..=2) of element `i` (< 256).
    #[inline]
    pub fn code(&self, i: usize) -> u8 {
        let (byte, n) = LAYOUT[i & 255];
        let b = if byte < 48 { self.qs[byte as usize] } else { self.qh[(byte - 48) as usize & 3] };
        trit(b, n as usize)
    }
}

impl Block for BlockTq1_0 {
    const FORMAT: FormatId = FORMAT;
    const ELEMS: usize = 256;

    /// `out[i] = (code_i - 1) as f32 * d`, bit-exact with gguf-py (`decode_ternary`).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_ternary(self, out)
    }
}

impl Ternary for BlockTq1_0 {
    const SCALE_OFFSET: usize = Self::D_OFFSET;
    fn stored_d(&self) -> f16 {
        self.d
    }
    fn code_at(&self, i: usize) -> u8 {
        self.code(i)
    }
}

/// Packs codes (0..=2, element order) and the scale into a TQ1_0 block (ggml's layout).
pub fn pack(codes: &[u8; 256], d: f16) -> BlockTq1_0 {
    let mut digits = [[0u8; 5]; 52];
    for (i, c) in codes.iter().enumerate() {
        let (byte, n) = LAYOUT[i];
        digits[byte as usize][n as usize] = *c;
    }
    let mut b = BlockTq1_0 { qs: [0; 48], qh: [0; 4], d };
    for (k, t) in digits.iter().enumerate() {
        let v = pack_trits(t);
        if k < 48 {
            b.qs[k] = v;
        } else {
            b.qh[k - 48] = v;
        }
    }
    b
}

pub(crate) fn decode_row(src: &[u8], dst: &mut [f32]) -> Result<()> {
    crate::block::decode_blocks::<BlockTq1_0>(src, dst)
}

/// Encodes with `Rule::Reference` (ggml's `quantize_row_tq1_0_ref`, byte-exact with it and
/// gguf-py: d = amax as f16 (RNE), codes `lroundf(x / amax) + 1` via the f32 reciprocal) or
/// `Rule::Improved` (least-squares ternary fit, optionally importance-weighted). Corner cases
/// as for TQ2_0 (see `tq2_0.rs`).
pub(crate) fn encode_row(src: &[f32], opts: &EncodeOptions<'_>, dst: &mut [u8]) -> Result<()> {
    encode_blocks(FORMAT, src, opts, dst, BlockTq1_0::BYTES, |c, d, out| {
        out.copy_from_slice(bytemuck::bytes_of(&pack(c, d)))
    })
}

/// Reference dot product with Q8_K activations (ggml's `vec_dot_type` for TQ1_0), following
/// ggml's `ggml_vec_dot_tq1_0_q8_K_generic` (`ggml/src/ggml-cpu/quants.c`):
///
/// per block (in order): `sum = Σ_i (code_i - 1) * q8_i` as an exact i32, then
/// `acc += sum as f32 * (f32(d_w) * act.d)` into one running f32 sum from +0.
///
/// Accuracy against an f64 sum of decoded products: at most three roundings per block, so
/// `|y - y_ref| <= 3 * n_blocks * 2^-24 * Σ|terms|` (c = 3 per 256 elements). A NaN / inf
/// weight scale is [`crate::Error::NonFiniteScale`].
pub(crate) fn dot_row(w: &[u8], act: ActRow<'_>) -> Result<f32> {
    dot_ternary::<BlockTq1_0>(w, act)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packed_value_reads_back() {
        for v in 0..243u16 {
            let t = [
                (v / 81 % 3) as u8,
                (v / 27 % 3) as u8,
                (v / 9 % 3) as u8,
                (v / 3 % 3) as u8,
                (v % 3) as u8,
            ];
            let b = pack_trits(&t);
            for (n, want) in t.iter().enumerate() {
                assert_eq!(trit(b, n), *want, "v {v} trit {n}");
            }
        }
    }

    #[test]
    fn every_byte_reads_as_trits() {
        for b in 0..=255u8 {
            for n in 0..5 {
                assert!(trit(b, n) <= 2);
            }
        }
    }

    #[test]
    fn pack_and_code_agree() {
        let mut codes = [0u8; 256];
        for (i, c) in codes.iter_mut().enumerate() {
            *c = ((i * 5 + i / 7) % 3) as u8;
        }
        let b = pack(&codes, f16::ONE);
        for (i, c) in codes.iter().enumerate() {
            assert_eq!(b.code(i), *c, "element {i}");
        }
    }
}

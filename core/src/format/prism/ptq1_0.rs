//! PTQ1_0: 128 trits packed base 3 with one f16 scale (28 bytes, 1.75 bpw).
//!
//! Layout (Prism `ggml-common.h` `block_ptq1_0`): `qs[24]`, `qh[2]`, `d` f16 LAST. Packing
//! (Prism `quantize_row_ptq1_0_ref` / `dequantize_row_ptq1_0`, stages of 16 then 8 bytes):
//!
//! * `qs[m]`, `m < 16`, holds elements `m + 16n` for digits `n = 0..5`;
//! * `qs[16 + m]`, `m < 8`, holds elements `80 + m + 8n`;
//! * `qh[h]`, `h < 2`, holds elements `120 + h + 2n` for `n = 0..4`.
//!
//! A byte's digits `c_n = t + 1 ∈ {0, 1, 2}` form `v = Σ c_n 3^(4-n)` (most significant first; a
//! `qh` byte has four digits and `v` is then multiplied by 3), stored as
//! `byte = (v * 256 + 242) / 243` (integer division). Digit `n` decodes as
//! `((u8)(byte * 3^n) * 3) >> 8` (the product wrapping to 8 bits), value `(digit - 1) * d`.
//! Every byte decodes to some digits, so decode never rejects a code byte; only a NaN/inf `d`.

use half::f16;

use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::registry::FormatId;

use super::{check_scale, QK};

/// Prism `block_ptq1_0`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockPtq1_0 {
    /// Five base-3 digits per byte (elements 0..120).
    pub qs: [u8; 24],
    /// Four base-3 digits per byte (elements 120..128).
    pub qh: [u8; 2],
    /// Scale (f16), last. NaN or infinity is rejected on decode.
    pub d: f16,
}
assert_block_size!(BlockPtq1_0, FormatId::Ptq1_0);

/// Where element `e` lives: `(byte, digit)` with `byte` indexing the 26 code bytes
/// (`qs` then `qh`) and `digit` the base-3 digit, 0 = most significant.
pub const PTQ1_0_PLACEMENT: [(u8, u8); QK] = placement();

const fn placement() -> [(u8, u8); QK] {
    let mut p = [(0u8, 0u8); QK];
    let mut e = 0;
    while e < QK {
        p[e] = if e < 80 {
            ((e % 16) as u8, (e / 16) as u8)
        } else if e < 120 {
            ((16 + (e - 80) % 8) as u8, ((e - 80) / 8) as u8)
        } else {
            ((24 + (e - 120) % 2) as u8, ((e - 120) / 2) as u8)
        };
        e += 1;
    }
    p
}

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Digit `n` (0 = most significant) of a packed byte: 0, 1 or 2.
#[inline]
fn digit(byte: u8, n: u8) -> u8 {
    ((byte.wrapping_mul(POW3[n as usize]) as u16 * 3) >> 8) as u8
}

impl BlockPtq1_0 {
    fn code_byte(&self, i: u8) -> u8 {
        let i = i as usize;
        if i < 24 {
            self.qs[i]
        } else {
            self.qh[i - 24]
        }
    }

    /// The block's trits (`digit - 1`), element order.
    pub fn trits(&self, t: &mut [i8; QK]) {
        for (v, &(b, n)) in t.iter_mut().zip(PTQ1_0_PLACEMENT.iter()) {
            *v = digit(self.code_byte(b), n) as i8 - 1;
        }
    }

    /// Packs a scale and trits (`-1, 0, +1`; anything else is clamped to that range).
    pub fn pack(d: f16, t: &[i8; QK]) -> Self {
        let mut v = [0u16; 26];
        // Accumulate digits most significant first: element order within a byte is digit order.
        for n in 0..5u8 {
            for (e, &(b, dn)) in PTQ1_0_PLACEMENT.iter().enumerate() {
                if dn == n {
                    v[b as usize] = v[b as usize] * 3 + (t[e].clamp(-1, 1) + 1) as u16;
                }
            }
        }
        // (v * 256 + 242) / 243, i.e. the ceiling of v * 256 / 243.
        let byte = |v: u16| (v * 256).div_ceil(243) as u8;
        let mut blk = BlockPtq1_0 { qs: [0; 24], qh: [0; 2], d };
        for (q, &x) in blk.qs.iter_mut().zip(&v[..24]) {
            *q = byte(x);
        }
        for (q, &x) in blk.qh.iter_mut().zip(&v[24..]) {
            *q = byte(x * 3);
        }
        blk
    }
}

impl Block for BlockPtq1_0 {
    const FORMAT: FormatId = FormatId::Ptq1_0;
    const ELEMS: usize = QK;

    /// `(digit - 1) * d` in f32 (exact). NaN/inf `d`: [`crate::Error::NonFiniteScale`] at 26.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = check_scale(Self::FORMAT, self.d, 26)?;
        let mut t = [0i8; QK];
        self.trits(&mut t);
        for (o, &v) in out.iter_mut().zip(&t) {
            *o = v as f32 * d;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_a_bijection() {
        let mut seen = [0u8; 26 * 5];
        for &(b, n) in PTQ1_0_PLACEMENT.iter() {
            assert!(n < if b < 24 { 5 } else { 4 });
            seen[b as usize * 5 + n as usize] += 1;
        }
        assert_eq!(seen.iter().filter(|&&c| c == 1).count(), 128);
    }

    #[test]
    fn every_digit_pattern_round_trips() {
        for v in 0..243u16 {
            let b = (v * 256).div_ceil(243) as u8;
            let mut r = 0u16;
            for n in 0..5 {
                r = r * 3 + digit(b, n) as u16;
            }
            assert_eq!(r, v);
        }
    }
}

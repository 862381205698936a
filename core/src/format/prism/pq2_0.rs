//! PQ2_0: 128 trits at 2 bits each with one f16 scale (34 bytes, 2.125 bpw).
//!
//! Layout (Prism `ggml-common.h` `block_pq2_0`): `d` f16, then `qs[32]`; element `j` is the
//! 2-bit code `(qs[j/4] >> 2(j%4)) & 3`, and decodes to `(code - 1) * d`. Prism's decoder
//! (`dequantize_row_pq2_0`) maps all four codes, so code 3 decodes to `+2 d`; lowbit does the
//! same (Prism's encoder never writes it, lowbit's never either).

use half::f16;

use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::Result;
use crate::registry::FormatId;

use super::{check_scale, QK};

/// Prism `block_pq2_0`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockPq2_0 {
    /// Scale (f16). NaN or infinity is rejected on decode.
    pub d: f16,
    /// 2-bit codes, element `j` at bits `2(j%4)` of byte `j/4`; value `code - 1`.
    pub qs: [u8; 32],
}
assert_block_size!(BlockPq2_0, FormatId::Pq2_0);

impl BlockPq2_0 {
    /// The block's multipliers `code - 1` (`-1, 0, +1`, or `+2` for code 3), element order.
    pub fn trits(&self, t: &mut [i8; QK]) {
        for (j, v) in t.iter_mut().enumerate() {
            *v = ((self.qs[j / 4] >> (2 * (j % 4))) & 3) as i8 - 1;
        }
    }

    /// Packs a scale and trits (`-1, 0, +1`; anything else is clamped to that range).
    pub fn pack(d: f16, t: &[i8; QK]) -> Self {
        let mut qs = [0u8; 32];
        for (j, &v) in t.iter().enumerate() {
            qs[j / 4] |= ((v.clamp(-1, 1) + 1) as u8) << (2 * (j % 4));
        }
        BlockPq2_0 { d, qs }
    }
}

impl Block for BlockPq2_0 {
    const FORMAT: FormatId = FormatId::Pq2_0;
    const ELEMS: usize = QK;

    /// `(code - 1) * d` in f32, as Prism's `dequantize_row_pq2_0` (the int converted to f32,
    /// then one f32 multiply, so exact). NaN/inf `d`: [`crate::Error::NonFiniteScale`] at 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let d = check_scale(Self::FORMAT, self.d, 0)?;
        let mut t = [0i8; QK];
        self.trits(&mut t);
        for (o, &v) in out.iter_mut().zip(&t) {
            *o = v as f32 * d;
        }
        Ok(())
    }
}

//! ggml IQ2_S: 256 weights in 82 bytes (2.5625 bpw). (llama.cpp's IQ2_M file type stores
//! these blocks too.)
//!
//! Layout (ggml `ggml-common.h` `block_iq2_s`): `d` f16, `qs` `u8[64]`, `qh` `u8[8]`, `scales`
//! `u8[8]`. `qs[0..32]` are the low 8 bits of the `iq2s_grid` index of each group of 8 weights,
//! `qs[32..64]` the group's sign byte (bit `j` = weight `j` negative, no parity rule). For
//! sub-block `ib` (32 weights, groups `4ib + l`), bits `2l, 2l+1` of `qh[ib]` are index bits 8
//! and 9; `scales[ib]` holds the 4-bit scale of its first (low nibble) and last 16 weights.
//!
//! Decode (gguf-py `IQ2_S.dequantize_blocks`, ggml `dequantize_row_iq2_s`):
//! `db = d * (0.5 + ls) * 0.25` in f32, left to right; `y = db * grid[j] * sign_j`.

use half::f16;

use super::iq2_xs::{decode_groups, dot_groups, Iq2Groups};
use super::tables::IQ2S_GRID;
use crate::assert_block_size;
use crate::block::Block;
use crate::error::Result;
use crate::format::ggml::BlockQ8K;
use crate::registry::FormatId;

/// ggml `block_iq2_s`.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIq2S {
    /// Super-block scale.
    pub d: f16,
    /// 32 grid index low bytes, then 32 sign bytes.
    pub qs: [u8; 64],
    /// Grid index bits 8-9, 2 bits per group of 8.
    pub qh: [u8; 8],
    /// Two 4-bit scales per 32 weights.
    pub scales: [u8; 8],
}
assert_block_size!(BlockIq2S, FormatId::Iq2S);

impl Iq2Groups for BlockIq2S {
    fn d(&self) -> f16 {
        self.d
    }
    fn scale_bytes(&self) -> &[u8; 8] {
        &self.scales
    }
    #[inline]
    fn group_at(&self, g: usize) -> (u64, u8) {
        let g = g & 31;
        let hi = (usize::from(self.qh[g / 4]) >> (2 * (g % 4))) & 3;
        (IQ2S_GRID[usize::from(self.qs[g]) | hi << 8], self.qs[32 + g])
    }
}

impl Block for BlockIq2S {
    const FORMAT: FormatId = FormatId::Iq2S;
    const ELEMS: usize = 256;

    /// Bit-exact with gguf-py (the IQ2_XS decode, `decode_groups`); NaN/inf `d` ->
    /// [`crate::Error::NonFiniteScale`] at offset 0.
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        decode_groups(self, out)
    }
}

/// Reference dot product with Q8_K activations (ggml `ggml_vec_dot_iq2_s_q8_K_generic`): the
/// IQ2_XS order and bound, [`dot_groups`].
pub(crate) fn dot_row(w: &[u8], a: &[BlockQ8K]) -> Result<f32> {
    dot_groups::<BlockIq2S>(w, a)
}

//! ROCmFP2 (`Q2_0_ROCMFPX`): the 10-byte block, its decode, its per-element code choice and its
//! bit packing. The scale search lives in `scale_search.rs` / `fast_fp*.rs`; the dot product in
//! [`super::dot`]. Nothing here allocates or panics on any byte input.
//!
//! Facts (github ciru-ai/ROCmFPX, `ggml/rocmfpx/rocmfp2_reference.{h,c}`, and charlie12345/ROCmFPX
//! `ggml/rocmfpx/rocmfpx.c`):
//!
//! * Layout `qs[8], e[2]`. Weight `4j + i` sits in bits `2i+1..2i` of `qs[j]`; `e[0]` scales
//!   weights 0..=15, `e[1]` weights 16..=31 (UE4M3-b8 bytes, 0x7F..=0xFF illegal).
//! * Codebook (frozen "MORD" order): code 0 = -4, 1 = -1, 2 = +1, 3 = +4. No zero level.
//! * Decode: `(codebook[code] as f32) * scale` in f32 (exact: at most 3 significant bits times a
//!   4-bit-mantissa power of two). Scale byte 0x00 decodes codes 0 and 1 to `-0.0`.

use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::scalar::try_ue4m3_b8_to_f32;

/// One ROCmFP2 block: 32 weights in 10 bytes (2.5 bits per weight).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockRocmFp2 {
    /// 2-bit codes, four per byte, least significant pair first.
    pub qs: [u8; 8],
    /// UE4M3-b8 scale bytes of the two 16-weight halves.
    pub e: [u8; 2],
}
assert_block_size!(BlockRocmFp2, FormatId::RocmFp2);

/// The FP2 codebook, indexed by code (ROCmFPX "MORD" order).
pub const FP2_LEVELS: [i8; 4] = [-4, -1, 1, 4];

/// Names of the two scale fields, for errors.
pub(crate) const FP2_SCALE_FIELDS: [&str; 2] = ["e[0]", "e[1]"];

/// Byte offset of `e[h]` inside a block.
pub(crate) const FP2_SCALE_OFFSET: usize = 8;

impl BlockRocmFp2 {
    /// The decoded scales of both halves, or [`Error::IllegalByte`] naming the first illegal
    /// scale byte (`e[0]` at block offset 8, `e[1]` at 9).
    pub fn scales(&self) -> Result<[f32; 2]> {
        let mut out = [0f32; 2];
        for (h, (o, &b)) in out.iter_mut().zip(self.e.iter()).enumerate() {
            *o = try_ue4m3_b8_to_f32(b).ok_or(Error::IllegalByte {
                format: FormatId::RocmFp2,
                field: FP2_SCALE_FIELDS[h],
                offset: FP2_SCALE_OFFSET + h,
                byte: b,
            })?;
        }
        Ok(out)
    }

    /// The 2-bit code of weight `i` (0..32; higher `i` wrap within the block).
    #[inline]
    pub fn code(&self, i: usize) -> u8 {
        (self.qs[(i / 4) % 8] >> (2 * (i % 4))) & 3
    }
}

impl Block for BlockRocmFp2 {
    const FORMAT: FormatId = FormatId::RocmFp2;
    const ELEMS: usize = 32;

    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let s = self.scales()?;
        for (i, o) in out.iter_mut().enumerate() {
            *o = f32::from(FP2_LEVELS[self.code(i) as usize]) * s[i / 16];
        }
        Ok(())
    }
}

/// The code ROCmFP2 stores for `x` under scale `s` (exact f64 arithmetic of
/// `rocmfp2_p1_select_code_optimized`): scale 0 gives code 0 for every input; otherwise the sign
/// bit of `x` picks the side (so `-0.0` gives code 1, `+0.0` code 2) and the outer level is taken
/// only when `(|x| - 4s)^2 < (|x| - s)^2` in f64, ties to the inner level. For `f32` inputs this is
/// exactly "outer iff `|x| > 2.5 s`" except when `|x| / s` exceeds about 2^50, where both rounded
/// squares can coincide and the inner code is kept (the reconstruction error is the same).
#[inline]
pub(crate) fn fp2_code(x: f64, s: f64) -> u8 {
    let m = x.abs();
    let id = m - s;
    let od = m - 4.0 * s;
    let outer = u8::from(od * od < id * id);
    let neg = u8::from(x.is_sign_negative());
    // (neg, outer) -> 0 (-4), 1 (-1), 2 (+1), 3 (+4), branch-free; scale 0 -> code 0
    (2 * (1 - neg) + (outer ^ neg)) * u8::from(s != 0.0)
}

/// Packs the 16 codes of half `h` (values 0..=3) into `qs[4h..4h+4]`.
pub(crate) fn fp2_pack_half(qs: &mut [u8; 8], h: usize, codes: &[u8; 16]) {
    for (j, quad) in codes.chunks_exact(4).enumerate() {
        qs[4 * h + j] = quad.iter().enumerate().fold(0u8, |b, (i, &c)| b | ((c & 3) << (2 * i)));
    }
}

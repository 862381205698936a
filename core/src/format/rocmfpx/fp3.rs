//! ROCmFP3 (`Q3_0_ROCMFPX`): the 14-byte block, its decode, its per-element code choice and its
//! 3-bit packing. The scale search lives in `scale_search.rs` / `fast_fp*.rs`; the dot product in
//! [`super::dot`]. Nothing here allocates or panics on any byte input.
//!
//! Facts (github ciru-ai/ROCmFPX, `ggml/rocmfpx/rocmfpx.{h,c}`: `block_rocmfp3`,
//! `rocmfpx_fp3_pack8` / `unpack8`, `rocmfpx_decode_fp3_code`, `rocmfpx_quantize_fp3_code`):
//!
//! * Layout `qs[12], e[2]`; half 0 (weights 0..=15) in `qs[0..6]`, half 1 in `qs[6..12]`; `e[h]`
//!   is the UE4M3-b8 scale of half `h` (0x7F..=0xFF illegal).
//! * A 3-bit code is sign (bit 2) plus a magnitude index (bits 0-1) into `{0, 1, 2, 4}`.
//! * Eight codes per three bytes, least significant bits first:
//!   `b0 = c0 | c1 << 3 | (c2 & 3) << 6`, `b1 = c2 >> 2 | c3 << 1 | c4 << 4 | (c5 & 1) << 7`,
//!   `b2 = c5 >> 1 | c6 << 2 | c7 << 5`.
//! * Code 4 ("-0") is never produced by the encoder, but ROCmFPX's decoder and its
//!   `rocmfpx_validate_row_data_fp3` accept it; it decodes to `+0.0` (the C decoder negates the
//!   integer 0). lowbit accepts it the same way.

use crate::assert_block_size;
use crate::block::{check_block_out, Block};
use crate::error::{Error, Result};
use crate::registry::FormatId;
use crate::scalar::try_ue4m3_b8_to_f32;

/// One ROCmFP3 block: 32 weights in 14 bytes (3.5 bits per weight).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockRocmFp3 {
    /// 3-bit codes, eight per three bytes, least significant bits first.
    pub qs: [u8; 12],
    /// UE4M3-b8 scale bytes of the two 16-weight halves.
    pub e: [u8; 2],
}
assert_block_size!(BlockRocmFp3, FormatId::RocmFp3);

/// The FP3 value of each code (code 4, "-0", is `0`).
pub const FP3_LEVELS: [i8; 8] = [0, 1, 2, 4, 0, -1, -2, -4];

const FP3_SCALE_FIELDS: [&str; 2] = ["e[0]", "e[1]"];
const FP3_SCALE_OFFSET: usize = 12;

impl BlockRocmFp3 {
    /// The decoded scales of both halves, or [`Error::IllegalByte`] naming the first illegal
    /// scale byte (`e[0]` at block offset 12, `e[1]` at 13).
    pub fn scales(&self) -> Result<[f32; 2]> {
        let mut out = [0f32; 2];
        for (h, (o, &b)) in out.iter_mut().zip(self.e.iter()).enumerate() {
            *o = try_ue4m3_b8_to_f32(b).ok_or(Error::IllegalByte {
                format: FormatId::RocmFp3,
                field: FP3_SCALE_FIELDS[h],
                offset: FP3_SCALE_OFFSET + h,
                byte: b,
            })?;
        }
        Ok(out)
    }

    /// All 32 codes (each 0..=7).
    pub fn codes(&self) -> [u8; 32] {
        let mut c = [0u8; 32];
        for (out, b) in c.chunks_exact_mut(8).zip(self.qs.chunks_exact(3)) {
            let v = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
            for (i, o) in out.iter_mut().enumerate() {
                *o = ((v >> (3 * i)) & 7) as u8;
            }
        }
        c
    }
}

impl Block for BlockRocmFp3 {
    const FORMAT: FormatId = FormatId::RocmFp3;
    const ELEMS: usize = 32;

    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let s = self.scales()?;
        let codes = self.codes();
        for (i, (o, &c)) in out.iter_mut().zip(codes.iter()).enumerate() {
            *o = f32::from(FP3_LEVELS[c as usize]) * s[i / 16];
        }
        Ok(())
    }
}

/// The magnitude index (0..=3, levels 0, 1, 2, 4) of `m = |x| >= 0` under scale `s > 0`:
/// thresholds `0.5 s`, `1.5 s`, `3 s`, each inclusive toward the smaller magnitude. The products
/// are exact in f64, so this is the exact nearest-level rule with ties to the smaller level.
#[inline]
pub(crate) fn fp3_index(m: f64, s: f64) -> u8 {
    if m <= 0.5 * s {
        0
    } else if m <= 1.5 * s {
        1
    } else if m <= 3.0 * s {
        2
    } else {
        3
    }
}

/// The code ROCmFP3 stores for `x` under scale `s`: scale 0 gives code 0; otherwise the magnitude
/// index of [`fp3_index`], with the sign bit set for `x < 0` unless the magnitude is 0 (so `-0.0`
/// and small negatives give code 0, never code 4).
#[inline]
pub(crate) fn fp3_code(x: f64, s: f64) -> u8 {
    if s == 0.0 {
        return 0;
    }
    let idx = fp3_index(x.abs(), s);
    if idx == 0 {
        0
    } else if x < 0.0 {
        4 | idx
    } else {
        idx
    }
}

/// Packs the 16 codes of half `h` (values 0..=7) into `qs[6h..6h+6]`.
pub(crate) fn fp3_pack_half(qs: &mut [u8; 12], h: usize, codes: &[u8; 16]) {
    for (g, c) in codes.chunks_exact(8).enumerate() {
        let v = c.iter().enumerate().fold(0u32, |v, (i, &c)| v | (u32::from(c & 7) << (3 * i)));
        let o = 6 * h + 3 * g;
        qs[o] = v as u8;
        qs[o + 1] = (v >> 8) as u8;
        qs[o + 2] = (v >> 16) as u8;
    }
}

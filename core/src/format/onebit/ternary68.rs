//! `Ternary68`: two 128-value ternary groups in 68 bytes (2.125 bpw), and the Q4_0 repack.
//!
//! Layout (1bit `host-memory-ternary.cpp` `pack_block`): `d0`, `d1` (the raw f16 bits of the two
//! groups' Q4_0 scales, copied unchanged), then `codes[64]`: value `i` of the 256 has the 2-bit
//! code `t + 1` at bits `2(i%4)` of `codes[i/4]` (byte `4 + i/4` of the block). Values `0..128`
//! use `d0`, `128..256` use `d1`; value = `(code - 1) * d` with `d` read as an IEEE f16 (the Q4_0
//! scale it came from, whose values were `(nibble - 8) * d = t * d`).

use half::f16;

use crate::assert_block_size;
use crate::block::{check_block_out, read_block, Block};
use crate::error::{Buffer, Error, Result};
use crate::registry::FormatId;

const FORMAT: FormatId = FormatId::Ternary68;

/// One 256-value block of the 1bit packed ternary layout.
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockTernary68 {
    /// Scale of values 0..128 (f16 bits). NaN or infinity is rejected on decode.
    pub d0: f16,
    /// Scale of values 128..256 (f16 bits). NaN or infinity is rejected on decode.
    pub d1: f16,
    /// 2-bit codes `t + 1`, value `i` at bits `2(i%4)` of byte `i/4`.
    pub codes: [u8; 64],
}
assert_block_size!(BlockTernary68, FormatId::Ternary68);

impl BlockTernary68 {
    /// The trits of the block (element order), or [`Error::IllegalByte`] for a byte holding code
    /// 3 (offset relative to the block). The repack never writes code 3 and the public source
    /// defines no value for it, so lowbit refuses it instead of guessing.
    pub fn trits(&self, t: &mut [i8; 256]) -> Result<()> {
        for (i, v) in t.iter_mut().enumerate() {
            let byte = self.codes[i / 4];
            let c = (byte >> (2 * (i % 4))) & 3;
            if c == 3 {
                return Err(Error::IllegalByte {
                    format: FORMAT,
                    field: "codes",
                    offset: 4 + i / 4,
                    byte,
                });
            }
            *v = c as i8 - 1;
        }
        Ok(())
    }

    fn scales(&self) -> Result<[f32; 2]> {
        let mut s = [0f32; 2];
        for (g, (d, o)) in [(self.d0, 0), (self.d1, 2)].into_iter().enumerate() {
            if !d.is_finite() {
                return Err(Error::NonFiniteScale { format: FORMAT, field: "d", offset: o });
            }
            s[g] = d.to_f32();
        }
        Ok(s)
    }
}

impl Block for BlockTernary68 {
    const FORMAT: FormatId = FormatId::Ternary68;
    const ELEMS: usize = 256;

    /// `(code - 1) * d_g` in f32 (exact). Errors: NaN/inf `d0`/`d1` ([`Error::NonFiniteScale`] at
    /// 0/2, checked first), code 3 ([`Error::IllegalByte`] at the code byte).
    fn decode(&self, out: &mut [f32]) -> Result<()> {
        check_block_out::<Self>(out)?;
        let s = self.scales()?;
        let mut t = [0i8; 256];
        self.trits(&mut t)?;
        for (i, (o, &v)) in out.iter_mut().zip(&t).enumerate() {
            *o = v as f32 * s[i / 128];
        }
        Ok(())
    }
}

/// Bytes of one Q4_0 block (ggml `block_q4_0`: `d` f16, `qs[16]`).
const Q4_0_BYTES: usize = 18;
/// Q4_0 bytes that become one `Ternary68` block (8 Q4_0 blocks = 256 values).
const UNIT: usize = 8 * Q4_0_BYTES;

/// Repacks exact-ternary Q4_0 blocks into `Ternary68` blocks, as 1bit does at load.
///
/// `src` holds whole groups of eight Q4_0 blocks (256 values: a row's K must be a multiple of
/// 256, so rows concatenate freely); `dst` holds `src.len() / 144 * 68` bytes. Q4_0 layout
/// (ggml): `d` f16, `qs[16]`, value `j` = low nibble of `qs[j]`, value `j + 16` = high nibble.
/// The low nibble `j` of Q4_0 block `b` (0..4) of 128-group `g` (0..2) becomes value
/// `i = 128g + 32b + j` of the output block, the high nibble value `i + 16`; code = nibble - 7.
///
/// Checks, in 1bit's order (each 128-group: for each of its four blocks, the scale, then the 16
/// bytes `qs[0..16]`, low nibble before high):
/// * a non-finite group scale (the first block's `d`): [`Error::NonFiniteScale`] (format Q4_0,
///   field `d`) at its offset. 1bit copies such bits through; lowbit refuses them because the
///   result would not decode.
/// * a block whose `d` bits differ from the group's first: [`Error::NotRepresentable`] at the
///   offset of that `d` (bit comparison, as 1bit: `+0` and `-0` differ).
/// * a nibble outside 7..=9: [`Error::NotRepresentable`] at the offset of its `qs` byte.
///
/// Offsets are byte offsets into `src`. On error `dst` is zeroed. Wrong lengths:
/// [`Error::Length`].
pub fn repack_q4_0(src: &[u8], dst: &mut [u8]) -> Result<()> {
    if src.len() % UNIT != 0 {
        return Err(Error::Length {
            format: FORMAT,
            buffer: Buffer::Encoded,
            got: src.len(),
            expected: src.len() / UNIT * UNIT,
        });
    }
    let need = src.len() / UNIT * 68;
    if dst.len() != need {
        return Err(Error::Length {
            format: FORMAT,
            buffer: Buffer::Encoded,
            got: dst.len(),
            expected: need,
        });
    }
    for (u, (s, d)) in src.chunks_exact(UNIT).zip(dst.chunks_exact_mut(68)).enumerate() {
        if let Err(e) = repack_unit(s, d) {
            dst.fill(0);
            return Err(e.at(u * UNIT));
        }
    }
    Ok(())
}

/// One 144-byte unit into one 68-byte block; offsets relative to the unit.
fn repack_unit(s: &[u8], out: &mut [u8]) -> Result<()> {
    let mut codes = [0u8; 64];
    let mut scales = [0u8; 4];
    for g in 0..2 {
        let base = g * 4 * Q4_0_BYTES;
        let d = [s[base], s[base + 1]];
        if !f16::from_le_bytes(d).is_finite() {
            return Err(Error::NonFiniteScale { format: FormatId::Q4_0, field: "d", offset: base });
        }
        for b in 0..4 {
            let off = base + b * Q4_0_BYTES;
            if s[off..off + 2] != d {
                return Err(Error::NotRepresentable {
                    format: FORMAT,
                    what: "Q4_0 scales differ within a 128-value group",
                    offset: off,
                });
            }
            for j in 0..16 {
                let byte = s[off + 2 + j];
                let (lo, hi) = (byte & 0x0F, byte >> 4);
                if !(7..=9).contains(&lo) || !(7..=9).contains(&hi) {
                    return Err(Error::NotRepresentable {
                        format: FORMAT,
                        what: "Q4_0 nibble outside 7..=9 (not ternary)",
                        offset: off + 2 + j,
                    });
                }
                let i = 128 * g + 32 * b + j;
                codes[i / 4] |= (lo - 7) << (2 * (i % 4));
                let i = i + 16;
                codes[i / 4] |= (hi - 7) << (2 * (i % 4));
            }
        }
        scales[2 * g..2 * g + 2].copy_from_slice(&d);
    }
    out[..4].copy_from_slice(&scales);
    out[4..].copy_from_slice(&codes);
    Ok(())
}

/// Reference dot product with f32 activations (the only kind 1bit's kernels feed this layout).
///
/// Order: for each block in order, each 128-group `g` in order: `s = 0`, then for each value `i`
/// of the group in index order `s = s + (t_i as f32) * x_i` (f32; the product is exact), then
/// `sum = sum + d_g * s`. 1bit's GPU kernel order is not public in source form here; this is
/// lowbit's fixed reference. Accumulation bound against an f64 reference:
/// `c = 2` in `|y - y_ref| <= c * n * 2^-24 * Σ|terms|`.
pub(crate) fn dot_f32(w: &[u8], x: &[f32]) -> Result<f32> {
    let mut sum = 0f32;
    let mut t = [0i8; 256];
    for (b, xb) in x.chunks_exact(256).enumerate() {
        let blk: BlockTernary68 = read_block(w, b);
        let s = blk.scales().map_err(|e| e.at(b * 68))?;
        blk.trits(&mut t).map_err(|e| e.at(b * 68))?;
        for g in 0..2 {
            let mut acc = 0f32;
            for (&v, &xi) in t[128 * g..128 * g + 128].iter().zip(&xb[128 * g..128 * g + 128]) {
                acc += v as f32 * xi;
            }
            sum += s[g] * acc;
        }
    }
    Ok(sum)
}

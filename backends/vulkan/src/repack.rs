//! Device layouts: canonical rows (already validated by the core's decoder) repacked into
//! structure-of-arrays word buffers, so kernels read whole u32 / vec2 / vec4 words. One
//! [`Layout`] per format says how many code words a block has and how wide its scale field is;
//! [`block`] splits one canonical block into the two.
//!
//! * `codes`: each block's code words, block after block, row after row. Mostly the canonical
//!   code bytes as little-endian words; re-ordered or re-coded (value for value) where noted in
//!   [`block`] (the kernels' comments give each layout).
//! * `scales`: each block's scale field (8, 16 or 32 bits), packed densely (blocks per word =
//!   32 / bits); for the hipfire formats then, from word `scale_off`, one f32 row scale per row.
//!
//! "Crumb words" (`crumb_word`) hold 16 2-bit codes with element 4j+L at bits 8L+2j, so one
//! shift and mask yields four codes as four bytes (ROCmFP2, ROCmFP3 magnitudes, PQ2_0).
//!
//! What must not live here: validation (the caller decodes every row with the core first),
//! Vulkan calls.

use lowbit_core::format::hipfire::RowHeader;
use lowbit_core::format::prism::BlockPtq1_0;
use lowbit_core::FormatId;

/// How a format's blocks are laid out on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The matmul kernel.
    pub shader: &'static str,
    /// Code words per block.
    pub code_words: usize,
    /// Bits of a block's scale field in `scales` (0: none; 8, 16 or 32).
    pub scale_bits: usize,
    /// Whether one f32 per row follows the block scales (hipfire rows).
    pub row_scale: bool,
}

const fn lay(shader: &'static str, code_words: usize, scale_bits: usize) -> Layout {
    Layout { shader, code_words, scale_bits, row_scale: false }
}

/// The device layout of a format, if the backend has kernels for it.
pub fn layout(format: FormatId) -> Option<Layout> {
    use FormatId as F;
    Some(match format {
        F::Q8_0 => lay("mm_q8_0", 8, 16),
        F::Q4_0 => lay("mm_q4_0", 4, 16),
        F::Q4_1 => lay("mm_q4_1", 4, 32),
        F::RocmFp2 => lay("mm_rocmfp2", 2, 16),
        F::RocmFp3 => lay("mm_rocmfp3", 3, 16),
        F::Mxfp4 => lay("mm_mxfp4", 4, 8),
        F::Nvfp4 => lay("mm_nvfp4", 8, 32),
        F::Q4K => lay("mm_q4_k", 36, 0),
        F::Q6K => lay("mm_q6_k", 52, 16),
        F::Tq2_0 => lay("mm_tq2_0", 16, 16),
        F::Pq2_0 => lay("mm_pq2_0", 8, 16),
        // PQ2_0's codes (trit + 1) and kernels (as the HIP backend does, layout.rs): 34 bytes
        // a block on the device against 28 canonical, but a decode of one shift and mask per
        // four weights instead of the base-3 digit arithmetic.
        F::Ptq1_0 => lay("mm_pq2_0", 8, 16),
        F::Hfp4G32 | F::Mfp4G32 => Layout { row_scale: true, ..lay("mm_hfp4", 4, 8) },
        F::Mfp4G32P => Layout { row_scale: true, ..lay("mm_mfp4p", 4, 8) },
        _ => return None,
    })
}

/// The format whose kernels (and kernel choices) a format's device layout uses: PTQ1_0 is
/// stored as PQ2_0 ([`layout`]), everything else as itself.
pub fn kernel_format(format: FormatId) -> FormatId {
    match format {
        FormatId::Ptq1_0 => FormatId::Pq2_0,
        f => f,
    }
}

/// Code words per block of a format with a device layout.
pub fn code_words(format: FormatId) -> Option<usize> {
    layout(format).map(|l| l.code_words)
}

/// Scale words of `rows` rows of `nb` blocks (per-row data included; at least one word, so the
/// buffer exists), and the word offset of the per-row data.
pub fn scale_words(format: FormatId, rows: usize, nb: usize) -> (usize, usize) {
    let Some(l) = layout(format) else { return (1, 0) };
    let blocks = 32usize.checked_div(l.scale_bits).map_or(0, |per| (rows * nb).div_ceil(per));
    if l.row_scale {
        (blocks + rows, blocks)
    } else {
        (blocks.max(1), 0)
    }
}

fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn u16_at(b: &[u8], i: usize) -> u32 {
    u32::from(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// The crumb word of 16 2-bit codes given in element order: element 4j+L at bits 8L+2j.
fn crumb_word(codes: impl Iterator<Item = u8>) -> u32 {
    let mut w = 0u32;
    for (k, c) in codes.take(16).enumerate() {
        let (j, l) = (k / 4, k % 4);
        w |= u32::from(c & 3) << (8 * l + 2 * j);
    }
    w
}

/// The crumb word of 4 canonical bytes that hold 16 2-bit codes (weight 4j+i at bits 2i of byte
/// j: ROCmFP2 halves, PQ2_0).
fn crumb_half(q: &[u8]) -> u32 {
    crumb_word((0..16).map(|k| q[k / 4] >> (2 * (k % 4))))
}

/// ROCmFP3's 32 3-bit codes (eight per three bytes, least significant bits first).
fn fp3_codes(qs: &[u8]) -> [u8; 32] {
    let mut c = [0u8; 32];
    for (g, b) in qs.chunks_exact(3).enumerate() {
        let bits = u32::from(b[0]) | (u32::from(b[1]) << 8) | (u32::from(b[2]) << 16);
        for i in 0..8 {
            c[8 * g + i] = ((bits >> (3 * i)) & 7) as u8;
        }
    }
    c
}

/// E2M1 code bytes (two codes each) as words, with code 8 (-0) rewritten to code 0: both read
/// as +0 (ggml's `kvalues_mxfp4`), and the kernels' decoder (`kv_bytes`) then needs no zero
/// test.
fn e2m1_words(codes: &mut Vec<u32>, qs: &[u8]) {
    let fix = |c: u8| if c == 8 { 0 } else { c };
    codes.extend(
        qs.chunks_exact(4).map(|w| {
            u32::from_le_bytes([0, 1, 2, 3].map(|i| fix(w[i] & 15) | (fix(w[i] >> 4) << 4)))
        }),
    );
}

/// HFP4-family E2M1 codes (16 bytes: byte k holds element 2k in its low nibble, 2k + 1 in its
/// high one) as the four words `mm_hfp4.wgsl` decodes: word i holds elements 8i..8i+7, half h
/// (bits 16h..16h+15) elements 8i + 2j + h for j = 0..3, with the magnitude bits (code & 7) of
/// element j at bits 3j..3j+2 of the half and its sign bit at bit 12 + j.
fn hfp4_words(qs: &[u8]) -> [u32; 4] {
    let mut out = [0u32; 4];
    for (i, w) in out.iter_mut().enumerate() {
        for j in 0..4 {
            let byte = qs[4 * i + j];
            for (h, code) in [byte & 15, byte >> 4].into_iter().enumerate() {
                let mag = u32::from(code & 7) << (16 * h + 3 * j);
                let sign = u32::from(code >> 3) << (16 * h + 12 + j);
                *w |= mag | sign;
            }
        }
    }
    out
}

/// Appends one canonical block's code words to `codes` and returns its scale field.
pub fn block(format: FormatId, blk: &[u8], codes: &mut Vec<u32>) -> u32 {
    let words = |codes: &mut Vec<u32>, b: &[u8]| codes.extend(b.chunks_exact(4).map(word));
    use FormatId as F;
    match format {
        F::Q8_0 | F::Q4_0 => {
            words(codes, &blk[2..]);
            u16_at(blk, 0)
        }
        F::Q4_1 => {
            words(codes, &blk[4..]);
            word(blk)
        }
        F::RocmFp2 => {
            codes.extend([crumb_half(&blk[0..4]), crumb_half(&blk[4..8])]);
            u16_at(blk, 8)
        }
        F::RocmFp3 => {
            // Magnitude indices of each half as crumb words, then the sign bits.
            let c = fp3_codes(&blk[..12]);
            codes.push(crumb_word(c[..16].iter().copied()));
            codes.push(crumb_word(c[16..].iter().copied()));
            codes.push(c.iter().enumerate().fold(0, |s, (i, &v)| s | (u32::from(v >> 2) << i)));
            u16_at(blk, 12)
        }
        F::Hfp4G32 | F::Mfp4G32 | F::Mfp4G32P => {
            codes.extend(hfp4_words(&blk[1..17]));
            u32::from(blk[0])
        }
        F::Mxfp4 => {
            e2m1_words(codes, &blk[1..17]);
            u32::from(blk[0])
        }
        F::Nvfp4 => {
            e2m1_words(codes, &blk[4..36]);
            word(blk)
        }
        F::Q4K => {
            words(codes, blk);
            0
        }
        F::Q6K => {
            words(codes, &blk[..208]);
            u16_at(blk, 208)
        }
        F::Tq2_0 => {
            words(codes, &blk[..64]);
            u16_at(blk, 64)
        }
        F::Pq2_0 => {
            codes.extend(blk[2..34].chunks_exact(4).map(crumb_half));
            u16_at(blk, 0)
        }
        F::Ptq1_0 => {
            // The trits (-1..1, the core's decoder) as PQ2_0's codes 0..2 in element order.
            let b: BlockPtq1_0 = bytemuck::pod_read_unaligned(blk);
            let mut t = [0i8; 128];
            b.trits(&mut t);
            codes.extend(t.chunks_exact(16).map(|h| crumb_word(h.iter().map(|&v| (v + 1) as u8))));
            u16_at(blk, 26)
        }
        _ => 0,
    }
}

/// Repacks `rows` validated canonical rows (`src`, `rb` bytes each, `nb` blocks each) of
/// `format` into `(codes, scales, scale_off)`.
pub fn repack(format: FormatId, src: &[u8], rb: usize, nb: usize) -> (Vec<u32>, Vec<u32>, u32) {
    let rows = src.len() / rb.max(1);
    let Some(l) = layout(format) else { return (Vec::new(), vec![0], 0) };
    let g = format.geometry();
    let mut codes = Vec::with_capacity(rows * nb * l.code_words);
    let (sw, scale_off) = scale_words(format, rows, nb);
    let mut scales = vec![0u32; sw];
    let per = 32usize.checked_div(l.scale_bits).unwrap_or(1);
    for (r, row) in src.chunks_exact(rb).enumerate() {
        for b in 0..nb {
            let off = g.row_header_bytes + b * g.block_bytes;
            let field = block(format, &row[off..off + g.block_bytes], &mut codes);
            let wi = r * nb + b;
            if l.scale_bits != 0 {
                scales[wi / per] |= field << (l.scale_bits * (wi % per));
            }
        }
        if l.row_scale {
            scales[scale_off + r] = RowHeader::read(row).row_scale().to_f32().to_bits();
        }
    }
    (codes, scales, scale_off as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crumb_half_puts_weight_4j_plus_l_at_bits_8l_plus_2j() {
        // Weight k of the half has code (k + k / 4) % 4.
        let code = |k: usize| ((k + k / 4) % 4) as u32;
        let mut q = [0u8; 4];
        for k in 0..16 {
            q[k / 4] |= (code(k) as u8) << (2 * (k % 4));
        }
        let w = crumb_half(&q);
        for j in 0..4 {
            let v = (w >> (2 * j)) & 0x0303_0303;
            for l in 0..4 {
                assert_eq!((v >> (8 * l)) & 3, code(4 * j + l));
            }
        }
    }

    /// The shader's decode of one word (`mm_hfp4.wgsl` `hfp4_word`), on the host: pair j as
    /// two f16s from one shift and mask, read as f32.
    fn shader_hfp4_word(w: u32) -> [f32; 8] {
        let mut out = [0f32; 8];
        for j in 0..4 {
            let mag = if j == 3 { w } else { w << (9 - 3 * j) } & 0x0E00_0E00;
            let sign = if j == 3 { w } else { w << (3 - j) } & 0x8000_8000;
            let bits = mag | sign;
            out[2 * j] = half::f16::from_bits(bits as u16).to_f32();
            out[2 * j + 1] = half::f16::from_bits((bits >> 16) as u16).to_f32();
        }
        out
    }

    #[test]
    fn hfp4_words_decode_to_the_core_e2m1_values_times_2_pow_minus_14() {
        use lowbit_core::scalar::e2m1_to_f32;
        // Every code at every position: byte k of block t holds codes (k + t) % 16 and
        // (3k + 5t) % 16.
        for t in 0..16usize {
            let qs: Vec<u8> =
                (0..16).map(|k| (((k + t) % 16) | (((3 * k + 5 * t) % 16) << 4)) as u8).collect();
            let words = hfp4_words(&qs);
            for (i, &w) in words.iter().enumerate() {
                let got = shader_hfp4_word(w);
                for (l, &g) in got.iter().enumerate() {
                    let e = 8 * i + l;
                    let code = (qs[e / 2] >> (4 * (e % 2))) & 15;
                    let want = e2m1_to_f32(code) * 2f32.powi(-14);
                    assert_eq!(g.to_bits(), want.to_bits(), "block {t} element {e} code {code}");
                }
            }
        }
    }

    #[test]
    fn hfp4_scales_hold_exponent_bytes_then_row_scales() {
        assert_eq!(scale_words(FormatId::Hfp4G32, 3, 5), (4 + 3, 4));
        assert_eq!(scale_words(FormatId::Q8_0, 3, 5), (8, 0));
        assert_eq!(scale_words(FormatId::Q4K, 3, 5), (1, 0));
    }

    #[test]
    fn fp3_codes_follow_the_rocmfpx_packing() {
        // b0 = c0 | c1 << 3 | (c2 & 3) << 6; b1 = c2 >> 2 | c3 << 1 | c4 << 4 | (c5 & 1) << 7;
        // b2 = c5 >> 1 | c6 << 2 | c7 << 5 (FORMATS.md section 3).
        let c = [1u8, 2, 7, 4, 5, 3, 6, 0];
        let b0 = c[0] | c[1] << 3 | (c[2] & 3) << 6;
        let b1 = c[2] >> 2 | c[3] << 1 | c[4] << 4 | (c[5] & 1) << 7;
        let b2 = c[5] >> 1 | c[6] << 2 | c[7] << 5;
        let mut qs = [0u8; 12];
        qs[3..6].copy_from_slice(&[b0, b1, b2]);
        assert_eq!(&fp3_codes(&qs)[8..16], &c);
    }

    #[test]
    fn e2m1_minus_zero_becomes_plus_zero_and_nothing_else_changes() {
        let qs: Vec<u8> = (0..=255u8).collect();
        let mut words = Vec::new();
        for chunk in qs.chunks_exact(16) {
            e2m1_words(&mut words, chunk);
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        for (b, (&q, &d)) in qs.iter().zip(&bytes).enumerate() {
            for sh in [0, 4] {
                let (c, got) = ((q >> sh) & 15, (d >> sh) & 15);
                assert_eq!(got, if c == 8 { 0 } else { c }, "byte {b} nibble {sh}");
            }
        }
    }
}

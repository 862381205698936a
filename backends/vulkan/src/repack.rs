//! Device layouts: canonical rows (already validated by the core's decoder) repacked into
//! structure-of-arrays word buffers, so kernels read whole u32 / vec2 / vec4 words:
//!
//! * `codes`: each block's code bytes as little-endian words, block after block, row after row
//!   (Q8_0: 8 words, Q4_0, Q4_1 and HFP4G32: 4, ROCmFP2: 2, re-ordered as described below).
//! * `scales`: each block's scale field, packed densely (Q8_0, Q4_0: the f16 bits, two blocks a
//!   word; Q4_1: d and m, one block a word; ROCmFP2: the two UE4M3-b8 bytes as one u16, two blocks a word; HFP4G32: the UE8M0
//!   byte, four blocks a word, then from word `scale_off` one f32 row scale per row).
//!
//! ROCmFP2 codes are re-ordered within each 16-weight half: canonical byte j holds weights
//! 4j..4j+3 (2 bits each, weight 4j+i at bits 2i); the device word puts weight 4j+L of the
//! half at bits 8L+2j, so one shift and mask yields four weights as four bytes.
//!
//! What must not live here: validation (the caller decodes every row with the core first),
//! Vulkan calls.

use lowbit_core::format::hipfire::RowHeader;
use lowbit_core::FormatId;

/// Code words per block of a format with a device layout.
pub fn code_words(format: FormatId) -> Option<usize> {
    Some(match format {
        FormatId::Q8_0 => 8,
        FormatId::Q4_0 | FormatId::Q4_1 | FormatId::Hfp4G32 => 4,
        FormatId::RocmFp2 => 2,
        _ => return None,
    })
}

/// Blocks whose scales share one scale word.
pub fn blocks_per_scale_word(format: FormatId) -> usize {
    match format {
        FormatId::Hfp4G32 => 4,
        FormatId::Q4_1 => 1,
        _ => 2,
    }
}

/// Scale words of `rows` rows of `nb` blocks (per-row data included), and the word offset of
/// the per-row data.
pub fn scale_words(format: FormatId, rows: usize, nb: usize) -> (usize, usize) {
    let blocks = (rows * nb).div_ceil(blocks_per_scale_word(format));
    if format == FormatId::Hfp4G32 {
        (blocks + rows, blocks)
    } else {
        (blocks, 0)
    }
}

fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// ROCmFP2: the device word of one 16-weight half (its 4 canonical code bytes).
fn fp2_half(q: &[u8]) -> u32 {
    let mut w = 0u32;
    for (j, &byte) in q.iter().enumerate().take(4) {
        for l in 0..4 {
            let code = u32::from((byte >> (2 * l)) & 3);
            w |= code << (8 * l + 2 * j);
        }
    }
    w
}

/// Repacks `rows` validated canonical rows (`src`, `rb` bytes each, `nb` blocks each) of
/// `format` into `(codes, scales, scale_off)`.
pub fn repack(format: FormatId, src: &[u8], rb: usize, nb: usize) -> (Vec<u32>, Vec<u32>, u32) {
    let rows = src.len() / rb.max(1);
    let cw = code_words(format).unwrap_or(0);
    let mut codes = Vec::with_capacity(rows * nb * cw);
    let (sw, scale_off) = scale_words(format, rows, nb);
    let mut scales = vec![0u32; sw];
    let per = blocks_per_scale_word(format);
    let bits = 32 / per;
    let put = |scales: &mut [u32], wi: usize, v: u32| {
        scales[wi / per] |= v << (bits * (wi % per));
    };
    for (r, row) in src.chunks_exact(rb).enumerate() {
        for b in 0..nb {
            let wi = r * nb + b;
            match format {
                FormatId::Q8_0 => {
                    let blk = &row[b * 34..b * 34 + 34];
                    put(&mut scales, wi, u32::from(u16::from_le_bytes([blk[0], blk[1]])));
                    codes.extend(blk[2..].chunks_exact(4).map(word));
                }
                FormatId::Q4_0 => {
                    let blk = &row[b * 18..b * 18 + 18];
                    put(&mut scales, wi, u32::from(u16::from_le_bytes([blk[0], blk[1]])));
                    codes.extend(blk[2..].chunks_exact(4).map(word));
                }
                FormatId::Q4_1 => {
                    let blk = &row[b * 20..b * 20 + 20];
                    put(&mut scales, wi, word(&blk[0..4]));
                    codes.extend(blk[4..].chunks_exact(4).map(word));
                }
                FormatId::RocmFp2 => {
                    let blk = &row[b * 10..b * 10 + 10];
                    put(&mut scales, wi, u32::from(blk[8]) | (u32::from(blk[9]) << 8));
                    codes.push(fp2_half(&blk[0..4]));
                    codes.push(fp2_half(&blk[4..8]));
                }
                FormatId::Hfp4G32 => {
                    let off = 16 + b * 17;
                    let blk = &row[off..off + 17];
                    put(&mut scales, wi, u32::from(blk[0]));
                    codes.extend(blk[1..].chunks_exact(4).map(word));
                }
                _ => {}
            }
        }
        if format == FormatId::Hfp4G32 {
            scales[scale_off + r] = RowHeader::read(row).row_scale().to_f32().to_bits();
        }
    }
    (codes, scales, scale_off as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp2_half_puts_weight_4j_plus_l_at_bits_8l_plus_2j() {
        // Weight k of the half has code (k + k / 4) % 4.
        let code = |k: usize| ((k + k / 4) % 4) as u32;
        let mut q = [0u8; 4];
        for k in 0..16 {
            q[k / 4] |= (code(k) as u8) << (2 * (k % 4));
        }
        let w = fp2_half(&q);
        for j in 0..4 {
            let v = (w >> (2 * j)) & 0x0303_0303;
            for l in 0..4 {
                assert_eq!((v >> (8 * l)) & 3, code(4 * j + l));
            }
        }
    }

    #[test]
    fn hfp4_scales_hold_exponent_bytes_then_row_scales() {
        assert_eq!(scale_words(FormatId::Hfp4G32, 3, 5), (4 + 3, 4));
        assert_eq!(scale_words(FormatId::Q8_0, 3, 5), (8, 0));
    }
}

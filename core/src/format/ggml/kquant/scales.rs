//! Unpacking of the 12-byte packed 6-bit sub-block scales shared by the K-quants.
//!
//! * Q4_K/Q5_K: eight 6-bit scales and eight 6-bit mins (ggml `get_scale_min_k4` in
//!   ggml-org/llama.cpp `ggml/src/ggml-quants.c`; gguf-py `Q4_K.get_scale_min`).
//! * Q3_K: sixteen 6-bit scales with an offset of 32 (ggml `dequantize_row_q3_K`, the `kmask1`/
//!   `kmask2` shuffle; gguf-py `Q3_K.dequantize_blocks`).
//!
//! Every byte pattern is valid; nothing here can fail.

/// Scale and min of sub-block `j` (0..8) of a Q4_K/Q5_K `scales` field, each 0..=63.
///
/// Bytes 0..4 hold the low 6 bits of the scales of sub-blocks 0..4 (their top 2 bits are the high
/// bits of the scales of sub-blocks 4..8); bytes 4..8 the same for the mins; bytes 8..12 hold the
/// low nibbles of the scales (low half) and mins (high half) of sub-blocks 4..8.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    let j = j & 7;
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        let sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (sc, m)
    }
}

/// All eight (scale, min) pairs of a Q4_K/Q5_K block, as two arrays.
#[inline]
pub fn scales_mins_k4(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = get_scale_min_k4(j, q);
    }
    (sc, m)
}

/// The sixteen signed scales (-32..=31) of a Q3_K block's `scales` field.
///
/// Scale `j` has its low nibble in byte `j % 8` (low half for j < 8, high half otherwise) and its
/// two high bits in byte `8 + j % 4` at bit `2 * (j / 4)`; the stored 6-bit value minus 32.
#[inline]
pub fn q3k_scales(q: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { q[j] & 0x0F } else { q[j - 8] >> 4 };
        let high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        // low | high << 4 is 0..=63, so the subtraction stays in i8.
        *o = ((low | (high << 4)) as i8) - 32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k4_extremes() {
        assert_eq!(scales_mins_k4(&[0; 12]), ([0; 8], [0; 8]));
        assert_eq!(scales_mins_k4(&[0xFF; 12]), ([63; 8], [63; 8]));
        // Only the high bits of byte 0 set: sub-block 4's scale gets 0b11 << 4.
        let mut q = [0u8; 12];
        q[0] = 0xC0;
        assert_eq!(get_scale_min_k4(4, &q), (48, 0));
        assert_eq!(get_scale_min_k4(0, &q), (0, 0));
        q[11] = 0xA5;
        assert_eq!(get_scale_min_k4(7, &q), (5, 10));
    }

    #[test]
    fn q3k_extremes() {
        assert_eq!(q3k_scales(&[0; 12]), [-32; 16]);
        assert_eq!(q3k_scales(&[0xFF; 12]), [31; 16]);
        let mut q = [0u8; 12];
        q[11] = 0b1100_0000; // high bits of scale 15
        q[7] = 0xF0; // low nibble of scale 15
        let s = q3k_scales(&q);
        assert_eq!(s[15], 63 - 32);
        assert!(s[..15].iter().all(|&x| x == -32));
    }
}

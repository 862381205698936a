// q4_k_fn.wgsl: Q4_K's packed 6-bit scales and mins (ggml get_scale_min_k4), for mm_q4_k.wgsl
// and mm_q4_kt.wgsl. h = the block's first vec4 (d | dmin << 16, then the 12 scale bytes).
// What must not live here: bindings or entry points.

// Byte i (< 12) of the packed scales (h.y, h.z, h.w).
fn k4_byte(h: vec4<u32>, i: u32) -> u32 {
    return (h[1u + i / 4u] >> ((i % 4u) * 8u)) & 0xFFu;
}

// (scale, min) of sub-block j: ggml get_scale_min_k4.
fn k4_scale_min(h: vec4<u32>, j: u32) -> vec2<i32> {
    if (j < 4u) {
        return vec2<i32>(i32(k4_byte(h, j) & 63u), i32(k4_byte(h, j + 4u) & 63u));
    }
    let lo = k4_byte(h, j + 4u);
    let sc = (lo & 0x0Fu) | ((k4_byte(h, j - 4u) >> 6u) << 4u);
    let mn = (lo >> 4u) | ((k4_byte(h, j) >> 6u) << 4u);
    return vec2<i32>(i32(sc), i32(mn));
}

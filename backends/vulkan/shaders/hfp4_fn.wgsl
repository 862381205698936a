// hfp4_fn.wgsl: the HFP4 family's table-free code word decode and block exponent (layout and
// method: mm_hfp4.wgsl's comment), for mm_hfp4.wgsl and mm_hfp4t.wgsl.
// What must not live here: bindings or entry points.

// Elements 8i..8i+7 of a code word (mm_hfp4.wgsl's layout) times 2^-14, as two vec4 (elements 0..3
// and 4..7 of the word).
fn hfp4_word(w: u32) -> array<vec4<f32>, 2> {
    let p0 = unpack2x16float(((w << 9u) & 0x0E000E00u) | ((w << 3u) & 0x80008000u));
    let p1 = unpack2x16float(((w << 6u) & 0x0E000E00u) | ((w << 2u) & 0x80008000u));
    let p2 = unpack2x16float(((w << 3u) & 0x0E000E00u) | ((w << 1u) & 0x80008000u));
    let p3 = unpack2x16float(w & 0x8E008E00u);
    return array<vec4<f32>, 2>(vec4<f32>(p0, p1), vec4<f32>(p2, p3));
}

// The exponent byte of block wi.
fn hfp4_exp(wi: u32) -> u32 {
    return (w_scales[wi >> 2u] >> ((wi & 3u) * 8u)) & 0xFFu;
}

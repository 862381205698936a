// HFP4G32 / MFP4G32 / MFP4G32P weights x f32 activations, tiled 8-column kernel (mm_tile.wgsl
// + act_f32t.wgsl; build.rs appends hfp4_fn.wgsl and factor_ue8m0.wgsl or factor_e4m3.wgsl;
// the other variants are mm_hfp4.wgsl's, whose comment has the device layout and method).
// Units are code words (8 elements, four a block): each is decoded once (hfp4_word, times
// 2^-14) for all columns; per unit and column s = sum(v' x), term = (s * 2^14) * block_factor
// (exact rescaling unless s is an f32 subnormal); y = sum of terms * row scale (row_factor,
// once per thread's partial).
@group(0) @binding(0) var<storage, read> w_words: array<u32>;

struct WRaw {
    c: u32, // the code word
    e: u32, // the word of block exponents that holds this block's
}

// wu = row * units + unit: code word wu.
fn fetch_w(wu: u32) -> WRaw {
    return WRaw(w_words[wu], w_scales[wu >> 4u]);
}

struct WBlock {
    lo: vec4<f32>,
    hi: vec4<f32>,
    f: f32, // block_factor
}

fn decode_w(raw: WRaw, wu: u32) -> WBlock {
    let v = hfp4_word(raw.c);
    return WBlock(v[0], v[1], block_factor((raw.e >> (((wu >> 2u) & 3u) * 8u)) & 0xFFu));
}

fn block_dot(w: WBlock, a: F8, wu: u32, col: u32, u: u32) -> f32 {
    return ((dot(w.lo, a.lo) + dot(w.hi, a.hi)) * 16384.0) * w.f;
}

// The row scale (one f32 a row after the block exponents).
fn row_factor(row: u32) -> f32 {
    return bitcast<f32>(w_scales[pc.scale_off + row]);
}

// HFP4G32 / MFP4G32 / MFP4G32P weights x f32 activations, tiled 8-column kernel (mm_tile.wgsl
// + act_f32t.wgsl; build.rs appends hfp4_fn.wgsl and factor_ue8m0.wgsl or factor_e4m3.wgsl;
// the other variants are mm_hfp4.wgsl's, whose comment has the device layout and method).
// Units are halves of a block (16 elements, two code words): each is decoded once
// (hfp4_word, times 2^-14) for all columns; per unit and column s = sum(v' x),
// term = (s * 2^14) * block_factor (exact rescaling unless s is an f32 subnormal);
// y = sum of terms * row scale (row_factor, once per thread's partial).
@group(0) @binding(0) var<storage, read> w_words: array<vec2<u32>>;

struct WRaw {
    c: vec2<u32>, // the code words
    e: u32,       // the word of block exponents that holds this block's
}

// wu = row * units + unit: code words 2 wu, 2 wu + 1.
fn fetch_w(wu: u32) -> WRaw {
    return WRaw(w_words[wu], w_scales[wu >> 3u]);
}

struct WBlock {
    v: array<vec4<f32>, 4>,
    f: f32, // block_factor
}

fn decode_w(raw: WRaw, wu: u32) -> WBlock {
    let a = hfp4_word(raw.c.x);
    let b = hfp4_word(raw.c.y);
    return WBlock(array<vec4<f32>, 4>(a[0], a[1], b[0], b[1]),
        block_factor((raw.e >> (((wu >> 1u) & 3u) * 8u)) & 0xFFu));
}

fn block_dot(w: WBlock, a: F16x, wu: u32, col: u32, u: u32) -> f32 {
    let s = (dot(w.v[0], a.v[0]) + dot(w.v[1], a.v[1]))
        + (dot(w.v[2], a.v[2]) + dot(w.v[3], a.v[3]));
    return (s * 16384.0) * w.f;
}

// The row scale (one f32 a row after the block exponents).
fn row_factor(row: u32) -> f32 {
    return bitcast<f32>(w_scales[pc.scale_off + row]);
}

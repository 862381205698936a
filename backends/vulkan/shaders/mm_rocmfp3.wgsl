// ROCmFP3 weights x Q8_0 activations. Device layout (repack.rs): codes = three words per block:
// the magnitude indices (0..3, levels 0, 1, 2, 4) of each 16-weight half as a crumb word
// (common.wgsl `crumbs`), then the sign bits (bit i = sign of weight i); w_scales = the two
// UE4M3-b8 scale bytes as one u16, two blocks a word. Per half: the signed level bytes dotted
// with the activations (exact), term = d_a * (s0 * sum0 + s1 * sum1), as for ROCmFP2.
@group(0) @binding(0) var<storage, read> w_codes: array<u32>;

const PREFETCH = true;

// One column: decode every block of a step first (mm_body.wgsl; decoding at use measured
// 0-4% slower for this format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = false;

const APB = 1u;

// The block decoded once when loaded (signed level bytes of each half), then reused for every
// column.
struct WBlock {
    lo: vec4<u32>, // weights 0..15: component j holds weights 4j..4j+3
    hi: vec4<u32>, // weights 16..31
    s0: f32, // the half scales divided by 128 (ue4m3_b8_pair_div128; block_dot puts it back)
    s1: f32,
}

// Signed level bytes of one half: mags = its crumb word, sg = its 16 sign bits. Levels 0, 1,
// 2, 4 by magnitude index; negation (v ^ 0xFF) + 1 only where the level is not 0 (no carry).
fn fp3_half(mags: u32, sg: u32) -> vec4<u32> {
    let ones = vec4<u32>(0x01010101u);
    let v = crumbs(mags);
    let lv = v + (v & (v >> vec4<u32>(1u)) & ones); // 3 -> 4
    let nib = (vec4<u32>(sg) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    let nz = (v | (v >> vec4<u32>(1u))) & ones;
    let s = ((nib * 0x00204081u) & ones) & nz; // sign bit of weight 4j+L at byte L
    return (lv ^ (s * 0xFFu)) + s;
}

struct WRaw {
    q: vec3<u32>, // the two crumb words, the sign word
    s: u32,       // the scale word (this block's u16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(vec3<u32>(w_codes[3u * wi], w_codes[3u * wi + 1u], w_codes[3u * wi + 2u]),
        w_scales[wi >> 1u]);
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let e = raw.s >> ((wi & 1u) * 16u);
    let sc = ue4m3_b8_pair_div128(e);
    return WBlock(fp3_half(raw.q.x, raw.q.z), fp3_half(raw.q.y, raw.q.z >> 16u), sc.x, sc.y);
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (a.m.x * 128.0) * (w.s0 * i2f(dot16(w.lo, a.lo)) + w.s1 * i2f(dot16(w.hi, a.hi)));
}

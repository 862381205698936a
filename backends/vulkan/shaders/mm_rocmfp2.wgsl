// ROCmFP2 weights x Q8_0 activations. Device layout (repack.rs): codes = two crumb words per
// block (common.wgsl `crumbs`), one per 16-weight half; w_scales = the two UE4M3-b8 scale bytes
// of each block as one u16, two blocks per word. Levels -4, -1, 1, 4 of code c are
// 3c - (c >> 1) - 4, so per half, with the bytes t = 3c - (c >> 1) (0..8) and A = sum(a):
// sum(level a) = dot(t, a) - 4A (exact, one dp4a per four weights).
// term = d_a * (s0 * sum0 + s1 * sum1) (f32). Each block is decoded to its t bytes once when
// loaded and reused for every column.
@group(0) @binding(0) var<storage, read> w_codes: array<vec2<u32>>;

const PREFETCH = true;

// One column: decode each block right where it is used (mm_body.wgsl; 1-4% faster for this
// format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = true;

const APB = 1u;

struct WRaw {
    q: vec2<u32>, // the crumb words of the two halves
    s: u32,       // the scale word (this block's u16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[wi], w_scales[wi >> 1u]);
}

struct WBlock {
    lo: vec4<u32>, // t bytes of weights 0..15 (component j: weights 4j..4j+3)
    hi: vec4<u32>, // weights 16..31
    s0: f32, // the half scales divided by 128 (ue4m3_b8_pair_div128; block_dot puts it back)
    s1: f32,
}

// t of the 16 codes of a crumb word. Fields 0 and 2 (and 1 and 3) are split into nibbles
// first, so t = 3c - (c >> 1) is formed for eight codes per operation (t <= 8: no carry
// between nibbles), then the nibbles are spread into bytes.
fn fp2_t(w: u32) -> vec4<u32> {
    let c = vec2<u32>(w, w >> 2u) & vec2<u32>(0x33333333u);
    let t = c * 3u - ((c >> vec2<u32>(1u)) & vec2<u32>(0x11111111u));
    let m = vec2<u32>(0x0F0F0F0Fu);
    let lo = t & m;
    let hi = (t >> vec2<u32>(4u)) & m;
    return vec4<u32>(lo.x, lo.y, hi.x, hi.y);
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let e = raw.s >> ((wi & 1u) * 16u);
    let sc = ue4m3_b8_pair_div128(e);
    return WBlock(fp2_t(raw.q.x), fp2_t(raw.q.y), sc.x, sc.y);
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    let h0 = i2f_minus(dot16(w.lo, a.lo), 4.0 * a.m.z);
    let h1 = i2f_minus(dot16(w.hi, a.hi), 4.0 * (a.m.y - a.m.z));
    return (a.m.x * 128.0) * (w.s0 * h0 + w.s1 * h1);
}

// ROCmFP2 weights x Q8_0 activations. Device layout (repack.rs): codes = two crumb words per
// block (common.wgsl `crumbs`), one per 16-weight half; w_scales = the two UE4M3-b8 scale bytes
// of each block as one u16, two blocks per word. Levels -4, -1, 1, 4 of code c are
// 3c - (c >> 1) - 4, so per half, with the bytes t = 3c - (c >> 1) (0..8, no carry between
// bytes) and A = sum(a): sum(level a) = dot(t, a) - 4A (exact, one dp4a per four weights).
// term = d_a * (s0 * sum0 + s1 * sum1) (f32). Each block is decoded to its t bytes once when
// loaded and reused for every column.
@group(0) @binding(0) var<storage, read> w_codes: array<vec2<u32>>;

const APB = 1u;

struct WBlock {
    lo: vec4<u32>, // t bytes of weights 0..15 (component j: weights 4j..4j+3)
    hi: vec4<u32>, // weights 16..31
    s0: f32,
    s1: f32,
}

fn fp2_t(w: u32) -> vec4<u32> {
    let v = crumbs(w);
    return v * 3u - ((v >> vec4<u32>(1u)) & vec4<u32>(0x01010101u));
}

fn load_w(wi: u32) -> WBlock {
    let q = w_codes[wi];
    let e = (w_scales[wi >> 1u] >> ((wi & 1u) * 16u)) & 0xFFFFu;
    return WBlock(fp2_t(q.x), fp2_t(q.y), ue4m3_b8(e & 0xFFu), ue4m3_b8(e >> 8u));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    let h0 = dot16(w.lo, a.lo) - 4 * i32(a.m.z);
    let h1 = dot16(w.hi, a.hi) - 4 * i32(a.m.y - a.m.z);
    return a.m.x * (w.s0 * f32(h0) + w.s1 * f32(h1));
}

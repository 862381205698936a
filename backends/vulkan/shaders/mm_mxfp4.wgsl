// MXFP4 weights x Q8_0 activations (ggml vec_dot_mxfp4_q8_0). Device layout (repack.rs): codes
// = the block's 16 nibble bytes as one vec4 (Q4_0's order: word t low nibbles are elements
// 4t..4t+3, high nibbles 16+4t..16+4t+3); w_scales = the UE8M0 bytes, four blocks a word.
// isum = sum(kvalues_mxfp4[code] * q_a) (exact), term = (d_a * 2^(e - 128)) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column: decode every block of a step first (mm_body.wgsl; decoding at use measured
// 0-4% slower for this format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = false;

const APB = 1u;

// The block decoded once when loaded (signed kvalues bytes), then reused for every column.
struct WBlock {
    lo: vec4<u32>, // elements 4t..4t+3 in word t
    hi: vec4<u32>, // elements 16+4t..16+4t+3
    d: f32,
}

struct WRaw {
    q: vec4<u32>,
    s: u32, // the scale word (this block's byte and three neighbours')
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[wi], w_scales[wi >> 2u]);
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let e = (raw.s >> ((wi & 3u) * 8u)) & 0xFFu;
    let v = kv_nibbles(raw.q);
    return WBlock(v.lo, v.hi, e8m0_half(e));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (a.m.x * w.d) * i2f(dot16(w.lo, a.lo) + dot16(w.hi, a.hi));
}

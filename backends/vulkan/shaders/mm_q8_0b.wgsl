// Q8_0 weights x Q8_0 activations on mm_body.wgsl, for the fused 1-column kernel `mm_q8_0_f`
// (the plain kernels are mm_q8_0.wgsl's). Device layout and arithmetic as mm_q8_0.wgsl:
// isum = sum of 32 int8 products (exact), term = (d_w * d_a) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column (the opt-in fused kernel): decode every block of a step first (mm_body.wgsl;
// decoding at use was not measured for it).
const DECODE_AT_USE = false;
const APB = 1u;

struct WRaw {
    q0: vec4<u32>,
    q1: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[2u * wi], w_codes[2u * wi + 1u], w_scales[wi >> 1u]);
}

struct WBlock {
    q0: vec4<u32>,
    q1: vec4<u32>,
    d: f32,
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    return WBlock(raw.q0, raw.q1, f16_of(raw.s, wi));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

// |isum| <= 32 * 128 * 128 < 2^22: i2f is exact.
fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (w.d * a.m.x) * i2f(dot16(w.q0, a.lo) + dot16(w.q1, a.hi));
}

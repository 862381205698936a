// Q4_0 weights x Q8_0 activations on mm_body.wgsl, for the fused 1-column kernel `mm_q4_0_f`
// (the plain kernels are mm_q4_0.wgsl's). Device layout and arithmetic as mm_q4_0.wgsl:
// isum = sum(q * a) - 8 * sum(a) (exact), term = (d_w * d_a) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column (the opt-in fused kernel): decode every block of a step first (mm_body.wgsl;
// decoding at use was not measured for it).
const DECODE_AT_USE = false;
const APB = 1u;

struct WRaw {
    q: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[wi], w_scales[wi >> 1u]);
}

struct WBlock {
    lo: vec4<u32>, // elements 4t..4t+3 in word t (nibbles as bytes 0..15)
    hi: vec4<u32>, // elements 16+4t..16+4t+3
    d: f32,
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let m = vec4<u32>(0x0F0F0F0Fu);
    return WBlock(raw.q & m, (raw.q >> vec4<u32>(4u)) & m, f16_of(raw.s, wi));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

// |isum| <= 32 * 15 * 128 + 8 * 32 * 128 < 2^22: exact.
fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (w.d * a.m.x) * i2f_minus(dot16(w.lo, a.lo) + dot16(w.hi, a.hi), 8.0 * a.m.y);
}

// Q4_1 weights x Q8_1 activations on the mm_body.wgsl interface, for the tiled 8-column
// kernel `mm_q4_1_t` (mm_tile.wgsl + act_q8t.wgsl; the plain kernels are mm_q4_1.wgsl's).
// Device layout and arithmetic as mm_q4_1.wgsl: codes = the block's 16 nibble bytes as one
// vec4, w_scales = one word per block (d low half, m high half, f16); isum = sum(q * a)
// (exact: |isum| <= 32 * 15 * 128 < 2^16), term = (d_w * d_a) * isum + m_w * s_a (ggml's
// vec_dot_q4_1_q8_1 expression; s_a = the activation block's m.w).
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

// One activation block a weight block (act_q8t.wgsl).
const APB = 1u;

struct WRaw {
    q: vec4<u32>,
    s: u32, // the block's scale word (d, m)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[wi], w_scales[wi]);
}

struct WBlock {
    lo: vec4<u32>, // elements 4t..4t+3 in word t (nibbles as bytes 0..15)
    hi: vec4<u32>, // elements 16+4t..16+4t+3
    d: f32,
    m: f32,
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let k = vec4<u32>(0x0F0F0F0Fu);
    return WBlock(raw.q & k, (raw.q >> vec4<u32>(4u)) & k, f16_of(raw.s, 0u), f16_of(raw.s, 1u));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (w.d * a.m.x) * f32(dot16(w.lo, a.lo) + dot16(w.hi, a.hi)) + w.m * a.m.w;
}

// MXFP4 weights x Q8_0 activations (ggml vec_dot_mxfp4_q8_0). Device layout (repack.rs): codes
// = the block's 16 nibble bytes as one vec4 (Q4_0's order: word t low nibbles are elements
// 4t..4t+3, high nibbles 16+4t..16+4t+3); w_scales = the UE8M0 bytes, four blocks a word.
// isum = sum(kvalues_mxfp4[code] * q_a) (exact), term = (d_a * 2^(e - 128)) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const APB = 1u;

// The block decoded once when loaded (signed kvalues bytes), then reused for every column.
struct WBlock {
    lo: vec4<u32>, // elements 4t..4t+3 in word t
    hi: vec4<u32>, // elements 16+4t..16+4t+3
    d: f32,
}

fn load_w(wi: u32) -> WBlock {
    let e = (w_scales[wi >> 2u] >> ((wi & 3u) * 8u)) & 0xFFu;
    let q = w_codes[wi];
    let m = vec4<u32>(0x0F0F0F0Fu);
    return WBlock(kv_bytes(q & m), kv_bytes((q >> vec4<u32>(4u)) & m), e8m0_half(e));
}

alias ABlock = Q8;

fn load_a(col: u32, b: u32) -> Q8 {
    return q8_block(col, b, 0u);
}

fn block_dot(w: WBlock, a: Q8, wi: u32, col: u32, b: u32) -> f32 {
    return (a.m.x * w.d) * f32(dot16(w.lo, a.lo) + dot16(w.hi, a.hi));
}

// NVFP4 weights x Q8_0 activations (ggml vec_dot_nvfp4_q8_0). Device layout (repack.rs): codes
// = the block's 32 code bytes as two vec4; sub-block s (16 elements) is words 2s, 2s+1: low
// nibbles are elements 16s+0..7, high nibbles 16s+8..15. w_scales = the four UE4M3 bytes, one
// word per block. Per sub-block: isum = sum(kvalues_mxfp4[code] * q_a) (exact),
// term = (d_a * ue4m3_half(d_s)) * isum, sub-blocks in order.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const APB = 2u;

struct WBlock {
    q0: vec4<u32>,
    q1: vec4<u32>,
    d: u32,
}

fn load_w(wi: u32) -> WBlock {
    return WBlock(w_codes[2u * wi], w_codes[2u * wi + 1u], w_scales[wi]);
}

struct ABlock {
    a0: Q8,
    a1: Q8,
}

fn load_a(col: u32, b: u32) -> ABlock {
    return ABlock(q8_block(col, b, 0u), q8_block(col, b, 1u));
}

// The two sub-blocks of one activation block: q = their four code words.
fn nv_pair(q: vec4<u32>, a: Q8, d: u32) -> f32 {
    let m = vec4<u32>(0x0F0F0F0Fu);
    let lo = kv_bytes(vec4<u32>(q.x, q.y, q.x >> 4u, q.y >> 4u) & m);
    let hi = kv_bytes(vec4<u32>(q.z, q.w, q.z >> 4u, q.w >> 4u) & m);
    // ggml's UE4M3 decode halves the scale: ue4m3_b8 is exactly that (bit 7 ignored).
    let t0 = (a.m.x * ue4m3_b8(d & 0x7Fu)) * f32(dot16(lo, a.lo));
    return t0 + (a.m.x * ue4m3_b8((d >> 8u) & 0x7Fu)) * f32(dot16(hi, a.hi));
}

fn block_dot(w: WBlock, a: ABlock, wi: u32, col: u32, b: u32) -> f32 {
    return nv_pair(w.q0, a.a0, w.d) + nv_pair(w.q1, a.a1, w.d >> 16u);
}

// NVFP4 weights x Q8_0 activations (ggml vec_dot_nvfp4_q8_0). Device layout (repack.rs): codes
// = the block's 32 code bytes as two vec4; sub-block s (16 elements) is words 2s, 2s+1: low
// nibbles are elements 16s+0..7, high nibbles 16s+8..15. w_scales = the four UE4M3 bytes, one
// word per block. Per sub-block: isum = sum(kvalues_mxfp4[code] * q_a) (exact),
// term = (d_a * ue4m3_half(d_s)) * isum, sub-blocks in order.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column: decode every block of a step first (mm_body.wgsl; decoding at use measured
// 0-4% slower for this format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = false;

const APB = 2u;

struct WRaw {
    q0: vec4<u32>,
    q1: vec4<u32>,
    d: u32,
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[2u * wi], w_codes[2u * wi + 1u], w_scales[wi]);
}

// The block decoded once when loaded (signed kvalues bytes of its four sub-blocks, component
// j of sub-block s: elements 16s + 4j .. 16s + 4j + 3), then reused for every column.
struct WBlock {
    v: array<vec4<u32>, 4>,
    d: u32,
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    let a = kv_nibbles(raw.q0);
    let b = kv_nibbles(raw.q1);
    return WBlock(array<vec4<u32>, 4>(vec4<u32>(a.lo.x, a.lo.y, a.hi.x, a.hi.y),
        vec4<u32>(a.lo.z, a.lo.w, a.hi.z, a.hi.w), vec4<u32>(b.lo.x, b.lo.y, b.hi.x, b.hi.y),
        vec4<u32>(b.lo.z, b.lo.w, b.hi.z, b.hi.w)), raw.d);
}

struct ABlock {
    a0: Q8,
    a1: Q8,
}

fn load_a(col: u32, b: u32) -> ABlock {
    return ABlock(q8_block(col, b, 0u), q8_block(col, b, 1u));
}

// One activation block against sub-blocks lo and hi (scale bytes d, d >> 8).
fn nv_pair(lo: vec4<u32>, hi: vec4<u32>, a: Q8, d: u32) -> f32 {
    // ggml's UE4M3 decode halves the scale: ue4m3_b8 is exactly that (bit 7 ignored).
    let t0 = (a.m.x * ue4m3_b8(d & 0x7Fu)) * i2f(dot16(lo, a.lo));
    return t0 + (a.m.x * ue4m3_b8((d >> 8u) & 0x7Fu)) * i2f(dot16(hi, a.hi));
}

fn block_dot(w: WBlock, a: ABlock, wi: u32, col: u32, b: u32) -> f32 {
    return nv_pair(w.v[0], w.v[1], a.a0, w.d) + nv_pair(w.v[2], w.v[3], a.a1, w.d >> 16u);
}

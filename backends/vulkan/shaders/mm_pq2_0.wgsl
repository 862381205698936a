// PQ2_0 weights x Q8_0 activations (Prism). Device layout (repack.rs): codes = eight crumb
// words per 128-weight block (common.wgsl `crumbs`; codes 0..3, weight = (code - 1) * d);
// w_scales = the f16 d, two blocks a word. Per activation block k: isum_k = sum(code * q) -
// sum(q) (exact); term = d_w * sum_k(d_a_k * isum_k), as Prism's vec_dot.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column: decode each block right where it is used (mm_body.wgsl; 1-4% faster for this
// format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = true;

const APB = 4u;

struct WBlock {
    q0: vec4<u32>,
    q1: vec4<u32>,
    d: f32,
}

struct WRaw {
    q0: vec4<u32>,
    q1: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[2u * wi], w_codes[2u * wi + 1u], w_scales[wi >> 1u]);
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    return WBlock(raw.q0, raw.q1, f16_of(raw.s, wi));
}

alias ABlock = array<Q8, 4>;

fn load_a(col: u32, b: u32) -> ABlock {
    return ABlock(q8_block(col, b, 0u), q8_block(col, b, 1u), q8_block(col, b, 2u),
        q8_block(col, b, 3u));
}

fn pq2_part(w0: u32, w1: u32, a: Q8) -> f32 {
    return a.m.x * i2f_minus(dot16(crumbs(w0), a.lo) + dot16(crumbs(w1), a.hi), a.m.y);
}

fn block_dot(w: WBlock, a: ABlock, wi: u32, col: u32, b: u32) -> f32 {
    var s = pq2_part(w.q0.x, w.q0.y, a[0]);
    s += pq2_part(w.q0.z, w.q0.w, a[1]);
    s += pq2_part(w.q1.x, w.q1.y, a[2]);
    s += pq2_part(w.q1.z, w.q1.w, a[3]);
    return w.d * s;
}

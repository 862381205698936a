// TQ2_0 weights x Q8_K activations (ggml vec_dot_tq2_0_q8_K). Device layout (repack.rs): codes
// = the 64 qs bytes as 4 vec4 (element 128h + 32l + m at bits 2l of byte 32h + m, codes 0..2,
// weight (code - 1) * d); w_scales = the f16 d, two blocks a word.
// isum = sum(code * q_a) - sum(q_a) (exact); term = isum * (d_a * d).
// The whole block is fetched into registers one step ahead (mm_body) and kept there for every
// column; its 2-bit fields are extracted per column.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = true;

// One column: decode every block of a step first (mm_body.wgsl; decoding at use measured
// 0-4% slower for this format on an H200, docs/BENCHMARKS.md session 8).
const DECODE_AT_USE = false;

struct WRaw {
    q: array<vec4<u32>, 4>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(array<vec4<u32>, 4>(w_codes[4u * wi], w_codes[4u * wi + 1u],
        w_codes[4u * wi + 2u], w_codes[4u * wi + 3u]), w_scales[wi >> 1u]);
}

struct WBlock {
    q: array<vec4<u32>, 4>,
    d: f32,
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    return WBlock(raw.q, f16_of(raw.s, wi));
}

fn block_dot(w: WBlock, a: Q8K, wi: u32, col: u32, b: u32) -> f32 {
    let t = vec4<u32>(0x03030303u);
    var isum = -a.sum;
    for (var h = 0u; h < 2u; h++) {
        let q0 = w.q[2u * h];
        let q1 = w.q[2u * h + 1u];
        for (var l = 0u; l < 4u; l++) {
            let sh = vec4<u32>(2u * l);
            let v = 8u * h + 2u * l;
            isum += dot16((q0 >> sh) & t, q8k_words(col, b, v))
                + dot16((q1 >> sh) & t, q8k_words(col, b, v + 1u));
        }
    }
    return i2f(isum) * (a.d * w.d);
}

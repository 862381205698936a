// Q6_K weights x Q8_K activations (ggml vec_dot_q6_K_q8_K). Device layout (repack.rs): codes =
// 13 vec4 per block: ql (8 vec4), qh (4 vec4), the 16 int8 scales (1 vec4); w_scales = the f16
// d, two blocks a word. Element 128n + 32k + l (l < 32) has its low nibble in ql[64n + l + 32 *
// (k & 1)] (high nibble for k >= 2) and its top two bits at 2k in qh[32n + l]; value
// (q - 32) * d * scale[8n + l / 16 + 2k]. isum = sum_g scale_g * (sum(q * q_a) - 32 * bsum_g)
// (exact); term = (d_a * d) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = false;

// No PREFETCH: the decode-at-use path (mm_body.wgsl) does not apply.
const DECODE_AT_USE = false;

struct WBlock {
    sc: vec4<u32>,
    d: f32,
}

struct WRaw {
    sc: vec4<u32>,
    s: u32, // the scale word (this block's f16 and its neighbour's)
}

fn fetch_w(wi: u32) -> WRaw {
    return WRaw(w_codes[13u * wi + 12u], w_scales[wi >> 1u]);
}

fn decode_w(raw: WRaw, wi: u32) -> WBlock {
    return WBlock(raw.sc, f16_of(raw.s, wi));
}

// The signed scale g (< 16).
fn q6_scale(sc: vec4<u32>, g: u32) -> i32 {
    return (i32(sc[g / 4u] << (24u - 8u * (g % 4u)))) >> 24u;
}

fn block_dot(w: WBlock, a: Q8K, wi: u32, col: u32, b: u32) -> f32 {
    let f = vec4<u32>(0x0F0F0F0Fu);
    let t = vec4<u32>(0x03030303u);
    var isum = 0;
    for (var n = 0u; n < 2u; n++) {
        for (var i = 0u; i < 2u; i++) {
            // l = 16 i .. 16 i + 15: one vec4 of ql for k = 0, 2 (W), k = 1, 3 (W2), of qh (H).
            let wl = w_codes[13u * wi + 4u * n + i];
            let w2 = w_codes[13u * wi + 4u * n + 2u + i];
            let h = w_codes[13u * wi + 8u + 2u * n + i];
            let q = array<vec4<u32>, 4>(
                (wl & f) | ((h & t) << vec4<u32>(4u)),
                (w2 & f) | (((h >> vec4<u32>(2u)) & t) << vec4<u32>(4u)),
                ((wl >> vec4<u32>(4u)) & f) | (((h >> vec4<u32>(4u)) & t) << vec4<u32>(4u)),
                ((w2 >> vec4<u32>(4u)) & f) | (((h >> vec4<u32>(6u)) & t) << vec4<u32>(4u)));
            for (var k = 0u; k < 4u; k++) {
                let g = 8u * n + 2u * k + i; // 16-element group (128n + 32k + 16i) / 16
                let s = dot16(q[k], q8k_words(col, b, g)) - 32 * q8k_bsum(a, g);
                isum += q6_scale(w.sc, 8u * n + i + 2u * k) * s;
            }
        }
    }
    return (a.d * w.d) * f32(isum);
}

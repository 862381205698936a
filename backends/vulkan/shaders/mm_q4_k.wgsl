// Q4_K weights x Q8_K activations (ggml vec_dot_q4_K_q8_K). Device layout (repack.rs): codes =
// the canonical 144-byte block as 9 vec4 (d | dmin << 16, the 12 packed scale bytes, then qs:
// bytes 32c..32c+31 hold sub-block 2c in the low nibbles and 2c+1 in the high ones); no scales.
// isum = sum_j sc_j * sum(q * q_a) and msum = sum_j m_j * (bsum of sub-block j) (exact);
// term = (d_a * d) * isum - (d_a * dmin) * msum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;

const PREFETCH = false;

// No PREFETCH: the decode-at-use path (mm_body.wgsl) does not apply.
const DECODE_AT_USE = false;

alias WBlock = vec4<u32>;
alias WRaw = vec4<u32>;

fn fetch_w(wi: u32) -> vec4<u32> {
    return w_codes[9u * wi];
}

fn decode_w(raw: vec4<u32>, wi: u32) -> vec4<u32> {
    return raw;
}

fn block_dot(w: vec4<u32>, a: Q8K, wi: u32, col: u32, b: u32) -> f32 {
    let m = vec4<u32>(0x0F0F0F0Fu);
    var isum = 0;
    var msum = 0;
    for (var c = 0u; c < 4u; c++) {
        let q0 = w_codes[9u * wi + 1u + 2u * c];
        let q1 = w_codes[9u * wi + 2u + 2u * c];
        let lo = dot16(q0 & m, q8k_words(col, b, 4u * c)) + dot16(q1 & m, q8k_words(col, b, 4u * c + 1u));
        let hi = dot16((q0 >> vec4<u32>(4u)) & m, q8k_words(col, b, 4u * c + 2u))
            + dot16((q1 >> vec4<u32>(4u)) & m, q8k_words(col, b, 4u * c + 3u));
        let s0 = k4_scale_min(w, 2u * c);
        let s1 = k4_scale_min(w, 2u * c + 1u);
        isum += s0.x * lo + s1.x * hi;
        msum += s0.y * (q8k_bsum(a, 4u * c) + q8k_bsum(a, 4u * c + 1u))
            + s1.y * (q8k_bsum(a, 4u * c + 2u) + q8k_bsum(a, 4u * c + 3u));
    }
    return (a.d * f16_of(w.x, 0u)) * f32(isum) - (a.d * f16_of(w.x, 1u)) * f32(msum);
}

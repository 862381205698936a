// q8_0_fn.wgsl: one Q8_0 / Q8_1 activation block quantized byte for byte as the core's encoder
// (ggml quantize_row_q8_0_ref): d = amax / 127, id = 1 / d, q = roundf(x * id), d stored as
// f16. Divisions are exact (div_rne); a block whose f32 scale would be subnormal (largest
// magnitude below 127 * 2^-126) stores q = 0 (its products are 0 either way). The host has
// rejected non-finite inputs and scales that overflow f16. Used by quant_q8_0.wgsl (its own
// dispatch) and act_q8f.wgsl (inside the matmul); the file that includes it declares `x`, the
// f32 activations as vec4.

// The block's 8 code words (lo: words 0..3, hi: 4..7) and its metadata (d as stored, sum q,
// sum of the first half, Q8_1's s = f16(sum q * d) with the unrounded f32 d, as ggml
// quantize_row_q8_1_ref).
struct Q8Quant {
    lo: vec4<u32>,
    hi: vec4<u32>,
    m: vec4<f32>,
}

// Quantizes block g (elements 32g .. 32g + 31 of x).
fn q8_0_quantize(g: u32) -> Q8Quant {
    var v: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        v[i] = x[g * 8u + i];
        let a = abs(v[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    var dh = 0.0;
    var id = 0.0;
    var d = 0.0;
    // amax >= 127 * 2^-126: d is a normal f32 and 1/d cannot overflow. Below, d_f16 = 0 and
    // Q8_1's s = 0 in the core encoder too, so the block's products are 0 either way.
    if (amax >= ldexp(127.0, -126)) {
        d = div_rne(amax, 127.0);
        dh = f16_round(d);
        id = div_rne(1.0, d);
    }
    var sums = vec2<i32>(0, 0);
    var words: array<u32, 8>;
    for (var i = 0u; i < 8u; i++) {
        let p = v[i] * id;
        let q = vec4<i32>(round_away(p.x), round_away(p.y), round_away(p.z), round_away(p.w));
        sums[i / 4u] += q.x + q.y + q.z + q.w;
        words[i] = (u32(q.x) & 0xFFu) | ((u32(q.y) & 0xFFu) << 8u) | ((u32(q.z) & 0xFFu) << 16u)
            | ((u32(q.w) & 0xFFu) << 24u);
    }
    let total = f32(sums.x + sums.y);
    let sd = total * d;
    let s8 = select(f16_round(sd), -f16_round(-sd), sd < 0.0);
    return Q8Quant(vec4<u32>(words[0], words[1], words[2], words[3]),
        vec4<u32>(words[4], words[5], words[6], words[7]), vec4<f32>(dh, total, f32(sums.x), s8));
}

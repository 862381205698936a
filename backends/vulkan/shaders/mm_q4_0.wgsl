// Q4_0 weights x Q8_0 activations. Device layout: codes = the block's 16 nibble bytes as one
// vec4 (word t: low nibbles are elements 4t..4t+3, high nibbles 16+4t..16+4t+3); w_scales =
// f16 scales, two per word. isum = sum(q * a) - 8 * sum(a) (the nibbles 0..15 are valid int8
// bytes; the activation block sum comes from the quantizer), acc += (d_w * d_a) * isum.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let row0 = (wgl * (WG / TPR) + lid / TPR) * RPT;
    var acc: array<f32, 64>;
    let m = vec4<u32>(0x0F0F0F0Fu);
    for (var b0 = (lid % TPR) * BPT; b0 < pc.nb; b0 += TPR * BPT) {
        var w: array<vec4<u32>, 8>;
        var d: array<f32, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                let wi = min(row0 + r, pc.rows - 1u) * pc.nb + b;
                w[j * RPT + r] = w_codes[wi];
                d[j * RPT + r] = f16_of(w_scales[wi >> 1u], wi);
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let b = b0 + j;
            let valid = b < pc.nb;
            for (var c = 0u; c < NCOLS; c++) {
                let ab = (pc.act_col + min(c, pc.n - 1u)) * pc.nb + min(b, pc.nb - 1u);
                let a0 = act_q[2u * ab];
                let a1 = act_q[2u * ab + 1u];
                let am = act_meta[ab];
                let off = 8 * i32(am.y);
                for (var r = 0u; r < RPT; r++) {
                    let q = w[j * RPT + r];
                    let s = dot16(q & m, a0) + dot16((q >> vec4<u32>(4u)) & m, a1) - off;
                    acc[r * NCOLS + c] += select(0.0, (d[j * RPT + r] * am.x) * f32(s), valid);
                }
            }
        }
    }
    reduce_store(lid, wgl, &acc);
}

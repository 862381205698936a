// Q8_0 weights x Q8_0 activations. Device layout (repack.rs): codes = 8 words (two vec4) per
// block, row after row; w_scales = the blocks' f16 scales, two per word. Per block:
// isum = sum of 32 int8 products (exact), acc += (d_w * d_a) * isum (f32).
// Each thread loads BPT consecutive blocks of RPT rows, then reuses them for every column.
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
    for (var b0 = (lid % TPR) * BPT; b0 < pc.nb; b0 += TPR * BPT) {
        var w: array<vec4<u32>, 16>;
        var d: array<f32, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                let wi = min(row0 + r, pc.rows - 1u) * pc.nb + b;
                w[2u * (j * RPT + r)] = w_codes[2u * wi];
                w[2u * (j * RPT + r) + 1u] = w_codes[2u * wi + 1u];
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
                let da = act_meta[ab].x;
                for (var r = 0u; r < RPT; r++) {
                    let q = j * RPT + r;
                    let s = dot16(w[2u * q], a0) + dot16(w[2u * q + 1u], a1);
                    acc[r * NCOLS + c] += select(0.0, (d[q] * da) * f32(s), valid);
                }
            }
        }
    }
    reduce_store(lid, wgl, &acc);
}

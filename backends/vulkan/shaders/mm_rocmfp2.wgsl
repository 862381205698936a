// ROCmFP2 weights x Q8_0 activations. Device layout (repack.rs): codes = two crumb words per
// block (common.wgsl `crumbs`), one per 16-weight half; w_scales = the two UE4M3-b8 scale bytes
// of each block as one u16, two blocks per word. Levels -4, -1, 1, 4 of code c are
// 3c - (c >> 1) - 4, so per half, with the bytes t = 3c - (c >> 1) (0..8, no carry between
// bytes) and A = sum(a): sum(level a) = dot(t, a) - 4A (exact, one dp4a per four weights).
// acc += d_a * (s0 * sum0 + s1 * sum1) (f32).
@group(0) @binding(0) var<storage, read> w_codes: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

fn half_sum(w: u32, a: vec4<u32>, asum: f32) -> i32 {
    let v = crumbs(w);
    let t = v * 3u - ((v >> vec4<u32>(1u)) & vec4<u32>(0x01010101u));
    return dot16(t, a) - 4 * i32(asum);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let row0 = (wgl * (WG / TPR) + lid / TPR) * RPT;
    var acc: array<f32, 64>;
    for (var b0 = (lid % TPR) * BPT; b0 < pc.nb; b0 += TPR * BPT) {
        var w: array<vec2<u32>, 8>;
        var e: array<u32, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                let wi = min(row0 + r, pc.rows - 1u) * pc.nb + b;
                w[j * RPT + r] = w_codes[wi];
                e[j * RPT + r] = (w_scales[wi >> 1u] >> ((wi & 1u) * 16u)) & 0xFFFFu;
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let b = b0 + j;
            let valid = b < pc.nb;
            var s0: array<f32, 8>;
            var s1: array<f32, 8>;
            for (var r = 0u; r < RPT; r++) {
                s0[r] = ue4m3_b8(e[j * RPT + r] & 0xFFu);
                s1[r] = ue4m3_b8(e[j * RPT + r] >> 8u);
            }
            for (var c = 0u; c < NCOLS; c++) {
                let ab = (pc.act_col + min(c, pc.n - 1u)) * pc.nb + min(b, pc.nb - 1u);
                let a0 = act_q[2u * ab];
                let a1 = act_q[2u * ab + 1u];
                let am = act_meta[ab];
                for (var r = 0u; r < RPT; r++) {
                    let q = w[j * RPT + r];
                    let h0 = half_sum(q.x, a0, am.z);
                    let h1 = half_sum(q.y, a1, am.y - am.z);
                    let v = am.x * (s0[r] * f32(h0) + s1[r] * f32(h1));
                    acc[r * NCOLS + c] += select(0.0, v, valid);
                }
            }
        }
    }
    reduce_store(lid, wgl, &acc);
}

// Activation quantization to Q8_0, byte for byte the core's encoder (ggml
// quantize_row_q8_0_ref): d = amax / 127, id = 1 / d, q = roundf(x * id), d stored as f16.
// One thread per (column, block). Divisions are exact (div_rne); a block whose f16 scale is 0
// stores q = 0 (its products are 0 either way). The host has rejected non-finite inputs and
// scales that overflow f16. Params: pc.rows = blocks in all, pc.nb = blocks per column.
// Outputs: act_q (8 words per block), act_meta (d as stored, sum q, sum of each half).
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * nwg.x * WG;
    if (g >= pc.rows) {
        return;
    }
    var v: array<vec4<f32>, 8>;
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        v[i] = x[g * 8u + i];
        let a = abs(v[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    var dh = 0.0;
    var id = 0.0;
    if (amax >= 1.1754944e-38) {
        let d = div_rne(amax, 127.0);
        dh = f16_round(d);
        if (dh != 0.0) {
            id = div_rne(1.0, d);
        }
    }
    var sums = vec2<i32>(0, 0);
    for (var i = 0u; i < 8u; i++) {
        let p = v[i] * id;
        let q = vec4<i32>(round_away(p.x), round_away(p.y), round_away(p.z), round_away(p.w));
        sums[i / 4u] += q.x + q.y + q.z + q.w;
        let word = (u32(q.x) & 0xFFu) | ((u32(q.y) & 0xFFu) << 8u) | ((u32(q.z) & 0xFFu) << 16u)
            | ((u32(q.w) & 0xFFu) << 24u);
        act_q[(g * 8u + i) / 4u][i % 4u] = word;
    }
    act_meta[g] = vec4<f32>(dh, f32(sums.x + sums.y), f32(sums.x), f32(sums.y));
}

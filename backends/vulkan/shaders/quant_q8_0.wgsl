// Activation quantization to Q8_0, byte for byte the core's encoder (ggml
// quantize_row_q8_0_ref): d = amax / 127, id = 1 / d, q = roundf(x * id), d stored as f16.
// One thread per (column, block). Divisions are exact (div_rne); a block whose f32 scale
// would be subnormal (largest magnitude below 127 * 2^-126) stores q = 0 (its products are 0
// either way). The host has rejected non-finite inputs and
// scales that overflow f16. Params: pc.rows = blocks in all, pc.nb = blocks per column.
// Outputs: act_q (8 words per block), act_meta (d as stored, sum q, sum of the first half,
// and Q8_1's s = f16(sum q * d) with the unrounded f32 d, as ggml quantize_row_q8_1_ref).
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
    var d = 0.0;
    // amax >= 127 * 2^-126: d is a normal f32 and 1/d cannot overflow. Below, d_f16 = 0 and
    // Q8_1's s = 0 in the core encoder too, so the block's products are 0 either way.
    if (amax >= ldexp(127.0, -126)) {
        d = div_rne(amax, 127.0);
        dh = f16_round(d);
        id = div_rne(1.0, d);
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
    let total = f32(sums.x + sums.y);
    let sd = total * d;
    let s8 = select(f16_round(sd), -f16_round(-sd), sd < 0.0);
    act_meta[g] = vec4<f32>(dh, total, f32(sums.x), s8);
}

// Activation quantization to Q8_0 / Q8_1 in its own dispatch, eight threads per block (each
// one vec4 of the block's 32 values), 32 blocks per workgroup of 256: the same bytes as
// quant_q8_0.wgsl (q8_0_fn.wgsl's arithmetic: d = div_rne(amax, 127), id = div_rne(1, d),
// q = roundf(x * id), the metadata (d as stored, sum q, sum of the first 16 q, Q8_1's s)),
// with the block's largest magnitude and sums gathered through workgroup memory, so a call's
// quantization waits for one load per thread instead of eight in a row.
// Params: pc.rows = blocks in all. Outputs: act_q (8 words per block), act_meta (one vec4 per
// block).
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> act_q: array<u32>;
@group(0) @binding(3) var<storage, read_write> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

var<workgroup> part_max: array<f32, 256>;
var<workgroup> part_sum: array<i32, 256>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let g = wg_linear(wgid) * (WG / 8u) + lid / 8u;
    let valid = g < pc.rows;
    let first = lid & ~7u;
    var v = vec4<f32>(0.0);
    if (valid) {
        v = x[g * 8u + lid % 8u];
    }
    let a = abs(v);
    part_max[lid] = max(max(a.x, a.y), max(a.z, a.w));
    workgroupBarrier();
    var amax = 0.0;
    for (var i = 0u; i < 8u; i++) {
        amax = max(amax, part_max[first + i]);
    }
    var dh = 0.0;
    var id = 0.0;
    var d = 0.0;
    // As q8_0_fn.wgsl: below 127 * 2^-126 the block stores d = 0 and q = 0.
    if (amax >= ldexp(127.0, -126)) {
        d = div_rne(amax, 127.0);
        dh = f16_round(d);
        id = div_rne(1.0, d);
    }
    let p = v * id;
    let q = vec4<i32>(round_away(p.x), round_away(p.y), round_away(p.z), round_away(p.w));
    part_sum[lid] = q.x + q.y + q.z + q.w;
    if (valid) {
        act_q[g * 8u + lid % 8u] = (u32(q.x) & 0xFFu) | ((u32(q.y) & 0xFFu) << 8u)
            | ((u32(q.z) & 0xFFu) << 16u) | ((u32(q.w) & 0xFFu) << 24u);
    }
    workgroupBarrier();
    if (valid && lid % 8u == 0u) {
        var lo = 0;
        var hi = 0;
        for (var i = 0u; i < 4u; i++) {
            lo += part_sum[first + i];
            hi += part_sum[first + 4u + i];
        }
        let total = f32(lo + hi);
        let sd = total * d;
        let s8 = select(f16_round(sd), -f16_round(-sd), sd < 0.0);
        act_meta[g] = vec4<f32>(dh, total, f32(lo), s8);
    }
}

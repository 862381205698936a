// Activation quantization to Q8_K, byte for byte the core's encoder (ggml
// quantize_row_q8_K_ref): max = the signed value of the first element with the largest |x|,
// iscale = -127 / max, q = min(127, nearest_int(iscale * x)) (ties to even), d = 1 / iscale.
// One workgroup of 64 threads per 256-element block, four elements a thread. Divisions are
// exact (div_rne); iscale overflowing to inf (|max| below about 3.7e-37) gives q = 0 and
// d = -0 * sign(max), as the core. Known gaps: |max| below 127 * 2^-126 makes d an f32
// subnormal, which is stored as 0 here; on a device that flushes f32 subnormals, subnormal
// inputs in a block with |max| below 2^-118 may round to a different q (the core keeps them).
// The host has rejected non-finite inputs.
// Params: pc.rows = blocks in all. Outputs: act_q (64 words per block), act_meta (5 vec4 per
// block: (d, sum q, 0, 0), then the 16 bsums as f32).
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> act_q: array<u32>;
@group(0) @binding(3) var<storage, read_write> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

// (|x|, index) of each thread's first largest element, then of the block.
var<workgroup> best: array<vec2<f32>, 64>;
var<workgroup> quarter: array<i32, 64>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let g = wg_linear(wgid);
    if (g >= pc.rows) {
        return;
    }
    let v = x[g * 64u + lid];
    var bi = 0u;
    for (var i = 1u; i < 4u; i++) {
        if (abs(v[i]) > abs(v[bi])) {
            bi = i;
        }
    }
    best[lid] = vec2<f32>(abs(v[bi]), f32(lid * 4u + bi));
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let o = best[lid + s];
            let m = best[lid];
            if (o.x > m.x || (o.x == m.x && o.y < m.y)) {
                best[lid] = o;
            }
        }
        workgroupBarrier();
    }
    let top = best[0];
    let amax = top.x;
    let mx = x[g * 64u + u32(top.y) / 4u][u32(top.y) % 4u];
    // d is built as bits: its sign is the opposite of max's, also for d = -0 (a compiler may
    // treat a literal -0.0 as +0.0).
    var dbits = 0u;
    var q = vec4<i32>(0);
    if (amax != 0.0) {
        let neg = mx < 0.0; // iscale has the opposite sign of max
        let sign = select(0x80000000u, 0u, neg);
        var mag = bitcast<f32>(0x7F800000u);
        if (amax >= ldexp(1.0, -126)) {
            mag = div_rne(127.0, amax);
        }
        dbits = sign;
        if (mag < bitcast<f32>(0x7F800000u)) {
            if (mag <= ldexp(1.0, 126)) {
                dbits = sign | bitcast<u32>(div_rne(1.0, mag));
            }
            let r = round(v * bitcast<f32>(sign | bitcast<u32>(mag))); // v * iscale
            q = min(vec4<i32>(r), vec4<i32>(127));
        }
    }
    act_q[g * 64u + lid] = (u32(q.x) & 0xFFu) | ((u32(q.y) & 0xFFu) << 8u)
        | ((u32(q.z) & 0xFFu) << 16u) | ((u32(q.w) & 0xFFu) << 24u);
    quarter[lid] = q.x + q.y + q.z + q.w;
    workgroupBarrier();
    if (lid < 16u) {
        let s = quarter[4u * lid] + quarter[4u * lid + 1u] + quarter[4u * lid + 2u]
            + quarter[4u * lid + 3u];
        act_meta[g * 5u + 1u + lid / 4u][lid % 4u] = f32(s);
    }
    if (lid == 0u) {
        var total = 0;
        for (var i = 0u; i < 64u; i++) {
            total += quarter[i];
        }
        act_meta[g * 5u] = vec4<f32>(bitcast<f32>(dbits), f32(total), 0.0, 0.0);
    }
}

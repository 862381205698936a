// Activation quantization to Q8_0 / Q8_1 in its own dispatch (q8_0_fn.wgsl does the work):
// one thread per (column, block). Params: pc.rows = blocks in all, pc.nb = blocks per column.
// Outputs: act_q (8 words per block), act_meta (see q8_0_fn.wgsl).
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
    let q = q8_0_quantize(g);
    act_q[2u * g] = q.lo;
    act_q[2u * g + 1u] = q.hi;
    act_meta[g] = q.m;
}

// sum_parts.wgsl: the second dispatch of a K-split tiled matmul (mm_tile.wgsl with BPT > 1):
// y = the sum, in split order, of each output's partial sums. One thread an output.
// Params: pc.rows = outputs (columns x rows), pc.nb = rows (y's column stride), pc.n = splits,
// pc.act_col = the first column. part: ((column, split) major, pc.nb rows each).
@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = gid.x + gid.y * nwg.x * WG;
    if (g >= pc.rows) {
        return;
    }
    let col = pc.act_col + g / pc.nb;
    let row = g % pc.nb;
    var s = 0.0;
    for (var k = 0u; k < pc.n; k++) {
        s += part[(col * pc.n + k) * pc.nb + row];
    }
    y[col * pc.nb + row] = s;
}

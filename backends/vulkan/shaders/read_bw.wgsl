// Streaming-read bandwidth probe: every thread reads vec4<u32> words at a grid stride (each
// warp-sized group of threads touches consecutive 16-byte words) and folds them with xor; one
// word per workgroup is written so the reads cannot be removed. Params: pc.rows = vec4 words
// to read, pc.nb = total threads of the dispatch.
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    var acc = vec4<u32>(0u);
    for (var i = wgl * WG + lid; i < pc.rows; i += pc.nb) {
        acc ^= src[i];
    }
    let v = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (v == 0x9E3779B9u) {
        y[wgl] = f32(v);
    }
}

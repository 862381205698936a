// HFP4G32 / MFP4G32 / MFP4G32P weights x f32 activations (MFP4: rotated by fwht256.wgsl
// first); build.rs appends factor_ue8m0.wgsl or factor_e4m3.wgsl (`block_factor`). Device layout (repack.rs): codes = the block's 16 nibble
// bytes as one vec4 (byte k: element 2k in the low nibble, 2k+1 in the high one); w_scales =
// the blocks' UE8M0 bytes, four per word, then (from word pc.scale_off) one f32 row scale per
// row. Per block: s = sum(E2M1[code] * x), acc += s * block_factor(e); y = acc * row_scale.
// E2M1 pairs come from a 256-entry table (byte -> two values) built in workgroup memory.
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> act_f: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

var<workgroup> lut: array<vec2<f32>, 256>;

fn e2m1(c: u32) -> f32 {
    let e = (c >> 1u) & 3u;
    let m = c & 1u;
    var v = select(bitcast<f32>(((e + 126u) << 23u) | (m << 22u)), f32(m) * 0.5, e == 0u);
    return select(v, -v, (c & 8u) != 0u);
}

fn block_dot(q: u32, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
    let p0 = lut[q & 0xFFu];
    let p1 = lut[(q >> 8u) & 0xFFu];
    let p2 = lut[(q >> 16u) & 0xFFu];
    let p3 = lut[q >> 24u];
    return dot(vec4<f32>(p0, p1), x0) + dot(vec4<f32>(p2, p3), x1);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    for (var i = lid; i < 256u; i += WG) {
        lut[i] = vec2<f32>(e2m1(i & 15u), e2m1(i >> 4u));
    }
    workgroupBarrier();
    let wgl = wg_linear(wgid);
    let row0 = (wgl * (WG / TPR) + lid / TPR) * RPT;
    var acc: array<f32, 64>;
    let kv = pc.nb * 8u; // vec4s per activation column
    for (var b0 = (lid % TPR) * BPT; b0 < pc.nb; b0 += TPR * BPT) {
        var w: array<vec4<u32>, 8>;
        var f: array<f32, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                let wi = min(row0 + r, pc.rows - 1u) * pc.nb + b;
                w[j * RPT + r] = w_codes[wi];
                let e = (w_scales[wi >> 2u] >> ((wi & 3u) * 8u)) & 0xFFu;
                f[j * RPT + r] = block_factor(e);
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let b = b0 + j;
            let valid = b < pc.nb;
            for (var c = 0u; c < NCOLS; c++) {
                let base = (pc.act_col + min(c, pc.n - 1u)) * kv + min(b, pc.nb - 1u) * 8u;
                var xs: array<vec4<f32>, 8>;
                for (var i = 0u; i < 8u; i++) {
                    xs[i] = act_f[base + i];
                }
                for (var r = 0u; r < RPT; r++) {
                    let q = w[j * RPT + r];
                    let s = block_dot(q.x, xs[0], xs[1]) + block_dot(q.y, xs[2], xs[3])
                        + block_dot(q.z, xs[4], xs[5]) + block_dot(q.w, xs[6], xs[7]);
                    acc[r * NCOLS + c] += select(0.0, s * f[j * RPT + r], valid);
                }
            }
        }
    }
    // The row scale multiplies each thread's partial (one rounding per partial, as for the
    // block factor); partials are then summed.
    for (var r = 0u; r < RPT; r++) {
        let rs = bitcast<f32>(w_scales[pc.scale_off + min(row0 + r, pc.rows - 1u)]);
        for (var c = 0u; c < NCOLS; c++) {
            acc[r * NCOLS + c] *= rs;
        }
    }
    reduce_store(lid, wgl, &acc);
}

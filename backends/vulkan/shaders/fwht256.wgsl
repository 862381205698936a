// hipfire's forward FWHT-256 with seeded signs, in place on the activations (MFP4G32,
// MFP4G32P), bit for bit the core's `rotate::fwht256`: x *= signs1; butterflies with strides
// 1, 2, ..., 128, each pair (a, b) becoming (a + b, a - b), stage by stage; x *= 0.0625 *
// signs2. Every step is one IEEE f32 operation, so the bits equal the CPU's. One workgroup of
// 256 threads per 256-element segment. Params: pc.rows = segments in all.
// Sign bits (LSB first, 1 = +1): FORMATS.md section 4 (hipfire gen_fwht_signs, seeds 42 and
// 1042), as little-endian words.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> act_q: array<u32>;
@group(0) @binding(3) var<storage, read_write> act_meta: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

const SIGNS1 = array<u32, 8>(0x7E1F436Fu, 0x7DCCA4DBu, 0x656132F7u, 0x3461EA31u, 0x3F8FF8ACu,
    0x57873038u, 0x3F939D88u, 0x408E25A3u);
const SIGNS2 = array<u32, 8>(0x615EB361u, 0x8EAB84A4u, 0x2481C03Bu, 0x511CC661u, 0x3AD419B8u,
    0xBEF3EC93u, 0xEE3A4271u, 0x390FAFE9u);

var<workgroup> seg: array<f32, 256>;

fn sign_of(bits: u32, i: u32) -> f32 {
    return select(-1.0, 1.0, ((bits >> (i & 31u)) & 1u) == 1u);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let g = wg_linear(wgid);
    if (g >= pc.rows) {
        return;
    }
    let s1 = SIGNS1;
    let s2 = SIGNS2;
    seg[lid] = x[g * 256u + lid] * sign_of(s1[lid / 32u], lid);
    workgroupBarrier();
    for (var h = 1u; h < 256u; h <<= 1u) {
        let lo = (lid & h) == 0u;
        let a = seg[select(lid - h, lid, lo)];
        let b = seg[select(lid, lid + h, lo)];
        workgroupBarrier();
        seg[lid] = select(a - b, a + b, lo);
        workgroupBarrier();
    }
    x[g * 256u + lid] = seg[lid] * (0.0625 * sign_of(s2[lid / 32u], lid));
}

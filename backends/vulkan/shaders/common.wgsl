// common.wgsl: declarations shared by every kernel; build.rs appends this file to each shader.
// What lives here: the push-constant block, bindings every matmul uses, and pure helper
// functions (integer dot products, scale decoders, exact division and rounding). No entry
// points.

// Push constants of every matmul dispatch (one per weight segment).
struct MatmulParams {
    rows: u32,      // rows of this segment
    nb: u32,        // blocks per row
    n: u32,         // activation columns of this dispatch (1..=NCOLS)
    y_off: u32,     // first output row of this segment
    y_stride: u32,  // output rows of the whole matrix (column stride of y)
    act_col: u32,   // first activation column of this dispatch
    scale_off: u32, // word offset of per-row data inside w_scales (formats that have it)
    wg_x: u32,      // workgroups along x (dispatches wider than the limit fold into y)
}

var<push_constant> pc: MatmulParams;

// Threads of the workgroup, threads that share one row, rows each thread accumulates,
// consecutive blocks each thread loads per step, and activation columns per dispatch:
// resolved by build.rs per variant (RPT * NCOLS <= 64, BPT * RPT <= 8).
override WG: u32 = 256u;
override TPR: u32 = 32u;
override RPT: u32 = 1u;
override BPT: u32 = 1u;
override NCOLS: u32 = 1u;

// The reduction buffer: WG * 16 partial sums, used in passes of 16 outputs per thread.
var<workgroup> red: array<f32, 4096>;

// Linear workgroup index of a dispatch folded into x and y.
fn wg_linear(wgid: vec3<u32>) -> u32 {
    return wgid.x + wgid.y * pc.wg_x;
}

// Sum of the four int8 x int8 products of two packed words, 4 times.
fn dot16(w: vec4<u32>, a: vec4<u32>) -> i32 {
    return dot4I8Packed(w.x, a.x) + dot4I8Packed(w.y, a.y) + dot4I8Packed(w.z, a.z)
        + dot4I8Packed(w.w, a.w);
}

// The f16 at half-word index i of a u32 array read as f16 pairs (little-endian). Finite
// values only (upload rejects NaN and infinite scales); exact.
fn f16_of(word: u32, i: u32) -> f32 {
    let h = (word >> ((i & 1u) * 16u)) & 0xFFFFu;
    let e = (h >> 10u) & 31u;
    let m = h & 0x3FFu;
    var v = f32(m) * 5.9604645e-8; // subnormal: m * 2^-24
    if (e != 0u) {
        v = bitcast<f32>(((e + 112u) << 23u) | (m << 13u));
    }
    return select(v, -v, (h & 0x8000u) != 0u);
}

// UE4M3 with exponent bias 8 (ROCmFPX scales): 4 exponent bits, 3 mantissa bits, no sign;
// exponent 0 is subnormal (m/8 * 2^-7). The caller has validated the byte (< 0x7F) at upload.
fn ue4m3_b8(b: u32) -> f32 {
    let e = (b >> 3u) & 15u;
    let m = b & 7u;
    let normal = bitcast<f32>(((e + 119u) << 23u) | (m << 20u));
    return select(f32(m) * 0.0009765625, normal, e != 0u); // subnormal: m * 2^-10
}

// a / b correctly rounded (nearest, ties to even) for positive normal a, b with a quotient
// that is normal or overflows (+inf): a restoring division of the 24-bit significands. GPU division is not correctly
// rounded (Vulkan allows 2.5 ulp), and the activation bytes must equal the core encoder's.
fn div_rne(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    var e = i32(ua >> 23u) - i32(ub >> 23u) + 127;
    var r = (ua & 0x7FFFFFu) | 0x800000u;
    let mb = (ub & 0x7FFFFFu) | 0x800000u;
    if (r < mb) {
        r = r << 1u;
        e = e - 1;
    }
    var q = 0u;
    for (var i = 0u; i < 25u; i++) {
        q = q << 1u;
        if (r >= mb) {
            r = r - mb;
            q = q | 1u;
        }
        r = r << 1u;
    }
    let round_bit = q & 1u;
    q = q >> 1u;
    if (round_bit == 1u && (r != 0u || (q & 1u) == 1u)) {
        q = q + 1u;
    }
    if (q == 0x1000000u) {
        q = q >> 1u;
        e = e + 1;
    }
    if (e > 254) {
        return bitcast<f32>(0x7F800000u); // overflow: +inf, as IEEE division rounds it
    }
    return bitcast<f32>((u32(e) << 23u) | (q & 0x7FFFFFu));
}

// The f32 value of x rounded to f16 (nearest, ties to even), for finite x >= 0 below f16's
// overflow threshold (the host rejects larger scales first). Integer arithmetic only.
fn f16_round(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    let e = i32(u >> 23u) - 127;
    if (e < -25 || u == 0u) {
        return 0.0;
    }
    let ulp_e = max(e - 10, -24);
    let m = (u & 0x7FFFFFu) | 0x800000u;
    let shift = u32(ulp_e - (e - 23));
    var q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        q = q + 1u;
    }
    return ldexp(f32(q), ulp_e);
}

// C's roundf (half away from zero) for |v| < 2^23.
fn round_away(v: f32) -> i32 {
    let t = trunc(v);
    let f = v - t;
    return i32(t) + select(0, 1, f >= 0.5) - select(0, 1, f <= -0.5);
}

// Sums each output's TPR partials (this thread's RPT x NCOLS sums, in passes of 16 per
// thread) and stores the results of this workgroup's rows. Every thread of the workgroup
// must call it.
fn reduce_store(lid: u32, wgl: u32, acc: ptr<function, array<f32, 64>>) {
    let teams = WG / TPR;
    let team = lid / TPR;
    let t = lid % TPR;
    let per = RPT * NCOLS;
    let pass_outs = min(per, 16u);
    let outs = teams * pass_outs;
    for (var p0 = 0u; p0 < per; p0 += 16u) {
        for (var i = 0u; i < pass_outs; i++) {
            red[t * outs + team * pass_outs + i] = (*acc)[p0 + i];
        }
        workgroupBarrier();
        for (var o = lid; o < outs; o += WG) {
            var s = 0.0;
            for (var i = 0u; i < TPR; i++) {
                s += red[i * outs + o];
            }
            // o = team * pass_outs + i, accumulator p0 + i = r * NCOLS + c.
            let a = p0 + o % pass_outs;
            let c = a % NCOLS;
            let row = (wgl * teams + o / pass_outs) * RPT + a / NCOLS;
            if (row < pc.rows && c < pc.n) {
                y[(pc.act_col + c) * pc.y_stride + pc.y_off + row] = s;
            }
        }
        workgroupBarrier();
    }
}

// The 2-bit fields of a device "crumb word" (16 elements, element 4j+L at bits 8L+2j; see
// repack.rs): component j holds elements 4j..4j+3 as four bytes 0..3.
fn crumbs(w: u32) -> vec4<u32> {
    return vec4<u32>(w, w >> 2u, w >> 4u, w >> 6u) & vec4<u32>(0x03030303u);
}

// Four E2M1 codes (one per byte, 0..15) to ggml's doubled values kvalues_mxfp4 = 2 * E2M1
// (0, 1, 2, 3, 4, 6, 8, 12, negated for codes 9..15) as signed bytes. Code 8 (-0) must not
// occur: upload rewrites it to code 0 (both read as +0). Magnitude m = code & 7: m < 4 gives
// m; m >= 4 gives m + (m & 3), plus 2 more for m = 7. Negation (v ^ 0xFF) + 1 happens only on
// bytes with v >= 1, so no carry crosses a byte.
fn kv_bytes(c: vec4<u32>) -> vec4<u32> {
    let ones = vec4<u32>(0x01010101u);
    let m = c & vec4<u32>(0x07070707u);
    let big = (m >> vec4<u32>(2u)) & ones;
    let top = m & (m >> vec4<u32>(1u)) & big;
    let v = m + ((m & vec4<u32>(0x03030303u)) & (big * 0xFFu)) + (top << vec4<u32>(1u));
    let s = (c >> vec4<u32>(3u)) & ones;
    return (v ^ (s * 0xFFu)) + s;
}

// UE8M0 halved (ggml_e8m0_to_fp32_half): 2^(e - 128), exact (e = 0, 1: f32 subnormals).
fn e8m0_half(e: u32) -> f32 {
    return select(bitcast<f32>((e - 1u) << 23u), bitcast<f32>(0x00400000u >> (1u - e)), e < 2u);
}

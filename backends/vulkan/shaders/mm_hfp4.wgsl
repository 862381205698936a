// HFP4G32 / MFP4G32 / MFP4G32P weights x f32 activations (MFP4: rotated by fwht256.wgsl
// first); build.rs appends hfp4_fn.wgsl and factor_ue8m0.wgsl or factor_e4m3.wgsl (`block_factor`).
// Device layout (repack.rs `hfp4_words`): codes = four words per block, word i holding elements
// 8i..8i+7: half h (bits 16h..16h+15) holds elements 8i + 2j + h (j = 0..3), the magnitude
// bits (code & 7) of element j at bits 3j..3j+2 of the half and its sign (code >> 3) at bit
// 12 + j; w_scales = the blocks' exponent bytes, four per word, then (from word pc.scale_off)
// one f32 row scale per row.
// Decode without a table: an E2M1 code's magnitude bits e1 e0 m placed at bits 11..9 of an
// f16 and its sign at bit 15 read as exactly 2^-14 times the E2M1 value (e > 0: 2^(e - 15)
// (1 + m/2) = 2^-14 2^(e - 1) (1 + m/2); e = 0: the subnormal m 2^-15 = 2^-14 m/2), so one
// shift and one mask per pair of elements give two f16s for unpack2x16float. Per block:
// s = sum(v' x) with v' = 2^-14 E2M1 (f32), acc += (s * 2^14) * block_factor(e) (exact
// rescaling unless s' is an f32 subnormal, i.e. only when every |E2M1 x| of the block's
// partial is below ~2^-112); y = acc * row_scale.
// Each thread holds the codes of BPT blocks of RPT rows (fetched one step ahead). One column:
// the block's eight activation vec4s are loaded once and each row's block is decoded and summed
// at once. Several columns: one word (8 elements) of each of the RPT rows is decoded at a time
// and used for every column (each activation vec4 read serves RPT rows, each decoded weight
// NCOLS columns).
@group(0) @binding(0) var<storage, read> w_codes: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> act_f: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let row0 = (wgl * (WG / TPR) + lid / TPR) * RPT;
    var acc: array<f32, 64>;
    var base: array<u32, 8>;
    for (var r = 0u; r < RPT; r++) {
        base[r] = min(row0 + r, pc.rows - 1u) * pc.nb;
    }
    let kv = pc.nb * 8u; // vec4s per activation column
    let step = TPR * BPT;
    let first = (lid % TPR) * BPT;
    // This step's codes and exponents, fetched one step ahead.
    var raw: array<vec4<u32>, 8>;
    var ex: array<u32, 8>;
    for (var j = 0u; j < BPT; j++) {
        let b = min(first + j, pc.nb - 1u);
        for (var r = 0u; r < RPT; r++) {
            raw[j * RPT + r] = w_codes[base[r] + b];
            ex[j * RPT + r] = hfp4_exp(base[r] + b);
        }
    }
    for (var b0 = first; b0 < pc.nb; b0 += step) {
        let cur = raw;
        let cex = ex;
        // The next step's words (clamped to the row: the last step re-reads its own blocks).
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + step + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                raw[j * RPT + r] = w_codes[base[r] + b];
                ex[j * RPT + r] = hfp4_exp(base[r] + b);
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let b = b0 + j;
            let valid = b < pc.nb;
            let bc = min(b, pc.nb - 1u);
            if (NCOLS == 1u) {
                // One column: the block's eight activation vec4s stay in registers for the
                // RPT rows, each row's block decoded word by word and summed at once.
                let a = pc.act_col * kv + bc * 8u;
                var xs: array<vec4<f32>, 8>;
                for (var i = 0u; i < 8u; i++) {
                    xs[i] = act_f[a + i];
                }
                for (var r = 0u; r < RPT; r++) {
                    let q = cur[j * RPT + r];
                    let d0 = hfp4_word(q.x);
                    let d1 = hfp4_word(q.y);
                    let d2 = hfp4_word(q.z);
                    let d3 = hfp4_word(q.w);
                    let s = dot(d0[0], xs[0]) + dot(d0[1], xs[1]) + dot(d1[0], xs[2])
                        + dot(d1[1], xs[3]) + dot(d2[0], xs[4]) + dot(d2[1], xs[5])
                        + dot(d3[0], xs[6]) + dot(d3[1], xs[7]);
                    let f = block_factor(cex[j * RPT + r]);
                    acc[r] += select(0.0, (s * 16384.0) * f, valid);
                }
                continue;
            }
            // Several columns: each word of each row decoded once, used for every column.
            // Zeroed explicitly: a declaration's zero initialisation happens once per call,
            // not once per iteration (naga hoists local variables to the function's start).
            var s: array<f32, 64>;
            for (var o = 0u; o < RPT * NCOLS; o++) {
                s[o] = 0.0;
            }
            for (var i = 0u; i < 4u; i++) {
                var v: array<vec4<f32>, 16>;
                for (var r = 0u; r < RPT; r++) {
                    let q = cur[j * RPT + r];
                    let d = hfp4_word(q[i]);
                    v[2u * r] = d[0];
                    v[2u * r + 1u] = d[1];
                }
                for (var c = 0u; c < NCOLS; c++) {
                    let a = (pc.act_col + min(c, pc.n - 1u)) * kv + bc * 8u + 2u * i;
                    let x0 = act_f[a];
                    let x1 = act_f[a + 1u];
                    for (var r = 0u; r < RPT; r++) {
                        let o = r * NCOLS + c;
                        s[o] = s[o] + dot(v[2u * r], x0) + dot(v[2u * r + 1u], x1);
                    }
                }
            }
            for (var r = 0u; r < RPT; r++) {
                let f = block_factor(cex[j * RPT + r]);
                for (var c = 0u; c < NCOLS; c++) {
                    let o = r * NCOLS + c;
                    acc[o] += select(0.0, (s[o] * 16384.0) * f, valid);
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

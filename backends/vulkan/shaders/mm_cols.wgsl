// mm_cols.wgsl: the column-split matmul entry point for 4 and 8 columns (kernels named `*_c`),
// an alternative to mm_body.wgsl's staged variants for the formats with Q8_0 activations: the
// same format-file interface (fetch_w, decode_w, load_a, block_dot; see mm_body.wgsl) and
// act_q8s.wgsl's staged activations, but the threads of a row are CS groups of TPR: thread
// (k, h) of a row (h = its index % CS, k = its index / CS) takes blocks k * BPT .. k * BPT +
// BPT - 1 of each step of TPR * BPT blocks (as mm_body's thread k) and only the columns
// h * NCOLS / CS .. (h + 1) * NCOLS / CS - 1. So each thread keeps RPT * NCOLS / CS
// accumulators instead of RPT * NCOLS (mm_body's 8-column variants need up to 64, which
// holds them to one workgroup a multiprocessor); the CS threads of a (k, row) load the same
// weight words (consecutive threads, one address) and each decodes them: decoding is repeated
// CS times in exchange for occupancy.
// Rows per workgroup = WG / (TPR * CS) * RPT (kernels.rs). What must not live here: format
// arithmetic.

@group(0) @binding(1) var<storage, read> w_scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Column groups per row.
const CS = 2u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let team_size = TPR * CS;
    let teams = WG / team_size;
    let team = lid / team_size;
    let lt = lid % team_size;
    let h = lt % CS;
    let hc = NCOLS / CS;
    let first = (lt / CS) * BPT;
    let row0 = (wgl * teams + team) * RPT;
    var acc: array<f32, 32>;
    // First block index of each of this thread's rows (rows past the end read the last one).
    var base: array<u32, 8>;
    for (var r = 0u; r < RPT; r++) {
        base[r] = min(row0 + r, pc.rows - 1u) * pc.nb;
    }
    let step = TPR * BPT;
    var raw: array<WRaw, 8>;
    for (var j = 0u; j < BPT; j++) {
        let b = min(first + j, pc.nb - 1u);
        for (var r = 0u; r < RPT; r++) {
            raw[j * RPT + r] = fetch_w(base[r] + b);
        }
    }
    // Every thread runs every step (stage_act synchronises the workgroup); blocks past the
    // row's end are clamped and add nothing.
    for (var s0 = 0u; s0 < pc.nb; s0 += step) {
        stage_act(lid, s0);
        var w: array<WBlock, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(s0 + first + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                w[j * RPT + r] = decode_w(raw[j * RPT + r], base[r] + b);
            }
        }
        // The next step's words in flight while this step is computed.
        for (var j = 0u; j < BPT; j++) {
            let b = min(s0 + step + first + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                raw[j * RPT + r] = fetch_w(base[r] + b);
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let valid = s0 + first + j < pc.nb;
            let b = min(s0 + first + j, pc.nb - 1u);
            for (var c = 0u; c < hc; c++) {
                let col = pc.act_col + min(h * hc + c, pc.n - 1u);
                let a = load_a(col, b);
                for (var r = 0u; r < RPT; r++) {
                    let v = block_dot(w[j * RPT + r], a, base[r] + b, col, b);
                    acc[r * hc + c] += select(0.0, v, valid);
                }
            }
        }
    }
    for (var r = 0u; r < RPT; r++) {
        let f = row_factor(min(row0 + r, pc.rows - 1u));
        for (var c = 0u; c < hc; c++) {
            acc[r * hc + c] *= f;
        }
    }
    // Sum each output's TPR partials through workgroup memory (common.wgsl's `red`, 256 *
    // RED_PASS floats) in passes of RED_PASS accumulators per thread; store the outputs.
    let per = RPT * hc;
    let pass_outs = min(per, RED_PASS);
    for (var p0 = 0u; p0 < per; p0 += RED_PASS) {
        for (var i = 0u; i < pass_outs; i++) {
            red[i * WG + lid] = acc[p0 + i];
        }
        workgroupBarrier();
        // Output o of the pass: accumulator p0 + o % pass_outs of column group (o /
        // pass_outs) % CS of team o / (pass_outs * CS).
        for (var o = lid; o < teams * CS * pass_outs; o += WG) {
            let i = o % pass_outs;
            let hh = (o / pass_outs) % CS;
            let tm = o / (pass_outs * CS);
            var s = 0.0;
            for (var k = 0u; k < TPR; k++) {
                s += red[i * WG + tm * team_size + k * CS + hh];
            }
            let a = p0 + i;
            let c = hh * hc + a % hc;
            let row = (wgl * teams + tm) * RPT + a / hc;
            if (a < per && row < pc.rows && c < pc.n) {
                y[(pc.act_col + c) * pc.y_stride + pc.y_off + row] = s;
            }
        }
        workgroupBarrier();
    }
}

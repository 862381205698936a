// mm_cols.wgsl: the column-split matmul entry point (kernels named `*_c`; built for 8 columns
// and, after session 9's measurements on an H200, for PQ2_0 only: kernels.rs `cols_shader`),
// an alternative to mm_body.wgsl for formats with Q8_0 / Q8_1 activations: the same format
// file interface (fetch_w, decode_w, load_a, block_dot; see mm_body.wgsl) and act_q8s.wgsl's
// staged activations, but the threads that share a row split the columns as well as the
// blocks: a team of TPR * NCOLS threads owns RPT rows; thread (k, c) of a team, with
// c = its index % NCOLS and k = its index / NCOLS, takes column c and blocks
// k * BPT .. k * BPT + BPT - 1 of each step of TPR * BPT blocks. So each thread keeps RPT
// accumulators (not RPT * NCOLS, up to 64 in mm_body's 8-column variants), decodes each of
// its blocks once for all its rows (PQ2_0's mm_body kernels decode again per column), and
// loads one activation block a step for all its rows. The NCOLS threads of one (k, row) read the same weight words (one
// load instruction for all of them: consecutive threads, the same address) and each decodes
// them: decoding is repeated NCOLS times, in exchange for occupancy.
// Here TPR means threads per row and column (K lanes); rows per workgroup =
// WG / (TPR * NCOLS) * RPT (kernels.rs). What must not live here: format arithmetic.

@group(0) @binding(1) var<storage, read> w_scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let team_size = TPR * NCOLS;
    let teams = WG / team_size;
    let team = lid / team_size;
    let lt = lid % team_size;
    let c = lt % NCOLS;
    let col = pc.act_col + min(c, pc.n - 1u);
    let first = (lt / NCOLS) * BPT;
    let row0 = (wgl * teams + team) * RPT;
    var acc: array<f32, 16>;
    // First block index of each of this thread's rows (rows past the end read the last one).
    var base: array<u32, 16>;
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
        let cur = raw;
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
            let a = load_a(col, b);
            for (var r = 0u; r < RPT; r++) {
                let w = decode_w(cur[j * RPT + r], base[r] + b);
                let v = block_dot(w, a, base[r] + b, col, b);
                acc[r] += select(0.0, v, valid);
            }
        }
    }
    // Sum each (row, column)'s TPR partials through workgroup memory (common.wgsl's `red`,
    // 256 * RED_PASS floats; RPT <= RED_PASS) and store the workgroup's outputs.
    for (var r = 0u; r < RPT; r++) {
        red[r * WG + lid] = acc[r] * row_factor(min(row0 + r, pc.rows - 1u));
    }
    workgroupBarrier();
    let outs = teams * RPT * NCOLS;
    for (var o = lid; o < outs; o += WG) {
        let cc = o % NCOLS;
        let r = (o / NCOLS) % RPT;
        let tm = o / (NCOLS * RPT);
        var s = 0.0;
        for (var k = 0u; k < TPR; k++) {
            s += red[r * WG + tm * team_size + k * NCOLS + cc];
        }
        let row = (wgl * teams + tm) * RPT + r;
        if (row < pc.rows && cc < pc.n) {
            y[(pc.act_col + cc) * pc.y_stride + pc.y_off + row] = s;
        }
    }
}

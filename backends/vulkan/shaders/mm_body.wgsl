// mm_body.wgsl: the matmul entry point shared by the per-format kernels built on it (build.rs
// appends it after the format's file). What lives here: the loop over blocks, rows and columns.
// What the format file defines:
//   alias WRaw = ...;                         one weight block's words as loaded
//   fn fetch_w(wi: u32) -> WRaw               wi = row * pc.nb + block (row within the segment)
//   alias WBlock = ...;                       one weight block's register data, decoded
//   fn decode_w(raw: WRaw, wi: u32) -> WBlock
//   alias ABlock = ...;                       one activation block's register data
//   fn load_a(col: u32, b: u32) -> ABlock     col = activation column, b = block of the row
//   fn block_dot(w: WBlock, a: ABlock, wi: u32, col: u32, b: u32) -> f32
//                                             the block's f32 term (wi, col, b as above, for
//                                             formats that read more data per column)
//   fn row_factor(row: u32) -> f32            multiplies each thread's partial of a row
//   fn prepare_act(lid: u32)                  called once by every thread before the loop
//   fn stage_act(lid: u32, b0: u32)           called by every thread at the start of each step
//                                             (b0: the step's first block), in uniform control
//                                             flow (act_q8s.wgsl copies the step's activations
//                                             into workgroup memory there)
//   const PREFETCH: bool                      whether to fetch one step ahead (formats whose
//                                             block_dot reads most of the block itself: no)
//   const DECODE_AT_USE: bool                 with PREFETCH, in the 1-column variants: decode
//                                             each block right before its dot product instead
//                                             of all of a step's blocks first (nothing to reuse
//                                             across columns; fewer registers live, so more
//                                             workgroups fit on a multiprocessor)
// The kernels named `*_o` (1 column, PREFETCH formats) set ROT: each block's slot is refilled
// right after its decode (see the loop), so only one step's raw words are live.
// Each thread fetches BPT consecutive blocks of RPT rows into registers (with PREFETCH one
// step ahead: the loads of step s + 1 are in flight while step s is computed), decodes them
// once, then uses them for every one of the NCOLS columns; partials of a row are summed by
// reduce_store.
// The format file declares binding 0 (`w_codes`, of its word type); the scales, the
// activations (act_q8.wgsl, act_q8k.wgsl) and the outputs are declared here and there.

@group(0) @binding(1) var<storage, read> w_scales: array<u32>;

// 1 in the rotated 1-column kernels (names ending in `_o`, build.rs), else 0.
override ROT: u32 = 0u;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let row0 = (wgl * (WG / TPR) + lid / TPR) * RPT;
    var acc: array<f32, 64>;
    // First block index of each of this thread's rows (rows past the end read the last one).
    var base: array<u32, 8>;
    for (var r = 0u; r < RPT; r++) {
        base[r] = min(row0 + r, pc.rows - 1u) * pc.nb;
    }
    let step = TPR * BPT;
    let first = (lid % TPR) * BPT;
    var b0 = first;
    var raw: array<WRaw, 8>;
    if (PREFETCH) {
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                raw[j * RPT + r] = fetch_w(base[r] + b);
            }
        }
    }
    // Fused kernels quantize the activations here, while the first weights are in flight.
    prepare_act(lid);
    // Every thread runs every step (the same count for the whole workgroup, so that
    // stage_act may synchronise it); blocks past the row's end are clamped and add nothing.
    for (var s0 = 0u; s0 < pc.nb; s0 += step) {
        b0 = s0 + first;
        stage_act(lid, s0);
        if (NCOLS == 1u && PREFETCH && ROT != 0u) {
            // Rotated loads (the kernels named `*_o`): each block is decoded, its slot
            // refilled with the next step's block at once, then the block used; one set of raw
            // words live (not this step's and the next's), the same loads in flight.
            for (var j = 0u; j < BPT; j++) {
                let valid = b0 + j < pc.nb;
                let b = min(b0 + j, pc.nb - 1u);
                let bn = min(b0 + step + j, pc.nb - 1u);
                let a = load_a(pc.act_col, b);
                for (var r = 0u; r < RPT; r++) {
                    let w = decode_w(raw[j * RPT + r], base[r] + b);
                    raw[j * RPT + r] = fetch_w(base[r] + bn);
                    let v = block_dot(w, a, base[r] + b, pc.act_col, b);
                    acc[r] += select(0.0, v, valid);
                }
            }
            continue;
        }
        if (NCOLS == 1u && PREFETCH && DECODE_AT_USE) {
            // This step's words, then the next step's loads issued, then each block decoded
            // and used at once.
            let cur = raw;
            for (var j = 0u; j < BPT; j++) {
                let b = min(b0 + step + j, pc.nb - 1u);
                for (var r = 0u; r < RPT; r++) {
                    raw[j * RPT + r] = fetch_w(base[r] + b);
                }
            }
            for (var j = 0u; j < BPT; j++) {
                let valid = b0 + j < pc.nb;
                let b = min(b0 + j, pc.nb - 1u);
                let a = load_a(pc.act_col, b);
                for (var r = 0u; r < RPT; r++) {
                    let w = decode_w(cur[j * RPT + r], base[r] + b);
                    let v = block_dot(w, a, base[r] + b, pc.act_col, b);
                    acc[r] += select(0.0, v, valid);
                }
            }
            continue;
        }
        var w: array<WBlock, 8>;
        for (var j = 0u; j < BPT; j++) {
            let b = min(b0 + j, pc.nb - 1u);
            for (var r = 0u; r < RPT; r++) {
                if (!PREFETCH) {
                    raw[j * RPT + r] = fetch_w(base[r] + b);
                }
                w[j * RPT + r] = decode_w(raw[j * RPT + r], base[r] + b);
            }
        }
        // The next step's words (clamped to the row: the last step re-reads its own blocks).
        if (PREFETCH) {
            for (var j = 0u; j < BPT; j++) {
                let b = min(b0 + step + j, pc.nb - 1u);
                for (var r = 0u; r < RPT; r++) {
                    raw[j * RPT + r] = fetch_w(base[r] + b);
                }
            }
        }
        for (var j = 0u; j < BPT; j++) {
            let valid = b0 + j < pc.nb;
            let b = min(b0 + j, pc.nb - 1u);
            for (var c = 0u; c < NCOLS; c++) {
                let col = pc.act_col + min(c, pc.n - 1u);
                let a = load_a(col, b);
                for (var r = 0u; r < RPT; r++) {
                    let v = block_dot(w[j * RPT + r], a, base[r] + b, col, b);
                    acc[r * NCOLS + c] += select(0.0, v, valid);
                }
            }
        }
    }
    for (var r = 0u; r < RPT; r++) {
        let f = row_factor(min(row0 + r, pc.rows - 1u));
        for (var c = 0u; c < NCOLS; c++) {
            acc[r * NCOLS + c] *= f;
        }
    }
    reduce_store(lid, wgl, &acc);
}

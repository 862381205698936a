// mm_tile.wgsl: the tiled matmul entry point for the 8-column variants (kernels named `*_t`;
// kernels.rs `tile_shader`), an alternative to mm_body.wgsl: the same format file interface
// (fetch_w, decode_w, load_a, block_dot; see mm_body.wgsl) with chunked activations
// (act_q8t.wgsl for Q8_0 / Q8_1, act_q8kt.wgsl for Q8_K, act_f32t.wgsl for f32). A team of
// TPR consecutive threads owns RPT rows (RPT <= 4); in each step its threads take TPR
// consecutive blocks of those rows (thread k: block k), so one load instruction of a team
// reads one contiguous run of each row, and the teams of a subgroup read the same activation
// words of workgroup memory (one broadcast). Each weight block is decoded once and used for
// all NCOLS columns; a thread keeps RPT * NCOLS accumulators, the step's raw words and the
// next step's in flight, and one activation block of the next chunk (the chunk is staged with
// one barrier pair per TILE_CH blocks, not per step as act_q8s.wgsl does). Partial sums of a
// (row, column) are summed through workgroup memory at the end.
// K split: here BPT is not blocks a step but the number of workgroups that share a row group,
// each taking one range of whole chunks of the row, so that a matrix of few rows still gives
// several workgroups to every multiprocessor. With BPT = 1 the workgroup stores its sums in y;
// with BPT > 1 binding 4 is a partial-sum buffer ((column, split) major, y_stride rows each)
// that sum_parts.wgsl adds up in a second dispatch (kernels.rs `Kernel::k_split`).
// Units: the loop's "blocks" are what the activation file's tile_nb() counts a row: weight
// blocks for act_q8t.wgsl; 64-element quarters of a 256-element block for act_q8kt.wgsl,
// 16-element halves of a 32-element block for act_f32t.wgsl (fetch_w, decode_w, load_a and
// block_dot then take unit indices: wi = row * tile_nb() + unit).
// What must not live here: format arithmetic.
// Requires: NCOLS = 8, TPR dividing the chunk (the activation file's tile_ch), RPT <= 4
// (build.rs' shape sets); the activation file declares tile_m, an array of at least WG
// vec4<f32> in workgroup memory, which the final sums reuse; an epilogue file defines
// tile_sums (tile_sum_c.wgsl: constant accumulator indices; tile_sum_r.wgsl: a loop).

@group(0) @binding(1) var<storage, read> w_scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wgid: vec3<u32>) {
    let wgl = wg_linear(wgid);
    let splits = BPT;
    let ks = wgl % splits;
    let group = wgl / splits;
    let teams = WG / TPR;
    let row0 = (group * teams + lid / TPR) * RPT;
    let first = lid % TPR;
    let ch = tile_ch();
    // Units (blocks, or parts of blocks) of a row.
    let nb = tile_nb();
    // This workgroup's units of the row: whole chunks, kb0 .. kb1 - 1.
    let kper = ((nb + splits - 1u) / splits + ch - 1u) / ch * ch;
    let kb0 = ks * kper;
    let kb1 = min(kb0 + kper, nb);
    var acc: array<f32, 32>;
    // First block index of each of this thread's rows (rows past the end read the last one).
    var base: array<u32, 4>;
    for (var r = 0u; r < RPT; r++) {
        base[r] = min(row0 + r, pc.rows - 1u) * nb;
    }
    var raw: array<WRaw, 4>;
    for (var r = 0u; r < RPT; r++) {
        raw[r] = fetch_w(base[r] + min(kb0 + first, nb - 1u));
    }
    var next = tile_fetch(lid, kb0);
    // Every thread runs every chunk and step (the same count for the whole workgroup, so the
    // barriers are in uniform control flow); blocks past the range's end are clamped and
    // masked.
    for (var c0 = kb0; c0 < kb1; c0 += ch) {
        workgroupBarrier();
        tile_store(lid, c0, next);
        workgroupBarrier();
        next = tile_fetch(lid, c0 + ch);
        for (var s0 = c0; s0 < c0 + ch; s0 += TPR) {
            let cur = raw;
            // The next step's words in flight while this step is computed.
            for (var r = 0u; r < RPT; r++) {
                raw[r] = fetch_w(base[r] + min(s0 + TPR + first, nb - 1u));
            }
            let bs = s0 + first;
            let valid = bs < kb1;
            let b = min(bs, nb - 1u);
            var w: array<WBlock, 4>;
            for (var r = 0u; r < RPT; r++) {
                w[r] = decode_w(cur[r], base[r] + b);
            }
            for (var c = 0u; c < NCOLS; c++) {
                let col = pc.act_col + c;
                // Staged under its unclamped index (the chunk's own slot).
                let a = load_a(col, bs);
                for (var r = 0u; r < RPT; r++) {
                    let v = block_dot(w[r], a, base[r] + b, col, b);
                    acc[r * NCOLS + c] += select(0.0, v, valid);
                }
            }
        }
    }
    // Sum each (row, column)'s TPR partials through tile_m (the epilogue file: tile_sum_c.wgsl
    // or tile_sum_r.wgsl, the same sums in the same order).
    tile_sums(lid, group, ks, &acc);
}

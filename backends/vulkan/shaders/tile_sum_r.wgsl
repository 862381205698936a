// tile_sum_r.wgsl: the tiled kernels' final sums (mm_tile.wgsl's tile_sums) in a loop over
// (row, half of the columns) (session 10's form). Its barriers keep the loop rolled, so the
// accumulators are indexed at run time (local memory on an H200); even so, some formats'
// kernels are faster in this form than with tile_sum_c.wgsl's constant indices (kernels.rs
// `tile_rolled`). The same sums in the same order as tile_sum_c.wgsl.
// What must not live here: the main loop or format arithmetic.

// Sums each (row, column)'s TPR partials (acc: this thread's RPT x NCOLS = 8 partials), four
// columns a pass, and stores them. Every thread calls it (uniform control flow: it has
// barriers).
fn tile_sums(lid: u32, group: u32, ks: u32, acc: ptr<function, array<f32, 32>>) {
    let teams = WG / TPR;
    let row0 = (group * teams + lid / TPR) * RPT;
    for (var r = 0u; r < RPT; r++) {
        let f = row_factor(min(row0 + r, pc.rows - 1u));
        for (var h = 0u; h < NCOLS; h += 4u) {
            workgroupBarrier();
            let i = r * NCOLS + h;
            tile_m[lid] = vec4<f32>((*acc)[i], (*acc)[i + 1u], (*acc)[i + 2u], (*acc)[i + 3u]) * f;
            workgroupBarrier();
            for (var o = lid; o < teams * 4u; o += WG) {
                let tm = o / 4u;
                var s = 0.0;
                for (var k = 0u; k < TPR; k++) {
                    s += tile_m[tm * TPR + k][o % 4u];
                }
                let row = (group * teams + tm) * RPT + r;
                let c = h + o % 4u;
                if (row < pc.rows && c < pc.n) {
                    y[((pc.act_col + c) * BPT + ks) * pc.y_stride + pc.y_off + row] = s;
                }
            }
        }
    }
}

// tile_sum_c.wgsl: the tiled kernels' final sums (mm_tile.wgsl's tile_sums) with constant
// indices into the accumulators: one tile_sum call per (row, half of the columns), so the
// accumulators stay in registers (on an H200 the rolled form, tile_sum_r.wgsl, put them in
// local memory). The same sums in the same order as tile_sum_r.wgsl; which form a format's
// kernel takes is build.rs' choice (the faster one on an H200: kernels.rs `tile_rolled`).
// What must not live here: the main loop or format arithmetic.

// Sums each (row, column)'s TPR partials (acc: this thread's RPT x NCOLS = 8 partials) and
// stores them. Every thread calls it (uniform control flow: it has barriers).
fn tile_sums(lid: u32, group: u32, ks: u32, acc: ptr<function, array<f32, 32>>) {
    tile_sum(lid, group, ks, 0u, 0u, vec4<f32>((*acc)[0], (*acc)[1], (*acc)[2], (*acc)[3]));
    tile_sum(lid, group, ks, 0u, 4u, vec4<f32>((*acc)[4], (*acc)[5], (*acc)[6], (*acc)[7]));
    if (RPT > 1u) {
        tile_sum(lid, group, ks, 1u, 0u, vec4<f32>((*acc)[8], (*acc)[9], (*acc)[10], (*acc)[11]));
        tile_sum(lid, group, ks, 1u, 4u, vec4<f32>((*acc)[12], (*acc)[13], (*acc)[14], (*acc)[15]));
    }
    if (RPT > 2u) {
        tile_sum(lid, group, ks, 2u, 0u, vec4<f32>((*acc)[16], (*acc)[17], (*acc)[18], (*acc)[19]));
        tile_sum(lid, group, ks, 2u, 4u, vec4<f32>((*acc)[20], (*acc)[21], (*acc)[22], (*acc)[23]));
    }
    if (RPT > 3u) {
        tile_sum(lid, group, ks, 3u, 0u, vec4<f32>((*acc)[24], (*acc)[25], (*acc)[26], (*acc)[27]));
        tile_sum(lid, group, ks, 3u, 4u, vec4<f32>((*acc)[28], (*acc)[29], (*acc)[30], (*acc)[31]));
    }
}

// One pass of the final sums: row r of each team, columns h..h + 3, v = this thread's
// partials of them.
fn tile_sum(lid: u32, group: u32, ks: u32, r: u32, h: u32, v: vec4<f32>) {
    let teams = WG / TPR;
    let row0 = (group * teams + lid / TPR) * RPT;
    workgroupBarrier();
    tile_m[lid] = v * row_factor(min(row0 + r, pc.rows - 1u));
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

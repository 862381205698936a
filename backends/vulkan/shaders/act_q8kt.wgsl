// act_q8kt.wgsl: Q8_K activations as quant_q8_k writes them (act_q8k.wgsl's layout: 16 vec4
// of int8 a block, then 5 vec4 of meta: (d, sum q, 0, 0) and the 16 group sums), for the tiled
// 8-column kernels of the 256-element formats (mm_tile.wgsl, names ending in `_t`).
// mm_tile.wgsl's units are quarters of a weight block (64 elements, KSUB a block): unit p of a
// block takes the four 16-element activation groups unit_group(p, 0..3) (the format file
// says which: contiguous for Q4_K, every other group of a 128-element half for TQ2_0 and
// Q6_K, whose weight bytes interleave so). The workgroup stages a chunk of TILE_ENTRIES units
// (all NCOLS columns) at once, one unit a thread, gathered in the format's group order, with
// one barrier pair per chunk; each thread fetches its unit of the next chunk into registers
// while the current chunk is computed (tile_fetch, tile_store). Word k of entry e is kept at
// tile_q[k * TILE_ENTRIES + e], so the threads of a team, which read consecutive entries, read
// consecutive 16-byte words (no bank conflicts).
// What must not live here: the loop (mm_tile.wgsl) or format arithmetic.
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;

// Units one chunk holds (all columns); one per thread of a 256-thread workgroup.
const TILE_ENTRIES = 256u;
// Units a 256-element block.
const KSUB = 4u;

// The units' int8 words (4 vec4 each, word-major).
var<workgroup> tile_q: array<vec4<u32>, 1024>;
// The units' group sums (in unit_group order; exact integers as f32). Also the final sums'
// buffer of mm_tile.wgsl.
var<workgroup> tile_m: array<vec4<f32>, 256>;
// The units' (block d, sum of the unit's q).
var<workgroup> tile_ds: array<vec2<f32>, 256>;
// First unit of the chunk staged now.
var<private> tile_b0: u32;

// One staged unit.
struct Q8U {
    q: array<vec4<u32>, 4>, // the four groups, in unit_group order
    bs: vec4<f32>,          // their sums
    ds: vec2<f32>,          // (d, bs.x + bs.y + bs.z + bs.w)
}

alias ABlock = Q8U;

// Units of a row (mm_tile.wgsl).
fn tile_nb() -> u32 {
    return pc.nb * KSUB;
}

// Units of one chunk (per column).
fn tile_ch() -> u32 {
    return TILE_ENTRIES / NCOLS;
}

// The unit thread `lid` stages for the chunk starting at unit u0: column lid / tile_ch()
// (column c >= pc.n repeats column pc.n - 1), unit u0 + the rest (clamped to the row: units
// past its end are staged as its last one, and masked by the caller).
fn tile_fetch(lid: u32, u0: u32) -> Q8U {
    let per = tile_ch();
    let col = pc.act_col + min(lid / per, pc.n - 1u);
    let u = min(u0 + lid % per, tile_nb() - 1u);
    let blk = col * pc.nb + u / KSUB;
    let p = u % KSUB;
    let g0 = unit_group(p, 0u);
    let g1 = unit_group(p, 1u);
    let g2 = unit_group(p, 2u);
    let g3 = unit_group(p, 3u);
    let m = 5u * blk + 1u;
    let bs = vec4<f32>(act_meta[m + g0 / 4u][g0 % 4u], act_meta[m + g1 / 4u][g1 % 4u],
        act_meta[m + g2 / 4u][g2 % 4u], act_meta[m + g3 / 4u][g3 % 4u]);
    let q = array<vec4<u32>, 4>(act_q[16u * blk + g0], act_q[16u * blk + g1],
        act_q[16u * blk + g2], act_q[16u * blk + g3]);
    // The sum of four group sums (each |.| <= 16 * 128) is exact in f32.
    return Q8U(q, bs, vec2<f32>(act_meta[5u * blk].x, (bs.x + bs.y) + (bs.z + bs.w)));
}

// Stores thread `lid`'s unit of the chunk starting at unit u0. Every thread calls it between
// two workgroup barriers.
fn tile_store(lid: u32, u0: u32, a: Q8U) {
    tile_b0 = u0;
    for (var k = 0u; k < 4u; k++) {
        tile_q[k * TILE_ENTRIES + lid] = a.q[k];
    }
    tile_m[lid] = a.bs;
    tile_ds[lid] = a.ds;
}

// Unit u (within the staged chunk) of column col.
fn load_a(col: u32, u: u32) -> Q8U {
    let e = (col - pc.act_col) * tile_ch() + (u - tile_b0);
    return Q8U(array<vec4<u32>, 4>(tile_q[e], tile_q[TILE_ENTRIES + e],
        tile_q[2u * TILE_ENTRIES + e], tile_q[3u * TILE_ENTRIES + e]), tile_m[e], tile_ds[e]);
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

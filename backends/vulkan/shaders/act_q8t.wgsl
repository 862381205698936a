// act_q8t.wgsl: Q8_0 / Q8_1 activations as quant_q8_0 writes them (act_q8.wgsl's layout), for
// the tiled 8-column kernels (mm_tile.wgsl, names ending in `_t`): the workgroup stages a
// chunk of K (TILE_CH weight blocks, APB activation blocks each, for each of the NCOLS
// columns: TILE_ENTRIES = 256 activation blocks, 12 KiB) in workgroup memory at once, one
// activation block a thread, with one barrier pair per chunk; each thread fetches its block of
// the next chunk into registers while the current chunk is computed (tile_fetch, tile_store).
// The three parts of a block are kept in separate arrays, so the threads of a row group that
// read consecutive blocks read consecutive 16-byte words (no bank conflicts).
// What must not live here: the loop (mm_tile.wgsl) or format arithmetic.
@group(0) @binding(2) var<storage, read> act_q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> act_meta: array<vec4<f32>>;

// Activation blocks one chunk holds (all columns); one per thread of a 256-thread workgroup.
const TILE_ENTRIES = 256u;

var<workgroup> tile_lo: array<vec4<u32>, 256>;
var<workgroup> tile_hi: array<vec4<u32>, 256>;
var<workgroup> tile_m: array<vec4<f32>, 256>;
// First weight block of the chunk staged now.
var<private> tile_b0: u32;

struct Q8 {
    lo: vec4<u32>, // elements 0..15
    hi: vec4<u32>, // elements 16..31
    m: vec4<f32>,  // (d, sum, sum of elements 0..15, s)
}

// Weight blocks of one chunk (per column).
fn tile_ch() -> u32 {
    return TILE_ENTRIES / (APB * NCOLS);
}

// The activation block thread `lid` stages for the chunk starting at weight block b0: column
// lid / (TILE_CH * APB) (column c >= pc.n repeats column pc.n - 1), block b0 * APB + the rest
// (clamped to the row: blocks past its end are staged as its last one, and masked by the
// caller).
fn tile_fetch(lid: u32, b0: u32) -> Q8 {
    let per = tile_ch() * APB;
    let col = pc.act_col + min(lid / per, pc.n - 1u);
    let ab = col * pc.nb * APB + min(b0 * APB + lid % per, pc.nb * APB - 1u);
    return Q8(act_q[2u * ab], act_q[2u * ab + 1u], act_meta[ab]);
}

// Stores thread `lid`'s block of the chunk starting at weight block b0. Every thread calls it
// between two workgroup barriers.
fn tile_store(lid: u32, b0: u32, q: Q8) {
    tile_b0 = b0;
    tile_lo[lid] = q.lo;
    tile_hi[lid] = q.hi;
    tile_m[lid] = q.m;
}

// Activation block i (< APB) of weight block b (within the staged chunk) of column col.
fn q8_block(col: u32, b: u32, i: u32) -> Q8 {
    let e = ((col - pc.act_col) * tile_ch() + (b - tile_b0)) * APB + i;
    return Q8(tile_lo[e], tile_hi[e], tile_m[e]);
}

fn row_factor(row: u32) -> f32 {
    return 1.0;
}

// Units of a row (mm_tile.wgsl): its weight blocks.
fn tile_nb() -> u32 {
    return pc.nb;
}

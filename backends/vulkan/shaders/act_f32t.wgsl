// act_f32t.wgsl: f32 activations (the staged, for MFP4 rotated, input columns) for the tiled
// 8-column kernels of the HFP4 family (mm_tile.wgsl + mm_hfp4t.wgsl, names ending in `_t`).
// mm_tile.wgsl's units are 16-element halves of a 32-element block (two code words). The
// workgroup stages a chunk of TILE_ENTRIES units (all NCOLS columns) at once, one unit a
// thread, with one barrier pair per chunk; each thread fetches its unit of the next chunk into
// registers while the current chunk is computed (tile_fetch, tile_store). Quarter k (elements
// 4k..4k+3) of entry e is kept at tile_m[k * TILE_ENTRIES + e], so the threads of a team,
// which read consecutive entries, read consecutive 16-byte words (no bank conflicts).
// What must not live here: the loop (mm_tile.wgsl) or format arithmetic.
@group(0) @binding(2) var<storage, read> act_f: array<vec4<f32>>;

// Units one chunk holds (all columns); one per thread of a 256-thread workgroup.
const TILE_ENTRIES = 256u;

// The staged units. Also the final sums' buffer of mm_tile.wgsl.
var<workgroup> tile_m: array<vec4<f32>, 1024>;
// First unit of the chunk staged now.
var<private> tile_b0: u32;

// One unit's sixteen activations.
struct F16x {
    v: array<vec4<f32>, 4>,
}

alias ABlock = F16x;

// Units of a row (mm_tile.wgsl).
fn tile_nb() -> u32 {
    return pc.nb * 2u;
}

// Units of one chunk (per column).
fn tile_ch() -> u32 {
    return TILE_ENTRIES / NCOLS;
}

// The unit thread `lid` stages for the chunk starting at unit u0: column lid / tile_ch()
// (column c >= pc.n repeats column pc.n - 1), unit u0 + the rest (clamped to the row: units
// past its end are staged as its last one, and masked by the caller).
fn tile_fetch(lid: u32, u0: u32) -> F16x {
    let per = tile_ch();
    let nu = tile_nb();
    let col = pc.act_col + min(lid / per, pc.n - 1u);
    let x = 4u * (col * nu + min(u0 + lid % per, nu - 1u));
    return F16x(array<vec4<f32>, 4>(act_f[x], act_f[x + 1u], act_f[x + 2u], act_f[x + 3u]));
}

// Stores thread `lid`'s unit of the chunk starting at unit u0. Every thread calls it between
// two workgroup barriers.
fn tile_store(lid: u32, u0: u32, a: F16x) {
    tile_b0 = u0;
    for (var k = 0u; k < 4u; k++) {
        tile_m[k * TILE_ENTRIES + lid] = a.v[k];
    }
}

// Unit u (within the staged chunk) of column col.
fn load_a(col: u32, u: u32) -> F16x {
    let e = (col - pc.act_col) * tile_ch() + (u - tile_b0);
    return F16x(array<vec4<f32>, 4>(tile_m[e], tile_m[TILE_ENTRIES + e],
        tile_m[2u * TILE_ENTRIES + e], tile_m[3u * TILE_ENTRIES + e]));
}

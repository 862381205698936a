// act_f32t.wgsl: f32 activations (the staged, for MFP4 rotated, input columns) for the tiled
// 8-column kernels of the HFP4 family (mm_tile.wgsl + mm_hfp4t.wgsl, names ending in `_t`).
// mm_tile.wgsl's units are 8-element words (four a 32-element block). The workgroup stages a
// chunk of TILE_ENTRIES units (all NCOLS columns) at once, UPT units a thread, with one
// barrier pair per chunk; each thread fetches its units of the next chunk into registers while
// the current chunk is computed (tile_fetch, tile_store). Half h (elements 4h..4h+3) of entry
// e is kept at tile_m[h * TILE_ENTRIES + e], so the threads of a team, which read
// consecutive entries, read consecutive 16-byte words (no bank conflicts).
// What must not live here: the loop (mm_tile.wgsl) or format arithmetic.
@group(0) @binding(2) var<storage, read> act_f: array<vec4<f32>>;

// Units one chunk holds (all columns), and units each thread of a 256-thread workgroup stages.
const TILE_ENTRIES = 512u;
const UPT = 2u;

// The staged units. Also the final sums' buffer of mm_tile.wgsl.
var<workgroup> tile_m: array<vec4<f32>, 1024>;
// First unit of the chunk staged now.
var<private> tile_b0: u32;

// One unit's eight activations.
struct F8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

alias ABlock = F8;

// Units of a row (mm_tile.wgsl).
fn tile_nb() -> u32 {
    return pc.nb * 4u;
}

// Units of one chunk (per column).
fn tile_ch() -> u32 {
    return TILE_ENTRIES / NCOLS;
}

// The units thread `lid` stages for the chunk starting at unit u0: entries lid + 256 j, entry
// e being column e / tile_ch() (column c >= pc.n repeats column pc.n - 1), unit u0 + the rest
// (clamped to the row: units past its end are staged as its last one, and masked by the
// caller).
fn tile_fetch(lid: u32, u0: u32) -> array<F8, 2> {
    let per = tile_ch();
    let nu = tile_nb();
    var out: array<F8, 2>;
    for (var j = 0u; j < UPT; j++) {
        let e = lid + j * 256u;
        let col = pc.act_col + min(e / per, pc.n - 1u);
        let x = 2u * (col * nu + min(u0 + e % per, nu - 1u));
        out[j] = F8(act_f[x], act_f[x + 1u]);
    }
    return out;
}

// Stores thread `lid`'s units of the chunk starting at unit u0. Every thread calls it between
// two workgroup barriers.
fn tile_store(lid: u32, u0: u32, a: array<F8, 2>) {
    tile_b0 = u0;
    for (var j = 0u; j < UPT; j++) {
        tile_m[lid + j * 256u] = a[j].lo;
        tile_m[TILE_ENTRIES + lid + j * 256u] = a[j].hi;
    }
}

// Unit u (within the staged chunk) of column col.
fn load_a(col: u32, u: u32) -> F8 {
    let e = (col - pc.act_col) * tile_ch() + (u - tile_b0);
    return F8(tile_m[e], tile_m[TILE_ENTRIES + e]);
}

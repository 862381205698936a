// lowbit_mma.h: the NVIDIA tensor-core matvec for column tiles of 8 and 16 (n = 5..16 and the
// tiles of larger n), included by lowbit_kernels.hip after the weight decoders (it uses Mat,
// ActPtrs and the decode helpers there). Compiled only where lowbit_hip.h defines LB_MMA
// (NVIDIA, and the host emulation of tests/host_shim.h); AMD builds run the dp4a skeleton
// under the same kernel names.
//
// What lives here: the fragment decoders (one per format: a lane's quarter of a unit, straight
// into MMA fragment words) and the kernel skeleton lb_mvq. What must not: the dp4a decoders,
// the n = 1 kernels, host logic.
//
// Shape of the work. mma.sync m16n8k32 (s8 x s8 -> s32): A = 16 weight rows x 32 weights (one
// unit), B = the unit's 32 activation quants x 8 columns. Lane 4g + t holds, per row (g and
// g + 8), the 8 weights the A fragment wants from it: word `lo` (k = 4t..4t+3, a[0] / a[1])
// and word `hi` (k = 16+4t.., a[2] / a[3]). Which 8 of the unit's 32 weights those are is the
// decoder's choice (any permutation of k is fine as long as B is permuted alike): each lane
// loads exactly the raw bytes its words need (4 bytes of a 16-byte unit, 2 of an 8-byte one)
// and decodes them in registers, no shared-memory tile, no shuffles. B comes straight from the
// prepared activations (L1/L2-resident): the unit's activation words ilo(t) and ihi(t) (ActQ8
// word order: 0-3 the first 16 quants, 4-7 the last 16, as the dp4a decoders' `dot` pairs them)
// of column g. The accumulator starts at the i2f magic number (lb_i2f), so each (row, column,
// unit) costs one FADD and one FFMA (two-scale formats: two MMAs, one per scale half, the
// other half's A words zero).
//
// Parallelism: a block (LB_MMA_WARPS warps) owns 16 MT rows; its warps split the row's units
// into contiguous ranges (K split), each keeping the raw words of its next P - 1 units in
// flight (a register ring), and the partial sums meet in shared memory at the end. So a
// 16384-row matrix gives 16384 / (16 MT) blocks of 8 warps, not 1024 / MT lone warps.
#pragma once

#if defined(LB_MMA)
#define LB_MMA_WARPS (LB_BLOCK >= 32 ? LB_BLOCK / 32 : 1)

// ------------------------------------------------------------------ fragment decoders --------
// fetch(m, row, u, nu, t): the raw bits lane t needs from unit u of `row`; frag(lo, hi): its
// two A words; scales(s0, s1): the row-unit's weight scale(s) (s0 = s1 unless SPLIT);
// ilo/ihi(t): the activation words paired with lo/hi; SPLIT formats also say which scale half
// lo and hi belong to (hlo/hhi). The integer parts are exact; the float association per unit
// is the dp4a decoders' up to the order of the final products (within the bound).

// Word t of a 16-byte unit, plus the unit's scale bits (SB bytes of the s plane).
template <int SB>
struct FrW16 {
    lb_u32 v, sc;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 u, lb_u32 nu, lb_u32 t) {
        lb_u64 i = row * nu + u;
        v = *(const lb_u32*)(m.q + i * 16 + 4 * t);
        sc = SB == 1 ? (lb_u32)m.s[i] : (lb_u32)((const lb_u16*)m.s)[i];
    }
    LB_DEV lb_u32 ilo(lb_u32 t) { return t; }
    LB_DEV lb_u32 ihi(lb_u32 t) { return 4 + t; }
};

// Q8_0: the q plane in halves like the activations: word t of each half.
struct FrQ8_0 {
    lb_u32 x0, x1, sc;
    static constexpr bool SPLIT = false;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 u, lb_u32 nu, lb_u32 t) {
        const lb_u8* base = m.q + row * nu * 32;
        x0 = *(const lb_u32*)(base + u * 16ull + 4 * t);
        x1 = *(const lb_u32*)(base + (lb_u64)(nu + u) * 16 + 4 * t);
        sc = ((const lb_u16*)m.s)[row * nu + u];
    }
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const { lo = x0; hi = x1; }
    LB_DEVM void scales(float& s0, float& s1) const { s0 = s1 = lb_h2f(sc); }
    LB_DEV lb_u32 ilo(lb_u32 t) { return t; }
    LB_DEV lb_u32 ihi(lb_u32 t) { return 4 + t; }
};

// Q4_0: low nibbles of word t are elements 4t.., high ones 16 + 4t.. (DecQ4_0's w[t], w[4+t]).
struct FrQ4_0 : FrW16<2> {
    static constexpr bool SPLIT = false;
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const {
        lo = (lb_u32)lb_sub_bytes((lb_i32)(v & 0x0f0f0f0fu), 8);
        hi = (lb_u32)lb_sub_bytes((lb_i32)((v >> 4) & 0x0f0f0f0fu), 8);
    }
    LB_DEVM void scales(float& s0, float& s1) const { s0 = s1 = lb_h2f(sc); }
};

// MXFP4: the kvalues lookup of word t (DecMxfp4's w[t], w[4+t]); scale 2^(e - 128).
struct FrMxfp4 : FrW16<1> {
    static constexpr bool SPLIT = false;
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const {
        const lb_u32 tb[4] = LB_KVALUES_MXFP4;
        lb_lut16(tb, v, lo, hi);
    }
    LB_DEVM void scales(float& s0, float& s1) const {
        s0 = s1 = lb_as_float(sc >= 2 ? (sc - 1) << 23 : 0x00200000u << sc);
    }
};

// ROCmFP3: 8-entry lookup of word t (DecFp3's w[t], w[4+t]); lo in the first scale half, hi in
// the second.
struct FrFp3 : FrW16<2> {
    static constexpr bool SPLIT = true;
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const { lb_lut8(0x04020100u, 0xfcfeff00u, v, lo, hi); }
    LB_DEVM void scales(float& s0, float& s1) const {
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEV lb_u32 hlo(lb_u32) { return 0; }
    LB_DEV lb_u32 hhi(lb_u32) { return 1; }
};

// NVFP4: word t's low nibbles are DecNvfp4's w[{0,1,4,5}[t]], the high ones w[{2,3,6,7}[t]];
// words 0-1 are the first sub-block (scale s0), 2-3 the second.
struct FrNvfp4 : FrW16<2> {
    static constexpr bool SPLIT = true;
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const {
        const lb_u32 tb[4] = LB_KVALUES_MXFP4;
        lb_lut16(tb, v, lo, hi);
    }
    LB_DEVM void scales(float& s0, float& s1) const {
        s0 = lb_ue4m3_b8(sc & 0x7fu);
        s1 = lb_ue4m3_b8((sc >> 8) & 0x7fu);
    }
    LB_DEV lb_u32 ilo(lb_u32 t) { return (t & 1u) + 4 * (t >> 1); }
    LB_DEV lb_u32 ihi(lb_u32 t) { return (t & 1u) + 4 * (t >> 1) + 2; }
    LB_DEV lb_u32 hlo(lb_u32 t) { return t >> 1; }
    LB_DEV lb_u32 hhi(lb_u32 t) { return t >> 1; }
};

// The 2-bit codebook formats (8-byte units, ROCmFP2's code layout): lane t takes bytes 2t, 2t+1
// (16 codes); lb_codebook16's first two output words of those bytes are the dp4a decoders'
// w[2t] and w[2t+1] (activations in lb_codebook4_pos order, as for the dp4a kernels).
struct FrCodes2 {
    lb_u32 v, sc;
    LB_DEVM void codes(lb_u32 table, lb_u32& lo, lb_u32& hi) const {
        lo = __byte_perm(table, 0u, v & 0x3333u);
        hi = __byte_perm(table, 0u, (v >> 2) & 0x3333u);
    }
    LB_DEV lb_u32 ilo(lb_u32 t) { return 2 * t; }
    LB_DEV lb_u32 ihi(lb_u32 t) { return 2 * t + 1; }
};

// ROCmFP2: codebook {-4, -1, 1, 4}; bytes 0-3 (lanes 0, 1) scale s0, 4-7 s1.
struct FrFp2 : FrCodes2 {
    static constexpr bool SPLIT = true;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 u, lb_u32 nu, lb_u32 t) {
        lb_u64 i = row * nu + u;
        v = ((const lb_u16*)(m.q + i * 8))[t];
        sc = ((const lb_u16*)m.s)[i];
    }
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const { codes(0x0401FFFCu, lo, hi); }
    LB_DEVM void scales(float& s0, float& s1) const {
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEV lb_u32 hlo(lb_u32 t) { return t >> 1; }
    LB_DEV lb_u32 hhi(lb_u32 t) { return t >> 1; }
};

// PQ2_0 / PTQ1_0 (G = 4) and TQ2_0 (G = 8): ternary codes, one f16 scale per G units.
template <int G>
struct FrTern : FrCodes2 {
    static constexpr bool SPLIT = false;
    LB_DEVM void fetch(const Mat& m, lb_u64 row, lb_u32 u, lb_u32 nu, lb_u32 t) {
        lb_u64 i = row * nu + u;
        v = ((const lb_u16*)(m.q + i * 8))[t];
        sc = ((const lb_u16*)m.g)[i / G];
    }
    LB_DEVM void frag(lb_u32& lo, lb_u32& hi) const { codes(0x020100FFu, lo, hi); }
    LB_DEVM void scales(float& s0, float& s1) const { s0 = s1 = lb_h2f(sc); }
};

// ------------------------------------------------------------------ the skeleton ------------
// y[col * rows + row] for NC columns (grid y: column tiles) and 16 MT rows per block (grid x,
// strided). ACC > 1: the integer sums of ACC consecutive units are chained through the MMA's
// accumulator before one epilogue (legal when neither the weight nor the activation scale
// changes within ACC units: TQ2_0, whose f16 d and Q8_K d both cover 8 units); the warps' unit
// ranges are then multiples of ACC. Every lane-indexed array has LB_SIM entries: one on the
// device, 32 in the host emulation (where one thread plays the warp).
template <int NC, int MT, int P, int ACC, class Fr>
LB_DEV void lb_mvq(const Mat& m, const ActPtrs& ap, float* y, lb_u32 rows, lb_u32 nu, lb_u32 ncols) {
    constexpr int NT = NC / 8;
    constexpr int E = MT * NT * 4 * 32;  // a warp's partial sums, [mt][tt][i][lane]
    LB_SHARED float red[LB_MMA_WARPS][E];
    const lb_u32 warp = lb_tid() / 32 % LB_MMA_WARPS, lane0 = lb_tid() % 32;
    const lb_u32 col0 = lb_bid_y() * NC;
    // This warp's units [ub, ue).
    const lb_u32 per = (nu / ACC + LB_MMA_WARPS - 1) / LB_MMA_WARPS * ACC;
    const lb_u32 ub = warp * per < nu ? warp * per : nu;
    const lb_u32 ue = ub + per < nu ? ub + per : nu;
    const lb_u32 blocks = (rows + 16 * MT - 1) / (16 * MT);
    const lb_i32 magic = 0x4b400000;
    static_assert(ACC == 1 || !Fr::SPLIT, "chained units need one scale per unit");
    struct Slot {
        Fr w[MT][2];        // rows g and g + 8 of each m-tile
        lb_u32 b[NT][2];    // B words of column g of each tile
        float da[NT][2];    // activation scales of columns 2t, 2t + 1
    };
    for (lb_u32 rb = lb_bid_x(); rb < blocks; rb += lb_grid_x()) {
        const lb_u32 row0 = rb * 16 * MT;
        float acc[LB_SIM][MT][NT][4];
        lb_i32 chain[LB_SIM][MT][NT][4];
        for (int li = 0; li < LB_SIM; li++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int tt = 0; tt < NT; tt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        acc[li][mt][tt][i] = 0.0f;
                        chain[li][mt][tt][i] = magic;
                    }
        Slot ring[P][LB_SIM];
        // Loads of unit u into ring slot k (rows and columns past the end are clamped: their
        // loads stay in bounds and their outputs are dropped).
        auto fetch = [&](int k, lb_u32 u) {
            for (int li = 0; li < LB_SIM; li++) {
                const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0, g = l >> 2, t = l & 3u;
                Slot& s = ring[k][li];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        lb_u32 row = row0 + 16 * mt + g + 8 * h;
                        s.w[mt][h].fetch(m, row < rows ? row : rows - 1, u, nu, t);
                    }
#pragma unroll
                for (int tt = 0; tt < NT; tt++) {
                    lb_u32 c = col0 + 8 * tt + g;
                    const lb_i8* base = ap.aq + (lb_u64)(c < ncols ? c : ncols - 1) * nu * 32;
                    lb_u32 wl = Fr::ilo(t), wh = Fr::ihi(t);
                    s.b[tt][0] = *(const lb_u32*)(base + (lb_u64)((wl >> 2) * nu + u) * 16 + 4 * (wl & 3u));
                    s.b[tt][1] = *(const lb_u32*)(base + (lb_u64)((wh >> 2) * nu + u) * 16 + 4 * (wh & 3u));
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        lb_u32 cj = col0 + 8 * tt + 2 * t + j;
                        s.da[tt][j] = ap.ad[(lb_u64)(cj < ncols ? cj : ncols - 1) * nu + u];
                    }
                }
            }
        };
        // The MMAs and epilogue of unit u from slot k.
        auto step = [&](int k, lb_u32 u) {
            const bool last = ACC == 1 || u % ACC == ACC - 1;
            lb_u32 fa[2][MT][LB_SIM][4];
            float sw[MT][LB_SIM][2][2];  // [row h][scale half]
            lb_u32 fb[NT][LB_SIM][2];
            for (int li = 0; li < LB_SIM; li++) {
                const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0, t = l & 3u;
                const Slot& s = ring[k][li];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    lb_u32 lo[2], hi[2];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        s.w[mt][h].frag(lo[h], hi[h]);
                        if (last) s.w[mt][h].scales(sw[mt][li][h][0], sw[mt][li][h][1]);
                    }
                    if constexpr (Fr::SPLIT) {
                        // Half 0's MMA gets the words of the first scale half, half 1's the rest.
                        const bool l0 = Fr::hlo(t) == 0, h0 = Fr::hhi(t) == 0;
                        fa[0][mt][li][0] = l0 ? lo[0] : 0u;
                        fa[0][mt][li][1] = l0 ? lo[1] : 0u;
                        fa[0][mt][li][2] = h0 ? hi[0] : 0u;
                        fa[0][mt][li][3] = h0 ? hi[1] : 0u;
                        fa[1][mt][li][0] = l0 ? 0u : lo[0];
                        fa[1][mt][li][1] = l0 ? 0u : lo[1];
                        fa[1][mt][li][2] = h0 ? 0u : hi[0];
                        fa[1][mt][li][3] = h0 ? 0u : hi[1];
                    } else {
                        fa[0][mt][li][0] = lo[0];
                        fa[0][mt][li][1] = lo[1];
                        fa[0][mt][li][2] = hi[0];
                        fa[0][mt][li][3] = hi[1];
                    }
                }
#pragma unroll
                for (int tt = 0; tt < NT; tt++) {
                    fb[tt][li][0] = s.b[tt][0];
                    fb[tt][li][1] = s.b[tt][1];
                }
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int tt = 0; tt < NT; tt++) {
                    lb_i32 d0[LB_SIM][4], d1[LB_SIM][4], c0[LB_SIM][4], c1[LB_SIM][4];
                    for (int li = 0; li < LB_SIM; li++)
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            c0[li][i] = chain[li][mt][tt][i];
                            c1[li][i] = magic;
                        }
                    lb_mma16832(d0, fa[0][mt], fb[tt], c0);
                    if (Fr::SPLIT) lb_mma16832(d1, fa[1][mt], fb[tt], c1);
                    for (int li = 0; li < LB_SIM; li++) {
                        const Slot& s = ring[k][li];
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            if (!last) {
                                chain[li][mt][tt][i] = d0[li][i];
                                continue;
                            }
                            chain[li][mt][tt][i] = magic;
                            const float* sr = sw[mt][li][i >> 1];
                            const float dc = s.da[tt][i & 1];
                            const float f0 = lb_as_float((lb_u32)d0[li][i]) - 12582912.0f;
                            if (Fr::SPLIT) {
                                const float f1 = lb_as_float((lb_u32)d1[li][i]) - 12582912.0f;
                                acc[li][mt][tt][i] += dc * (sr[0] * f0 + sr[1] * f1);
                            } else {
                                acc[li][mt][tt][i] += f0 * (sr[0] * dc);
                            }
                        }
                    }
                }
        };
        // Prologue: units ub .. ub + P - 2 into slots 0 .. P - 2; then per unit, issue the
        // unit P - 1 ahead and compute this one (slots by compile-time index: unrolled P times).
#pragma unroll
        for (int k = 0; k < P - 1; k++)
            if (ub + k < ue) fetch(k, ub + k);
        for (lb_u32 u0 = ub; u0 < ue; u0 += P) {
#pragma unroll
            for (int k = 0; k < P; k++) {
                const lb_u32 u = u0 + k;
                if (u + P - 1 < ue) fetch((k + P - 1) % P, u + P - 1);
                if (u < ue) step(k, u);
            }
        }
        // The K split's partial sums meet in shared memory; every thread then adds up some
        // outputs over the warps (in warp order: deterministic).
        for (int li = 0; li < LB_SIM; li++) {
            const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int tt = 0; tt < NT; tt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) red[warp][((mt * NT + tt) * 4 + i) * 32 + l] = acc[li][mt][tt][i];
        }
        lb_barrier();
        for (lb_u32 e = lb_tid(); e < (lb_u32)E; e += LB_BLOCK) {
            float v = 0.0f;
#pragma unroll
            for (int w = 0; w < LB_MMA_WARPS; w++) v += red[w][e];
            const lb_u32 l = e % 32, i = e / 32 % 4, tt = e / 128 % NT, mt = e / (128 * NT);
            const lb_u32 row = row0 + 16 * mt + (l >> 2) + 8 * (i >> 1), c = 8 * tt + 2 * (l & 3u) + (i & 1u);
            if (row < rows && col0 + c < ncols) y[(lb_u64)(col0 + c) * rows + row] = v;
        }
        lb_barrier();
    }
}
#endif

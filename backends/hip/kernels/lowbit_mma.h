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
// Loads: a warp's weight bytes go to its own shared-memory ring of S stages by cp.async (16 B
// per lane and copy, each row's RB bytes per stage contiguous: whole 64- or 128-byte spans,
// where a lane loading only its fragment's 4 bytes would touch every sector twice), and lanes
// read their fragment words back from the ring (16-byte chunks XOR-swizzled by row: no bank
// conflicts). The small per-unit values (weight scales, B words, activation scales) come
// straight from global memory one unit ahead.
//
// Parallelism: a block (LB_MMA_WARPS warps) owns 16 MT rows; its warps split the row's units
// into contiguous ranges (K split), and the partial sums meet in shared memory at the end. So a
// 16384-row matrix gives 16384 / (16 MT) blocks of 8 warps, not 1024 / MT lone warps.
#pragma once

#if defined(LB_MMA)
#define LB_MMA_WARPS (LB_BLOCK >= 32 ? LB_BLOCK / 32 : 1)

// ------------------------------------------------------------------ staging helpers ---------
// Asynchronous copies global -> shared (cp.async, sm_80+): 16 bytes of which `valid` (0..16)
// are read and the rest zero-filled, or N whole bytes; groups committed and waited as PTX's
// cp.async.commit_group / wait_group.
#if defined(LB_HOST_EMULATION)
LB_DEV void lb_cp_async16(void* dst, const void* src, lb_u32 valid) {
    for (lb_u32 i = 0; i < 16; i++) ((lb_u8*)dst)[i] = i < valid ? ((const lb_u8*)src)[i] : 0;
}
template <int N>
LB_DEV void lb_cp_async(void* dst, const void* src) {
    for (int i = 0; i < N; i++) ((lb_u8*)dst)[i] = ((const lb_u8*)src)[i];
}
LB_DEV void lb_cp_commit() {}
template <int N>
LB_DEV void lb_cp_wait() {}
#else
LB_DEV void lb_cp_async16(void* dst, const void* src, lb_u32 valid) {
    lb_u32 d = (lb_u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid) : "memory");
}
// N = 4, 8 or 16 bytes, all read (both addresses N-aligned).
template <int N>
LB_DEV void lb_cp_async(void* dst, const void* src) {
    lb_u32 d = (lb_u32)__cvta_generic_to_shared(dst);
    if constexpr (N == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src), "n"(N) : "memory");
}
LB_DEV void lb_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
LB_DEV void lb_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
#endif

// Byte o of a staged row whose 16-byte chunks sit XOR-swizzled by `swz`.
LB_DEV lb_u32 lb_lds32(const lb_u8* rowp, lb_u32 swz, lb_u32 o) {
    return *(const lb_u32*)(rowp + ((((o >> 4) ^ swz) << 4) | (o & 15u)));
}
LB_DEV lb_u32 lb_lds16(const lb_u8* rowp, lb_u32 swz, lb_u32 o) {
    return *(const lb_u16*)(rowp + ((((o >> 4) ^ swz) << 4) | (o & 15u)));
}

// ------------------------------------------------------------------ fragment decoders --------
// Per format, as static functions: QB code bytes per unit in the q plane (HALVES: Q8_0's two
// 16-byte regions per row); frag(rowp, swz, j, t, lo, hi): lane t's two A words of the j-th
// unit of a staged row (RB bytes: HALVES puts the second region at RB / 2); the scale plane
// `splane` holds SB bytes per G units (staged like the codes); scales(bits, s0, s1): the
// weight scale(s) (s0 = s1 unless SPLIT); ilo/ihi(t): the activation words paired with lo/hi
// (ORDER names the pattern for lb_mma_acts); SPLIT formats also say which scale half lo and hi
// belong to (hlo/hhi). The integer parts are exact; the float association per unit is the
// dp4a decoders' up to the order of the final products (within the bound).

// 16-byte units: word t of the unit.
struct FrW16 {
    static constexpr int QB = 16;
    static constexpr bool HALVES = false;
    static constexpr int SB = 2, G = 1, ORDER = 0;
    LB_DEV const lb_u8* splane(const Mat& m) { return m.s; }
    LB_DEV lb_u32 word(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t) { return lb_lds32(rowp, swz, j * 16 + 4 * t); }
    LB_DEV lb_u32 ilo(lb_u32 t) { return t; }
    LB_DEV lb_u32 ihi(lb_u32 t) { return 4 + t; }
};

// Q8_0: the q plane in halves like the activations: word t of each half.
struct FrQ8_0 : FrW16 {
    static constexpr bool HALVES = true;
    static constexpr bool SPLIT = false;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        lo = lb_lds32(rowp, swz, j * 16 + 4 * t);
        hi = lb_lds32(rowp, swz, RB / 2 + j * 16 + 4 * t);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) { s0 = s1 = lb_h2f(sc); }
};

// Q4_0: low nibbles of word t are elements 4t.., high ones 16 + 4t.. (DecQ4_0's w[t], w[4+t]).
struct FrQ4_0 : FrW16 {
    static constexpr bool SPLIT = false;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        lb_u32 v = word(rowp, swz, j, t);
        lo = (lb_u32)lb_sub_bytes((lb_i32)(v & 0x0f0f0f0fu), 8);
        hi = (lb_u32)lb_sub_bytes((lb_i32)((v >> 4) & 0x0f0f0f0fu), 8);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) { s0 = s1 = lb_h2f(sc); }
};

// MXFP4: the kvalues lookup of word t (DecMxfp4's w[t], w[4+t]); scale 2^(e - 128).
struct FrMxfp4 : FrW16 {
    static constexpr bool SPLIT = false;
    static constexpr int SB = 1;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        const lb_u32 tb[4] = LB_KVALUES_MXFP4;
        lb_lut16(tb, word(rowp, swz, j, t), lo, hi);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) {
        s0 = s1 = lb_as_float(sc >= 2 ? (sc - 1) << 23 : 0x00200000u << sc);
    }
};

// ROCmFP3: 8-entry lookup of word t (DecFp3's w[t], w[4+t]); lo in the first scale half, hi in
// the second.
struct FrFp3 : FrW16 {
    static constexpr bool SPLIT = true;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        lb_lut8(0x04020100u, 0xfcfeff00u, word(rowp, swz, j, t), lo, hi);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) {
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEV lb_u32 hlo(lb_u32) { return 0; }
    LB_DEV lb_u32 hhi(lb_u32) { return 1; }
};

// NVFP4: word t's low nibbles are DecNvfp4's w[{0,1,4,5}[t]], the high ones w[{2,3,6,7}[t]];
// words 0-1 are the first sub-block (scale s0), 2-3 the second.
struct FrNvfp4 : FrW16 {
    static constexpr bool SPLIT = true;
    static constexpr int ORDER = 1;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        const lb_u32 tb[4] = LB_KVALUES_MXFP4;
        lb_lut16(tb, word(rowp, swz, j, t), lo, hi);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) {
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
    static constexpr int QB = 8;
    static constexpr bool HALVES = false;
    static constexpr int SB = 2, G = 1, ORDER = 2;
    LB_DEV const lb_u8* splane(const Mat& m) { return m.s; }
    LB_DEV void codes(lb_u32 table, lb_u32 v, lb_u32& lo, lb_u32& hi) {
        lo = __byte_perm(table, 0u, v & 0x3333u);
        hi = __byte_perm(table, 0u, (v >> 2) & 0x3333u);
    }
    LB_DEV lb_u32 ilo(lb_u32 t) { return 2 * t; }
    LB_DEV lb_u32 ihi(lb_u32 t) { return 2 * t + 1; }
};

// ROCmFP2: codebook {-4, -1, 1, 4}; bytes 0-3 (lanes 0, 1) scale s0, 4-7 s1.
struct FrFp2 : FrCodes2 {
    static constexpr bool SPLIT = true;
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        codes(0x0401FFFCu, lb_lds16(rowp, swz, j * 8 + 2 * t), lo, hi);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) {
        s0 = lb_ue4m3_b8(sc & 0xffu);
        s1 = lb_ue4m3_b8(sc >> 8);
    }
    LB_DEV lb_u32 hlo(lb_u32 t) { return t >> 1; }
    LB_DEV lb_u32 hhi(lb_u32 t) { return t >> 1; }
};

// PQ2_0 / PTQ1_0 (G = 4) and TQ2_0 (G = 8): ternary codes, one f16 scale per G units.
template <int G_>
struct FrTern : FrCodes2 {
    static constexpr bool SPLIT = false;
    static constexpr int G = G_;
    LB_DEV const lb_u8* splane(const Mat& m) { return m.g; }
    template <int RB>
    LB_DEV void frag(const lb_u8* rowp, lb_u32 swz, lb_u32 j, lb_u32 t, lb_u32& lo, lb_u32& hi) {
        codes(0x020100FFu, lb_lds16(rowp, swz, j * 8 + 2 * t), lo, hi);
    }
    LB_DEV void scales(lb_u32 sc, float& s0, float& s1) { s0 = s1 = lb_h2f(sc); }
};

// ------------------------------------------------------------------ activations ------------
// The Q8 activations (lb_quantize_q8 / lb_quantize_q8k layout) reordered for the MMA's B
// fragments: per tile of 8 columns T and unit u, the 32 lanes' two words (lane 4g + t: column
// 8T + g, words ilo(t), ihi(t) of the unit in pattern `order`: 0 FrW16, 1 FrNvfp4, 2
// FrCodes2) in af[((T nu + u) 32 + lane) 2 + {0, 1}], and the unit's 8 column scales in
// adf[(T nu + u) 8 + c]; columns past ncols are zero. One thread per (T, u, lane), so a warp's
// B fragments are one 256-byte load and its scales one 32-byte load.
#if !defined(LB_SELECT) || defined(LB_BASE)
LB_KERNEL void lb_mma_acts(const lb_i8* aq, const float* ad, lb_u32* af, float* adf, lb_u32 nu,
                           lb_u32 ncols, lb_u32 ntiles, lb_u32 order) {
    lb_u64 i = (lb_u64)lb_bid_x() * LB_BLOCK + lb_tid();
    if (i >= (lb_u64)ntiles * nu * 32) return;
    const lb_u32 l = (lb_u32)(i % 32), u = (lb_u32)(i / 32 % nu), tile = (lb_u32)(i / 32 / nu);
    const lb_u32 g = l >> 2, t = l & 3u, c = 8 * tile + g;
    const lb_u32 wl = order == 0 ? FrW16::ilo(t) : order == 1 ? FrNvfp4::ilo(t) : FrCodes2::ilo(t);
    const lb_u32 wh = order == 0 ? FrW16::ihi(t) : order == 1 ? FrNvfp4::ihi(t) : FrCodes2::ihi(t);
    lb_u32 b0 = 0, b1 = 0;
    if (c < ncols) {
        const lb_i8* base = aq + (lb_u64)c * nu * 32;
        b0 = *(const lb_u32*)(base + (lb_u64)((wl >> 2) * nu + u) * 16 + 4 * (wl & 3u));
        b1 = *(const lb_u32*)(base + (lb_u64)((wh >> 2) * nu + u) * 16 + 4 * (wh & 3u));
    }
    af[2 * i] = b0;
    af[2 * i + 1] = b1;
    if (l < 8) {
        const lb_u32 cc = 8 * tile + l;
        adf[((lb_u64)tile * nu + u) * 8 + l] = cc < ncols ? ad[(lb_u64)cc * nu + u] : 0.0f;
    }
}
#endif  // LB_BASE

// ------------------------------------------------------------------ the skeleton ------------
// How many units ahead a warp loads the small per-unit values (B words, activation scales:
// L2 hits, which the MMA otherwise waits for; ncu, session 11): AH per kernel (the stem's
// choice in lowbit_kernels.hip, LB_MVQ_ALL), a ring of AH + 1 slots; a stage's unit count (4
// or 8 in the default variants) must be a multiple of the ring, else the ring is 2. The tuning
// definition LB_MMA_AHEAD (e.g. 3 or 7) overrides every stem's AH.
#if defined(LB_MMA_AHEAD)
#define LB_MMA_AH(ah) (LB_MMA_AHEAD)
#else
#define LB_MMA_AH(ah) (ah)
#endif

// One warp's state: the B words and activation scales of the next units (a ring of D, indexed
// by the unit's position modulo D: the unit loop is unrolled over a stage, whose unit count
// is a multiple of D) and the accumulators of its 16 MT rows x NC columns, all in registers (every method
// force-inlined, every index a compile-time constant after unrolling). The weight codes and
// scales of C units per row are staged by cp.async. Lane-indexed arrays have LB_SIM entries:
// one on the device, 32 in the host emulation (where one thread plays the warp).
template <int NC, int MT, int RB, int S, int ACC, int AH, class Fr>
struct MvqWarp {
    static constexpr int NT = NC / 8;
    static constexpr lb_i32 MAGIC = 0x4b400000;
    static constexpr int C = Fr::HALVES ? RB / 32 : RB / Fr::QB;  // units per stage
    static constexpr int CPR = RB / 16;                          // 16-byte chunks per row
    static constexpr int ROWS = 16 * MT;
    static constexpr int SBR = C / Fr::G * Fr::SB;               // scale bytes per row and stage
    // Scales are staged when a row's span is a cp.async size (else, TQ2_0's 2 bytes per 8
    // units, read from global memory where used: once per chained group).
    static constexpr bool SSTAGE = SBR == 4 || SBR == 8 || SBR % 16 == 0;
    static constexpr int SCH = SBR < 16 ? SBR : 16;              // their copy size
    static constexpr int STAGE = ROWS * (RB + (SSTAGE ? SBR : 0));  // bytes per stage
    static_assert(C % 2 == 0 && CPR >= 4 && (ROWS * CPR) % 32 == 0, "stage shape");
    static_assert(C % Fr::G == 0 && (SSTAGE || ACC % C == 0), "scale staging");
    static constexpr int D = C % (AH + 1) == 0 ? AH + 1 : 2;  // small ring
    static_assert(C % D == 0, "small ring");
    struct Small {
        lb_u32 b[NT][2];  // B words of column g of each tile
        float da[NT][2];  // activation scales of columns 2t, 2t + 1
    };
    Small ring[D][LB_SIM];
    float acc[LB_SIM][MT][NT][4];
    lb_i32 chain[LB_SIM][MT][NT][4];
    lb_u8* stages;  // this warp's S stages: ROWS x RB code bytes, then ROWS x SBR scale bytes
    Mat m;
    const lb_u32* af;
    const float* adf;
    lb_u32 row0, rows, nu, tile0, lane0;

    // The swizzle of staged row r: chunk c sits at c ^ swz(r) (rows 0-7 of a fragment read
    // land on distinct banks for 8 and for 4 chunks per row).
    LB_DEV lb_u32 swz(lb_u32 r) { return CPR >= 8 ? (r & 7u) : ((r >> 1) & (lb_u32)(CPR - 1)); }
    LB_DEVM lb_u32 clamp_row(lb_u32 r) const { return row0 + r < rows ? row0 + r : rows - 1; }

    LB_DEVM void clear() {
        for (int li = 0; li < LB_SIM; li++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int tt = 0; tt < NT; tt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        acc[li][mt][tt][i] = 0.0f;
                        chain[li][mt][tt][i] = MAGIC;
                    }
    }

    // Issues the copies of units u0 .. u0 + C - 1 (u0 and nu multiples of C: the host's
    // condition) of the block's rows into stage `st`: codes, then scales (rows past the
    // matrix's end repeat its last row).
    LB_DEVM void issue(lb_u32 st, lb_u32 u0) {
        lb_u8* base = stages + st * STAGE;
        const lb_u8* sp = Fr::splane(m);
        for (int li = 0; li < LB_SIM; li++) {
            const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0;
#pragma unroll
            for (int i = 0; i < ROWS * CPR / 32; i++) {
                const lb_u32 c = l + 32 * i, r = c / CPR, ch = c % CPR;
                const lb_u64 row = clamp_row(r);
                const lb_u8* src;
                if (Fr::HALVES) {
                    const lb_u32 h = ch / (CPR / 2), u = u0 + ch % (CPR / 2);
                    src = m.q + row * nu * 32 + (lb_u64)(h * nu + u) * 16;
                } else {
                    src = m.q + (row * nu + u0) * Fr::QB + ch * 16;
                }
                lb_cp_async16(base + r * RB + ((ch ^ swz(r)) << 4), src, 16);
            }
            if constexpr (SSTAGE) {
                constexpr int SN = ROWS * SBR / SCH;  // scale copies per stage
#pragma unroll
                for (int i = 0; i < (SN + 31) / 32; i++) {
                    const lb_u32 c = l + 32 * i;
                    if (SN % 32 == 0 || c < (lb_u32)SN) {
                        const lb_u32 r = c / (SBR / SCH), k = c % (SBR / SCH);
                        const lb_u64 e = (clamp_row(r) * nu + u0) / Fr::G;
                        lb_cp_async<SCH>(base + ROWS * RB + r * SBR + k * SCH, sp + e * Fr::SB + k * SCH);
                    }
                }
            }
        }
        lb_cp_commit();
    }

    // The B words and activation scales of unit u into ring slot K.
    template <int K>
    LB_DEVM void fetch_small(lb_u32 u) {
        for (int li = 0; li < LB_SIM; li++) {
            const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0, t = l & 3u;
            Small& s = ring[K][li];
#pragma unroll
            for (int tt = 0; tt < NT; tt++) {
                const lb_u64 tu = (lb_u64)(tile0 + tt) * nu + u;
                const lb_u32* b = af + (tu * 32 + l) * 2;
                s.b[tt][0] = b[0];
                s.b[tt][1] = b[1];
                s.da[tt][0] = adf[tu * 8 + 2 * t];
                s.da[tt][1] = adf[tu * 8 + 2 * t + 1];
            }
        }
    }

    // The scale bits of unit u, the j-th of its stage, of staged row r.
    LB_DEVM lb_u32 sbits(const lb_u8* base, lb_u32 r, lb_u32 j, lb_u32 u) const {
        const lb_u8* p = SSTAGE ? base + ROWS * RB + r * SBR + (j / Fr::G) * Fr::SB
                                : Fr::splane(m) + (clamp_row(r) * nu + u) / Fr::G * Fr::SB;
        return Fr::SB == 1 ? (lb_u32)*p : (lb_u32)*(const lb_u16*)p;
    }

    // The MMAs and epilogue of unit u: the j-th of stage `st`, small values in slot K.
    template <int K>
    LB_DEVM void step(lb_u32 st, lb_u32 j, lb_u32 u) {
        const bool last = ACC == 1 || u % ACC == ACC - 1;
        const lb_u8* base = stages + st * STAGE;
        lb_u32 fa[2][MT][LB_SIM][4];
        float sw[MT][LB_SIM][2][2];  // [row h][scale half]
        lb_u32 fb[NT][LB_SIM][2];
        for (int li = 0; li < LB_SIM; li++) {
            const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : lane0, g = l >> 2, t = l & 3u;
            const Small& s = ring[K][li];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                lb_u32 lo[2], hi[2];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const lb_u32 r = 16 * mt + g + 8 * h;
                    Fr::template frag<RB>(base + r * RB, swz(r), j, t, lo[h], hi[h]);
                    if (last) Fr::scales(sbits(base, r, j, u), sw[mt][li][h][0], sw[mt][li][h][1]);
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
                        c1[li][i] = MAGIC;
                    }
                lb_mma16832(d0, fa[0][mt], fb[tt], c0);
                if (Fr::SPLIT) lb_mma16832(d1, fa[1][mt], fb[tt], c1);
                for (int li = 0; li < LB_SIM; li++) {
                    const Small& s = ring[K][li];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        if (!last) {
                            chain[li][mt][tt][i] = d0[li][i];
                            continue;
                        }
                        chain[li][mt][tt][i] = MAGIC;
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
    }

    // The C units of stage `st` starting at unit u0 (those below ue), D - 1 units' small loads
    // ahead.
    template <int J>
    LB_DEVM void units(lb_u32 st, lb_u32 u0, lb_u32 ue) {
        if constexpr (J < C) {
            const lb_u32 u = u0 + J;
            if (u + D - 1 < ue) fetch_small<(J + D - 1) % D>(u + D - 1);
            if (u < ue) step<J % D>(st, J, u);
            units<J + 1>(st, u0, ue);
        }
    }

    // The small values of units ub .. ub + D - 2 (those below ue) into slots 0 .. D - 2.
    template <int K>
    LB_DEVM void prologue_small(lb_u32 ub, lb_u32 ue) {
        if constexpr (K < D - 1) {
            if (ub + K < ue) fetch_small<K>(ub + K);
            prologue_small<K + 1>(ub, ue);
        }
    }

    // Units ub .. ue - 1 in stages of C: S - 1 stages in flight while one is computed (a
    // group is committed every round, empty at the tail, so wait_group S - 1 always means
    // "this round's stage has landed").
    LB_DEVM void run(lb_u32 ub, lb_u32 ue) {
        if (ub >= ue) return;
        const lb_u32 nst = (ue - ub + C - 1) / C;
#pragma unroll
        for (int k = 0; k < S - 1; k++) {
            if ((lb_u32)k < nst) issue(k, ub + k * C);
            else lb_cp_commit();
        }
        prologue_small<0>(ub, ue);
        for (lb_u32 i = 0; i < nst; i++) {
            const lb_u32 nx = i + S - 1;
            if (nx < nst) issue(nx % S, ub + nx * C);
            else lb_cp_commit();
            lb_cp_wait<S - 1>();
            lb_syncwarp();
            units<0>(i % S, ub + i * C, ue);
            lb_syncwarp();  // every lane is done with stage i % S before it is refilled
        }
    }
};

// y[col * rows + row] for NC columns (grid y: column tiles) and 16 MT rows per block (grid x,
// strided); RB staged code bytes per row and stage, S stages; activations as lb_mma_acts
// leaves them (af, adf). The host launches it only when nu is a multiple of a stage's units.
// ACC > 1: the integer sums of ACC consecutive units are chained through the MMA's
// accumulator before one epilogue (legal when neither the weight nor the activation scale
// changes within ACC units: TQ2_0, whose f16 d and Q8_K d both cover 8 units); the warps'
// unit ranges are then multiples of ACC (and of a stage's units).
template <int NC, int MT, int RB, int S, int ACC, int AH, class Fr>
LB_DEV void lb_mvq(const Mat& m, const lb_u32* af, const float* adf, float* y, lb_u32 rows, lb_u32 nu,
                   lb_u32 ncols) {
    static_assert(ACC == 1 || !Fr::SPLIT, "chained units need one scale per unit");
    typedef MvqWarp<NC, MT, RB, S, ACC, AH, Fr> W;
    constexpr int NT = NC / 8;
    constexpr int E = MT * NT * 4 * 32;  // a warp's partial sums, [mt][tt][i][lane]
    constexpr int Q = W::C > ACC ? W::C : ACC;
    static_assert(Q % W::C == 0 && Q % ACC == 0, "unit ranges");
    // Static shared memory of the device block (8 warps: backend.rs BLOCK) within 48 KiB.
    static_assert(8 * (E * 4 + S * W::STAGE) <= 48 * 1024, "shared memory");
    LB_SHARED float red[LB_MMA_WARPS][E];
    LB_SHARED __align__(16) lb_u8 ring[LB_MMA_WARPS][S * W::STAGE];
    const lb_u32 warp = lb_tid() / 32 % LB_MMA_WARPS;
    // This warp's units [ub, ue).
    const lb_u32 per = ((nu + Q - 1) / Q + LB_MMA_WARPS - 1) / LB_MMA_WARPS * Q;
    const lb_u32 ub = warp * per < nu ? warp * per : nu;
    const lb_u32 ue = ub + per < nu ? ub + per : nu;
    const lb_u32 blocks = (rows + 16 * MT - 1) / (16 * MT);
    const lb_u32 col0 = lb_bid_y() * NC;
    W w;
    w.stages = ring[warp];
    w.m = m;
    w.af = af;
    w.adf = adf;
    w.rows = rows;
    w.nu = nu;
    w.tile0 = col0 / 8;
    w.lane0 = lb_tid() % 32;
    for (lb_u32 rb = lb_bid_x(); rb < blocks; rb += lb_grid_x()) {
        w.row0 = rb * 16 * MT;
        w.clear();
        w.run(ub, ue);
        // The K split's partial sums meet in shared memory; every thread then adds up some
        // outputs over the warps (in warp order: deterministic).
        for (int li = 0; li < LB_SIM; li++) {
            const lb_u32 l = LB_SIM > 1 ? (lb_u32)li : w.lane0;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int tt = 0; tt < NT; tt++)
#pragma unroll
                    for (int i = 0; i < 4; i++) red[warp][((mt * NT + tt) * 4 + i) * 32 + l] = w.acc[li][mt][tt][i];
        }
        lb_barrier();
        for (lb_u32 e = lb_tid(); e < (lb_u32)E; e += LB_BLOCK) {
            float v = 0.0f;
#pragma unroll
            for (int k = 0; k < LB_MMA_WARPS; k++) v += red[k][e];
            const lb_u32 l = e % 32, i = e / 32 % 4, tt = e / 128 % NT, mt = e / (128 * NT);
            const lb_u32 row = w.row0 + 16 * mt + (l >> 2) + 8 * (i >> 1), c = 8 * tt + 2 * (l & 3u) + (i & 1u);
            if (row < rows && col0 + c < ncols) y[(lb_u64)(col0 + c) * rows + row] = v;
        }
        lb_barrier();
    }
}
#endif

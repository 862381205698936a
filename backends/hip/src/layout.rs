//! The device layout: a canonical matrix split into planes so every kernel load is aligned and
//! coalesced, one table row per format ([`split`]). Pure host code, no device calls.
//!
//! Every format is cut into units of 32 weights (`nu = cols / 32` per row). Planes, row after
//! row, unit after unit:
//!
//! * `q`: the unit's code bytes (`unit_q` per unit);
//! * `s`: the unit's scale bytes (`unit_s` per unit, may be 0);
//! * `g`: per group of `group` units (a 64/128/256-element block), `group_bytes` each;
//! * `r`: per row, the first `r_bytes` of the row header (the HFP4 family's f16 row scale).
//!
//! | format | q per unit | s per unit | g per group | repack |
//! |---|---|---|---|---|
//! | Q8_0 | 32 B (first halves of a row's units, then second) | f16 d | - | slices |
//! | Q4_0 / Q4_1 | 16 B | f16 d / d, m | - | slices |
//! | MXFP4 | 16 B | e | - | slices |
//! | NVFP4 | 16 B (two sub-blocks) | two UE4M3 | - | slices, 2 units per block |
//! | ROCmFP2 | 8 B | e[0], e[1] | - | slices |
//! | ROCmFP3 | 16 B: one 3-bit code per nibble, Q4_0 order | e[0], e[1] | - | 14 -> 18 B |
//! | PQ2_0 | 8 B | - | f16 d per 4 | slices |
//! | PTQ1_0 | 8 B: trits as PQ2_0 codes | - | f16 d per 4 | 28 -> 34 B per 128 |
//! | TQ2_0 | 8 B: codes in ROCmFP2's layout | - | f16 d per 8 | same size |
//! | Q4_K | 16 B: the sub-block's nibbles, Q4_0 order | scale, min (unpacked) | d, dmin per 8 | 144 -> 148 B |
//! | Q6_K | 16 B low nibbles (Q4_0 order) | 8 B high pairs | f16 d + 16 i8 scales per 8 | same size |
//! | HFP4G32 / MFP4G32 / MFP4G32P | 16 B | scale byte | - | slices, r = f16 row_scale_a |
//!
//! The kernels (kernels/lowbit_kernels.hip) read exactly these planes. Validation happens
//! before the split (the core's decoder on every row), so a plane never holds an illegal byte
//! and the repack functions cannot fail.

use lowbit_core::backend::MatrixDesc;
use lowbit_core::format::ggml::kquant::scales::get_scale_min_k4;
use lowbit_core::format::prism::BlockPtq1_0;
use lowbit_core::format::rocmfpx::BlockRocmFp3;
use lowbit_core::registry::{ActFormat, FormatId};

/// The three planes of a matrix (plus the per-row plane).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Planes {
    pub q: Vec<u8>,
    pub s: Vec<u8>,
    pub g: Vec<u8>,
    pub r: Vec<u8>,
}

/// How one canonical block becomes plane bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Repack {
    /// Byte ranges (offset, length) of the block: `s` and `q` split evenly into the block's
    /// units, `g` copied once per block.
    Slices { s: (usize, usize), q: (usize, usize), g: (usize, usize) },
    /// A format-specific function of one (validated) block.
    Custom(fn(&[u8], &mut Planes)),
}

/// Which kernel family a format uses and how its blocks split into planes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split {
    /// Kernel name stem (`lb_mv_<stem>_<nc>_r<r>`).
    pub stem: &'static str,
    /// The activation format the device prepares (the registry's).
    pub act: ActFormat,
    /// Activation quants stored in lb_codebook16 order (the 2-bit kernels).
    pub codebook_order: bool,
    /// The dp4a kernels take the activations transposed instead (lb_quantize_q8's order 2,
    /// with the integer quant sums: the ternary formats' table-free DecTern); the tensor-core
    /// kernels still take `codebook_order`.
    pub transposed_dp4a: bool,
    /// Code bytes per unit.
    pub unit_q: usize,
    /// Scale bytes per unit.
    pub unit_s: usize,
    /// Units per g-plane entry, and its bytes.
    pub group: usize,
    pub group_bytes: usize,
    /// Bytes per row kept in the r plane (from the start of the row header).
    pub r_bytes: usize,
    /// (rows per warp, pipeline code) at n = 1 (see backend.rs `work_shape`, `PIPELINES`).
    pub n1: (usize, usize),
    /// The q plane holds each row's first 16 code bytes of every unit, then the last 16
    /// (Q8_0: matches the activation layout, keeps 16-byte loads contiguous across a warp).
    pub halves: bool,
    pub repack: Repack,
}

/// Every kernel stem, once (for resolving kernel names at load).
pub(crate) const STEMS: [(&str, bool); 13] = [
    ("q8_0", false),
    ("q4_0", false),
    ("q4_1", false),
    ("mxfp4", false),
    ("nvfp4", false),
    ("rocmfp2", false),
    ("rocmfp3", false),
    ("pq2", false),
    ("tq2_0", false),
    ("q4_k", false),
    ("q6_k", false),
    ("hfp4", true),
    ("hfp4p", true),
];

/// The stems with tensor-core kernels for column tiles of 8 and 16
/// (`lb_mv_<stem>_<nc>_mma_...`, kernels/lowbit_mma.h): the activation word order of each
/// one's fragment decoder (`lb_mma_acts`' `order`: 0 FrW16, 1 FrNvfp4, 2 FrCodes2) and the
/// code of its default variant (backend.rs `MMA_VARIANTS`; 0 = not the default: Q8_0, whose
/// dp4a kernel was faster at n = 8 on the H200, 95 against 136-141 us at 16384x16384:
/// docs/BENCHMARKS.md, session 7). TQ2_0 takes 18 (m1b64s2: 77 against 92 us there).
pub(crate) const MMA_STEMS: [(&str, u32, usize); 8] = [
    ("q8_0", 0, 0),
    ("q4_0", 0, 32),
    ("mxfp4", 0, 32),
    ("nvfp4", 1, 32),
    ("rocmfp2", 2, 32),
    ("rocmfp3", 0, 32),
    ("pq2", 2, 32),
    ("tq2_0", 2, 18),
];

/// The split of `format`, or None if the HIP backend has no kernel for it.
pub(crate) fn split(format: FormatId) -> Option<Split> {
    let base = |stem, unit_q, unit_s, repack| Split {
        stem,
        act: format.info().activation,
        codebook_order: false,
        transposed_dp4a: false,
        unit_q,
        unit_s,
        group: 1,
        group_bytes: 0,
        r_bytes: 0,
        n1: n1_shape(format),
        halves: false,
        repack,
    };
    let sl = |s, q, g| Repack::Slices { s, q, g };
    let tern = |stem, group, repack| Split {
        codebook_order: true,
        transposed_dp4a: true,
        group,
        group_bytes: 2,
        ..base(stem, 8, 0, repack)
    };
    Some(match format {
        FormatId::Q8_0 => {
            Split { halves: true, ..base("q8_0", 32, 2, sl((0, 2), (2, 32), (0, 0))) }
        }
        FormatId::Q4_0 => base("q4_0", 16, 2, sl((0, 2), (2, 16), (0, 0))),
        FormatId::Q4_1 => base("q4_1", 16, 4, sl((0, 4), (4, 16), (0, 0))),
        FormatId::Mxfp4 => base("mxfp4", 16, 1, sl((0, 1), (1, 16), (0, 0))),
        FormatId::Nvfp4 => base("nvfp4", 16, 2, sl((0, 4), (4, 32), (0, 0))),
        FormatId::RocmFp2 => {
            Split { codebook_order: true, ..base("rocmfp2", 8, 2, sl((8, 2), (0, 8), (0, 0))) }
        }
        FormatId::RocmFp3 => base("rocmfp3", 16, 2, Repack::Custom(repack_fp3)),
        FormatId::Pq2_0 => tern("pq2", 4, sl((0, 0), (2, 32), (0, 2))),
        FormatId::Ptq1_0 => tern("pq2", 4, Repack::Custom(repack_ptq1_0)),
        FormatId::Tq2_0 => tern("tq2_0", 8, Repack::Custom(repack_tq2_0)),
        FormatId::Q4K => {
            Split { group: 8, group_bytes: 4, ..base("q4_k", 16, 2, Repack::Custom(repack_q4_k)) }
        }
        FormatId::Q6K => {
            Split { group: 8, group_bytes: 18, ..base("q6_k", 16, 8, Repack::Custom(repack_q6_k)) }
        }
        FormatId::Hfp4G32 | FormatId::Mfp4G32 => {
            Split { r_bytes: 2, ..base("hfp4", 16, 1, sl((0, 1), (1, 16), (0, 0))) }
        }
        FormatId::Mfp4G32P => {
            Split { r_bytes: 2, ..base("hfp4p", 16, 1, sl((0, 1), (1, 16), (0, 0))) }
        }
        _ => return None,
    })
}

/// (rows per warp, pipeline code) at n = 1 (backend.rs `PIPELINES`): the fastest point of the
/// session-6 sweeps at 16384x16384 on an H200 (docs/bench/hip-h200-2026-12-01-s6-sweep{1,2}.json:
/// rows 1, 2, 4 x pipelines 1, 2, 4, 8, then 2, 12, 14).
fn n1_shape(format: FormatId) -> (usize, usize) {
    match format {
        FormatId::Q8_0 | FormatId::Q6K => (4, 2),
        FormatId::RocmFp2 => (2, 14),
        FormatId::RocmFp3 => (1, 14),
        _ => (2, 12),
    }
}

/// The stems with staged n = 1 kernels (`lb_mv_<stem>_1_r<R>_u<30 + S>`, kernels
/// lowbit_kernels.hip `LB_MV_1S`), run only when forced (backend.rs `STAGED_PIPELINES`: they
/// were slower than the defaults on the H200, docs/BENCHMARKS.md, session 12).
pub(crate) const STAGED_STEMS: [&str; 8] =
    ["mxfp4", "nvfp4", "rocmfp2", "rocmfp3", "pq2", "tq2_0", "hfp4", "hfp4p"];

/// Splits validated canonical bytes (`rows * row_bytes(cols)`) into planes.
pub(crate) fn to_planes(sp: &Split, desc: &MatrixDesc, bytes: &[u8], row_bytes: usize) -> Planes {
    let g = desc.format.geometry();
    let nu = desc.cols / 32;
    let units = g.block_elems / 32;
    let mut p = Planes {
        q: Vec::with_capacity(desc.rows * nu * sp.unit_q),
        s: Vec::with_capacity(desc.rows * nu * sp.unit_s),
        g: Vec::with_capacity(desc.rows * (nu / sp.group) * sp.group_bytes),
        r: Vec::with_capacity(desc.rows * sp.r_bytes),
    };
    for row in bytes.chunks_exact(row_bytes.max(1)).take(desc.rows) {
        p.r.extend_from_slice(&row[..sp.r_bytes]);
        let blocks = || row[g.row_header_bytes..].chunks_exact(g.block_bytes);
        match sp.repack {
            Repack::Slices { s, q, g } => {
                let (sl, ql) = (s.1 / units, q.1 / units);
                for blk in blocks() {
                    p.g.extend_from_slice(&blk[g.0..g.0 + g.1]);
                    for u in 0..units {
                        p.s.extend_from_slice(&blk[s.0 + u * sl..s.0 + (u + 1) * sl]);
                    }
                    if !sp.halves {
                        for u in 0..units {
                            p.q.extend_from_slice(&blk[q.0 + u * ql..q.0 + (u + 1) * ql]);
                        }
                    }
                }
                if sp.halves {
                    for part in 0..2 {
                        for blk in blocks() {
                            let o = q.0 + part * q.1 / 2;
                            p.q.extend_from_slice(&blk[o..o + q.1 / 2]);
                        }
                    }
                }
            }
            Repack::Custom(f) => blocks().for_each(|blk| f(blk, &mut p)),
        }
    }
    p
}

/// 32 codes (2 bits each) in ROCmFP2's layout: element 4j + i at bits 2i of byte j.
fn push_codes2(q: &mut Vec<u8>, codes: impl Fn(usize) -> u8) {
    for j in 0..8 {
        q.push((0..4).fold(0u8, |b, i| b | ((codes(4 * j + i) & 3) << (2 * i))));
    }
}

/// 32 nibbles in ggml's Q4_0 order: byte j = element j | element j + 16 << 4.
fn push_nibbles(q: &mut Vec<u8>, nib: impl Fn(usize) -> u8) {
    for j in 0..16 {
        q.push((nib(j) & 15) | ((nib(j + 16) & 15) << 4));
    }
}

/// ROCmFP3 (14 B: qs[12], e[2]): one code per nibble, scales as stored.
fn repack_fp3(blk: &[u8], p: &mut Planes) {
    let b: BlockRocmFp3 = bytemuck::pod_read_unaligned(blk);
    let c = b.codes();
    push_nibbles(&mut p.q, |i| c[i]);
    p.s.extend_from_slice(&b.e);
}

/// PTQ1_0 (28 B: qs[24], qh[2], d): trits + 1 as PQ2_0's 2-bit codes, four units, d per block.
fn repack_ptq1_0(blk: &[u8], p: &mut Planes) {
    let b: BlockPtq1_0 = bytemuck::pod_read_unaligned(blk);
    let mut t = [0i8; 128];
    b.trits(&mut t);
    for u in 0..4 {
        push_codes2(&mut p.q, |e| (t[32 * u + e] + 1) as u8);
    }
    p.g.extend_from_slice(&blk[26..28]);
}

/// TQ2_0 (66 B: qs[64], d): element 128h + 32l + m is bits 2l of qs[32h + m].
fn repack_tq2_0(blk: &[u8], p: &mut Planes) {
    let code = |i: usize| (blk[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
    for u in 0..8 {
        push_codes2(&mut p.q, |e| code(32 * u + e));
    }
    p.g.extend_from_slice(&blk[64..66]);
}

/// Q4_K (144 B: d, dmin, scales[12], qs[128]): sub-block j's nibbles are (qs[32(j/2) + e] >>
/// 4(j%2)) & 15; its 6-bit scale and min unpacked to bytes.
fn repack_q4_k(blk: &[u8], p: &mut Planes) {
    let sc: [u8; 12] = blk[4..16].try_into().unwrap_or([0; 12]);
    let qs = &blk[16..144];
    for j in 0..8 {
        push_nibbles(&mut p.q, |e| qs[32 * (j / 2) + e] >> (4 * (j % 2)));
        let (s, m) = get_scale_min_k4(j, &sc);
        p.s.extend_from_slice(&[s, m]);
    }
    p.g.extend_from_slice(&blk[0..4]);
}

/// Q6_K (210 B: ql[128], qh[64], scales[16], d): element e = 128h + r has low nibble
/// (ql[64h + r%64] >> 4(r/64)) & 15 and high pair (qh[32h + r%32] >> 2(r/32)) & 3. Per unit:
/// the low nibbles in Q4_0 order (q), 8 bytes of pairs (s): element 4(4x + t) + k at bits 2t
/// of byte 4x + k; per block d, then the 16 scales (g), so every plane load is aligned.
fn repack_q6_k(blk: &[u8], p: &mut Planes) {
    let (ql, qh, sc) = (&blk[0..128], &blk[128..192], &blk[192..208]);
    for u in 0..8 {
        let at = |i: usize| {
            let (h, r) = ((32 * u + i) / 128, (32 * u + i) % 128);
            let low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
            (low, (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3)
        };
        push_nibbles(&mut p.q, |i| at(i).0);
        let mut hi = [0u8; 8];
        for i in 0..32 {
            let (g, k) = (i / 4, i % 4);
            hi[4 * (g / 4) + k] |= at(i).1 << (2 * (g % 4));
        }
        p.s.extend_from_slice(&hi);
    }
    p.g.extend_from_slice(&blk[208..210]);
    p.g.extend_from_slice(sc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_every_block_byte_once() {
        for f in FormatId::ALL {
            let Some(sp) = split(f) else { continue };
            let g = f.geometry();
            assert_eq!(g.block_elems % 32, 0, "{f}");
            let units = g.block_elems / 32;
            assert_eq!(g.block_elems / 32 % sp.group, 0, "{f}");
            if let Repack::Slices { s, q, g: gp } = sp.repack {
                assert_eq!(s.1 + q.1 + gp.1, g.block_bytes, "{f}");
                assert_eq!((q.1 / units, s.1 / units), (sp.unit_q, sp.unit_s), "{f}");
                assert_eq!(gp.1, sp.group_bytes, "{f}");
                let mut used = vec![0u8; g.block_bytes];
                for (o, l) in [s, q, gp] {
                    used[o..o + l].iter_mut().for_each(|u| *u += 1);
                }
                assert!(used.iter().all(|&u| u == 1), "{f}");
            }
        }
    }

    #[test]
    fn plane_sizes_match_the_table() {
        for f in FormatId::ALL {
            let Some(sp) = split(f) else { continue };
            let k = f.geometry().row_multiple.max(256);
            let rb = f.row_bytes(k).unwrap();
            let desc = MatrixDesc { format: f, rows: 3, cols: k };
            let p = to_planes(&sp, &desc, &vec![0u8; 3 * rb], rb);
            let nu = k / 32;
            assert_eq!(p.q.len(), 3 * nu * sp.unit_q, "{f}");
            assert_eq!(p.s.len(), 3 * nu * sp.unit_s, "{f}");
            assert_eq!(p.g.len(), 3 * nu / sp.group * sp.group_bytes, "{f}");
            assert_eq!(p.r.len(), 3 * sp.r_bytes, "{f}");
            assert!(STEMS.iter().any(|(s, _)| *s == sp.stem), "{f}");
        }
    }

    #[test]
    fn q4_0_planes_in_order() {
        let desc = MatrixDesc { format: FormatId::Q4_0, rows: 2, cols: 64 };
        let bytes: Vec<u8> = (0..72u8).collect();
        let p = to_planes(&split(FormatId::Q4_0).unwrap(), &desc, &bytes, 36);
        assert_eq!(p.s, [0, 1, 18, 19, 36, 37, 54, 55]);
        assert_eq!(&p.q[..16], &bytes[2..18]);
        assert_eq!(&p.q[48..], &bytes[56..72]);
        assert!(p.r.is_empty());
    }

    #[test]
    fn q8_0_quants_split_into_halves() {
        let desc = MatrixDesc { format: FormatId::Q8_0, rows: 1, cols: 64 };
        let bytes: Vec<u8> = (0..68u8).collect();
        let p = to_planes(&split(FormatId::Q8_0).unwrap(), &desc, &bytes, 68);
        assert_eq!(p.s, [0, 1, 34, 35]);
        assert_eq!(&p.q[..16], &bytes[2..18]);
        assert_eq!(&p.q[16..32], &bytes[36..52]);
        assert_eq!(&p.q[32..48], &bytes[18..34]);
        assert_eq!(&p.q[48..], &bytes[52..68]);
    }

    #[test]
    fn nvfp4_units_take_half_a_block_each() {
        let desc = MatrixDesc { format: FormatId::Nvfp4, rows: 1, cols: 64 };
        let bytes: Vec<u8> = (0..36u8).collect();
        let p = to_planes(&split(FormatId::Nvfp4).unwrap(), &desc, &bytes, 36);
        assert_eq!(p.s, [0, 1, 2, 3]);
        assert_eq!(p.q, (4..36).collect::<Vec<u8>>());
    }

    #[test]
    fn hfp4_keeps_row_scale_and_drops_the_rest_of_the_header() {
        let desc = MatrixDesc { format: FormatId::Hfp4G32, rows: 1, cols: 32 };
        let bytes: Vec<u8> = (0..33u8).collect();
        let p = to_planes(&split(FormatId::Hfp4G32).unwrap(), &desc, &bytes, 33);
        assert_eq!(p.r, [0, 1]);
        assert_eq!(p.s, [16]);
        assert_eq!(p.q, (17..33).collect::<Vec<u8>>());
    }

    #[test]
    fn tq2_0_codes_land_in_rocmfp2_order() {
        // Element 128 + 32*2 + 5 = 197: bits 4..6 of qs[32 + 5]; unit 6, element 5 = byte 1,
        // bits 2..4 of that unit's 8 bytes.
        let mut blk = [0u8; 66];
        blk[37] = 0b10 << 4;
        let mut p = Planes::default();
        repack_tq2_0(&blk, &mut p);
        let mut want = vec![0u8; 64];
        want[6 * 8 + 1] = 0b10 << 2;
        assert_eq!(p.q, want);
    }

    #[test]
    fn q6_k_high_pairs() {
        // Element 197 = 128 + 69: high pair from qh[32 + 5] bits 4..6 (r/32 = 2).
        let mut blk = [0u8; 210];
        blk[128 + 37] = 0b11 << 4;
        let mut p = Planes::default();
        repack_q6_k(&blk, &mut p);
        // Unit 6 (elements 192..224), element 5: group g = 1, k = 1 -> byte 4*0 + 1, bits 2.
        assert_eq!(p.s[6 * 8 + 1], 0b11 << 2);
        assert_eq!(p.s.iter().filter(|&&b| b != 0).count(), 1);
        assert!(p.q.iter().all(|&b| b == 0));
    }
}

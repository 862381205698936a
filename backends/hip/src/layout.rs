//! The device layout: a canonical matrix split into planes (quant bytes, scale bytes, per-row
//! values) so every kernel load is aligned and coalesced. Pure host code, no device calls.
//!
//! Per format (`nb` blocks per row; planes row after row, block after block):
//!
//! | format | q plane (per block) | s plane (per block) | r plane (per row) |
//! |---|---|---|---|
//! | Q8_0 | qs, 32 B | f16 d, 2 B | - |
//! | Q4_0 | qs, 16 B | f16 d, 2 B | - |
//! | ROCmFP2 | qs, 8 B | e[0], e[1] | - |
//! | HFP4G32 / MFP4G32 / MFP4G32P | qs, 16 B | scale byte | f16 row_scale_a |
//!
//! The kernels (kernels/lowbit_kernels.hip) read exactly these planes. Validation happens
//! before the split (the core's decoder on every row), so a plane never holds an illegal byte.

use lowbit_core::backend::MatrixDesc;
use lowbit_core::registry::FormatId;

/// Which kernel family a format uses, and how its blocks split into planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// Kernel name stem (`lb_mv_<stem>_<nc>`).
    pub stem: &'static str,
    /// Bytes of the row header (the r plane takes `r_bytes` from its start).
    pub header: usize,
    /// Bytes per row kept in the r plane.
    pub r_bytes: usize,
    /// Block size in bytes and the (offset, length) of the scale and quant parts.
    pub block: usize,
    pub s: (usize, usize),
    pub q: (usize, usize),
    /// Activations: quantized to Q8_0 on the device (true) or f32.
    pub q8_act: bool,
    /// The q plane holds each row's first 16 quant bytes of every block, then the last 16
    /// (Q8_0: matches the activation layout, keeps 16-byte loads contiguous across a warp).
    pub halves: bool,
}

/// The split of `format`, or None if the HIP backend has no kernel for it.
pub(crate) fn split(format: FormatId) -> Option<Split> {
    let g = |stem, block, s, q| Split {
        stem,
        header: 0,
        r_bytes: 0,
        block,
        s,
        q,
        q8_act: true,
        halves: false,
    };
    let hfp = |stem| Split {
        stem,
        header: 16,
        r_bytes: 2,
        block: 17,
        s: (0, 1),
        q: (1, 16),
        q8_act: false,
        halves: false,
    };
    Some(match format {
        FormatId::Q8_0 => Split { halves: true, ..g("q8_0", 34, (0, 2), (2, 32)) },
        FormatId::Q4_0 => g("q4_0", 18, (0, 2), (2, 16)),
        FormatId::RocmFp2 => g("rocmfp2", 10, (8, 2), (0, 8)),
        FormatId::Hfp4G32 | FormatId::Mfp4G32 => hfp("hfp4"),
        FormatId::Mfp4G32P => hfp("hfp4p"),
        _ => return None,
    })
}

/// The three planes of a matrix.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Planes {
    pub q: Vec<u8>,
    pub s: Vec<u8>,
    pub r: Vec<u8>,
}

/// Splits validated canonical bytes (`rows * row_bytes(cols)`) into planes.
pub(crate) fn to_planes(sp: &Split, desc: &MatrixDesc, bytes: &[u8], row_bytes: usize) -> Planes {
    let nb = desc.cols / 32;
    let mut p = Planes {
        q: Vec::with_capacity(desc.rows * nb * sp.q.1),
        s: Vec::with_capacity(desc.rows * nb * sp.s.1),
        r: Vec::with_capacity(desc.rows * sp.r_bytes),
    };
    for row in bytes.chunks_exact(row_bytes.max(1)).take(desc.rows) {
        p.r.extend_from_slice(&row[..sp.r_bytes]);
        let blocks = || row[sp.header..].chunks_exact(sp.block);
        for blk in blocks() {
            p.s.extend_from_slice(&blk[sp.s.0..sp.s.0 + sp.s.1]);
        }
        if sp.halves {
            let h = sp.q.1 / 2;
            for part in 0..2 {
                for blk in blocks() {
                    let o = sp.q.0 + part * h;
                    p.q.extend_from_slice(&blk[o..o + h]);
                }
            }
        } else {
            for blk in blocks() {
                p.q.extend_from_slice(&blk[sp.q.0..sp.q.0 + sp.q.1]);
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_every_block_byte_once() {
        for f in FormatId::ALL {
            if let Some(sp) = split(f) {
                let g = f.geometry();
                assert_eq!(sp.block, g.block_bytes, "{f}");
                assert_eq!(sp.header, g.row_header_bytes, "{f}");
                assert_eq!(sp.s.1 + sp.q.1, sp.block, "{f}");
                let mut used = vec![0u8; sp.block];
                for (o, l) in [sp.s, sp.q] {
                    used[o..o + l].iter_mut().for_each(|u| *u += 1);
                }
                assert!(used.iter().all(|&u| u == 1), "{f}");
            }
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
    fn hfp4_keeps_row_scale_and_drops_the_rest_of_the_header() {
        let desc = MatrixDesc { format: FormatId::Hfp4G32, rows: 1, cols: 32 };
        let bytes: Vec<u8> = (0..33u8).collect();
        let p = to_planes(&split(FormatId::Hfp4G32).unwrap(), &desc, &bytes, 33);
        assert_eq!(p.r, [0, 1]);
        assert_eq!(p.s, [16]);
        assert_eq!(p.q, (17..33).collect::<Vec<u8>>());
    }
}

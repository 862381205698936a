//! Activation preparation: every column of `x` rotated (for rotated formats) and quantized into
//! the format's activation format once per matmul call, then shared by every row and thread.
//!
//! Quantization calls the core's reference encoders ([`codec::encode_row`]), so the bytes are
//! exactly those [`lowbit_core::backend::PreparedActivations`] holds (a test checks this);
//! the cost is K values per column, negligible next to the weights. For Q8_0 the block scales
//! are also widened to f32 once here, so kernels do not convert f16 per row.
//!
//! What must not live here: kernels, threads beyond the per-column split.

use bytemuck::Zeroable;
use lowbit_core::codec::{self, ActRow, EncodeOptions};
use lowbit_core::format::ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use lowbit_core::registry::{ActFormat, Rotation};
use lowbit_core::{Error, FormatId};
use rayon::prelude::*;

/// Prepared activations of `n` columns of `k` elements each.
#[derive(Clone, Debug)]
pub struct Acts {
    /// Elements per column.
    pub k: usize,
    /// Columns.
    pub n: usize,
    /// The data, column after column.
    pub data: ActData,
}

/// The prepared data, one variant per activation format.
#[derive(Clone, Debug)]
pub enum ActData {
    /// f32 (rotated where the format needs it).
    F32(Vec<f32>),
    /// Q8_0 blocks and their scales as f32.
    Q8_0 {
        /// Blocks, `k / 32` per column.
        blocks: Vec<BlockQ8_0>,
        /// `blocks[i].d` widened to f32.
        d: Vec<f32>,
    },
    /// Q8_1 blocks.
    Q8_1(Vec<BlockQ8_1>),
    /// Q8_K blocks.
    Q8K(Vec<BlockQ8K>),
}

fn first_error(results: Vec<Result<(), Error>>) -> Result<(), Error> {
    results.into_iter().collect()
}

/// Quantizes every column of `src` (columns of `k`) into `dst` (`per` blocks per column) with
/// the core's reference encoder for `act`; the first failing column (lowest index) wins, its
/// element index shifted to a position in `src`.
fn encode_cols<B: bytemuck::Pod + Send>(
    act: FormatId,
    src: &[f32],
    k: usize,
    per: usize,
    dst: &mut [B],
) -> Result<(), Error> {
    let opts = EncodeOptions::default();
    let res: Vec<Result<(), Error>> = src
        .par_chunks_exact(k)
        .zip(dst.par_chunks_exact_mut(per))
        .enumerate()
        .map(|(j, (x, out))| {
            codec::encode_row(act, x, &opts, bytemuck::cast_slice_mut(out))
                .map_err(|e| e.at_element(j * k))
        })
        .collect();
    first_error(res)
}

impl Acts {
    /// Rotates and quantizes the `n` columns of `x` (`x.len() == n * k`) for `format`.
    /// Errors: [`Error::BadInput`] for a NaN/inf element (index into `x`),
    /// [`Error::OutOfRange`] for a block whose scale overflows f16 (Q8_0/Q8_1).
    pub fn prepare(format: FormatId, x: &[f32], n: usize, k: usize) -> Result<Self, Error> {
        let info = format.info();
        let rotated;
        let src: &[f32] = if info.rotation == Rotation::Fwht256 {
            if k % 256 != 0 {
                return Err(Error::RowLength { format, k, multiple_of: 256 });
            }
            let mut v = x.to_vec();
            v.par_chunks_exact_mut(256).for_each(|seg| {
                if let Ok(seg) = <&mut [f32; 256]>::try_from(seg) {
                    lowbit_core::rotate::fwht256(seg);
                }
            });
            rotated = v;
            &rotated
        } else {
            x
        };
        let data = match info.activation {
            ActFormat::F32 => ActData::F32(src.to_vec()),
            ActFormat::Q8_0 => {
                let per = k / 32;
                let mut blocks = vec![BlockQ8_0::zeroed(); per * n];
                encode_cols(FormatId::Q8_0, src, k, per, &mut blocks)?;
                let d = blocks.iter().map(|b| b.d.to_f32()).collect();
                ActData::Q8_0 { blocks, d }
            }
            ActFormat::Q8_1 => {
                let per = k / 32;
                let mut blocks = vec![BlockQ8_1::zeroed(); per * n];
                encode_cols(FormatId::Q8_1, src, k, per, &mut blocks)?;
                ActData::Q8_1(blocks)
            }
            ActFormat::Q8K => {
                let per = k / 256;
                let mut blocks = vec![BlockQ8K::zeroed(); per * n];
                encode_cols(FormatId::Q8K, src, k, per, &mut blocks)?;
                ActData::Q8K(blocks)
            }
        };
        Ok(Acts { k, n, data })
    }

    /// Column `j` as the core's [`ActRow`].
    pub fn row(&self, j: usize) -> ActRow<'_> {
        let k = self.k;
        match &self.data {
            ActData::F32(v) => ActRow::F32(&v[j * k..(j + 1) * k]),
            ActData::Q8_0 { blocks, .. } => ActRow::Q8_0(&blocks[j * k / 32..(j + 1) * k / 32]),
            ActData::Q8_1(b) => ActRow::Q8_1(&b[j * k / 32..(j + 1) * k / 32]),
            ActData::Q8K(b) => ActRow::Q8K(&b[j * k / 256..(j + 1) * k / 256]),
        }
    }
}

#[cfg(test)]
mod tests {
    use lowbit_core::backend::PreparedActivations;

    use super::*;

    /// The prepared bytes are exactly the reference backend's, for every activation format
    /// (Q8_0 via ROCmFP2, Q8_1 via Q4_1, Q8_K via Q4_K, f32 via F16), column by column.
    #[test]
    fn bytes_match_prepared_activations() {
        let k = 512;
        let n = 3;
        let x: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 * 0.013 - 6.1).collect();
        for format in [FormatId::RocmFp2, FormatId::Q4_1, FormatId::Q4K, FormatId::F16] {
            let acts = Acts::prepare(format, &x, n, k).unwrap();
            for j in 0..n {
                let want = PreparedActivations::new(format, &x[j * k..(j + 1) * k]).unwrap();
                let ok = match (acts.row(j), want.row()) {
                    (ActRow::F32(a), ActRow::F32(b)) => a == b,
                    (ActRow::Q8_0(a), ActRow::Q8_0(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    (ActRow::Q8_1(a), ActRow::Q8_1(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    (ActRow::Q8K(a), ActRow::Q8K(b)) => {
                        bytemuck::cast_slice::<_, u8>(a) == bytemuck::cast_slice::<_, u8>(b)
                    }
                    _ => false,
                };
                assert!(ok, "{format} column {j}");
            }
            if let ActData::Q8_0 { blocks, d } = &acts.data {
                assert!(blocks.iter().zip(d).all(|(b, d)| b.d.to_f32() == *d));
            }
        }
    }
}

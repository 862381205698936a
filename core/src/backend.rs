//! The trait every compute backend implements ([`Backend`]), the shape of a quantized matrix
//! ([`MatrixDesc`]), and, with `alloc`, the [`ReferenceBackend`] built on the core's reference
//! dot products, against which every other backend is tested.
//!
//! Conventions shared by every backend:
//!
//! * A quantized matrix W has `rows` output rows of `cols` elements each (cols = K, the
//!   reduction dimension), stored row after row in the format's canonical (on-disk) layout:
//!   `rows * format.row_bytes(cols)` bytes. A backend may repack on upload and must validate
//!   every block it repacks.
//! * `matmul` computes `y = W x` for `n` activation columns. `x` holds the columns one after
//!   another (`x[j * cols + k]`, column j = one token), and `y` receives `y[j * rows + r]`.
//! * Activations are rotated (for rotated formats) and quantized into the format's activation
//!   format ([`crate::registry::FormatInfo::activation`]) once per call, then shared by every
//!   row.
//!
//! Results agree with [`ReferenceBackend`] within the accumulation bound of DESIGN.md
//! (each backend states its constant c); NaN and infinities agree.
//!
//! What must not live here: anything that needs `std`, threads, or a device API.

use crate::error::Result;
use crate::registry::FormatId;

/// The shape and format of a quantized matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDesc {
    /// Weight format.
    pub format: FormatId,
    /// Output rows.
    pub rows: usize,
    /// Elements per row (K).
    pub cols: usize,
}

impl MatrixDesc {
    /// Bytes of the canonical layout (`rows * row_bytes(cols)`), or an error if `cols` does not
    /// fit the format.
    pub fn canonical_bytes(&self) -> Result<usize> {
        Ok(self.format.row_bytes(self.cols)?.saturating_mul(self.rows))
    }
}

/// A compute backend: uploads quantized matrices and multiplies them with f32 activations.
pub trait Backend {
    /// An uploaded matrix (in the backend's device layout).
    type Matrix;
    /// The backend's error; every core error converts into it.
    type Error: core::error::Error + From<crate::Error>;

    /// A short name for logs (`"reference"`, `"cpu-avx2"`, `"vulkan:NVIDIA H200"`, ...).
    fn name(&self) -> &str;

    /// Whether `matmul` is implemented for `format`.
    fn supports(&self, format: FormatId) -> bool;

    /// Uploads (and possibly repacks) a matrix given in canonical layout. Validates the length
    /// and every block.
    fn upload(&self, desc: MatrixDesc, bytes: &[u8]) -> Result<Self::Matrix, Self::Error>;

    /// The description the matrix was uploaded with.
    fn desc(&self, matrix: &Self::Matrix) -> MatrixDesc;

    /// `y = W x` for `n` columns: `x.len() == n * cols`, `y.len() == n * rows`.
    fn matmul(
        &self,
        matrix: &Self::Matrix,
        x: &[f32],
        n: usize,
        y: &mut [f32],
    ) -> Result<(), Self::Error>;
}

#[cfg(feature = "alloc")]
mod reference {
    use alloc::vec;
    use alloc::vec::Vec;

    use bytemuck::Zeroable;

    use super::{Backend, MatrixDesc};
    use crate::codec::{self, ActRow, EncodeOptions};
    use crate::error::{Buffer, Error, Result};
    use crate::format::ggml::{BlockQ8K, BlockQ8_0, BlockQ8_1};
    use crate::registry::{ActFormat, FormatId, Rotation};

    /// The core's reference dot products as a backend: one [`codec::dot_row`] per output.
    /// Slow and exact; the yardstick for every other backend.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ReferenceBackend;

    /// A matrix held by [`ReferenceBackend`]: the canonical bytes, validated.
    #[derive(Clone, Debug)]
    pub struct ReferenceMatrix {
        desc: MatrixDesc,
        bytes: Vec<u8>,
    }

    /// One activation column prepared for a format (rotated, then quantized).
    #[derive(Clone, Debug)]
    pub enum PreparedActivations {
        /// f32 (rotated if the format needs it).
        F32(Vec<f32>),
        /// Q8_0 blocks.
        Q8_0(Vec<BlockQ8_0>),
        /// Q8_1 blocks.
        Q8_1(Vec<BlockQ8_1>),
        /// Q8_K blocks.
        Q8K(Vec<BlockQ8K>),
    }

    impl PreparedActivations {
        /// Rotates `x` as `format` needs and quantizes it to the format's activation format
        /// with the reference encoder.
        pub fn new(format: FormatId, x: &[f32]) -> Result<Self> {
            let info = format.info();
            let mut xr = x.to_vec();
            if info.rotation == Rotation::Fwht256 {
                if x.len() % 256 != 0 {
                    return Err(Error::RowLength { format, k: x.len(), multiple_of: 256 });
                }
                for seg in xr.chunks_exact_mut(256) {
                    let seg: &mut [f32; 256] = seg.try_into().map_err(|_| Error::RowLength {
                        format,
                        k: x.len(),
                        multiple_of: 256,
                    })?;
                    crate::rotate::fwht256(seg);
                }
            }
            let opts = EncodeOptions::default();
            Ok(match info.activation {
                ActFormat::F32 => PreparedActivations::F32(xr),
                ActFormat::Q8_0 => {
                    let mut a = vec![BlockQ8_0::zeroed(); xr.len() / 32];
                    codec::encode_row(
                        FormatId::Q8_0,
                        &xr,
                        &opts,
                        bytemuck::cast_slice_mut(&mut a),
                    )?;
                    PreparedActivations::Q8_0(a)
                }
                ActFormat::Q8_1 => {
                    let mut a = vec![BlockQ8_1::zeroed(); xr.len() / 32];
                    codec::encode_row(
                        FormatId::Q8_1,
                        &xr,
                        &opts,
                        bytemuck::cast_slice_mut(&mut a),
                    )?;
                    PreparedActivations::Q8_1(a)
                }
                ActFormat::Q8K => {
                    let mut a = vec![BlockQ8K::zeroed(); xr.len() / 256];
                    codec::encode_row(FormatId::Q8K, &xr, &opts, bytemuck::cast_slice_mut(&mut a))?;
                    PreparedActivations::Q8K(a)
                }
            })
        }

        /// A borrowed view for [`codec::dot_row`].
        pub fn row(&self) -> ActRow<'_> {
            match self {
                PreparedActivations::F32(x) => ActRow::F32(x),
                PreparedActivations::Q8_0(a) => ActRow::Q8_0(a),
                PreparedActivations::Q8_1(a) => ActRow::Q8_1(a),
                PreparedActivations::Q8K(a) => ActRow::Q8K(a),
            }
        }
    }

    impl Backend for ReferenceBackend {
        type Matrix = ReferenceMatrix;
        type Error = Error;

        fn name(&self) -> &str {
            "reference"
        }

        fn supports(&self, format: FormatId) -> bool {
            // Every format whose decoder exists has a reference dot product.
            let k = format.geometry().row_multiple;
            let mut probe = vec![0u8; format.row_bytes(k).unwrap_or(0)];
            // A row of zero bytes is not always a valid block (hipfire headers), so ask the
            // codec with a valid all-zero encoding where one exists.
            if codec::encode_row(format, &vec![0.0; k], &EncodeOptions::default(), &mut probe)
                .is_err()
            {
                probe.iter_mut().for_each(|b| *b = 0);
            }
            let mut out = vec![0f32; k];
            !matches!(codec::decode_row(format, &probe, &mut out), Err(Error::Unsupported { .. }))
        }

        fn upload(&self, desc: MatrixDesc, bytes: &[u8]) -> Result<ReferenceMatrix> {
            let rb = desc.format.row_bytes(desc.cols)?;
            let need = desc.canonical_bytes()?;
            if bytes.len() != need {
                return Err(Error::Length {
                    format: desc.format,
                    buffer: Buffer::Encoded,
                    got: bytes.len(),
                    expected: need,
                });
            }
            let mut scratch = vec![0f32; desc.cols];
            for (r, row) in bytes.chunks_exact(rb).enumerate() {
                codec::decode_row(desc.format, row, &mut scratch).map_err(|e| e.at(r * rb))?;
            }
            Ok(ReferenceMatrix { desc, bytes: bytes.to_vec() })
        }

        fn desc(&self, matrix: &ReferenceMatrix) -> MatrixDesc {
            matrix.desc
        }

        fn matmul(&self, m: &ReferenceMatrix, x: &[f32], n: usize, y: &mut [f32]) -> Result<()> {
            let MatrixDesc { format, rows, cols } = m.desc;
            if x.len() != n * cols {
                return Err(Error::Length {
                    format,
                    buffer: Buffer::Activations,
                    got: x.len(),
                    expected: n * cols,
                });
            }
            if y.len() != n * rows {
                return Err(Error::Length {
                    format,
                    buffer: Buffer::Values,
                    got: y.len(),
                    expected: n * rows,
                });
            }
            let rb = format.row_bytes(cols)?;
            for (xc, yc) in x.chunks_exact(cols.max(1)).zip(y.chunks_exact_mut(rows.max(1))) {
                let act = PreparedActivations::new(format, xc)?;
                for (r, out) in yc.iter_mut().enumerate() {
                    *out = codec::dot_row(format, &m.bytes[r * rb..(r + 1) * rb], act.row())?;
                }
            }
            Ok(())
        }
    }
}

#[cfg(feature = "alloc")]
pub use reference::{PreparedActivations, ReferenceBackend, ReferenceMatrix};

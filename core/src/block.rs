//! The [`Block`] trait that ties a `#[repr(C)]` block type to its [`FormatId`], and the
//! generic row loops built on it.
//!
//! Block types are `bytemuck::Pod`, so a byte buffer can be viewed as blocks without copying
//! when it is aligned; [`read_block`] copies one block out of an unaligned buffer.

use crate::error::{Error, Result};
use crate::registry::FormatId;

/// One fixed-size block of a block format.
pub trait Block: bytemuck::Pod {
    /// The format this block belongs to.
    const FORMAT: FormatId;
    /// Elements per block.
    const ELEMS: usize;
    /// Bytes per block (`size_of::<Self>()`, asserted against the registry).
    const BYTES: usize = core::mem::size_of::<Self>();

    /// Decodes the block into `out` (`out.len() == ELEMS`, else [`Error::Length`]). Errors carry
    /// byte offsets relative to the start of the block.
    fn decode(&self, out: &mut [f32]) -> Result<()>;
}

/// Asserts at compile time that a block type's size matches the registry.
#[macro_export]
#[doc(hidden)]
macro_rules! assert_block_size {
    ($ty:ty, $fmt:expr) => {
        const _: () = assert!(
            core::mem::size_of::<$ty>() == $fmt.geometry().block_bytes,
            "block size disagrees with the registry"
        );
    };
}

/// Copies block `i` out of a byte buffer of whole blocks (no alignment needed).
///
/// The caller guarantees `src.len() >= (i + 1) * B::BYTES`.
#[inline]
pub fn read_block<B: Block>(src: &[u8], i: usize) -> B {
    bytemuck::pod_read_unaligned(&src[i * B::BYTES..(i + 1) * B::BYTES])
}

/// Checks that `out` holds exactly one block's elements.
#[inline]
pub fn check_block_out<B: Block>(out: &[f32]) -> Result<()> {
    if out.len() != B::ELEMS {
        return Err(Error::Length {
            format: B::FORMAT,
            buffer: crate::error::Buffer::Values,
            got: out.len(),
            expected: B::ELEMS,
        });
    }
    Ok(())
}

/// Decodes a buffer of whole blocks into `dst`. The caller has checked that
/// `src.len() / B::BYTES * B::ELEMS == dst.len()`. Errors carry offsets into `src`.
pub fn decode_blocks<B: Block>(src: &[u8], dst: &mut [f32]) -> Result<()> {
    for (i, out) in dst.chunks_exact_mut(B::ELEMS).enumerate() {
        read_block::<B>(src, i).decode(out).map_err(|e| e.at(i * B::BYTES))?;
    }
    Ok(())
}

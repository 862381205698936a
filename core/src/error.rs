//! The one error type of the core: every failure names the format, what was wrong, and where
//! (a byte offset into the buffer the caller passed, or an element index).
//!
//! Block-level code reports offsets relative to the block; the row-level functions in
//! [`crate::codec`] add the block's position with [`Error::at`], so callers always see offsets
//! into the buffer they passed.

use core::fmt;

use crate::registry::FormatId;

/// Result with the core's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Which caller buffer a length error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// The encoded bytes (blocks, row headers).
    Encoded,
    /// The decoded or to-be-encoded `f32` values.
    Values,
    /// The importance weights passed to an encoder.
    Importance,
    /// The activation row passed to a dot product.
    Activations,
}

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Buffer::Encoded => "encoded bytes",
            Buffer::Values => "values",
            Buffer::Importance => "importance weights",
            Buffer::Activations => "activations",
        })
    }
}

/// Everything that can go wrong in the core.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A row length (elements per row, K) the format cannot hold.
    RowLength {
        /// The format.
        format: FormatId,
        /// The row length that was asked for.
        k: usize,
        /// K must be a positive multiple of this.
        multiple_of: usize,
    },
    /// A buffer whose length does not match what the format and row length need.
    Length {
        /// The format.
        format: FormatId,
        /// Which buffer.
        buffer: Buffer,
        /// Its length (bytes for encoded data, elements otherwise).
        got: usize,
        /// The length required.
        expected: usize,
    },
    /// A byte no valid block contains (an illegal scale byte, a reserved code, a bad header).
    IllegalByte {
        /// The format.
        format: FormatId,
        /// Which field of the block or header.
        field: &'static str,
        /// Byte offset of the field in the caller's buffer.
        offset: usize,
        /// The byte found.
        byte: u8,
    },
    /// A stored scale that decodes to NaN or infinity.
    NonFiniteScale {
        /// The format.
        format: FormatId,
        /// Which field of the block or header.
        field: &'static str,
        /// Byte offset of the field in the caller's buffer.
        offset: usize,
    },
    /// An input value (or importance weight) that is NaN or infinite, or a negative weight.
    BadInput {
        /// The format being encoded.
        format: FormatId,
        /// Which buffer.
        buffer: Buffer,
        /// Element index in that buffer.
        index: usize,
    },
    /// A value whose magnitude no block of the format can represent (the scale would overflow).
    OutOfRange {
        /// The format being encoded.
        format: FormatId,
        /// Element index of the offending value (the block's largest).
        index: usize,
    },
    /// A repack whose source is not what the target layout can hold (for example a Q4_0 nibble
    /// outside 7..=9 when repacking ternary weights).
    NotRepresentable {
        /// The target format.
        format: FormatId,
        /// What was wrong.
        what: &'static str,
        /// Byte offset in the source buffer.
        offset: usize,
    },
    /// An operation the format (or this build) does not provide.
    Unsupported {
        /// The format.
        format: FormatId,
        /// The operation, e.g. "encode with importance weights".
        op: &'static str,
    },
    /// A dot product given activations of the wrong kind for the weight format.
    WrongActivation {
        /// The weight format.
        format: FormatId,
        /// What the format needs.
        expected: crate::registry::ActFormat,
        /// What was given.
        got: crate::registry::ActFormat,
    },
}

impl Error {
    /// Shifts every byte offset in the error by `base` (a block's position in a row).
    #[must_use]
    pub fn at(self, base: usize) -> Self {
        match self {
            Error::IllegalByte { format, field, offset, byte } => {
                Error::IllegalByte { format, field, offset: offset + base, byte }
            }
            Error::NonFiniteScale { format, field, offset } => {
                Error::NonFiniteScale { format, field, offset: offset + base }
            }
            Error::NotRepresentable { format, what, offset } => {
                Error::NotRepresentable { format, what, offset: offset + base }
            }
            other => other,
        }
    }

    /// Shifts every element index in the error by `base` (a block's first element in a row).
    #[must_use]
    pub fn at_element(self, base: usize) -> Self {
        match self {
            Error::BadInput { format, buffer, index } => {
                Error::BadInput { format, buffer, index: index + base }
            }
            Error::OutOfRange { format, index } => {
                Error::OutOfRange { format, index: index + base }
            }
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::RowLength { format, k, multiple_of } => write!(
                f,
                "{format}: a row of {k} elements is not a positive multiple of {multiple_of}"
            ),
            Error::Length { format, buffer, got, expected } => {
                write!(f, "{format}: {buffer} length is {got}, expected {expected}")
            }
            Error::IllegalByte { format, field, offset, byte } => {
                write!(f, "{format}: illegal {field} byte 0x{byte:02X} at offset {offset}")
            }
            Error::NonFiniteScale { format, field, offset } => {
                write!(f, "{format}: {field} at offset {offset} is NaN or infinite")
            }
            Error::BadInput { format, buffer, index } => write!(
                f,
                "{format}: {buffer} element {index} is NaN, infinite or (for weights) negative"
            ),
            Error::OutOfRange { format, index } => {
                write!(f, "{format}: value at element {index} is beyond the format's range")
            }
            Error::NotRepresentable { format, what, offset } => {
                write!(f, "{format}: cannot repack: {what} at source offset {offset}")
            }
            Error::Unsupported { format, op } => write!(f, "{format}: {op} is not supported"),
            Error::WrongActivation { format, expected, got } => {
                write!(f, "{format}: dot product needs {expected:?} activations, got {got:?}")
            }
        }
    }
}

impl core::error::Error for Error {}

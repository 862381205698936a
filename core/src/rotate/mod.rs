//! Rotations applied to weights offline and to activations at run time, so that
//! <R w, R x> = <w, x>:
//!
//! * [`fwht256`]: hipfire's FWHT-256 with seeded sign vectors (MFP4).
//! * [`hadamard`]: the normalised Sylvester Walsh-Hadamard of size 2^k with optional explicit
//!   signs (Prism folds n = 1024).
//!
//! Both are butterflies (n log2 n adds); nothing here multiplies by a dense matrix.

mod fwht256;
pub mod hadamard;

pub use fwht256::*;

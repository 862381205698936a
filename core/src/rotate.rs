//! Rotations applied to weights offline and to activations at run time, so that
//! <R w, R x> = <w, x>:
//!
//! * [`fwht256`]: hipfire's FWHT-256 with seeded sign vectors (MFP4).
//! * Normalised Sylvester Walsh-Hadamard of size 2^k with optional explicit signs (Prism,
//!   n = 1024). (Being implemented.)
//!
//! Both are butterflies (n log2 n adds); nothing here multiplies by a dense matrix.

/// hipfire's FWHT-256, in place (being implemented by the hipfire family work).
pub fn fwht256(x: &mut [f32; 256]) {
    let _ = x;
    unimplemented!("fwht256")
}

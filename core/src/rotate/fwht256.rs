//! hipfire's FWHT-256 with seeded signs. (Being implemented.)

/// hipfire's FWHT-256, in place. (Being implemented: currently the identity.)
pub fn fwht256(x: &mut [f32; 256]) {
    let _ = x;
}

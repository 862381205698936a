//! Shared rounding of a non-negative `f32` onto an unsigned minifloat code grid.
//!
//! A minifloat with `mbits` mantissa bits and exponent bias `bias` has value
//! `M * 2^(1 - bias - mbits)` for exponent field 0 (subnormal) and
//! `(2^mbits + M) * 2^(E - bias - mbits)` otherwise. Codes `E << mbits | M` are monotonic in
//! value, so rounding can work on codes directly.

/// Round `x >= 0` (finite) to the nearest code, ties to the even code. The result may exceed
/// the format's largest code: callers decide between saturation, NaN and error.
pub(crate) fn rne_code(x: f32, mbits: u32, bias: i32) -> u32 {
    debug_assert!(x >= 0.0 && x.is_finite());
    let min_normal_exp = 1 - bias;
    let e = floor_log2(x);
    if x == 0.0 || e < min_normal_exp {
        // Subnormal range: step 2^(1 - bias - mbits).
        let q = libm::rintf(scale_pow2(x, -(min_normal_exp - mbits as i32)));
        return q as u32;
    }
    let frac = scale_pow2(x, -e) - 1.0; // in [0, 1)
    let q = libm::rintf(scale_pow2(frac, mbits as i32)) as u32; // may be 2^mbits: carries
    (((e + bias) as u32) << mbits) + q
}

/// floor(log2(x)) of a positive finite f32, exact (read from the bits).
pub(crate) fn floor_log2(x: f32) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff;
    let exp = (bits >> 23) as i32;
    if exp == 0 {
        if bits == 0 {
            return i32::MIN / 2;
        }
        // Subnormal: value = mantissa * 2^-149.
        let lz = bits.leading_zeros() as i32; // >= 9
        return (31 - lz) - 149;
    }
    exp - 127
}

/// x * 2^n, exact when the result is a normal or exactly-representable f32.
pub(crate) fn scale_pow2(x: f32, n: i32) -> f32 {
    // Split to keep each factor representable.
    let mut x = x;
    let mut n = n;
    while n > 100 {
        x *= f32::from_bits(((100 + 127) as u32) << 23);
        n -= 100;
    }
    while n < -100 {
        x *= f32::from_bits(((-100 + 127) as u32) << 23);
        n += 100;
    }
    x * f32::from_bits(((n + 127) as u32) << 23)
}

/// Exact value of code `c` of a minifloat (see the module docs).
pub(crate) fn code_value(c: u32, mbits: u32, bias: i32) -> f32 {
    let e = (c >> mbits) as i32;
    let m = (c & ((1 << mbits) - 1)) as f32;
    if e == 0 {
        scale_pow2(m, 1 - bias - mbits as i32)
    } else {
        scale_pow2((1u32 << mbits) as f32 + m, e - bias - mbits as i32)
    }
}

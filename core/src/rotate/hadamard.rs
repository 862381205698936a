//! The normalised Sylvester Walsh-Hadamard transform of size `n = 2^k`, in place, with an
//! optional explicit sign vector: the rotation Prism folds into weights
//! (`prism.hadamard.transform = "normalized-sylvester-walsh-hadamard"`, block size 1024,
//! `sign_mode` `explicit` or `identity`; github PrismML-Eng/llama.cpp branch `prism`). 1bit's
//! dropped "H32" Q4_0 files used `n = 32` without signs.
//!
//! What lives here: [`wht`] (`x ← H x / √n`), [`rotate`] (`y = H(S x)/√n`) and its inverse
//! [`unrotate`] (`x = S H y / √n`). `H` is Sylvester's matrix, `H[i][j] = (-1)^popcount(i & j)`;
//! `S = diag(signs)`. What must not: dense matrix products, allocation, per-format logic.
//!
//! ## Exact operation order (so that every backend can match it bit for bit)
//!
//! 1. Signs (if any): `x[i] = -x[i]` where `signs[i] == -1` (exact).
//! 2. Butterflies: for `h = 1, 2, 4, …, n/2` (in that order), for every `i` with `i & h == 0`
//!    in increasing order: `(x[i], x[i+h]) ← (x[i] + x[i+h], x[i] - x[i+h])` in f32.
//!    That is `n log2 n` additions/subtractions.
//! 3. Scale: `x[i] ← x[i] * c` with `c` = the f32 nearest to `1/√n`. For even `k`, `c = 2^(-k/2)`
//!    exactly, so this step is exact (barring underflow to subnormals); for odd `k`,
//!    `c = fl(1/√2) · 2^(-(k-1)/2)`, one rounding per element.
//!
//! [`unrotate`] runs steps 2 and 3, then the signs. `H` is symmetric and `H H = n I`, so both are
//! orthogonal and each other's inverse up to f32 rounding.

use core::fmt;

/// What can be wrong with a transform's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HadamardError {
    /// The length is not a power of two (or is zero).
    NotPowerOfTwo {
        /// The length given.
        n: usize,
    },
    /// The sign vector's length differs from the data's.
    SignLength {
        /// Length of the sign vector.
        got: usize,
        /// Length of the data.
        expected: usize,
    },
    /// A sign that is not `-1` or `+1`.
    BadSign {
        /// Its index.
        index: usize,
        /// Its value.
        value: i8,
    },
}

impl fmt::Display for HadamardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HadamardError::NotPowerOfTwo { n } => {
                write!(f, "Walsh-Hadamard size {n} is not a power of two")
            }
            HadamardError::SignLength { got, expected } => {
                write!(f, "sign vector has {got} entries, data has {expected}")
            }
            HadamardError::BadSign { index, value } => {
                write!(f, "sign {index} is {value}, not -1 or +1")
            }
        }
    }
}

impl core::error::Error for HadamardError {}

fn check(n: usize, signs: Option<&[i8]>) -> Result<(), HadamardError> {
    if !n.is_power_of_two() {
        return Err(HadamardError::NotPowerOfTwo { n });
    }
    if let Some(s) = signs {
        if s.len() != n {
            return Err(HadamardError::SignLength { got: s.len(), expected: n });
        }
        if let Some(index) = s.iter().position(|&v| v != 1 && v != -1) {
            return Err(HadamardError::BadSign { index, value: s[index] });
        }
    }
    Ok(())
}

/// The f32 nearest to `1/√n` for `n = 2^k` (see the module documentation).
pub fn inv_sqrt_pow2(k: u32) -> f32 {
    let half = libm::ldexpf(1.0, -((k / 2) as i32));
    if k % 2 == 0 {
        half
    } else {
        core::f32::consts::FRAC_1_SQRT_2 * half
    }
}

fn apply_signs(x: &mut [f32], signs: Option<&[i8]>) {
    if let Some(s) = signs {
        for (v, &sg) in x.iter_mut().zip(s) {
            if sg < 0 {
                *v = -*v;
            }
        }
    }
}

fn butterflies_and_scale(x: &mut [f32]) {
    let n = x.len();
    let mut h = 1;
    while h < n {
        for block in x.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (p, q) in a.iter_mut().zip(b.iter_mut()) {
                let (u, v) = (*p, *q);
                *p = u + v;
                *q = u - v;
            }
        }
        h *= 2;
    }
    let c = inv_sqrt_pow2(n.trailing_zeros());
    for v in x.iter_mut() {
        *v *= c;
    }
}

/// `x ← H x / √n` in place (`n = x.len()` a power of two, else an error and `x` untouched).
pub fn wht(x: &mut [f32]) -> Result<(), HadamardError> {
    check(x.len(), None)?;
    butterflies_and_scale(x);
    Ok(())
}

/// `x ← H (S x) / √n` in place: the rotation applied to activations of Hadamard-folded weights.
/// `signs` (`±1`, one per element) is `S`; `None` means the identity. On error `x` is untouched.
pub fn rotate(x: &mut [f32], signs: Option<&[i8]>) -> Result<(), HadamardError> {
    check(x.len(), signs)?;
    apply_signs(x, signs);
    butterflies_and_scale(x);
    Ok(())
}

/// The inverse of [`rotate`]: `x ← S H x / √n` in place. On error `x` is untouched.
pub fn unrotate(x: &mut [f32], signs: Option<&[i8]>) -> Result<(), HadamardError> {
    check(x.len(), signs)?;
    butterflies_and_scale(x);
    apply_signs(x, signs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Dense f64 reference: H(S x)/√n with H[i][j] = (-1)^popcount(i & j).
    fn dense(x: &[f32], signs: Option<&[i8]>) -> [f64; 1024] {
        let n = x.len();
        let mut y = [0f64; 1024];
        for (i, yi) in y.iter_mut().enumerate().take(n) {
            let mut s = 0f64;
            for (j, &xj) in x.iter().enumerate() {
                let sg = signs.map_or(1.0, |s| f64::from(s[j]));
                let h = if (i & j).count_ones() % 2 == 1 { -1.0 } else { 1.0 };
                s += h * sg * f64::from(xj);
            }
            *yi = s / (n as f64).sqrt();
        }
        y
    }

    #[test]
    fn scale_constant() {
        assert_eq!(inv_sqrt_pow2(10), 1.0 / 32.0);
        assert_eq!(inv_sqrt_pow2(0), 1.0);
        assert_eq!(inv_sqrt_pow2(5), (1.0f64 / 32f64.sqrt()) as f32);
    }

    #[test]
    fn orthonormal_columns_n32() {
        let mut cols = [[0f32; 32]; 32];
        for (i, c) in cols.iter_mut().enumerate() {
            c[i] = 1.0;
            wht(c).unwrap();
        }
        for i in 0..32 {
            for j in 0..32 {
                let d: f32 = cols[i].iter().zip(&cols[j]).map(|(a, b)| a * b).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((d - want).abs() < 1e-6, "({i},{j}) = {d}");
            }
        }
    }

    #[test]
    fn matches_dense_and_inverts() {
        let mut seed = 7;
        for n in [1usize, 2, 32, 1024] {
            let x: [f32; 1024] = core::array::from_fn(|_| lcg(&mut seed));
            let signs: [i8; 1024] =
                core::array::from_fn(|_| if lcg(&mut seed) < 0.0 { -1 } else { 1 });
            for s in [None, Some(&signs[..n])] {
                let mut y = [0f32; 1024];
                y[..n].copy_from_slice(&x[..n]);
                rotate(&mut y[..n], s).unwrap();
                let r = dense(&x[..n], s);
                let tol = 1e-6 * (n as f64).log2().max(1.0);
                for i in 0..n {
                    assert!((f64::from(y[i]) - r[i]).abs() <= tol, "n={n} i={i}");
                }
                unrotate(&mut y[..n], s).unwrap();
                for i in 0..n {
                    assert!((y[i] - x[i]).abs() <= 1e-5, "inverse n={n} i={i}");
                }
            }
        }
    }

    #[test]
    fn errors_not_panics() {
        let mut x = [1f32; 24];
        assert_eq!(wht(&mut x), Err(HadamardError::NotPowerOfTwo { n: 24 }));
        assert_eq!(wht(&mut []), Err(HadamardError::NotPowerOfTwo { n: 0 }));
        let mut x = [1f32; 32];
        let s = [1i8; 16];
        assert_eq!(
            rotate(&mut x, Some(&s)),
            Err(HadamardError::SignLength { got: 16, expected: 32 })
        );
        let mut s = [1i8; 32];
        s[5] = 0;
        assert_eq!(rotate(&mut x, Some(&s)), Err(HadamardError::BadSign { index: 5, value: 0 }));
        assert_eq!(x, [1f32; 32]);
    }
}

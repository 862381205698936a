//! Least-squares ternary fit shared by PQ2_0, PTQ1_0, TQ1_0 and TQ2_0's improved encoders.
//! (Being implemented: the body below is the naive amax rule, to be replaced.)

use half::f16;

/// Fits `x ≈ d * t` with `t[i] ∈ {-1, 0, +1}` and `d` an f16, minimising
/// `sum_i w_i (x_i - d t_i)^2` (`w_i` = importance, 1 if `None`). Writes the codes to `codes`
/// (same length as `x`) and returns the f16 scale; the codes are optimal for the returned
/// (rounded) scale. An all-zero group gives d = 0 and all-zero codes.
pub fn fit_ternary(x: &[f32], importance: Option<&[f32]>, codes: &mut [i8]) -> f16 {
    let _ = importance;
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = f16::from_f32(amax);
    let inv = if amax > 0.0 { 1.0 / amax } else { 0.0 };
    for (c, v) in codes.iter_mut().zip(x) {
        *c = libm::roundf(v * inv) as i8;
    }
    d
}

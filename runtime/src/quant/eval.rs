//! Error of quantized tensors against their source: per tensor the NRMSE
//! `||q - s|| / ||s||` and the largest absolute error, and totals over a model, as data
//! ([`EvalReport`]) and as a table ([`EvalReport::render`]).
//!
//! Sums are f64. [`compare_encoded`] decodes both sides row by row (rows in parallel, partial
//! sums added in row order, so results do not depend on the thread count) and never holds a
//! whole tensor in f32. Totals: the element-weighted mean of the per-tensor NRMSEs (every
//! weight counts the same, whatever its tensor's scale) and the pooled NRMSE
//! `sqrt(sum ||q - s||^2 / sum ||s||^2)` (dominated by large-magnitude tensors).
//! What must not live here: file reading, quantization.

use std::fmt::Write as _;

use lowbit_core::{codec, FormatId};
use rayon::prelude::*;

use super::{rows_and_k, QuantError};

/// The error of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorError {
    /// Tensor name.
    pub name: String,
    /// Source format.
    pub source_format: FormatId,
    /// Quantized format.
    pub format: FormatId,
    /// Elements compared.
    pub elements: u64,
    /// `||q - s|| / ||s||` (0 when both are all zero, infinite when only `s` is).
    pub nrmse: f64,
    /// `max |q - s|`.
    pub max_abs: f64,
    /// `||q - s||^2`.
    pub sum_sq_err: f64,
    /// `||s||^2`.
    pub sum_sq_src: f64,
}

fn nrmse(err: f64, src: f64) -> f64 {
    if src > 0.0 {
        (err / src).sqrt()
    } else if err == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

#[derive(Clone, Copy, Default)]
struct Acc {
    err: f64,
    src: f64,
    max: f64,
}

fn accumulate(s: &[f32], q: &[f32]) -> Acc {
    let mut a = Acc::default();
    for (&x, &y) in s.iter().zip(q) {
        let d = f64::from(y) - f64::from(x);
        a.err += d * d;
        a.src += f64::from(x) * f64::from(x);
        // NaN compares false: make it visible instead of dropping it.
        a.max = if d.abs() > a.max || d.is_nan() { d.abs() } else { a.max };
    }
    a
}

fn finish(name: &str, sf: FormatId, qf: FormatId, n: u64, a: Acc) -> TensorError {
    TensorError {
        name: name.to_owned(),
        source_format: sf,
        format: qf,
        elements: n,
        nrmse: nrmse(a.err, a.src),
        max_abs: a.max,
        sum_sq_err: a.err,
        sum_sq_src: a.src,
    }
}

/// Compares decoded values (`source` and `quant` of equal length).
pub fn compare_values(
    name: &str,
    format: FormatId,
    source: &[f32],
    quant: &[f32],
) -> Result<TensorError, QuantError> {
    if source.len() != quant.len() {
        return Err(QuantError::Tensor {
            tensor: name.to_owned(),
            what: format!("{} source values but {} quantized", source.len(), quant.len()),
        });
    }
    let a = accumulate(source, quant);
    Ok(finish(name, FormatId::F32, format, source.len() as u64, a))
}

/// Compares two encodings of the same tensor (`dims` in ggml order), decoding both row by row.
pub fn compare_encoded(
    name: &str,
    dims: &[u64],
    source_format: FormatId,
    source: &[u8],
    format: FormatId,
    quant: &[u8],
) -> Result<TensorError, QuantError> {
    let terr = |what: String| QuantError::Tensor { tensor: name.to_owned(), what };
    let (rows, k) = rows_and_k(dims).ok_or_else(|| terr(format!("dims {dims:?} overflow")))?;
    if rows == 0 || k == 0 {
        return Ok(finish(name, source_format, format, 0, Acc::default()));
    }
    let srb = source_format.row_bytes(k).map_err(|e| terr(format!("source: {e}")))?;
    let qrb = format.row_bytes(k).map_err(|e| terr(format!("quantized: {e}")))?;
    for (what, f, len, rb) in
        [("source", source_format, source.len(), srb), ("quantized", format, quant.len(), qrb)]
    {
        if Some(len) != rows.checked_mul(rb) {
            return Err(terr(format!(
                "{what} has {len} bytes of {f}, {rows} rows of {k} need {}",
                rows * rb
            )));
        }
    }
    let parts: Vec<Result<Acc, QuantError>> = (0..rows)
        .into_par_iter()
        .map_init(
            || (vec![0f32; k], vec![0f32; k]),
            |(s, q), r| {
                let codec_err = |stage, source| QuantError::Codec {
                    tensor: name.to_owned(),
                    stage,
                    row: r,
                    source,
                };
                codec::decode_row(source_format, &source[r * srb..(r + 1) * srb], s)
                    .map_err(|e| codec_err("decoding the source", e))?;
                codec::decode_row(format, &quant[r * qrb..(r + 1) * qrb], q)
                    .map_err(|e| codec_err("decoding the quantized tensor", e))?;
                Ok(accumulate(s, q))
            },
        )
        .collect();
    let mut total = Acc::default();
    for p in parts {
        let p = p?;
        total.err += p.err;
        total.src += p.src;
        total.max = if p.max > total.max || p.max.is_nan() { p.max } else { total.max };
    }
    Ok(finish(name, source_format, format, (rows * k) as u64, total))
}

/// Per-tensor errors of a model and their totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalReport {
    /// One entry per tensor, in order.
    pub tensors: Vec<TensorError>,
}

impl EvalReport {
    /// Total elements.
    pub fn elements(&self) -> u64 {
        self.tensors.iter().map(|t| t.elements).sum()
    }

    /// Element-weighted mean of the per-tensor NRMSEs.
    pub fn weighted_nrmse(&self) -> f64 {
        let n = self.elements();
        if n == 0 {
            return 0.0;
        }
        self.tensors.iter().map(|t| t.nrmse * t.elements as f64).sum::<f64>() / n as f64
    }

    /// `sqrt(sum ||q - s||^2 / sum ||s||^2)` over every tensor.
    pub fn pooled_nrmse(&self) -> f64 {
        let e = self.tensors.iter().map(|t| t.sum_sq_err).sum();
        let s = self.tensors.iter().map(|t| t.sum_sq_src).sum();
        nrmse(e, s)
    }

    /// Largest absolute error of any tensor.
    pub fn max_abs(&self) -> f64 {
        self.tensors
            .iter()
            .map(|t| t.max_abs)
            .fold(0.0, |a, b| if b > a || b.is_nan() { b } else { a })
    }

    /// The report as a table with a totals line.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<36} {:<8} {:<9} {:>12} {:>10} {:>12}",
            "tensor", "source", "format", "elements", "NRMSE", "max_abs_err"
        );
        for t in &self.tensors {
            let _ = writeln!(
                s,
                "{:<36} {:<8} {:<9} {:>12} {:>10.6} {:>12.6}",
                t.name,
                t.source_format.name(),
                t.format.name(),
                t.elements,
                t.nrmse,
                t.max_abs
            );
        }
        let _ = writeln!(
            s,
            "total: {} tensors, {} elements, NRMSE {:.6} (element-weighted) {:.6} (pooled), \
             max abs err {:.6}",
            self.tensors.len(),
            self.elements(),
            self.weighted_nrmse(),
            self.pooled_nrmse(),
            self.max_abs()
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        let a = compare_values("a", FormatId::Q4_0, &[3.0, 4.0], &[3.0, 0.0]).unwrap();
        assert_eq!((a.nrmse, a.max_abs, a.elements), (0.8, 4.0, 2));
        let b = compare_values("b", FormatId::Q4_0, &[1.0, 0.0, 0.0, 0.0], &[1.0, 0.0, 0.0, 0.0])
            .unwrap();
        assert_eq!((b.nrmse, b.max_abs), (0.0, 0.0));
        let r = EvalReport { tensors: vec![a, b] };
        assert!((r.weighted_nrmse() - 1.6 / 6.0).abs() < 1e-15);
        assert!((r.pooled_nrmse() - (16.0f64 / 26.0).sqrt()).abs() < 1e-15);
        assert_eq!(r.max_abs(), 4.0);
        let t = r.render();
        assert!(t.contains("0.800000") && t.contains("total: 2 tensors, 6 elements"), "{t}");
        let z = compare_values("z", FormatId::F32, &[0.0], &[1.0]).unwrap();
        assert!(z.nrmse.is_infinite());
        let n = compare_values("n", FormatId::F32, &[1.0, 2.0], &[f32::NAN, 2.0]).unwrap();
        assert!(n.max_abs.is_nan());
        assert!(compare_values("x", FormatId::F32, &[1.0], &[]).is_err());
    }
}

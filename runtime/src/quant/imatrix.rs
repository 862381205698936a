//! llama.cpp importance matrices: the legacy `.dat` binary layout ([`read_legacy`]) and the
//! GGUF layout interpreted from already-read tensors and metadata ([`from_gguf_parts`]; the
//! GGUF file itself is read by the GGUF module). Both give an [`ImportanceMatrix`]: per weight
//! tensor, the mean of the squared activations of each input column (one vector of the row
//! length per matrix; stacked experts have one per expert), finite and >= 0.
//!
//! Legacy layout (ggml-org/llama.cpp `tools/imatrix/imatrix.cpp`, `save_imatrix_legacy` and
//! `load_imatrix_legacy`; all integers little-endian `int32`, values `f32`):
//! ```text
//! n_entries
//! n_entries x { name_len, name[name_len], ncall, nval, values[nval] }
//! optional trailer: last_chunk, dataset_len, dataset[dataset_len]
//! ```
//! Stored values are `(sum of x^2 / count) * ncall`; the quantizer divides by `ncall` when it
//! is positive (`tools/quantize/quantize.cpp`, `load_legacy_imatrix`), giving the mean of x^2.
//! Experts of a stacked tensor are concatenated in one entry (nval = row length x experts).
//!
//! GGUF layout (same `imatrix.cpp`, `save_imatrix`; read by `quantize.cpp` `load_imatrix`):
//! for each weight `W`, an F32 tensor `W.in_sum2` of dims `[row length, n_mat]` (sums of x^2)
//! and `W.counts` of dims `[1, n_mat]` (tokens seen per matrix); an optional `W.in_sum` (sums
//! of x, newer files) is ignored. Metadata: `general.type = "imatrix"`,
//! `imatrix.datasets` (array of strings), `imatrix.chunk_count` and `imatrix.chunk_size`
//! (u32); the quantizer refuses a file missing any of the last three. Value =
//! `in_sum2 / count` per matrix, and 1 for a matrix whose count is 0 (an expert the
//! calibration never routed to).
//!
//! lowbit extension (ignored by llama.cpp's readers, which skip tensors whose names end in
//! neither `.in_sum2` nor `.counts`): `W.in_cov`, an F32 tensor of dims `[k, k]` (or
//! `[k, k, n_mat]` for stacked experts) holding the sums `sum x x^T` of the same inputs
//! (written by `lowbit imatrix --covariance`, read into [`ImportanceMatrix::covariance`], used
//! by the GPTQ encoders of [`super::gptq`]). Its values are checked where they are used.
//! What must not live here: applying the weights (see [`super::pipeline`]).

use std::collections::BTreeMap;

use super::{MetaValue, QuantError};

/// One weight tensor's importance vector(s).
#[derive(Clone, Debug, PartialEq)]
pub struct ImportanceEntry {
    /// `n_mat` vectors of the row length, back to back.
    pub values: Vec<f32>,
    /// Number of matrices, when the file says (GGUF layout); `None` for legacy entries.
    pub n_mat: Option<usize>,
}

/// Importance vectors by weight tensor name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportanceMatrix {
    /// Entries by weight tensor name (`blk.0.attn_q.weight`).
    pub entries: BTreeMap<String, ImportanceEntry>,
    /// Calibration datasets named by the file.
    pub datasets: Vec<String>,
    /// Chunks the matrix was computed on, where the file says.
    pub chunk_count: Option<u64>,
    /// Input covariance sums (`W.in_cov`) by weight tensor name, where the file has them.
    pub covariance: BTreeMap<String, CovarianceEntry>,
}

/// One weight tensor's input covariance sums (lowbit's `W.in_cov` extension).
#[derive(Clone, Debug, PartialEq)]
pub struct CovarianceEntry {
    /// Row length of the weight (the matrix is `k x k`).
    pub k: usize,
    /// Stacked matrices (experts; 1 for a plain matrix).
    pub n_mat: usize,
    /// `n_mat` row-major `k x k` matrices of `sum x x^T`, back to back.
    pub sums: Vec<f32>,
}

/// One tensor of a GGUF imatrix file, as the GGUF reader gives it.
#[derive(Clone, Copy, Debug)]
pub struct GgufImatrixTensor<'a> {
    /// Tensor name (`blk.0.attn_q.weight.in_sum2`).
    pub name: &'a str,
    /// Dims in ggml order.
    pub dims: &'a [u64],
    /// The values (the reader converts F32 data; other types are the reader's error).
    pub data: &'a [f32],
}

fn imx(entry: &str, offset: usize, what: impl Into<String>) -> QuantError {
    QuantError::Imatrix { entry: entry.to_owned(), offset, what: what.into() }
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, entry: &str, what: &str) -> Result<&[u8], QuantError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            imx(
                entry,
                self.pos,
                format!("truncated: {what} needs {n} bytes, {} left", self.b.len() - self.pos),
            )
        })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn i32(&mut self, entry: &str, what: &str) -> Result<i32, QuantError> {
        let s = self.take(4, entry, what)?;
        Ok(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn count(&mut self, entry: &str, what: &str, min: i32) -> Result<usize, QuantError> {
        let at = self.pos;
        let v = self.i32(entry, what)?;
        if v < min {
            return Err(imx(entry, at, format!("{what} is {v}, must be at least {min}")));
        }
        Ok(v as usize)
    }
}

fn check_value(entry: &str, offset: usize, v: f32) -> Result<(), QuantError> {
    if !v.is_finite() || v < 0.0 {
        return Err(imx(entry, offset, format!("value {v} is not finite and >= 0")));
    }
    Ok(())
}

/// Reads a legacy `.dat` importance matrix (layout in the module documentation). Every
/// length is checked against the bytes left; errors name the entry and the byte offset.
pub fn read_legacy(bytes: &[u8]) -> Result<ImportanceMatrix, QuantError> {
    let mut c = Cursor { b: bytes, pos: 0 };
    let n_entries = c.count("<header>", "entry count", 1)?;
    let mut m = ImportanceMatrix::default();
    for i in 0..n_entries {
        let label = format!("#{i}");
        let len_at = c.pos;
        let len = c.count(&label, "name length", 1)?;
        let name_at = c.pos;
        let name = std::str::from_utf8(c.take(len, &label, "name")?)
            .map_err(|_| imx(&label, name_at, "name is not UTF-8"))?
            .to_owned();
        let ncall = c.i32(&name, "ncall")?;
        let nval = c.count(&name, "value count", 1)?;
        let need = nval.checked_mul(4).ok_or_else(|| imx(&name, c.pos, "value count overflows"))?;
        let base = c.pos;
        let raw = c.take(need, &name, "values")?;
        let mut values = Vec::with_capacity(nval);
        for (j, b) in raw.chunks_exact(4).enumerate() {
            let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            check_value(&name, base + 4 * j, v)?;
            values.push(if ncall > 0 { v / ncall as f32 } else { v });
        }
        if m.entries.insert(name.clone(), ImportanceEntry { values, n_mat: None }).is_some() {
            return Err(imx(&name, len_at, "duplicate entry"));
        }
    }
    if c.pos < bytes.len() {
        let last_chunk = c.i32("<trailer>", "chunk count")?;
        let dlen = c.count("<trailer>", "dataset name length", 0)?;
        let at = c.pos;
        let ds = c.take(dlen, "<trailer>", "dataset name")?;
        let ds = std::str::from_utf8(ds).map_err(|_| imx("<trailer>", at, "dataset not UTF-8"))?;
        m.datasets.push(ds.to_owned());
        m.chunk_count = u64::try_from(last_chunk).ok();
        if c.pos != bytes.len() {
            return Err(imx("<trailer>", c.pos, "unexpected bytes after the dataset name"));
        }
    }
    Ok(m)
}

/// Interprets the tensors and metadata of a GGUF imatrix file (layout in the module
/// documentation). `data` offsets in errors are byte offsets into the named tensor's data.
pub fn from_gguf_parts(
    tensors: &[GgufImatrixTensor<'_>],
    metadata: &[(String, MetaValue)],
) -> Result<ImportanceMatrix, QuantError> {
    let get = |k: &str| metadata.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    let meta_err = |k: &str, what: &str| imx("<metadata>", 0, format!("key {k}: {what}"));
    if let Some(v) = get("general.type") {
        if v.as_str() != Some("imatrix") {
            return Err(meta_err("general.type", &format!("is {v}, not \"imatrix\"")));
        }
    }
    let mut m = ImportanceMatrix::default();
    match get("imatrix.datasets") {
        Some(MetaValue::StringArray(a)) => m.datasets = a.clone(),
        Some(v) => return Err(meta_err("imatrix.datasets", &format!("is a {}", v.type_name()))),
        None => return Err(meta_err("imatrix.datasets", "missing")),
    }
    for k in ["imatrix.chunk_count", "imatrix.chunk_size"] {
        let v = get(k).ok_or_else(|| meta_err(k, "missing"))?;
        let n = v.as_u64().ok_or_else(|| meta_err(k, &format!("is {v}, not an integer")))?;
        if k == "imatrix.chunk_count" {
            m.chunk_count = Some(n);
        }
    }

    let mut pairs: BTreeMap<&str, (Option<usize>, Option<usize>)> = BTreeMap::new();
    for (i, t) in tensors.iter().enumerate() {
        if let Some(w) = t.name.strip_suffix(".in_cov") {
            let k = t.dims.first().copied().unwrap_or(0) as usize;
            let n_mat = t.dims.get(2).copied().unwrap_or(1) as usize;
            let shape_ok = matches!(t.dims.len(), 2 | 3)
                && t.dims[1] as usize == k
                && k.checked_mul(k).and_then(|kk| kk.checked_mul(n_mat)) == Some(t.data.len())
                && k > 0;
            if !shape_ok {
                return Err(imx(
                    w,
                    0,
                    format!(
                        "{} dims {:?} with {} values is not k x k (x n_mat)",
                        t.name,
                        t.dims,
                        t.data.len()
                    ),
                ));
            }
            m.covariance.insert(w.to_owned(), CovarianceEntry { k, n_mat, sums: t.data.to_vec() });
        } else if let Some(w) = t.name.strip_suffix(".in_sum2") {
            pairs.entry(w).or_default().0 = Some(i);
        } else if let Some(w) = t.name.strip_suffix(".counts") {
            pairs.entry(w).or_default().1 = Some(i);
        }
    }
    if pairs.is_empty() {
        return Err(imx("<tensors>", 0, "no `.in_sum2` / `.counts` tensors"));
    }
    for (w, pair) in pairs {
        let (Some(si), Some(ci)) = pair else {
            return Err(imx(w, 0, "has only one of `.in_sum2` and `.counts`"));
        };
        let (s, c) = (&tensors[si], &tensors[ci]);
        for t in [s, c] {
            let n = t.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            if n != Some(t.data.len() as u64) {
                return Err(imx(
                    w,
                    0,
                    format!("{} dims {:?} but {} values", t.name, t.dims, t.data.len()),
                ));
            }
        }
        let n_mat = c.data.len();
        if n_mat == 0 || s.data.is_empty() || s.data.len() % n_mat != 0 {
            return Err(imx(
                w,
                0,
                format!("{} values do not split into {} matrices", s.data.len(), n_mat),
            ));
        }
        if s.dims.len() >= 2 && s.dims[1..].iter().product::<u64>() != n_mat as u64 {
            return Err(imx(w, 0, format!("in_sum2 dims {:?} but {n_mat} counts", s.dims)));
        }
        let ne0 = s.data.len() / n_mat;
        let mut values = Vec::with_capacity(s.data.len());
        for (j, &count) in c.data.iter().enumerate() {
            if !count.is_finite() || count < 0.0 {
                return Err(imx(w, 4 * j, format!("count {count} of matrix {j} is invalid")));
            }
            for i in 0..ne0 {
                let v = s.data[j * ne0 + i];
                check_value(w, 4 * (j * ne0 + i), v)?;
                values.push(if count > 0.0 { v / count } else { 1.0 });
            }
        }
        // A huge sum over a tiny count can overflow to infinity.
        if let Some(p) = values.iter().position(|v| !v.is_finite()) {
            return Err(imx(w, 4 * p, "sum / count overflows f32"));
        }
        m.entries.insert(w.to_owned(), ImportanceEntry { values, n_mat: Some(n_mat) });
    }
    Ok(m)
}

impl ImportanceMatrix {
    /// The importance vectors for weight `name` with rows of `k` elements and `n_mat` stacked
    /// matrices (experts; 1 for a plain matrix): `None` if the matrix has no entry, an error if
    /// the entry's size does not match (llama.cpp's quantizer refuses that too).
    pub fn for_tensor(
        &self,
        name: &str,
        k: usize,
        n_mat: usize,
    ) -> Result<Option<&[f32]>, QuantError> {
        let Some(e) = self.entries.get(name) else { return Ok(None) };
        let want = k.checked_mul(n_mat);
        if want != Some(e.values.len()) || e.n_mat.is_some_and(|n| n != n_mat) {
            return Err(QuantError::Tensor {
                tensor: name.to_owned(),
                what: format!(
                    "imatrix entry has {} values{}, the tensor needs {k} x {n_mat}",
                    e.values.len(),
                    e.n_mat.map(|n| format!(" in {n} matrices")).unwrap_or_default()
                ),
            });
        }
        Ok(Some(&e.values))
    }

    /// The covariance sums of matrix `mat` of weight `name` with rows of `k` elements and
    /// `n_mat` stacked matrices: `None` if the file has none, an error if the shape differs.
    pub fn covariance_for(
        &self,
        name: &str,
        k: usize,
        n_mat: usize,
        mat: usize,
    ) -> Result<Option<&[f32]>, QuantError> {
        let Some(c) = self.covariance.get(name) else { return Ok(None) };
        if c.k != k || c.n_mat != n_mat || mat >= n_mat {
            return Err(QuantError::Tensor {
                tensor: name.to_owned(),
                what: format!(
                    "imatrix covariance is {} x {} x {} matrices, the tensor needs {k} x {k} x {n_mat}",
                    c.k, c.k, c.n_mat
                ),
            });
        }
        Ok(Some(&c.sums[mat * k * k..(mat + 1) * k * k]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(entries: &[(&str, i32, &[f32])], trailer: Option<(i32, &str)>) -> Vec<u8> {
        let mut b = (entries.len() as i32).to_le_bytes().to_vec();
        for (n, ncall, v) in entries {
            b.extend((n.len() as i32).to_le_bytes());
            b.extend(n.as_bytes());
            b.extend(ncall.to_le_bytes());
            b.extend((v.len() as i32).to_le_bytes());
            v.iter().for_each(|x| b.extend(x.to_le_bytes()));
        }
        if let Some((c, d)) = trailer {
            b.extend(c.to_le_bytes());
            b.extend((d.len() as i32).to_le_bytes());
            b.extend(d.as_bytes());
        }
        b
    }

    #[test]
    fn legacy_divides_by_ncall_and_reads_trailer() {
        let b = legacy(&[("a.weight", 4, &[4.0, 8.0]), ("b", 0, &[3.0])], Some((7, "wiki")));
        let m = read_legacy(&b).unwrap();
        assert_eq!(m.entries["a.weight"].values, vec![1.0, 2.0]);
        assert_eq!(m.entries["b"].values, vec![3.0]);
        assert_eq!((m.datasets.clone(), m.chunk_count), (vec!["wiki".to_owned()], Some(7)));
        assert_eq!(m.for_tensor("a.weight", 2, 1).unwrap(), Some(&[1.0f32, 2.0][..]));
        assert_eq!(m.for_tensor("zz", 2, 1).unwrap(), None);
        assert!(m.for_tensor("a.weight", 1, 1).is_err());
        assert!(read_legacy(&legacy(&[("a", 1, &[1.0])], None)).is_ok());
    }

    #[test]
    fn legacy_errors_name_entry_and_offset() {
        let good = legacy(&[("a", 1, &[1.0, 2.0])], Some((1, "d")));
        // header(4) len(4) name(1) ncall(4) nval(4) => first value at 17.
        let mut nan = good.clone();
        nan[21..25].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = read_legacy(&nan).unwrap_err().to_string();
        assert!(e.contains("entry a ") && e.contains("offset 21"), "{e}");
        let mut neg = good.clone();
        neg[17..21].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert!(read_legacy(&neg).unwrap_err().to_string().contains("offset 17"));
        for cut in [0, 3, 6, 10, 15, 20, 26, 29] {
            let e = read_legacy(&good[..cut]).unwrap_err().to_string();
            assert!(e.contains("truncated") || e.contains("at least"), "cut {cut}: {e}");
        }
        let mut extra = good.clone();
        extra.push(0);
        assert!(read_legacy(&extra).unwrap_err().to_string().contains("after the dataset"));
        let mut huge = good.clone();
        huge[13..17].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(read_legacy(&huge).unwrap_err().to_string().contains("truncated"));
        let dup = legacy(&[("a", 1, &[1.0]), ("a", 1, &[1.0])], None);
        assert!(read_legacy(&dup).unwrap_err().to_string().contains("duplicate"));
    }

    fn meta() -> Vec<(String, MetaValue)> {
        vec![
            ("general.type".into(), MetaValue::String("imatrix".into())),
            ("imatrix.datasets".into(), MetaValue::StringArray(vec!["d".into()])),
            ("imatrix.chunk_count".into(), MetaValue::U32(3)),
            ("imatrix.chunk_size".into(), MetaValue::U32(512)),
        ]
    }

    #[test]
    fn gguf_parts_per_matrix_counts() {
        let sums = [2.0, 4.0, 9.0, 9.0];
        let counts = [2.0, 0.0];
        let t = [
            GgufImatrixTensor { name: "e.weight.counts", dims: &[1, 2], data: &counts },
            GgufImatrixTensor { name: "e.weight.in_sum2", dims: &[2, 2], data: &sums },
            GgufImatrixTensor { name: "e.weight.in_sum", dims: &[2, 2], data: &[-1.0; 4] },
        ];
        let m = from_gguf_parts(&t, &meta()).unwrap();
        assert_eq!(m.entries["e.weight"].values, vec![1.0, 2.0, 1.0, 1.0]);
        assert_eq!(m.chunk_count, Some(3));
        assert!(m.for_tensor("e.weight", 2, 2).unwrap().is_some());
        assert!(m.for_tensor("e.weight", 4, 1).is_err());
        let mut md = meta();
        md.remove(3);
        assert!(from_gguf_parts(&t, &md).unwrap_err().to_string().contains("chunk_size"));
        let e = from_gguf_parts(&t[1..], &meta()).unwrap_err().to_string();
        assert!(e.contains("e.weight"), "{e}");
        let bad = [-3.0f32, 1.0, 1.0, 1.0];
        let t2 = [t[0], GgufImatrixTensor { name: "e.weight.in_sum2", dims: &[2, 2], data: &bad }];
        assert!(from_gguf_parts(&t2, &meta()).unwrap_err().to_string().contains("offset 0"));
    }

    #[test]
    fn gguf_parts_covariance() {
        let counts = [2.0];
        let sums = [1.0, 4.0];
        let cov = [1.0, 0.5, 0.5, 4.0];
        let t = [
            GgufImatrixTensor { name: "w.counts", dims: &[1, 1], data: &counts },
            GgufImatrixTensor { name: "w.in_sum2", dims: &[2, 1], data: &sums },
            GgufImatrixTensor { name: "w.in_cov", dims: &[2, 2], data: &cov },
        ];
        let m = from_gguf_parts(&t, &meta()).unwrap();
        assert_eq!(m.covariance_for("w", 2, 1, 0).unwrap(), Some(&cov[..]));
        assert_eq!(m.covariance_for("v", 2, 1, 0).unwrap(), None);
        let e = m.covariance_for("w", 3, 1, 0).unwrap_err().to_string();
        assert!(e.contains("2 x 2 x 1") && e.contains("3 x 3 x 1"), "{e}");
        let bad =
            [t[0], t[1], GgufImatrixTensor { name: "w.in_cov", dims: &[2, 3], data: &[0.0; 6] }];
        let e = from_gguf_parts(&bad, &meta()).unwrap_err().to_string();
        assert!(e.contains("w.in_cov") && e.contains("not k x k"), "{e}");
    }
}

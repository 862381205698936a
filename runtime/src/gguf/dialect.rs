//! Which numbering of tensor type ids a GGUF file uses, and the mapping between type ids and
//! [`FormatId`]s under it.
//!
//! Type ids above ggml's own set mean different things in different forks (ROCmFPX's 104/107,
//! Prism's 142/143; hipfire numbers its formats 21/24/33, where ggml has IQ3_S at 21). A file is
//! read under the dialect that is *stated* by the caller, else the one *recognised* from its
//! metadata, else ggml's. When the evidence names several dialects, every tensor's id is read
//! under all of them, and an id that means two different formats is an error naming both:
//! lowbit never guesses.
//!
//! Metadata recognised (first match wins: lowbit's own key, then the forks' keys):
//! * `lowbit.dialect` (string: `ggml`, `rocmfpx`, `prism` or `hipfire`): written by lowbit
//!   (see [`KEY_DIALECT`]); authoritative, since lowbit wrote the type ids.
//! * Any `prism.hadamard.*` key: the Prism fork's Hadamard-fold metadata (github
//!   PrismML-Eng/llama.cpp branch prism; FORMATS.md section 5) -> prism.
//! * `general.file_type` 141, 142 or 143: Prism's `LLAMA_FTYPE_MOSTLY_PQ2_0` = 141,
//!   `..._PQ2_0_LEGACY` = 142, `..._PTQ1_0` = 143 (PrismML-Eng/llama.cpp `include/llama.h`)
//!   -> prism.
//! * `general.file_type` 100..=122: ROCmFPX's ftype range (`GGML_FTYPE_MOSTLY_Q4_0_ROCMFP4` =
//!   100 ... `GGML_FTYPE_MOSTLY_Q2_0_ROCMFPX` = 122 in github ciru-ai/ROCmFPX
//!   `ggml/include/ggml.h`; gguf-py `LlamaFileType` there agrees) -> rocmfpx. Upstream
//!   llama.cpp's ftypes stay below 100.
//!
//! hipfire stores tensors in its own `.hfq` container, not GGUF (FORMATS.md section 4), so a
//! hipfire-numbered GGUF can only come from lowbit, which always writes `lowbit.dialect`. In
//! such a file hipfire's ids (21, 24, 33) take precedence and every other format keeps its ggml
//! id; a ggml format whose id hipfire reuses (IQ3_S = 21) cannot be written in it.
//!
//! Files lowbit writes carry `lowbit.dialect` and `lowbit.formats` ([`KEY_FORMATS`]: the
//! names of every format the file's tensors use, in registry order) and use the dialect's ids,
//! so a rocmfpx file is numbered as ROCmFPX numbers it and a prism file as Prism does. A reader
//! that finds `lowbit.formats` checks every tensor's format against it.
//!
//! What must not live here: the ids themselves (lowbit-core's registry owns them) and byte
//! parsing.

use std::fmt;

use lowbit_core::{Dialect, FormatId};

use super::error::{dialects_text, GgufError};
use super::value::Value;

/// lowbit's metadata key naming the dialect of a file's type ids (a string, [`Dialect::name`]).
pub const KEY_DIALECT: &str = "lowbit.dialect";
/// lowbit's metadata key listing the formats a file's tensors use (an array of strings,
/// [`FormatId::name`], in registry order).
pub const KEY_FORMATS: &str = "lowbit.formats";

/// The Prism fork's metadata prefix for Hadamard-folded weights.
const PRISM_HADAMARD_PREFIX: &str = "prism.hadamard.";

/// ggml type ids that lowbit has no codec for, with ggml's names (ggml `include/ggml.h`
/// `enum ggml_type`), so an error can say what the id is.
const GGML_UNSUPPORTED: [(u32, &str); 7] =
    [(24, "I8"), (25, "I16"), (26, "I32"), (27, "I64"), (28, "F64"), (41, "Q1_0"), (42, "Q2_0")];

/// Parses a dialect name (`ggml`, `rocmfpx`, `prism`, `hipfire`; case-insensitive).
pub fn parse_dialect(name: &str) -> Option<Dialect> {
    Dialect::ALL.into_iter().find(|d| d.name().eq_ignore_ascii_case(name))
}

/// The dialect(s) a file is read under, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialectChoice {
    /// The candidate dialects (one, unless the metadata points at several).
    pub dialects: Vec<Dialect>,
    /// Why: `stated`, `lowbit.dialect`, the fork key that was found, or the default.
    pub reason: String,
}

impl DialectChoice {
    /// The dialect when there is exactly one candidate.
    pub fn single(&self) -> Option<Dialect> {
        match self.dialects.as_slice() {
            [d] => Some(*d),
            _ => None,
        }
    }
}

impl fmt::Display for DialectChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", dialects_text(&self.dialects), self.reason)
    }
}

/// The format that type id `id` names in a GGUF file of `dialect`.
pub fn format_for_id(dialect: Dialect, id: u32) -> Option<FormatId> {
    match dialect {
        Dialect::Hipfire => FormatId::from_type_id(Dialect::Hipfire, id)
            .or_else(|| FormatId::from_type_id(Dialect::Ggml, id)),
        d => FormatId::from_type_id(d, id),
    }
}

/// The type id of `format` in a GGUF file of `dialect`, or `None` if the dialect cannot
/// hold it.
pub fn id_for_format(dialect: Dialect, format: FormatId) -> Option<u32> {
    match dialect {
        Dialect::Hipfire => format.type_id(Dialect::Hipfire).or_else(|| {
            let id = format.type_id(Dialect::Ggml)?;
            // An id hipfire uses for its own formats cannot also mean a ggml format.
            FormatId::from_type_id(Dialect::Hipfire, id).is_none().then_some(id)
        }),
        d => format.type_id(d),
    }
}

/// Works out the dialect(s) from the caller's statement and the metadata (see the module
/// documentation for the keys).
pub fn choose(
    stated: Option<Dialect>,
    metadata: &[(String, Value)],
) -> Result<DialectChoice, GgufError> {
    if let Some(d) = stated {
        return Ok(DialectChoice { dialects: vec![d], reason: "stated".into() });
    }
    let get = |k: &str| metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    if let Some(v) = get(KEY_DIALECT) {
        let name = v.as_str().ok_or_else(|| GgufError::Dialect {
            reason: format!("{KEY_DIALECT} must be a string, found {}", v.value_type()),
        })?;
        let d = parse_dialect(name).ok_or_else(|| GgufError::Dialect {
            reason: format!(
                "{KEY_DIALECT} = '{name}' is not a dialect lowbit knows ({})",
                dialects_text(&Dialect::ALL)
            ),
        })?;
        return Ok(DialectChoice { dialects: vec![d], reason: KEY_DIALECT.into() });
    }
    let mut found: Vec<(Dialect, String)> = Vec::new();
    if let Some((k, _)) = metadata.iter().find(|(k, _)| k.starts_with(PRISM_HADAMARD_PREFIX)) {
        found.push((Dialect::Prism, format!("key {k}")));
    }
    if let Some(ft) = get("general.file_type").and_then(Value::as_u64) {
        match ft {
            141..=143 => found.push((Dialect::Prism, format!("general.file_type = {ft}"))),
            100..=122 => found.push((Dialect::RocmFpx, format!("general.file_type = {ft}"))),
            _ => {}
        }
    }
    if found.is_empty() {
        return Ok(DialectChoice {
            dialects: vec![Dialect::Ggml],
            reason: "default: no dialect metadata".into(),
        });
    }
    let mut dialects: Vec<Dialect> = Vec::new();
    for (d, _) in &found {
        if !dialects.contains(d) {
            dialects.push(*d);
        }
    }
    let reason = found.iter().map(|(_, r)| r.as_str()).collect::<Vec<_>>().join(", ");
    Ok(DialectChoice { dialects, reason })
}

/// Reads type id `id` of tensor `tensor` (found at byte `offset`) under every candidate
/// dialect: the format if they agree, an [`GgufError::AmbiguousType`] naming every reading if
/// they do not, an [`GgufError::UnknownType`] (saying what the id means elsewhere) if none
/// knows it.
pub fn resolve(
    choice: &DialectChoice,
    id: u32,
    tensor: &str,
    offset: u64,
) -> Result<FormatId, GgufError> {
    let mut readings: Vec<(FormatId, Vec<Dialect>)> = Vec::new();
    for &d in &choice.dialects {
        if let Some(f) = format_for_id(d, id) {
            match readings.iter_mut().find(|(g, _)| *g == f) {
                Some((_, ds)) => ds.push(d),
                None => readings.push((f, vec![d])),
            }
        }
    }
    match readings.len() {
        1 => Ok(readings[0].0),
        0 => {
            let mut hints: Vec<String> = Dialect::ALL
                .into_iter()
                .filter(|d| !choice.dialects.contains(d))
                .filter_map(|d| format_for_id(d, id).map(|f| format!("in {} it is {f}", d.name())))
                .collect();
            if let Some((_, name)) = GGML_UNSUPPORTED.iter().find(|(i, _)| *i == id) {
                hints.insert(0, format!("ggml calls it {name}, which lowbit does not implement"));
            } else if !hints.is_empty() {
                hints.push("state the dialect (--dialect) if the file comes from that fork".into());
            }
            Err(GgufError::UnknownType {
                tensor: tensor.to_owned(),
                offset,
                id,
                dialects: choice.to_string(),
                hint: hints.join("; "),
            })
        }
        _ => Err(GgufError::AmbiguousType { tensor: tensor.to_owned(), offset, id, readings }),
    }
}

/// The value of [`KEY_FORMATS`] for a file whose tensors use `formats` (deduplicated, in
/// registry order).
pub fn formats_value(formats: impl IntoIterator<Item = FormatId>) -> Value {
    let mut used: Vec<FormatId> = formats.into_iter().collect();
    used.sort();
    used.dedup();
    let names: Vec<&str> = used.iter().map(|f| f.name()).collect();
    Value::string_array(&names)
}

/// Parses [`KEY_FORMATS`] if present: `Ok(None)` when absent.
pub fn listed_formats(metadata: &[(String, Value)]) -> Result<Option<Vec<FormatId>>, GgufError> {
    let Some((_, v)) = metadata.iter().find(|(k, _)| k == KEY_FORMATS) else {
        return Ok(None);
    };
    let bad = |why: String| GgufError::Dialect { reason: format!("{KEY_FORMATS}: {why}") };
    let arr =
        v.as_array().ok_or_else(|| bad(format!("must be an array, found {}", v.value_type())))?;
    arr.items
        .iter()
        .map(|item| {
            let name = item.as_str().ok_or_else(|| bad("must hold strings".into()))?;
            FormatId::from_name(name).ok_or_else(|| bad(format!("unknown format '{name}'")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn stated_wins_then_lowbit_key_then_fork_keys() {
        let m = meta(&[
            (KEY_DIALECT, Value::String("hipfire".into())),
            ("general.file_type", Value::U32(141)),
        ]);
        assert_eq!(choose(Some(Dialect::Ggml), &m).unwrap().dialects, [Dialect::Ggml]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::Hipfire]);
        let m = meta(&[("general.file_type", Value::U32(141))]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::Prism]);
        let m = meta(&[("general.file_type", Value::U32(119))]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::RocmFpx]);
        let m = meta(&[("prism.hadamard.block_size", Value::U32(1024))]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::Prism]);
        let m = meta(&[("general.file_type", Value::U32(15))]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::Ggml]);
        // Both forks' evidence: both are candidates.
        let m = meta(&[
            ("prism.hadamard.version", Value::U32(1)),
            ("general.file_type", Value::U32(112)),
        ]);
        assert_eq!(choose(None, &m).unwrap().dialects, [Dialect::Prism, Dialect::RocmFpx]);
        let m = meta(&[(KEY_DIALECT, Value::String("llamafile".into()))]);
        assert!(choose(None, &m).unwrap_err().to_string().contains("llamafile"));
        let m = meta(&[(KEY_DIALECT, Value::U32(3))]);
        assert!(choose(None, &m).is_err());
    }

    #[test]
    fn ids_resolve_per_dialect_and_ambiguity_names_both() {
        let one = |d| DialectChoice { dialects: vec![d], reason: "test".into() };
        assert_eq!(resolve(&one(Dialect::RocmFpx), 107, "t", 0).unwrap(), FormatId::RocmFp2);
        assert_eq!(resolve(&one(Dialect::Prism), 142, "t", 0).unwrap(), FormatId::Pq2_0);
        assert_eq!(resolve(&one(Dialect::Hipfire), 21, "t", 0).unwrap(), FormatId::Hfp4G32);
        assert_eq!(resolve(&one(Dialect::Hipfire), 0, "t", 0).unwrap(), FormatId::F32);
        assert_eq!(resolve(&one(Dialect::Ggml), 21, "t", 0).unwrap(), FormatId::Iq3S);
        // Under ggml, 107 is unknown, and the error says what rocmfpx reads.
        let e = resolve(&one(Dialect::Ggml), 107, "blk.0.w", 99).unwrap_err().to_string();
        assert!(e.contains("blk.0.w") && e.contains("99") && e.contains("rocmfpx"), "{e}");
        assert!(e.contains("ROCMFP2"), "{e}");
        let e = resolve(&one(Dialect::Ggml), 28, "x", 0).unwrap_err().to_string();
        assert!(e.contains("F64"), "{e}");
        // Two candidates that disagree: an error naming both readings.
        let two =
            DialectChoice { dialects: vec![Dialect::Ggml, Dialect::Hipfire], reason: "t".into() };
        let e = resolve(&two, 21, "blk.1.ffn", 7).unwrap_err();
        assert!(matches!(e, GgufError::AmbiguousType { .. }));
        let e = e.to_string();
        assert!(e.contains("IQ3_S") && e.contains("HFP4G32") && e.contains("blk.1.ffn"), "{e}");
        // Candidates that agree are fine.
        assert_eq!(resolve(&two, 2, "t", 0).unwrap(), FormatId::Q4_0);
    }

    #[test]
    fn write_ids() {
        assert_eq!(id_for_format(Dialect::RocmFpx, FormatId::RocmFp3), Some(104));
        assert_eq!(id_for_format(Dialect::Ggml, FormatId::RocmFp3), None);
        assert_eq!(id_for_format(Dialect::Hipfire, FormatId::Mfp4G32), Some(24));
        assert_eq!(id_for_format(Dialect::Hipfire, FormatId::F16), Some(1));
        assert_eq!(id_for_format(Dialect::Hipfire, FormatId::Iq3S), None);
        // Every id written under a dialect reads back as the same format.
        for d in Dialect::ALL {
            for f in FormatId::ALL {
                if let Some(id) = id_for_format(d, f) {
                    assert_eq!(format_for_id(d, id), Some(f), "{f} in {d:?}");
                }
            }
        }
    }
}

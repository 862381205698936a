//! Quantization recipes: an ordered list of per-tensor-name rules, each giving a format, an
//! optional encoder rule and a fallback chain; the first rule whose pattern matches a tensor's
//! name decides its format. [`Recipe::plan`] applies a recipe to one tensor.
//!
//! Semantics:
//! * Patterns are globs over llama.cpp GGUF tensor names: `*` matches any run of characters
//!   (dots included), `?` one character (`blk.*.ffn_*.weight`, `token_embd.weight`,
//!   `*norm*`). A rule may list several patterns.
//! * 1-D tensors (norms, biases; and scalars) stay F32 unless a rule that matches them says
//!   `one_d = true`; other rules skip them. A 2-D or larger tensor that no rule matches stays
//!   F32 too (built-in recipes end with a `*` rule, so that never happens for them).
//! * A format can hold a row of length K = `dims[0]` only if K is a multiple of its row
//!   multiple (32 for Q4_0, Q8_0, ROCmFP2, HFP4G32; 128 for PQ2_0; 256 for MFP4G32 and the
//!   K-quant-sized types). When the rule's format cannot, the rule's `fallback` chain is tried
//!   in order (or, if the rule has none, the recipe's), and the plan records the format it
//!   wanted and why; when nothing in the chain fits, planning fails naming the tensor.
//! * `encoder` is `reference` (the default: byte-exact with the format's public quantizer),
//!   `improved` (lowbit's lower-error encoder of the same format) or `exhaustive`. A rule's
//!   encoder applies to its fallbacks too; a format that does not offer the asked-for encoder
//!   gets its reference encoder. `gptq` asks for the GPTQ encoder of [`super::gptq`] (ROCmFP2,
//!   ROCmFP3, HFP4G32, MFP4G32: the same formats' bytes, chosen to compensate errors across columns using the
//!   importance matrix's input covariance `W.in_cov`); on other formats (fallbacks included)
//!   it means `improved`. `gptq_damp` (only with `gptq`; default 0.01) is GPTQ's dampening,
//!   the fraction of the covariance's mean diagonal added to its diagonal.
//! * Every format a recipe names must have an encoder in `lowbit-core` (so Q4_K or IQ2_XXS are
//!   refused when the recipe is loaded, not halfway through a model).
//!
//! The TOML format (the built-in recipes below are written in it, and `docs/RECIPES.md`
//! describes each one):
//!
//! ```toml
//! name = "my-recipe"                       # optional; defaults to the file name
//! description = "what and why"             # optional
//! fallback = ["Q8_0", "F16"]               # optional default chain for rules without one
//!
//! [[rule]]
//! match = "*ffn_gate_inp*"                 # the MoE router stays in full precision
//! format = "F32"
//!
//! [[rule]]
//! match = ["blk.*.ffn_gate.weight", "blk.*.ffn_up.weight", "blk.*.ffn_down.weight"]
//! format = "ROCMFP2"                       # any name or alias `lowbit formats` knows
//! encoder = "reference"                    # reference | improved | exhaustive | gptq
//! fallback = ["Q8_0", "F16"]
//!
//! [[rule]]
//! match = "*norm*"
//! format = "F16"
//! one_d = true                             # let this rule apply to 1-D tensors
//!
//! [[rule]]
//! match = "*"
//! format = "Q8_0"
//! ```
//!
//! Unknown keys are errors (a misspelt `fallbak` must not be silently ignored).
//! What must not live here: encoding (see [`super::pipeline`]) and file I/O beyond reading a
//! recipe file.

use std::fmt::Write as _;
use std::path::Path;

use lowbit_core::{FormatId, Rule as Encoder};
use serde::Deserialize;

use super::glob;
use super::QuantError;

/// One rule of a recipe.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRule {
    /// Glob patterns; the rule matches a tensor whose name matches any of them.
    pub patterns: Vec<String>,
    /// The format it asks for.
    pub format: FormatId,
    /// The encoder rule asked for (`None`: reference).
    pub encoder: Option<Encoder>,
    /// Whether `encoder = "gptq"` was asked for (then `encoder` is `Improved`).
    pub gptq: bool,
    /// GPTQ's dampening fraction (`None`: [`super::gptq::DAMP_FRACTION`]).
    pub gptq_damp: Option<f64>,
    /// Formats to try, in order, when `format` cannot hold the row length (`None`: the
    /// recipe's default chain).
    pub fallback: Option<Vec<FormatId>>,
    /// Whether the rule applies to 1-D tensors too.
    pub one_d: bool,
}

/// A recipe: rules in order (first match wins) and a default fallback chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    /// Name (a built-in's name, or the TOML `name`, or the file name).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The rules, in the order they are tried.
    pub rules: Vec<TensorRule>,
    /// Fallback chain for rules that state none.
    pub fallback: Vec<FormatId>,
}

/// The format chosen for a rule's wanted format that could not hold the row, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct FallbackUsed {
    /// The format the rule asked for.
    pub wanted: FormatId,
    /// Why it (and any earlier fallbacks) could not be used.
    pub reason: String,
}

/// What [`Recipe::plan`] decided for one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The format to store the tensor in.
    pub format: FormatId,
    /// The encoder rule to run (always one the format offers).
    pub encoder: Encoder,
    /// Run the GPTQ encoder instead (only for formats [`super::gptq::supports`]).
    pub gptq: bool,
    /// GPTQ's dampening fraction.
    pub gptq_damp: f64,
    /// Index into [`Recipe::rules`] of the rule that matched (`None`: the F32 default for
    /// 1-D or unmatched tensors).
    pub rule: Option<usize>,
    /// Set when the rule's format could not hold the row length.
    pub fallback_used: Option<FallbackUsed>,
}

/// Names of the built-in recipes, in the order `docs/RECIPES.md` describes them.
pub const BUILTIN_NAMES: [&str; 6] = ["fpx-ifp2", "hfp4", "mfp4", "ternary", "q4_0", "q8_0"];

/// `fpx-ifp2`: ROCmFP2 on the routed-expert bulk of MoE models; on dense FFNs ROCmFP3 for
/// `ffn_down` and Q4_0 for `ffn_gate`/`ffn_up`; Q5_0 on attention and the token embedding; Q8_0
/// on shared experts, the output projection and anything else.
///
/// The MoE part follows the ROCmFPX project's FPX-IFP2 report (the HY3 "Speed-v1" artifact, in
/// `shared/seeds/`, section "Where FPX-IFP2 belongs today"): ROCmFP2 on the routed expert
/// tensors, higher precision for attention, embeddings, shared experts and other fragile
/// tensors. The MoE router (`ffn_gate_inp`) stays F32, as llama.cpp's quantizer keeps it
/// (`src/llama-quant.cpp`). The dense part is measured, not taken from the report: on
/// SmolLM2-135M with an importance matrix, ROCmFP2 on every dense `ffn_gate`+`ffn_up` costs a
/// mean KLD of 0.79 and on every `ffn_down` 0.40 (everything else Q8_0), so a dense FFN in
/// ROCmFP2 cannot meet llama.cpp IQ2_M's quality at its size; ROCmFP3 `ffn_down` (0.10) with
/// Q4_0 gate/up (0.07) and Q5_0 attention and embedding does (docs/RECIPES.md, docs/QUALITY.md).
pub const FPX_IFP2_TOML: &str = r#"
name = "fpx-ifp2"
description = "ROCmFP2 (2.5 bpw) on routed-expert weights; dense FFN: ROCmFP3 ffn_down, Q4_0 ffn_gate/ffn_up; Q5_0 attention and token embedding; Q8_0 output and shared experts; router and norms F32"
fallback = ["Q8_0", "F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = "blk.*.ffn_*_shexp.weight"
format = "Q8_0"
fallback = ["F16"]

[[rule]]
match = "blk.*.ffn_*_exps.weight"
format = "ROCMFP2"
encoder = "reference"
fallback = ["Q8_0", "F16"]

[[rule]]
match = "blk.*.ffn_down.weight"
format = "ROCMFP3"
encoder = "reference"
fallback = ["Q8_0", "F16"]

[[rule]]
match = ["blk.*.ffn_gate.weight", "blk.*.ffn_up.weight"]
format = "Q4_0"
fallback = ["Q8_0", "F16"]

[[rule]]
match = ["blk.*.attn_*.weight", "token_embd.weight"]
format = "Q5_0"
fallback = ["Q8_0", "F16"]

[[rule]]
match = "*"
format = "Q8_0"
fallback = ["F16"]
"#;

/// `hfp4`: hipfire HFP4G32 (4.25 bpw + a 16-byte row header) on every matrix but the token
/// embedding, with lowbit's improved encoder.
pub const HFP4_TOML: &str = r#"
name = "hfp4"
description = "HFP4G32 (improved encoder) on every weight matrix; token embedding Q8_0; router and norms F32"
fallback = ["Q8_0", "F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = "token_embd.weight"
format = "Q8_0"
fallback = ["F16"]

[[rule]]
match = "*"
format = "HFP4G32"
encoder = "improved"
"#;

/// `mfp4`: hipfire MFP4G32 (HFP4 on FWHT-256-rotated rows); rows whose length is not a
/// multiple of 256 fall back to HFP4G32, then Q8_0.
pub const MFP4_TOML: &str = r#"
name = "mfp4"
description = "MFP4G32 (FWHT-256 rotated, improved encoder) on every weight matrix, HFP4G32 where rows are not a multiple of 256; token embedding Q8_0; router and norms F32"
fallback = ["HFP4G32", "Q8_0", "F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = "token_embd.weight"
format = "Q8_0"
fallback = ["F16"]

[[rule]]
match = "*"
format = "MFP4G32"
encoder = "improved"
"#;

/// `ternary`: Prism PQ2_0 (2.125 bpw ternary, 128 per block); rows whose length is not a
/// multiple of 128 fall back to Q4_0.
pub const TERNARY_TOML: &str = r#"
name = "ternary"
description = "PQ2_0 ternary (improved encoder) on attention and FFN weights, Q4_0 where rows are not a multiple of 128; embeddings and output Q8_0; router and norms F32"
fallback = ["Q4_0", "F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = ["token_embd.weight", "output.weight"]
format = "Q8_0"
fallback = ["F16"]

[[rule]]
match = "*"
format = "PQ2_0"
encoder = "improved"
"#;

/// `q4_0`: ggml Q4_0 on every matrix (llama.cpp's `--pure` Q4_0).
pub const Q4_0_TOML: &str = r#"
name = "q4_0"
description = "Q4_0 on every weight matrix (like llama-quantize --pure Q4_0); router and norms F32"
fallback = ["F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = "*"
format = "Q4_0"
"#;

/// `q8_0`: ggml Q8_0 on every matrix.
pub const Q8_0_TOML: &str = r#"
name = "q8_0"
description = "Q8_0 on every weight matrix; router and norms F32"
fallback = ["F16"]

[[rule]]
match = "*ffn_gate_inp*"
format = "F32"

[[rule]]
match = "*"
format = "Q8_0"
"#;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    name: Option<String>,
    description: Option<String>,
    fallback: Option<Vec<String>>,
    #[serde(default)]
    rule: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(rename = "match")]
    patterns: Patterns,
    format: String,
    encoder: Option<String>,
    fallback: Option<Vec<String>>,
    #[serde(default)]
    one_d: bool,
    gptq_damp: Option<f64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Patterns {
    One(String),
    Many(Vec<String>),
}

fn recipe_err(recipe: &str, what: impl Into<String>) -> QuantError {
    QuantError::Recipe { recipe: recipe.to_owned(), what: what.into() }
}

fn parse_format(recipe: &str, ctx: &str, name: &str) -> Result<FormatId, QuantError> {
    let f = FormatId::from_name(name)
        .ok_or_else(|| recipe_err(recipe, format!("{ctx}: unknown format {name:?}")))?;
    if !f.info().encoders.reference {
        return Err(recipe_err(
            recipe,
            format!("{ctx}: format {f} has no encoder in lowbit (it can be read, not written)"),
        ));
    }
    Ok(f)
}

/// The encoder rule and whether GPTQ was asked for.
fn parse_encoder(recipe: &str, ctx: &str, name: &str) -> Result<(Encoder, bool), QuantError> {
    match name.to_ascii_lowercase().as_str() {
        "reference" => Ok((Encoder::Reference, false)),
        "improved" => Ok((Encoder::Improved, false)),
        "exhaustive" => Ok((Encoder::Exhaustive, false)),
        "gptq" => Ok((Encoder::Improved, true)),
        _ => Err(recipe_err(
            recipe,
            format!("{ctx}: unknown encoder {name:?} (reference, improved, exhaustive or gptq)"),
        )),
    }
}

fn parse_chain(recipe: &str, ctx: &str, names: &[String]) -> Result<Vec<FormatId>, QuantError> {
    names.iter().map(|n| parse_format(recipe, ctx, n)).collect()
}

/// The encoder to run for `format` when `asked` was asked for: the asked one if the format
/// offers it, else its reference encoder.
pub fn effective_encoder(format: FormatId, asked: Encoder) -> Encoder {
    let e = format.info().encoders;
    match asked {
        Encoder::Improved if e.improved => Encoder::Improved,
        Encoder::Exhaustive if e.exhaustive => Encoder::Exhaustive,
        _ => Encoder::Reference,
    }
}

/// Why `format` cannot hold rows of `k` elements, or `None` if it can.
pub fn row_misfit(format: FormatId, k: usize) -> Option<String> {
    match format.row_bytes(k) {
        Ok(_) => None,
        Err(_) => Some(format!(
            "{format} needs a row length that is a multiple of {}",
            format.geometry().row_multiple
        )),
    }
}

impl Recipe {
    /// Parses a recipe from TOML text; `source` names it in errors (and is its name when the
    /// TOML has none).
    pub fn from_toml(text: &str, source: &str) -> Result<Recipe, QuantError> {
        let file: RecipeFile =
            toml::from_str(text).map_err(|e| recipe_err(source, e.to_string().trim_end()))?;
        let name = file.name.clone().unwrap_or_else(|| source.to_owned());
        let fallback = parse_chain(&name, "fallback", file.fallback.as_deref().unwrap_or(&[]))?;
        let mut rules = Vec::with_capacity(file.rule.len());
        for (i, r) in file.rule.into_iter().enumerate() {
            let ctx = format!("rule {}", i + 1);
            let patterns = match r.patterns {
                Patterns::One(p) => vec![p],
                Patterns::Many(v) => v,
            };
            if patterns.is_empty() {
                return Err(recipe_err(&name, format!("{ctx}: `match` lists no pattern")));
            }
            let enc = r.encoder.as_deref().map(|e| parse_encoder(&name, &ctx, e)).transpose()?;
            let gptq = enc.is_some_and(|e| e.1);
            if let Some(d) = r.gptq_damp {
                if !(gptq && d.is_finite() && d > 0.0) {
                    return Err(recipe_err(
                        &name,
                        format!("{ctx}: gptq_damp = {d} needs encoder = \"gptq\" and a value > 0"),
                    ));
                }
            }
            rules.push(TensorRule {
                patterns,
                format: parse_format(&name, &ctx, &r.format)?,
                encoder: enc.map(|e| e.0),
                gptq,
                gptq_damp: r.gptq_damp,
                fallback: r
                    .fallback
                    .as_deref()
                    .map(|c| parse_chain(&name, &format!("{ctx} fallback"), c))
                    .transpose()?,
                one_d: r.one_d,
            });
        }
        Ok(Recipe { name, description: file.description.unwrap_or_default(), rules, fallback })
    }

    /// The built-in recipe called `name` (see [`BUILTIN_NAMES`]).
    pub fn builtin(name: &str) -> Result<Recipe, QuantError> {
        let text = match name {
            "fpx-ifp2" => FPX_IFP2_TOML,
            "hfp4" => HFP4_TOML,
            "mfp4" => MFP4_TOML,
            "ternary" => TERNARY_TOML,
            "q4_0" => Q4_0_TOML,
            "q8_0" => Q8_0_TOML,
            _ => {
                return Err(recipe_err(
                    name,
                    format!(
                        "no built-in recipe of that name (built-in: {})",
                        BUILTIN_NAMES.join(", ")
                    ),
                ))
            }
        };
        Recipe::from_toml(text, name)
    }

    /// A built-in name, or else the path of a TOML recipe file.
    pub fn from_name_or_file(arg: &str) -> Result<Recipe, QuantError> {
        if BUILTIN_NAMES.contains(&arg) {
            return Recipe::builtin(arg);
        }
        let path = Path::new(arg);
        let text = std::fs::read_to_string(path).map_err(|e| {
            recipe_err(
                arg,
                format!(
                    "not a built-in recipe ({}), and reading it as a file: {e}",
                    BUILTIN_NAMES.join(", ")
                ),
            )
        })?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or(arg);
        Recipe::from_toml(&text, stem).map_err(|e| match e {
            QuantError::Recipe { recipe, what } => {
                QuantError::Recipe { recipe: format!("{recipe} ({})", path.display()), what }
            }
            other => other,
        })
    }

    /// The same recipe with every rule asking for `encoder` (for example
    /// [`Encoder::Reference`] to produce exactly what hipfire's or Prism's quantizer writes).
    pub fn with_encoder(mut self, encoder: Encoder) -> Recipe {
        for r in &mut self.rules {
            r.encoder = Some(encoder);
            r.gptq = false;
        }
        self
    }

    /// Every format this recipe can produce (rule formats, their chains, F32), sorted.
    pub fn formats(&self) -> Vec<FormatId> {
        let mut v = vec![FormatId::F32];
        v.extend(self.fallback.iter().copied());
        for r in &self.rules {
            v.push(r.format);
            v.extend(r.fallback.iter().flatten().copied());
        }
        v.sort();
        v.dedup();
        v
    }

    /// Index of the first rule that applies to a tensor called `name` with `n_dims` dims.
    pub fn matching_rule(&self, name: &str, n_dims: usize) -> Option<usize> {
        self.rules.iter().position(|r| {
            (n_dims >= 2 || r.one_d) && r.patterns.iter().any(|p| glob::matches(p, name))
        })
    }

    /// Decides the format of one tensor (`dims` in ggml order, `dims[0]` = row length).
    pub fn plan(&self, name: &str, dims: &[u64]) -> Result<Planned, QuantError> {
        let f32_default = |rule| Planned {
            format: FormatId::F32,
            encoder: Encoder::Reference,
            gptq: false,
            gptq_damp: super::gptq::DAMP_FRACTION,
            rule,
            fallback_used: None,
        };
        let Some((rows, k)) = super::rows_and_k(dims) else {
            return Err(QuantError::Tensor {
                tensor: name.to_owned(),
                what: format!("dims {dims:?} overflow the address space"),
            });
        };
        let Some(idx) = self.matching_rule(name, dims.len()) else {
            return Ok(f32_default(None));
        };
        let rule = &self.rules[idx];
        let asked = rule.encoder.unwrap_or(Encoder::Reference);
        if rows == 0 || k == 0 {
            // Nothing to encode: keep the bytes trivially representable.
            return Ok(f32_default(Some(idx)));
        }
        let chain = rule.fallback.as_deref().unwrap_or(&self.fallback);
        let mut why = String::new();
        for (i, &f) in std::iter::once(&rule.format).chain(chain).enumerate() {
            match row_misfit(f, k) {
                None => {
                    let fallback_used = (i > 0).then(|| FallbackUsed {
                        wanted: rule.format,
                        reason: format!("row length {k}: {why}"),
                    });
                    return Ok(Planned {
                        format: f,
                        encoder: effective_encoder(f, asked),
                        gptq: rule.gptq && super::gptq::supports(f),
                        gptq_damp: rule.gptq_damp.unwrap_or(super::gptq::DAMP_FRACTION),
                        rule: Some(idx),
                        fallback_used,
                    });
                }
                Some(r) => {
                    if !why.is_empty() {
                        why.push_str("; ");
                    }
                    let _ = write!(why, "{r}");
                }
            }
        }
        Err(QuantError::NoFormatFits {
            tensor: name.to_owned(),
            dims: dims.to_vec(),
            tried: format!(
                "rule {} ({}): row length {k}: {why}",
                idx + 1,
                rule.patterns.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_name_themselves() {
        for n in BUILTIN_NAMES {
            let r = Recipe::builtin(n).unwrap();
            assert_eq!(r.name, n);
            assert!(!r.description.is_empty(), "{n}");
            assert!(!r.rules.is_empty());
        }
        assert!(matches!(Recipe::builtin("q5_k"), Err(QuantError::Recipe { .. })));
    }

    #[test]
    fn first_match_wins_and_one_d_default() {
        let r = Recipe::from_toml(
            r#"
            fallback = ["F16"]
            [[rule]]
            match = "blk.*.ffn_down.weight"
            format = "Q8_0"
            [[rule]]
            match = ["blk.*", "output.weight"]
            format = "Q4_0"
            encoder = "improved"
            [[rule]]
            match = "*norm*"
            format = "F16"
            one_d = true
            "#,
            "t",
        )
        .unwrap();
        assert_eq!(r.name, "t");
        let p = r.plan("blk.0.ffn_down.weight", &[64, 32]).unwrap();
        assert_eq!((p.format, p.rule), (FormatId::Q8_0, Some(0)));
        let p = r.plan("blk.0.ffn_up.weight", &[64, 32]).unwrap();
        // Q4_0 has no improved encoder: the reference one runs.
        assert_eq!((p.format, p.rule, p.encoder), (FormatId::Q4_0, Some(1), Encoder::Reference));
        // 1-D: `blk.*` does not apply (no one_d), so the F32 default... unless a one_d rule.
        let p = r.plan("blk.0.attn_norm.weight", &[64]).unwrap();
        assert_eq!((p.format, p.rule), (FormatId::F16, Some(2)));
        let p = r.plan("blk.0.attn_q.bias", &[64]).unwrap();
        assert_eq!((p.format, p.rule), (FormatId::F32, None));
        // 2-D but unmatched.
        let p = r.plan("token_embd.weight", &[64, 10]).unwrap();
        assert_eq!((p.format, p.rule), (FormatId::F32, None));
    }

    #[test]
    fn fallback_chain_records_reason_and_errors_when_exhausted() {
        let r = Recipe::builtin("mfp4").unwrap();
        let p = r.plan("blk.0.attn_q.weight", &[576, 576]).unwrap();
        assert_eq!(p.format, FormatId::Hfp4G32);
        assert_eq!(p.encoder, Encoder::Improved);
        let fb = p.fallback_used.unwrap();
        assert_eq!(fb.wanted, FormatId::Mfp4G32);
        assert!(fb.reason.contains("576") && fb.reason.contains("256"), "{}", fb.reason);
        let p = r.plan("blk.0.ffn_down.weight", &[1536, 576]).unwrap();
        assert_eq!((p.format, p.fallback_used), (FormatId::Mfp4G32, None));
        // 48 fits neither MFP4 (256) nor HFP4 (32), Q8_0 (32) ... but F16.
        let p = r.plan("blk.0.attn_q.weight", &[48, 4]).unwrap();
        assert_eq!(p.format, FormatId::F16);
        let reason = p.fallback_used.unwrap().reason;
        assert!(reason.contains("HFP4G32") && reason.contains("Q8_0"), "{reason}");

        let strict = Recipe::from_toml("[[rule]]\nmatch='*'\nformat='PQ2_0'\n", "s").unwrap();
        let e = strict.plan("blk.1.attn_k.weight", &[576, 192]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("blk.1.attn_k.weight") && msg.contains("128"), "{msg}");
    }

    #[test]
    fn bad_recipes_are_clear_errors() {
        let cases = [
            ("[[rule]]\nmatch='*'\nformat='Q9_9'\n", "Q9_9"),
            ("[[rule]]\nmatch='*'\nformat='Q4_K'\n", "no encoder"),
            ("[[rule]]\nmatch='*'\nformat='Q4_0'\nencoder='best'\n", "best"),
            ("[[rule]]\nmatch='*'\nformat='Q4_0'\nfallbak=['F16']\n", "fallbak"),
            ("[[rule]]\nmatch=[]\nformat='Q4_0'\n", "no pattern"),
            ("fallback=['IQ2_XXS']\n", "IQ2_XXS"),
            ("[[rule]]\nmatch='*'\n", "format"),
            ("[[rule]\n", "line"),
        ];
        for (text, needle) in cases {
            let e = Recipe::from_toml(text, "bad").unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("bad"), "{text:?} -> {e}");
        }
    }

    #[test]
    fn aliases_and_with_encoder() {
        let r = Recipe::from_toml("[[rule]]\nmatch='*'\nformat='fp2'\n", "a").unwrap();
        assert_eq!(r.rules[0].format, FormatId::RocmFp2);
        let r = Recipe::builtin("hfp4").unwrap().with_encoder(Encoder::Reference);
        let p = r.plan("blk.0.attn_q.weight", &[256, 256]).unwrap();
        assert_eq!((p.format, p.encoder), (FormatId::Hfp4G32, Encoder::Reference));
        assert_eq!(
            Recipe::builtin("q4_0").unwrap().formats(),
            vec![FormatId::F32, FormatId::F16, FormatId::Q4_0]
        );
    }
}

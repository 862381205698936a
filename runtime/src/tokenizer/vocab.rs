//! The vocabulary as GGUF stores it: the `tokenizer.ggml.*` keys (names and meanings: ggml
//! `docs/gguf.md`, gguf-py `gguf/constants.py` `Keys.Tokenizer`; token types: gguf-py
//! `TokenType`, NORMAL = 1 ... BYTE = 6; defaults: llama.cpp src/llama-vocab.cpp `load`).
//! What must not live here: tokenization algorithms.

use super::bpe::FxMap;
use super::TokenizerError;
use crate::gguf::{GgufFile, Value, ValueType};

/// `tokenizer.ggml.model`.
pub const KEY_MODEL: &str = "tokenizer.ggml.model";
/// `tokenizer.ggml.pre`.
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
/// `tokenizer.ggml.tokens`.
pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
/// `tokenizer.ggml.token_type`.
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// `tokenizer.ggml.scores`.
pub const KEY_SCORES: &str = "tokenizer.ggml.scores";
/// `tokenizer.ggml.merges`.
pub const KEY_MERGES: &str = "tokenizer.ggml.merges";
/// `tokenizer.chat_template`.
pub const KEY_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// A token's type (`tokenizer.ggml.token_type`, gguf-py `TokenType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 1 (also 0, "undefined", which llama.cpp treats as normal).
    Normal,
    /// 2.
    Unknown,
    /// 3: e.g. `<|im_start|>`; matched whole in text, not rendered unless asked.
    Control,
    /// 4: matched whole in text, always rendered as its text.
    UserDefined,
    /// 5.
    Unused,
    /// 6: SentencePiece byte fallback `<0xNN>`.
    Byte,
}

impl TokenType {
    fn from_code(code: i64) -> Option<TokenType> {
        Some(match code {
            0 | 1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }

    /// Control and unknown tokens: the ones decoding may skip.
    pub fn is_special(self) -> bool {
        matches!(self, TokenType::Control | TokenType::Unknown)
    }
}

/// The vocabulary and the settings common to every tokenizer model.
#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub tokens: Vec<String>,
    pub types: Vec<TokenType>,
    /// Text -> id (the last id wins for duplicate texts, as in llama.cpp's `token_to_id`).
    pub ids: FxMap<String, u32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
}

pub(crate) fn string<'a>(
    f: &'a GgufFile,
    key: &'static str,
) -> Result<Option<&'a str>, TokenizerError> {
    match f.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => {
            Err(TokenizerError::WrongType { key, expected: "STRING", found: v.value_type() })
        }
    }
}

fn boolean(f: &GgufFile, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match f.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(TokenizerError::WrongType { key, expected: "BOOL", found: v.value_type() }),
    }
}

fn array<'a>(
    f: &'a GgufFile,
    key: &'static str,
    expected: &'static str,
    ok: impl Fn(ValueType) -> bool,
) -> Result<Option<&'a [Value]>, TokenizerError> {
    match f.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) if ok(a.elem) => Ok(Some(&a.items)),
        Some(Value::Array(a)) => Err(TokenizerError::WrongType { key, expected, found: a.elem }),
        Some(v) => Err(TokenizerError::WrongType { key, expected, found: v.value_type() }),
    }
}

/// The strings of the array at `key` (absent: `None`).
pub(crate) fn strings<'a>(
    f: &'a GgufFile,
    key: &'static str,
) -> Result<Option<Vec<&'a str>>, TokenizerError> {
    let Some(items) = array(f, key, "array of STRING", |t| t == ValueType::String)? else {
        return Ok(None);
    };
    items
        .iter()
        .enumerate()
        .map(|(index, v)| {
            v.as_str().ok_or_else(|| TokenizerError::BadElement {
                key,
                index,
                reason: format!("expected STRING, found {}", v.value_type()),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The f32 scores (`tokenizer.ggml.scores`), each finite, if present.
pub(crate) fn scores(f: &GgufFile, n: usize) -> Result<Option<Vec<f32>>, TokenizerError> {
    let key = KEY_SCORES;
    let Some(items) = array(f, key, "array of FLOAT32", |t| t == ValueType::F32)? else {
        return Ok(None);
    };
    if items.len() != n {
        return Err(TokenizerError::LengthMismatch { key, len: items.len(), expected: n });
    }
    items
        .iter()
        .enumerate()
        .map(|(index, v)| match v {
            Value::F32(x) if x.is_finite() => Ok(*x),
            other => Err(TokenizerError::BadElement {
                key,
                index,
                reason: format!("expected a finite FLOAT32, found {}", other.abbreviated(0)),
            }),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn token_id(f: &GgufFile, key: &'static str, n: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(v) = f.get(key) else { return Ok(None) };
    // llama.cpp stores -1 (as u32 0xFFFFFFFF or i32 -1) for "none".
    if matches!(v, Value::I32(-1) | Value::I64(-1) | Value::U32(u32::MAX)) {
        return Ok(None);
    }
    let id = v.as_u64().ok_or(TokenizerError::WrongType {
        key,
        expected: "an unsigned integer",
        found: v.value_type(),
    })?;
    match u32::try_from(id) {
        Ok(id32) if (id32 as usize) < n => Ok(Some(id32)),
        _ => Err(TokenizerError::BadId { key, id, n_tokens: n }),
    }
}

impl Vocab {
    /// Reads the vocabulary keys; `spm` selects the defaults of `tokenizer.ggml.model = llama`
    /// (add BOS and a space prefix unless the file says otherwise).
    pub(crate) fn from_gguf(f: &GgufFile, spm: bool) -> Result<Vocab, TokenizerError> {
        let tokens: Vec<String> = strings(f, KEY_TOKENS)?
            .ok_or(TokenizerError::MissingKey { key: KEY_TOKENS })?
            .into_iter()
            .map(str::to_owned)
            .collect();
        let n = tokens.len();
        if n == 0 || u32::try_from(n).is_err() {
            return Err(TokenizerError::BadElement {
                key: KEY_TOKENS,
                index: 0,
                reason: format!("{n} tokens (must be 1 to 2^32 - 1)"),
            });
        }
        let types = match array(f, KEY_TOKEN_TYPE, "array of integers", |t| {
            matches!(t, ValueType::I32 | ValueType::U32 | ValueType::I8 | ValueType::U8)
        })? {
            None => vec![TokenType::Normal; n],
            Some(items) => {
                if items.len() != n {
                    return Err(TokenizerError::LengthMismatch {
                        key: KEY_TOKEN_TYPE,
                        len: items.len(),
                        expected: n,
                    });
                }
                items
                    .iter()
                    .enumerate()
                    .map(|(index, v)| {
                        v.as_u64().and_then(|c| TokenType::from_code(c as i64)).ok_or_else(|| {
                            TokenizerError::BadElement {
                                key: KEY_TOKEN_TYPE,
                                index,
                                reason: format!("unknown token type {}", v.abbreviated(0)),
                            }
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        let mut ids = FxMap::with_capacity_and_hasher(n, Default::default());
        for (i, t) in tokens.iter().enumerate() {
            ids.insert(t.clone(), i as u32);
        }
        Ok(Vocab {
            bos: token_id(f, "tokenizer.ggml.bos_token_id", n)?,
            eos: token_id(f, "tokenizer.ggml.eos_token_id", n)?,
            unk: token_id(f, "tokenizer.ggml.unknown_token_id", n)?,
            pad: token_id(f, "tokenizer.ggml.padding_token_id", n)?,
            add_bos: boolean(f, "tokenizer.ggml.add_bos_token")?.unwrap_or(spm),
            add_eos: boolean(f, "tokenizer.ggml.add_eos_token")?.unwrap_or(false),
            add_space_prefix: boolean(f, "tokenizer.ggml.add_space_prefix")?.unwrap_or(spm),
            tokens,
            types,
            ids,
        })
    }

    pub(crate) fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }
}

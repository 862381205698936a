//! Tokenizers read from GGUF metadata: byte-level BPE (`tokenizer.ggml.model = gpt2`, with the
//! pre-tokenizer `tokenizer.ggml.pre` names) and SentencePiece-style (`llama`), a streaming
//! decoder ([`StreamDecoder`]) and chat templates ([`ChatTemplate`], ChatML).
//!
//! The flow follows llama.cpp (src/llama-vocab.cpp `llama_vocab::impl::tokenize`): control,
//! user-defined and unknown tokens are first cut out of the text whole (longest first; control
//! and unknown ones only when parsing specials), then each remaining fragment is tokenized by
//! the model, and BOS/EOS are added when asked and the file says so.
//!
//! Files: `vocab.rs` (keys), `pretok.rs` + `unicode.rs` (+ generated `unicode_tables.rs`)
//! (pre-tokenizers), `bpe.rs`, `spm.rs`, `stream.rs`, `chat.rs`, `error.rs`.
//! What must not live here: model inference, sampling.

mod bpe;
mod chat;
mod error;
pub mod pretok;
mod spm;
mod stream;
mod unicode;
mod unicode_tables;
mod vocab;

pub use chat::{ChatTemplate, Message};
pub use error::TokenizerError;
pub use pretok::PreTokenizer;
pub use stream::StreamDecoder;
pub use vocab::TokenType;

use std::collections::HashMap;

use crate::gguf::GgufFile;
use bpe::Bpe;
use spm::Spm;
use vocab::{Vocab, KEY_MODEL, KEY_PRE};

#[derive(Clone, Debug)]
enum Model {
    Bpe { bpe: Bpe, pre: PreTokenizer },
    Spm(Spm),
}

/// A tokenizer built from a GGUF file's `tokenizer.ggml.*` keys.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    /// Control, user-defined and unknown token ids, longest text first.
    specials: Vec<u32>,
}

/// A piece of text still to tokenize, or a special token already matched.
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

impl Tokenizer {
    /// Builds the tokenizer `file`'s metadata describes. Errors name the key (and the element
    /// index) that is missing or unusable.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let model_name =
            vocab::string(file, KEY_MODEL)?.ok_or(TokenizerError::MissingKey { key: KEY_MODEL })?;
        let spm = match model_name {
            "gpt2" => false,
            "llama" => true,
            other => return Err(TokenizerError::UnsupportedModel(other.to_owned())),
        };
        let vocab = Vocab::from_gguf(file, spm)?;
        for (flag, id, key) in [
            (vocab.add_bos, vocab.bos, "tokenizer.ggml.bos_token_id"),
            (vocab.add_eos, vocab.eos, "tokenizer.ggml.eos_token_id"),
        ] {
            if flag && id.is_none() {
                return Err(TokenizerError::MissingKey { key });
            }
        }
        let model = if spm {
            let scores = vocab::scores(file, vocab.tokens.len())?
                .ok_or(TokenizerError::MissingKey { key: vocab::KEY_SCORES })?;
            Model::Spm(Spm::new(&vocab, scores)?)
        } else {
            // llama.cpp uses its default regex list when the key is absent.
            let name = vocab::string(file, KEY_PRE)?.unwrap_or("default");
            let pre = PreTokenizer::from_name(name)
                .ok_or_else(|| TokenizerError::UnsupportedPre(name.to_owned()))?;
            Model::Bpe { bpe: Bpe::from_gguf(file, &vocab)?, pre }
        };
        let mut specials: Vec<u32> = (0..vocab.tokens.len() as u32)
            .filter(|&i| {
                let ty = vocab.types[i as usize];
                (ty.is_special() || ty == TokenType::UserDefined)
                    && !vocab.tokens[i as usize].is_empty()
            })
            .collect();
        specials.sort_by_key(|&i| std::cmp::Reverse(vocab.tokens[i as usize].len()));
        Ok(Tokenizer { vocab, model, specials })
    }

    /// Tokens in the vocabulary.
    pub fn n_tokens(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// The beginning-of-sequence token, if the file names one.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.bos
    }

    /// The end-of-sequence token, if the file names one.
    pub fn eos(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// The unknown token, if the file names one.
    pub fn unk(&self) -> Option<u32> {
        self.vocab.unk
    }

    /// The padding token, if the file names one.
    pub fn pad(&self) -> Option<u32> {
        self.vocab.pad
    }

    /// Whether `encode(_, true)` starts with BOS (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// The text of token `id`, as stored.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of the token whose stored text is `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    /// The type of token `id`.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.types.get(id as usize).copied()
    }

    /// Whether generation should stop at `id`: EOS, or a control token llama.cpp treats as
    /// end of generation (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<|end|>`,
    /// `<end_of_turn>`, `<|eom_id|>`, `<EOT>`; src/llama-vocab.cpp `special_eog_ids`).
    pub fn is_eog(&self, id: u32) -> bool {
        Some(id) == self.vocab.eos
            || matches!(
                self.token_text(id),
                Some(
                    "<|im_end|>"
                        | "<|endoftext|>"
                        | "<|eot_id|>"
                        | "<|end|>"
                        | "<end_of_turn>"
                        | "<|eom_id|>"
                        | "<EOT>"
                )
            )
    }

    /// Tokenizes `text`, matching special tokens written in it (as llama.cpp's CLI and HF
    /// `tokenizers` do); `add_special` adds BOS/EOS where the file asks for them.
    pub fn encode(&self, text: &str, add_special: bool) -> Vec<u32> {
        self.encode_with(text, add_special, true)
    }

    /// Tokenizes `text`; `parse_special = false` matches only user-defined tokens in the text,
    /// so that `<|im_start|>` typed by a user stays plain text.
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.vocab.add_bos {
            out.extend(self.vocab.bos);
        }
        let fragments = self.partition(text, parse_special);
        match &self.model {
            Model::Bpe { bpe, pre } => {
                let mut scratch = bpe::Scratch::default();
                // Words repeat: each distinct word is merged once per call.
                let mut cache: HashMap<&str, (usize, usize)> = HashMap::new();
                for f in fragments {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(t) => {
                            for word in pre.split(t) {
                                if let Some(&(at, len)) = cache.get(word) {
                                    out.extend_from_within(at..at + len);
                                } else {
                                    let at = out.len();
                                    bpe.encode_word(word, &mut scratch, &mut out);
                                    cache.insert(word, (at, out.len() - at));
                                }
                            }
                        }
                    }
                }
            }
            Model::Spm(spm) => {
                let mut prev_special = true;
                for f in fragments {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(t) => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if self.vocab.add_space_prefix && prev_special {
                                s.push_str(spm::SPACE);
                            }
                            s.push_str(&t.replace(' ', spm::SPACE));
                            spm.encode(&self.vocab, &s, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.vocab.add_eos {
            out.extend(self.vocab.eos);
        }
        out
    }

    /// Cuts the special tokens out of `text` (llama.cpp `tokenizer_st_partition`).
    fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut frags = if text.is_empty() { Vec::new() } else { vec![Fragment::Text(text)] };
        for &id in &self.specials {
            let ty = self.vocab.types[id as usize];
            if !parse_special && ty.is_special() {
                continue;
            }
            let st = self.vocab.tokens[id as usize].as_str();
            if !frags.iter().any(|f| matches!(f, Fragment::Text(t) if t.contains(st))) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                match f {
                    Fragment::Text(mut t) => {
                        while let Some(at) = t.find(st) {
                            if at > 0 {
                                next.push(Fragment::Text(&t[..at]));
                            }
                            next.push(Fragment::Token(id));
                            t = &t[at + st.len()..];
                        }
                        if !t.is_empty() {
                            next.push(Fragment::Text(t));
                        }
                    }
                    tok => next.push(tok),
                }
            }
            frags = next;
        }
        frags
    }

    /// The bytes token `id` decodes to (`None` for an id outside the vocabulary); control and
    /// unknown tokens give their text unless `skip_special`.
    pub fn piece(&self, id: u32, skip_special: bool) -> Option<&[u8]> {
        let ty = self.token_type(id)?;
        if skip_special && ty.is_special() {
            return Some(&[]);
        }
        let pieces = match &self.model {
            Model::Bpe { bpe, .. } => &bpe.pieces,
            Model::Spm(spm) => &spm.pieces,
        };
        pieces.get(id as usize).map(|p| &p[..])
    }

    /// Whether decoding drops one leading space from the text (SentencePiece with a space
    /// prefix: the space `encode` added).
    pub(crate) fn strips_leading_space(&self) -> bool {
        matches!(self.model, Model::Spm(_)) && self.vocab.add_space_prefix
    }

    /// Decodes `ids` to text, special tokens included as their text. Bytes that are not valid
    /// UTF-8 and ids outside the vocabulary become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut d = StreamDecoder::new(self, false);
        let mut s = String::new();
        for &id in ids {
            s.push_str(&d.push(id));
        }
        s.push_str(&d.finish());
        s
    }

    /// [`decode`](Self::decode) without control and unknown tokens.
    pub fn decode_skip_special(&self, ids: &[u32]) -> String {
        let mut d = StreamDecoder::new(self, true);
        let mut s = String::new();
        for &id in ids {
            s.push_str(&d.push(id));
        }
        s.push_str(&d.finish());
        s
    }
}

//! Streaming detokenization: token ids in, text out as soon as it is complete UTF-8. A token
//! may end inside a multi-byte character (byte-level BPE and byte-fallback tokens split
//! characters); those bytes wait for the next token. Only bytes that can never become valid
//! UTF-8 are replaced (by U+FFFD).
//! What must not live here: the token -> bytes tables (`bpe.rs`, `spm.rs`).

use super::{TokenType, Tokenizer};

/// Turns a stream of token ids into text, holding incomplete UTF-8 sequences back.
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tok: &'t Tokenizer,
    skip_special: bool,
    pending: Vec<u8>,
    /// SentencePiece's added leading space has not been seen (and dropped) yet.
    strip_space: bool,
}

impl<'t> StreamDecoder<'t> {
    /// A decoder for `tok`'s ids; `skip_special` drops control and unknown tokens' text.
    pub fn new(tok: &'t Tokenizer, skip_special: bool) -> StreamDecoder<'t> {
        StreamDecoder {
            tok,
            skip_special,
            pending: Vec::new(),
            strip_space: tok.strips_leading_space(),
        }
    }

    /// Adds token `id`; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: u32) -> String {
        match self.tok.piece(id, self.skip_special) {
            None => {
                let mut s = self.flush_lossy();
                s.push(char::REPLACEMENT_CHARACTER);
                return s;
            }
            Some(p) => {
                let special = self.tok.token_type(id).is_some_and(TokenType::is_special);
                if self.strip_space && !special && !p.is_empty() {
                    self.strip_space = false;
                    self.pending.extend_from_slice(p.strip_prefix(b" ").unwrap_or(p));
                } else {
                    self.pending.extend_from_slice(p);
                }
            }
        }
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix is valid UTF-8 by `valid_up_to`'s contract.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    fn flush_lossy(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    /// Ends the stream: returns the bytes still held (an incomplete sequence, as U+FFFD).
    pub fn finish(&mut self) -> String {
        self.flush_lossy()
    }
}

//! SentencePiece-style tokenization (`tokenizer.ggml.model = llama`), llama.cpp's algorithm
//! (src/llama-vocab.cpp `llm_tokenizer_spm_session`): spaces become U+2581 "▁" (with one
//! prepended to a text fragment at the start or after a special token when
//! `tokenizer.ggml.add_space_prefix`), the text starts as one symbol per UTF-8 character, and
//! the adjacent pair whose concatenation is the vocabulary token of highest score (leftmost
//! among equal scores) merges until no pair is a token. A final symbol that is not a token is
//! written as byte-fallback tokens `<0xNN>` (the unknown token where a byte has none).
//! What must not live here: special-token matching (`mod.rs`), decoding (`mod.rs`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::{TokenType, Vocab, KEY_TOKENS};
use super::TokenizerError;

/// The "▁" that stands for a space.
pub(crate) const SPACE: &str = "\u{2581}";

/// Scores and byte tokens of a SentencePiece vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct Spm {
    scores: Vec<f32>,
    byte_ids: [Option<u32>; 256],
    /// Each token's bytes as decoding writes them ("▁" -> space, `<0xNN>` -> the byte).
    pub pieces: Vec<Box<[u8]>>,
}

/// The byte of a byte-fallback token's text `<0xNN>`.
fn parse_byte(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

impl Spm {
    pub(crate) fn new(vocab: &Vocab, scores: Vec<f32>) -> Result<Spm, TokenizerError> {
        let mut byte_ids = [None; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = vocab.id(&format!("<0x{b:02X}>"));
        }
        let mut pieces = Vec::with_capacity(vocab.tokens.len());
        for (index, (t, ty)) in vocab.tokens.iter().zip(&vocab.types).enumerate() {
            let piece: Box<[u8]> = match ty {
                TokenType::Byte => {
                    let b = parse_byte(t).ok_or_else(|| TokenizerError::BadElement {
                        key: KEY_TOKENS,
                        index,
                        reason: format!("byte token {t:?} is not <0xNN>"),
                    })?;
                    Box::new([b])
                }
                TokenType::Normal | TokenType::Unused => t.replace(SPACE, " ").into_bytes().into(),
                _ => t.as_bytes().into(),
            };
            pieces.push(piece);
        }
        Ok(Spm { scores, byte_ids, pieces })
    }

    /// Appends the tokens of `text` (already escaped: spaces as "▁").
    pub(crate) fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        // Symbols are contiguous byte ranges of `text`: start and length; merged-away symbols
        // have length 0.
        let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let n = starts.len();
        if n == 0 {
            return;
        }
        let mut len: Vec<usize> =
            (0..n).map(|i| starts.get(i + 1).copied().unwrap_or(text.len()) - starts[i]).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Bigram>, len: &[usize], l: usize, r: usize| {
            let size = len[l] + len[r];
            if let Some(id) = vocab.id(&text[starts[l]..starts[l] + size]) {
                if let Some(&score) = self.scores.get(id as usize) {
                    heap.push(Bigram { score, left: l, right: r, size });
                }
            }
        };
        for i in 1..n {
            push(&mut heap, &len, i - 1, i);
        }
        while let Some(b) = heap.pop() {
            if len[b.left] == 0 || len[b.right] == 0 || len[b.left] + len[b.right] != b.size {
                continue;
            }
            len[b.left] = b.size;
            len[b.right] = 0;
            next[b.left] = next[b.right];
            if next[b.right] < n {
                prev[next[b.right]] = b.left;
            }
            if prev[b.left] < n {
                push(&mut heap, &len, prev[b.left], b.left);
            }
            if next[b.left] < n {
                push(&mut heap, &len, b.left, next[b.left]);
            }
        }
        let mut i = 0;
        while i < n {
            let sym = &text[starts[i]..starts[i] + len[i]];
            match vocab.id(sym) {
                Some(id) => out.push(id),
                None => {
                    for &byte in sym.as_bytes() {
                        if let Some(id) = self.byte_ids[byte as usize].or(vocab.unk) {
                            out.push(id);
                        }
                    }
                }
            }
            i = next[i];
        }
    }
}

/// A candidate merge; the heap's top is the highest score, then the leftmost.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_token_text() {
        assert_eq!(parse_byte("<0x0A>"), Some(10));
        assert_eq!(parse_byte("<0xff>"), Some(255));
        assert_eq!(parse_byte("<0x1>"), None);
        assert_eq!(parse_byte("<0x0AA>"), None);
        assert_eq!(parse_byte("a"), None);
    }
}

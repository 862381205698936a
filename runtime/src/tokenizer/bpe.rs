//! GPT-2 style byte-level BPE (`tokenizer.ggml.model = gpt2`): the byte <-> character map,
//! the ranked merge table, and the merge loop.
//!
//! Facts carried over: the byte-to-character map is GPT-2's `bytes_to_unicode` (printable bytes
//! `!`..`~`, `¡`..`¬`, `®`..`ÿ` map to themselves, the other 68 bytes to U+0100 onwards in byte
//! order; openai/gpt-2 `src/encoder.py`, llama.cpp src/unicode.cpp `unicode_byte_to_utf8_map`).
//! Merges: `tokenizer.ggml.merges[i]` is "LEFT RIGHT" with rank i; a word's symbols start as
//! its mapped bytes and the adjacent pair of lowest rank (leftmost among equal ranks) merges
//! until none applies (llama.cpp src/llama-vocab.cpp `llm_tokenizer_bpe_session::tokenize`, HF
//! `tokenizers` `BPE::merge_word`).
//! What must not live here: pre-tokenization (`pretok.rs`), special-token matching (`mod.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::vocab::{strings, Vocab, KEY_MERGES};
use super::TokenizerError;
use crate::gguf::GgufFile;

/// GPT-2's byte -> character map.
pub(crate) fn byte_to_char() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        let cp = if printable {
            b
        } else {
            next += 1;
            next - 1
        };
        map[b as usize] = char::from_u32(cp).unwrap_or('\0');
    }
    map
}

/// The merge table and byte tokens of a byte-level BPE vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct Bpe {
    /// (left id, right id) -> (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The token of each byte's mapped character (`None`: absent from the vocabulary).
    byte_ids: [Option<u32>; 256],
    /// Each token's bytes (normal tokens mapped back through the byte map; others verbatim).
    pub pieces: Vec<Box<[u8]>>,
}

impl Bpe {
    pub(crate) fn from_gguf(f: &GgufFile, vocab: &Vocab) -> Result<Bpe, TokenizerError> {
        let merges_text =
            strings(f, KEY_MERGES)?.ok_or(TokenizerError::MissingKey { key: KEY_MERGES })?;
        let mut merges = HashMap::with_capacity(merges_text.len());
        let bad = |index, reason: String| TokenizerError::BadElement { key: KEY_MERGES, index, reason };
        for (i, m) in merges_text.iter().enumerate() {
            let (l, r) = m
                .split_once(' ')
                .filter(|(l, r)| !l.is_empty() && !r.is_empty())
                .ok_or_else(|| bad(i, format!("{m:?} is not \"LEFT RIGHT\"")))?;
            let id = |t: &str| {
                vocab.id(t).ok_or_else(|| bad(i, format!("{m:?}: token {t:?} is not in the vocabulary")))
            };
            let (li, ri) = (id(l)?, id(r)?);
            let merged = id(&format!("{l}{r}"))?;
            let rank = u32::try_from(i).map_err(|_| bad(i, "too many merges".into()))?;
            // The first occurrence of a pair keeps its (lowest) rank.
            merges.entry((li, ri)).or_insert((rank, merged));
        }
        let map = byte_to_char();
        let mut byte_ids = [None; 256];
        let mut buf = [0u8; 4];
        for (b, c) in map.iter().enumerate() {
            byte_ids[b] = vocab.id(c.encode_utf8(&mut buf));
        }
        let mut rev = HashMap::with_capacity(256);
        for (b, c) in map.iter().enumerate() {
            rev.insert(*c, b as u8);
        }
        let pieces = vocab
            .tokens
            .iter()
            .zip(&vocab.types)
            .map(|(t, ty)| {
                if *ty == super::TokenType::Normal {
                    let mut out = Vec::with_capacity(t.len());
                    for c in t.chars() {
                        match rev.get(&c) {
                            Some(b) => out.push(*b),
                            // Not a mapped byte: keep the character's own UTF-8.
                            None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
                        }
                    }
                    out.into_boxed_slice()
                } else {
                    t.as_bytes().into()
                }
            })
            .collect();
        Ok(Bpe { merges, byte_ids, pieces })
    }

    /// Appends the tokens of one pre-tokenized word.
    pub(crate) fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        // Symbols: (id, prev, next); merged-away symbols get id None.
        let bytes = word.as_bytes();
        let mut ids: Vec<Option<u32>> = bytes.iter().map(|&b| self.byte_ids[b as usize]).collect();
        let n = ids.len();
        if n == 0 {
            return;
        }
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut alive = vec![true; n];
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<_>, ids: &[Option<u32>], l: usize, r: usize| {
            if let (Some(a), Some(b)) = (ids[l], ids[r]) {
                if let Some(&(rank, merged)) = self.merges.get(&(a, b)) {
                    heap.push(Reverse((rank, l, r, a, b, merged)));
                }
            }
        };
        for i in 1..n {
            push(&mut heap, &ids, i - 1, i);
        }
        while let Some(Reverse((_, l, r, a, b, merged))) = heap.pop() {
            // Stale: one side merged since, or changed.
            if !alive[l] || !alive[r] || next[l] != r || ids[l] != Some(a) || ids[r] != Some(b) {
                continue;
            }
            ids[l] = Some(merged);
            alive[r] = false;
            next[l] = next[r];
            if next[r] < n {
                prev[next[r]] = l;
            }
            if prev[l] < n {
                push(&mut heap, &ids, prev[l], l);
            }
            if next[l] < n {
                push(&mut heap, &ids, l, next[l]);
            }
        }
        let mut i = 0;
        while i < n {
            // A byte whose character is not a token yields nothing (llama.cpp drops it too).
            if let Some(id) = ids[i] {
                out.push(id);
            }
            i = next[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        let m = byte_to_char();
        assert_eq!(m[b'a' as usize], 'a');
        assert_eq!(m[b' ' as usize], '\u{120}'); // 'Ġ'
        assert_eq!(m[b'\n' as usize], '\u{10A}'); // 'Ċ'
        assert_eq!(m[0], '\u{100}');
        assert_eq!(m[0xAD], '\u{143}');
        let mut all: Vec<char> = m.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
    }
}

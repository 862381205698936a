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
use std::hash::{BuildHasherDefault, Hasher};

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

/// A fast multiplicative hasher for small integer keys (the Fx hash of rustc's
/// `rustc-hash`: rotate by 5, xor, multiply by 0x517cc1b727220a95). Not DoS-resistant, which
/// the merge table, built from the file, does not need.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A candidate merge: (rank, left symbol, right symbol, left id, right id, merged id); the
/// heap pops the lowest rank, then the leftmost.
type Candidate = (u32, usize, usize, u32, u32, u32);

/// Buffers one word's merge loop reuses across words.
#[derive(Default)]
pub(crate) struct Scratch {
    ids: Vec<Option<u32>>,
    prev: Vec<usize>,
    next: Vec<usize>,
    heap: BinaryHeap<Reverse<Candidate>>,
}

/// The merge table and byte tokens of a byte-level BPE vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct Bpe {
    /// (left id, right id) -> (rank, merged id).
    merges: FxMap<(u32, u32), (u32, u32)>,
    /// The token of each byte's mapped character (`None`: absent from the vocabulary).
    byte_ids: [Option<u32>; 256],
    /// Each token's bytes (normal tokens mapped back through the byte map; others verbatim).
    pub pieces: Vec<Box<[u8]>>,
}

impl Bpe {
    pub(crate) fn from_gguf(f: &GgufFile, vocab: &Vocab) -> Result<Bpe, TokenizerError> {
        let merges_text =
            strings(f, KEY_MERGES)?.ok_or(TokenizerError::MissingKey { key: KEY_MERGES })?;
        let mut merges = FxMap::with_capacity_and_hasher(merges_text.len(), Default::default());
        let bad =
            |index, reason: String| TokenizerError::BadElement { key: KEY_MERGES, index, reason };
        for (i, m) in merges_text.iter().enumerate() {
            let (l, r) = m
                .split_once(' ')
                .filter(|(l, r)| !l.is_empty() && !r.is_empty())
                .ok_or_else(|| bad(i, format!("{m:?} is not \"LEFT RIGHT\"")))?;
            let id = |t: &str| {
                vocab
                    .id(t)
                    .ok_or_else(|| bad(i, format!("{m:?}: token {t:?} is not in the vocabulary")))
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
        // Every mapped character is below U+0144: a direct table.
        let mut rev = [None; 0x144];
        for (b, c) in map.iter().enumerate() {
            if let Some(slot) = rev.get_mut(*c as usize) {
                *slot = Some(b as u8);
            }
        }
        let pieces = vocab
            .tokens
            .iter()
            .zip(&vocab.types)
            .map(|(t, ty)| {
                if *ty == super::TokenType::Normal {
                    let mut out = Vec::with_capacity(t.len());
                    for c in t.chars() {
                        match rev.get(c as usize).copied().flatten() {
                            Some(b) => out.push(b),
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
    pub(crate) fn encode_word(&self, word: &str, sc: &mut Scratch, out: &mut Vec<u32>) {
        let n = word.len();
        if n == 0 {
            return;
        }
        // Symbols: ids[i] (None: a byte without a token), linked by prev/next; a merged-away
        // symbol is unlinked and its id cleared.
        let Scratch { ids, prev, next, heap } = sc;
        ids.clear();
        ids.extend(word.bytes().map(|b| self.byte_ids[b as usize]));
        prev.clear();
        prev.extend((0..n).map(|i| i.wrapping_sub(1)));
        next.clear();
        next.extend(1..=n);
        heap.clear();
        let push = |heap: &mut BinaryHeap<_>, ids: &[Option<u32>], l: usize, r: usize| {
            if let (Some(a), Some(b)) = (ids[l], ids[r]) {
                if let Some(&(rank, merged)) = self.merges.get(&(a, b)) {
                    heap.push(Reverse((rank, l, r, a, b, merged)));
                }
            }
        };
        for i in 1..n {
            push(heap, ids, i - 1, i);
        }
        while let Some(Reverse((_, l, r, a, b, merged))) = heap.pop() {
            // Stale: one side merged since (then r is no longer l's neighbour, or an id changed).
            if next[l] != r || ids[l] != Some(a) || ids[r] != Some(b) {
                continue;
            }
            ids[l] = Some(merged);
            ids[r] = None;
            next[l] = next[r];
            next[r] = usize::MAX;
            if next[l] < n {
                prev[next[l]] = l;
            }
            if prev[l] < n {
                push(heap, ids, prev[l], l);
            }
            if next[l] < n {
                push(heap, ids, l, next[l]);
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

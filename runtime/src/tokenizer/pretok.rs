//! Pre-tokenizers for byte-level BPE: hand-written scanners for the regex lists llama.cpp picks
//! by `tokenizer.ggml.pre` (src/llama-vocab.cpp, `llm_tokenizer_bpe`'s constructor), applied the
//! way llama.cpp (`unicode_regex_split`) and HF `tokenizers` (`Split(..., "isolated")` in a
//! `Sequence`) apply them: each regex splits every piece the previous one produced, and both its
//! matches and the gaps between them become pieces. Lookaheads see only the current piece.
//!
//! * `smollm` (also starcoder, refact, command-r, codeshell, exaone, minerva in llama.cpp):
//!   `\p{N}`, then the GPT-2 regex.
//! * `gpt2` (also mpt, olmo, jais): the GPT-2 regex alone,
//!   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
//! * `default` (llama.cpp's fallback): `[\p{P}\$\+<=>\^~\|]+`, the GPT-2 regex, `\p{N}+`,
//!   `[0-9][0-9][0-9]`.
//!
//! Character classes: `unicode.rs`. What must not live here: byte-level mapping and merges
//! (`bpe.rs`).

use super::unicode::{is_letter, is_number, is_punct, is_space};

/// A pre-tokenizer: a sequence of splitting stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_SMOLLM` (and the types sharing its regex list).
    Smollm,
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_GPT2` (and the types sharing its regex list).
    Gpt2,
    /// llama.cpp `LLAMA_VOCAB_PRE_TYPE_DEFAULT`.
    Default,
}

#[derive(Clone, Copy)]
enum Stage {
    EachNumber,
    Gpt2,
    PunctRun,
    NumberRun,
    ThreeAsciiDigits,
}

impl PreTokenizer {
    /// The pre-tokenizer `tokenizer.ggml.pre` names (llama.cpp's names), if implemented.
    pub fn from_name(name: &str) -> Option<PreTokenizer> {
        Some(match name {
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva" => PreTokenizer::Smollm,
            "gpt2" | "gpt-2" | "mpt" | "olmo" | "jais" => PreTokenizer::Gpt2,
            "default" => PreTokenizer::Default,
            _ => return None,
        })
    }

    fn stages(self) -> &'static [Stage] {
        match self {
            PreTokenizer::Smollm => &[Stage::EachNumber, Stage::Gpt2],
            PreTokenizer::Gpt2 => &[Stage::Gpt2],
            PreTokenizer::Default => {
                &[Stage::PunctRun, Stage::Gpt2, Stage::NumberRun, Stage::ThreeAsciiDigits]
            }
        }
    }

    /// Splits `text` into pieces (non-empty, in order, concatenating to `text`).
    pub fn split(self, text: &str) -> Vec<&str> {
        let mut pieces: Vec<&str> = if text.is_empty() { Vec::new() } else { vec![text] };
        for &stage in self.stages() {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for p in pieces {
                split_stage(stage, p, &mut next);
            }
            pieces = next;
        }
        pieces
    }
}

/// Pushes the matches of `stage` in `s` and the gaps between them.
fn split_stage<'a>(stage: Stage, s: &'a str, out: &mut Vec<&'a str>) {
    let mut gap_start = 0;
    let mut pos = 0;
    while pos < s.len() {
        match find_at(stage, s, pos) {
            Some(end) => {
                if gap_start < pos {
                    out.push(&s[gap_start..pos]);
                }
                out.push(&s[pos..end]);
                pos = end;
                gap_start = end;
            }
            None => pos += s[pos..].chars().next().map_or(1, char::len_utf8),
        }
    }
    if gap_start < s.len() {
        out.push(&s[gap_start..]);
    }
}

/// The end of `stage`'s match starting at byte `pos` of `s`, if one starts there (leftmost-first
/// semantics: the caller tries positions left to right).
fn find_at(stage: Stage, s: &str, pos: usize) -> Option<usize> {
    let rest = &s[pos..];
    let c = rest.chars().next()?;
    match stage {
        Stage::EachNumber => is_number(c).then(|| pos + c.len_utf8()),
        Stage::PunctRun => {
            let run = run_len(rest, |c| {
                is_punct(c) || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
            });
            (run > 0).then_some(pos + run)
        }
        Stage::NumberRun => {
            let run = run_len(rest, is_number);
            (run > 0).then_some(pos + run)
        }
        Stage::ThreeAsciiDigits => {
            let b = rest.as_bytes();
            (b.len() >= 3 && b[..3].iter().all(u8::is_ascii_digit)).then_some(pos + 3)
        }
        Stage::Gpt2 => Some(pos + gpt2_match(rest)),
    }
}

/// Bytes of the longest prefix of `s` whose characters satisfy `f`.
fn run_len(s: &str, f: impl Fn(char) -> bool) -> usize {
    s.char_indices().find(|&(_, c)| !f(c)).map_or(s.len(), |(i, _)| i)
}

/// The length of the GPT-2 regex's match at the start of non-empty `s` (every position has one:
/// the alternatives cover every character).
fn gpt2_match(s: &str) -> usize {
    let mut chars = s.chars();
    let Some(c) = chars.next() else { return 0 };
    // 's 't 're 've 'm 'll 'd (case-sensitive, as in the GPT-2 regex).
    if c == '\'' {
        let b = s.as_bytes();
        if let Some(&n) = b.get(1) {
            if matches!(n, b's' | b't' | b'm' | b'd') {
                return 2;
            }
            if let Some(&n2) = b.get(2) {
                if matches!((n, n2), (b'r', b'e') | (b'v', b'e') | (b'l', b'l')) {
                    return 3;
                }
            }
        }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
    let (start, first) = if c == ' ' {
        match chars.next() {
            Some(n) => (1, n),
            None => (0, c),
        }
    } else {
        (0, c)
    };
    if !is_space(first) {
        let body = &s[start..];
        let run = if is_letter(first) {
            run_len(body, is_letter)
        } else if is_number(first) {
            run_len(body, is_number)
        } else {
            run_len(body, |c| !is_space(c) && !is_letter(c) && !is_number(c))
        };
        return start + run;
    }
    // `\s+(?!\S)`, else `\s+`: a whitespace run that does not end at the piece's end gives its
    // last character to what follows, unless the run is a single character.
    let run = run_len(s, is_space);
    if run == s.len() {
        return run;
    }
    let last = s[..run].chars().next_back().map_or(1, char::len_utf8);
    if run > last {
        run - last
    } else {
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_basics() {
        let p = PreTokenizer::Gpt2;
        assert_eq!(p.split("Hello world"), ["Hello", " world"]);
        assert_eq!(p.split("a   b"), ["a", "  ", " b"]);
        assert_eq!(p.split("I'm  x\t"), ["I", "'m", " ", " x", "\t"]);
        assert_eq!(p.split(""), Vec::<&str>::new());
        assert_eq!(PreTokenizer::Smollm.split("ab 12"), ["ab", " ", "1", "2"]);
    }
}

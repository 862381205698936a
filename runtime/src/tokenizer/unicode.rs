//! The Unicode character classes the pre-tokenizer regexes use: `\p{L}`, `\p{N}`, `\p{P}`, `\s`.
//!
//! `\p{N}` is Rust's [`char::is_numeric`] (general categories Nd, Nl, No, exactly) and `\s` is
//! [`char::is_whitespace`] (the White_Space property, which is what Oniguruma's and llama.cpp's
//! `\s` match). Rust has no general-category query for letters or punctuation
//! ([`char::is_alphabetic`] also holds for combining marks with Other_Alphabetic, e.g. Devanagari
//! vowel signs and Arabic harakat, which `\p{L}` excludes), so `\p{L}` and `\p{P}` come from
//! generated range tables (`unicode_tables.rs`, Unicode 14 from Python's unicodedata).
//! Approximation: code points assigned after Unicode 14 count as neither letter nor punctuation.
//! What must not live here: the regex scanners (`pretok.rs`).

use super::unicode_tables::{LETTER, PUNCT};

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// `\p{L}`: general category L (Lu, Ll, Lt, Lm, Lo).
pub fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphabetic()
    } else {
        in_table(&LETTER, c)
    }
}

/// `\p{N}`: general category N (Nd, Nl, No).
pub fn is_number(c: char) -> bool {
    c.is_numeric()
}

/// `\p{P}`: general category P (Pc, Pd, Ps, Pe, Pi, Pf, Po).
pub fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        // ASCII P excludes the symbols $ + < = > ^ ` | ~ (category S).
        c.is_ascii_punctuation()
            && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~')
    } else {
        in_table(&PUNCT, c)
    }
}

/// `\s`: the White_Space property.
pub fn is_space(c: char) -> bool {
    c.is_whitespace()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_disjoint_and_consistent_with_std() {
        for table in [&LETTER[..], &PUNCT[..]] {
            for w in table.windows(2) {
                assert!(w[0].1 < w[1].0, "{w:?}");
            }
        }
        // Every letter is Alphabetic (L is a subset of Alphabetic), none is numeric or space.
        for &(lo, hi) in LETTER.iter() {
            for c in (lo..=hi).filter_map(char::from_u32) {
                assert!(c.is_alphabetic() && !c.is_numeric() && !c.is_whitespace(), "{c:?}");
            }
        }
        assert!(is_letter('é') && is_letter('日') && !is_letter('\u{0301}'));
        assert!(!is_letter('\u{093F}'), "Devanagari vowel sign i is Mc, not L");
        assert!(is_number('7') && is_number('½') && is_number('Ⅷ') && !is_number('a'));
        assert!(is_punct('!') && is_punct('。') && !is_punct('$') && !is_punct('a'));
    }
}

//! Glob patterns over tensor names: `*` matches any run of characters (dots included, so
//! `blk.*.ffn_*` covers every layer), `?` exactly one character, everything else itself
//! (case-sensitive). What must not live here: rule ordering (see [`super::recipe`]).

/// Whether `name` matches `pattern` as a whole.
///
/// The classic linear-time wildcard walk: on a mismatch after a `*`, retry with the star
/// absorbing one more character; no backtracking beyond the last star is ever needed.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p = pattern.as_bytes();
    let n = name.as_bytes();
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || (p[pi] != b'*' && p[pi] == n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literal_and_wildcards() {
        assert!(matches("token_embd.weight", "token_embd.weight"));
        assert!(!matches("token_embd.weight", "token_embd.weight2"));
        assert!(!matches("token_embd.weight", "token_embd.weigh"));
        assert!(matches("blk.*.ffn_*.weight", "blk.12.ffn_down.weight"));
        assert!(matches("blk.*.ffn_*.weight", "blk.0.ffn_gate_exps.weight"));
        assert!(!matches("blk.*.ffn_*.weight", "blk.0.attn_q.weight"));
        assert!(!matches("blk.*.ffn_*.weight", "blk.0.ffn_down.bias"));
        assert!(matches("*norm*", "blk.3.attn_norm.weight"));
        assert!(matches("*norm*", "output_norm.weight"));
        assert!(!matches("*norm*", "output.weight"));
        assert!(matches("*", ""));
        assert!(matches("", ""));
        assert!(!matches("", "a"));
        assert!(matches("blk.?.attn_k.weight", "blk.7.attn_k.weight"));
        assert!(!matches("blk.?.attn_k.weight", "blk.17.attn_k.weight"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("**x", "yyx"));
    }
}

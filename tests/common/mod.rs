//! Shared fixture runner for the oracle fixtures under `tests/fixtures/<family>/`.
//!
//! Each family directory holds `manifest.tsv`, one case per line (tab-separated, `#` comments):
//!
//! ```text
//! op      format  k     rule       input            importance      expected
//! decode  Q4_0    256   -          rand.q4_0.bin    -               rand.q4_0.dec.f32
//! encode  Q4_0    256   reference  rand.f32         -               rand.q4_0.bin
//! reject  ROCMFP2 32    -          bad.rocmfp2.bin  -               IllegalByte@9
//! ```
//!
//! * `decode`: `input` holds encoded rows of `k` elements; `expected` the f32 (LE) values the
//!   oracle decoded. Compared bit for bit (NaN only matches NaN).
//! * `encode`: `input` holds f32 (LE) rows of `k`; `importance` (optional) holds `k` f32;
//!   `expected` the bytes the oracle produced. Compared byte for byte; the decode of the
//!   expected bytes must also succeed.
//! * `reject`: decoding `input` must fail with the named error variant at the byte offset.
//!
//! The files are written by the scripts in `tools/` from independent oracles; tests never run
//! Python.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use lowbit::{codec, EncodeOptions, Error, FormatId, Rule};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures")
}

pub fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(b.len() % 4, 0, "{}: not a whole number of f32", path.display());
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn error_tag(e: &Error) -> String {
    match e {
        Error::IllegalByte { offset, .. } => format!("IllegalByte@{offset}"),
        Error::NonFiniteScale { offset, .. } => format!("NonFiniteScale@{offset}"),
        Error::NotRepresentable { offset, .. } => format!("NotRepresentable@{offset}"),
        other => format!("{other:?}"),
    }
}

/// Runs every case of `tests/fixtures/<family>/manifest.tsv`; returns the number of cases.
/// Panics with a list of every failing case.
pub fn run_manifest(family: &str) -> usize {
    let dir = fixtures_dir().join(family);
    let manifest = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!("{}: {e} (run the oracle script in tools/)", manifest.display())
    });
    let mut failures = Vec::new();
    let mut n = 0;
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("op\t") {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 7, "{}:{}: expected 7 fields", manifest.display(), lineno + 1);
        let (op, fmt, k, rule, input, imp, expected) = (f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
        let format = FormatId::from_name(fmt).unwrap_or_else(|| panic!("unknown format {fmt}"));
        let k: usize = k.parse().expect("k");
        let rule = match rule {
            "-" | "reference" => Rule::Reference,
            "exhaustive" => Rule::Exhaustive,
            "improved" => Rule::Improved,
            r => panic!("unknown rule {r}"),
        };
        n += 1;
        let where_ = format!("{family}:{} {op} {fmt} {input}", lineno + 1);
        match op {
            "decode" => {
                let src = std::fs::read(dir.join(input)).expect(input);
                let want = read_f32(&dir.join(expected));
                match codec::decode_to_vec(format, k, &src) {
                    Ok(got) => {
                        if got.len() != want.len() {
                            failures.push(format!(
                                "{where_}: {} values, want {}",
                                got.len(),
                                want.len()
                            ));
                        } else if let Some(i) = (0..got.len()).find(|&i| {
                            !(got[i].to_bits() == want[i].to_bits()
                                || (got[i].is_nan() && want[i].is_nan()))
                        }) {
                            failures.push(format!(
                                "{where_}: element {i}: got {} ({:08x}), want {} ({:08x})",
                                got[i],
                                got[i].to_bits(),
                                want[i],
                                want[i].to_bits()
                            ));
                        }
                    }
                    Err(e) => failures.push(format!("{where_}: {e}")),
                }
            }
            "encode" => {
                let src = read_f32(&dir.join(input));
                let importance = (imp != "-").then(|| read_f32(&dir.join(imp)));
                let want = std::fs::read(dir.join(expected)).expect(expected);
                let opts = EncodeOptions { rule, importance: importance.as_deref() };
                match codec::encode_to_vec(format, k, &src, &opts) {
                    Ok(got) => {
                        if got.len() != want.len() {
                            failures.push(format!(
                                "{where_}: {} bytes, want {}",
                                got.len(),
                                want.len()
                            ));
                        } else if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                            let bb = format.geometry().block_bytes;
                            failures.push(format!(
                                "{where_}: byte {i} (block {}): got {:02x}, want {:02x}",
                                i / bb.max(1),
                                got[i],
                                want[i]
                            ));
                        } else if let Err(e) = codec::decode_to_vec(format, k, &got) {
                            failures.push(format!("{where_}: encoded bytes do not decode: {e}"));
                        }
                    }
                    Err(e) => failures.push(format!("{where_}: {e}")),
                }
            }
            "reject" => {
                let src = std::fs::read(dir.join(input)).expect(input);
                match codec::decode_to_vec(format, k, &src) {
                    Ok(_) => failures.push(format!("{where_}: decoded, want {expected}")),
                    Err(e) if error_tag(&e) == expected => {}
                    Err(e) => {
                        failures.push(format!("{where_}: got {}, want {expected}", error_tag(&e)))
                    }
                }
            }
            other => panic!("unknown op {other}"),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} fixture cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(n > 0, "{}: no cases", manifest.display());
    n
}

//! `lowbit run`, `speed`, `perplexity`, `kld` and `imatrix` on the real SmolLM2-135M-Instruct model.
//! Needs LOWBIT_SMOLLM2 (its path; `.ci/run` sets it); without it the tests say so and skip.
//! The text is GPL-3 from Debian's base-files (`/usr/share/common-licenses`), skipped if absent.

use std::path::PathBuf;
use std::process::Command;

fn model() -> Option<PathBuf> {
    let p = std::env::var_os("LOWBIT_SMOLLM2").map(PathBuf::from);
    if p.is_none() {
        eprintln!("LOWBIT_SMOLLM2 is not set: skipping (run tools/fetch_smollm2.sh)");
    }
    p
}

fn text() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/share/common-licenses/GPL-3");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("{} is absent: skipping", p.display());
        None
    }
}

fn lowbit(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_lowbit")).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn field(out: &str, key: &str) -> f64 {
    let line = out.lines().find(|l| l.contains(key)).unwrap_or_else(|| panic!("{key} in {out}"));
    let rest = &line[line.find(key).unwrap() + key.len()..];
    let v = rest.trim_start_matches([' ', ':', '=']).split_whitespace().next().unwrap_or("");
    v.parse().unwrap_or_else(|_| panic!("{key}: {line}"))
}

#[test]
fn run_streams_paris_and_reports_speed() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let (ok, out, err) = lowbit(&["run", "-m", m, "-p", "The capital of France is", "-n", "3"]);
    assert!(ok, "{err}");
    assert!(out.trim_start().starts_with("Paris"), "{out:?}");
    assert!(err.contains("prompt: 5 tokens") && err.contains("tokens/s"), "{err}");
    // A NaN-free model with bad sampling settings is refused clearly.
    let (ok, _, err) = lowbit(&["run", "-m", m, "-p", "x", "--temp=-1"]);
    assert!(!ok && err.contains("temperature"), "{err}");
}

#[test]
fn perplexity_kld_against_itself_and_imatrix() {
    let (Some(m), Some(t)) = (model(), text()) else { return };
    let (m, t) = (m.to_str().unwrap(), t.to_str().unwrap());
    let (ok, out, err) = lowbit(&["perplexity", "-m", m, "-f", t, "-c", "128", "--chunks", "2"]);
    assert!(ok, "{err}");
    let ppl = field(&out, "PPL =");
    assert!(ppl > 1.5 && ppl < 100.0, "{out}");
    assert!(out.contains("2 chunks of 128 tokens, 63 scored per chunk (126 in all)"), "{out}");

    // The model against itself: zero divergence, same top token everywhere, equal perplexity.
    let (ok, out, err) =
        lowbit(&["kld", "--base", m, "-m", m, "-f", t, "-c", "128", "--chunks", "1"]);
    assert!(ok, "{err}");
    assert!(field(&out, "Mean KLD").abs() < 1e-9, "{out}");
    assert_eq!(field(&out, "Same top token"), 100.0, "{out}");
    assert!((field(&out, "PPL(model)/PPL(base)") - 1.0).abs() < 1e-9, "{out}");

    // Too little text for the context: a clear error.
    let (ok, _, err) = lowbit(&["perplexity", "-m", m, "-f", t, "-c", "100000"]);
    assert!(!ok && err.contains("needs at least 200000"), "{err}");

    // imatrix: written, then used by quantize (+imat on the ROCmFP3 tensors).
    let dir = tempfile::tempdir().unwrap();
    let imat = dir.path().join("imatrix.gguf");
    let imat_s = imat.to_str().unwrap();
    let (ok, out, err) =
        lowbit(&["imatrix", "-m", m, "-f", t, "-o", imat_s, "-c", "128", "--chunks", "1"]);
    assert!(ok, "{err}");
    assert!(out.contains("imatrix: 210 tensors from 1 chunks"), "{out}");
    let q = dir.path().join("q.gguf");
    let (ok, out, err) =
        lowbit(&["quantize", m, q.to_str().unwrap(), "--recipe", "fpx-ifp2", "--imatrix", imat_s]);
    assert!(ok, "{err}");
    assert!(out.contains("ROCMFP3   reference+imat"), "{out}");
    assert!(!out.contains("warning:"), "{out}");
    // Without the imatrix, the summary warns about the 2-bit tensors (ternary: PQ2_0 ffn_down).
    let (ok, out, err) = lowbit(&["quantize", m, q.to_str().unwrap(), "--recipe", "ternary"]);
    assert!(ok, "{err}");
    assert!(out.contains("warning: 30 tensors are in a format below 3 bits"), "{out}");
}

#[test]
fn speed_reports_pp_and_tg_with_breakdown_and_json() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("speed.json");
    let args = ["speed", "-m", m, "-t", "1", "-p", "8", "-n", "4", "-r", "2", "--profile"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--json", json.to_str().unwrap()]);
    let (ok, out, err) = lowbit(&args);
    assert!(ok, "{err}");
    for test in ["| pp8 |", "| tg4 |", "matmul ffn_gate+up", "attention", "total"] {
        assert!(out.contains(test), "{test} in {out}");
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, test) in rows.iter().zip(["pp8", "tg4"]) {
        assert_eq!(row["test"], test);
        assert_eq!(row["threads"], 1);
        assert_eq!(row["samples"].as_array().unwrap().len(), 2);
        assert!(row["tokens_per_s_mean"].as_f64().unwrap() > 0.0);
    }
    let (ok, _, err) = lowbit(&["speed", "-m", m, "-r", "0"]);
    assert!(!ok && err.contains("--reps"), "{err}");
}

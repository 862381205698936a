//! End-to-end tests of the `lowbit` binary: the format table, raw-file encode/decode round
//! trips, error messages on bad input files, and that a failed command leaves no output file.
//!
//! Formats whose codecs other branches implement (Q8_0, Q4_0, ...) are tested here too; they
//! pass once those codecs are merged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lowbit_core::FormatId;

fn lowbit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowbit")).args(args).output().expect("run lowbit")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = lowbit(args);
    assert!(o.status.success(), "lowbit {args:?} failed: {}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.stderr.is_empty(), "unexpected stderr: {}", text(&o.stderr));
    text(&o.stdout)
}

/// Runs a command that must fail; returns its stderr.
fn fails(args: &[&str]) -> String {
    let o = lowbit(args);
    assert!(!o.status.success(), "lowbit {args:?} should fail: {}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "lowbit {args:?} panicked: {err}");
    err
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

fn write_f32(path: &Path, x: &[f32]) {
    std::fs::write(path, x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

fn read_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(b.len() % 4, 0);
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Deterministic test values: a smooth wave with some larger entries, `n` of them.
fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.731).sin() * if i % 37 == 0 { 4.0 } else { 0.5 }).collect()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

#[test]
fn formats_table_lists_every_format() {
    let out = ok(&["formats"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), FormatId::ALL.len() + 1, "{out}");
    assert!(lines[0].starts_with("format") && lines[0].contains("hipfire"));
    for f in FormatId::ALL {
        assert!(lines.iter().any(|l| l.split_whitespace().next() == Some(f.name())), "{f}");
    }
    let q4 = lines.iter().find(|l| l.starts_with("Q4_0 ")).unwrap();
    let cols: Vec<&str> = q4.split_whitespace().collect();
    assert_eq!(&cols[..11], ["Q4_0", "ggml", "2", "2", "2", "-", "32", "18", "0", "32", "4.5000"]);
    let hfp4 = lines.iter().find(|l| l.starts_with("HFP4G32 ")).unwrap();
    assert!(hfp4.split_whitespace().nth(5) == Some("21"), "{hfp4}");
}

#[test]
fn formats_json_is_an_array_of_every_format() {
    let out = ok(&["formats", "--json"]);
    let t = out.trim();
    assert!(t.starts_with('[') && t.ends_with(']'));
    assert_eq!(t.matches("\"name\":").count(), FormatId::ALL.len());
    assert!(t.contains("\"name\": \"PQ2_0\"") && t.contains("\"prism\": 142"));
}

/// Encodes `n` values to `format` with the given extra arguments, decodes them back, and
/// returns (input, output, encoded size).
fn round_trip(format: &str, n: usize, k: Option<usize>) -> (Vec<f32>, Vec<f32>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, enc, y_path) =
        (dir.path().join("x.f32"), dir.path().join("x.enc"), dir.path().join("y.f32"));
    let x = values(n);
    write_f32(&x_path, &x);
    let ks = k.map(|k| k.to_string());
    let mut enc_args =
        vec!["codec", "encode", "--format", format, "--input", p(&x_path), "--output", p(&enc)];
    let mut dec_args =
        vec!["codec", "decode", "--format", format, "--input", p(&enc), "--output", p(&y_path)];
    if let Some(k) = &ks {
        enc_args.extend(["--k", k.as_str()]);
        dec_args.extend(["--k", k.as_str()]);
    }
    let msg = ok(&enc_args);
    assert!(
        msg.contains("encoded") && msg.contains(&FormatId::from_name(format).unwrap().to_string()),
        "{msg}"
    );
    ok(&dec_args);
    let size = std::fs::metadata(&enc).unwrap().len() as usize;
    assert_eq!(files_in(dir.path()).len(), 3, "temporary files left behind");
    (x, read_f32(&y_path), size)
}

#[test]
fn f32_round_trip_is_exact() {
    let (x, y, size) = round_trip("F32", 100, None);
    assert_eq!(size, 400);
    assert_eq!(x, y);
}

#[test]
fn f16_round_trip_rounds_to_nearest_even() {
    let (x, y, size) = round_trip("f16", 96, Some(32));
    assert_eq!(size, 192);
    for (a, b) in x.iter().zip(&y) {
        assert_eq!(*b, half::f16::from_f32(*a).to_f32());
    }
}

#[test]
fn bf16_round_trip() {
    let (x, y, size) = round_trip("BF16", 64, None);
    assert_eq!(size, 128);
    for (a, b) in x.iter().zip(&y) {
        assert_eq!(*b, half::bf16::from_f32(*a).to_f32());
    }
}

#[test]
fn q8_0_round_trip() {
    let (x, y, size) = round_trip("Q8_0", 256, None);
    assert_eq!(size, 8 * 34);
    for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (a, b) in xb.iter().zip(yb) {
            assert!((a - b).abs() <= amax * (0.5 / 127.0 + 1e-3), "{a} {b}");
        }
    }
}

#[test]
fn q4_0_round_trip_in_rows() {
    let (x, y, size) = round_trip("q4_0", 128, Some(64));
    assert_eq!(size, 4 * 18);
    for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (a, b) in xb.iter().zip(yb) {
            assert!((a - b).abs() <= amax * (1.0 / 8.0 + 1e-3), "{a} {b}");
        }
    }
}

#[test]
fn rocmfp2_round_trip() {
    let (x, y, size) = round_trip("fp2", 64, None);
    assert_eq!(size, 2 * 10);
    assert_eq!(x.len(), y.len());
}

#[test]
fn hfp4_needs_k_and_round_trips_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, enc) = (dir.path().join("x.f32"), dir.path().join("x.hfp4"));
    write_f32(&x_path, &values(512));
    let err = fails(&[
        "codec",
        "encode",
        "--format",
        "HFP4G32",
        "--input",
        p(&x_path),
        "--output",
        p(&enc),
    ]);
    assert!(err.contains("--k is required for HFP4G32"), "{err}");
    assert!(!enc.exists());
    let (x, y, size) = round_trip("HFP4G32", 512, Some(256));
    assert_eq!(size, 2 * (16 + 8 * 17));
    assert_eq!(x.len(), y.len());
}

#[test]
fn roundtrip_command_reports_error() {
    let dir = tempfile::tempdir().unwrap();
    let x_path = dir.path().join("x.f32");
    write_f32(&x_path, &values(64));
    let out = ok(&["codec", "roundtrip", "--format", "F16", "--input", p(&x_path)]);
    assert!(
        out.contains("F16: 64 values (1 row of K = 64), 128 bytes") && out.contains("NRMSE"),
        "{out}"
    );
}

#[test]
fn truncated_f32_input_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, out) = (dir.path().join("short.f32"), dir.path().join("out.bin"));
    std::fs::write(&x_path, [0u8; 130]).unwrap();
    let err =
        fails(&["codec", "encode", "--format", "F16", "--input", p(&x_path), "--output", p(&out)]);
    assert!(
        err.contains("short.f32") && err.contains("offset 128") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(files_in(dir.path()), [x_path]);
}

#[test]
fn truncated_encoded_input_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (enc, out) = (dir.path().join("t.f16"), dir.path().join("out.f32"));
    std::fs::write(&enc, [0u8; 70]).unwrap();
    // Rows of K = 16 F16 values are 32 bytes: the third row, at offset 64, is cut short.
    let err = fails(&[
        "codec",
        "decode",
        "--format",
        "F16",
        "--k",
        "16",
        "--input",
        p(&enc),
        "--output",
        p(&out),
    ]);
    assert!(
        err.contains("t.f16") && err.contains("offset 64") && err.contains("6 of 32 bytes"),
        "{err}"
    );
    assert!(!out.exists());
    // Q8_0 blocks are 34 bytes: 70 bytes leave 2 bytes of a block at offset 68.
    let err =
        fails(&["codec", "decode", "--format", "Q8_0", "--input", p(&enc), "--output", p(&out)]);
    assert!(err.contains("offset 68") && err.contains("2 of 34 bytes"), "{err}");
    assert_eq!(files_in(dir.path()), [enc]);
}

#[test]
fn failed_encode_leaves_no_output_and_keeps_an_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, out) = (dir.path().join("x.f32"), dir.path().join("out.bin"));
    let mut x = values(64);
    x[40] = f32::NAN;
    write_f32(&x_path, &x);
    let args = ["codec", "encode", "--format", "F16", "--input", p(&x_path), "--output", p(&out)];
    let err = fails(&args);
    assert!(
        err.contains("x.f32") && err.contains("element 40") && err.contains("byte offset 160"),
        "{err}"
    );
    assert!(err.contains("F16"), "{err}");
    assert!(!out.exists());
    // An existing output survives a failed run untouched.
    std::fs::write(&out, b"old").unwrap();
    fails(&args);
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    assert_eq!(files_in(dir.path()).len(), 2);
}

#[test]
fn bad_row_length_and_unknown_format_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, out) = (dir.path().join("x.f32"), dir.path().join("o"));
    write_f32(&x_path, &values(48));
    let err =
        fails(&["codec", "encode", "--format", "Q8_0", "--input", p(&x_path), "--output", p(&out)]);
    assert!(
        err.contains("x.f32") && err.contains("Q8_0") && err.contains("multiple of 32"),
        "{err}"
    );
    let err = fails(&[
        "codec",
        "encode",
        "--format",
        "F16",
        "--k",
        "32",
        "--input",
        p(&x_path),
        "--output",
        p(&out),
    ]);
    assert!(err.contains("row at element 32") && err.contains("byte offset 128"), "{err}");
    let err =
        fails(&["codec", "encode", "--format", "Q9_9", "--input", p(&x_path), "--output", p(&out)]);
    assert!(err.contains("unknown format 'Q9_9'") && err.contains("ROCMFP2"), "{err}");
    let err = fails(&[
        "codec",
        "encode",
        "--format",
        "F16",
        "--rule",
        "improved",
        "--input",
        p(&x_path),
        "--output",
        p(&out),
    ]);
    assert!(err.contains("F16") && err.contains("not supported"), "{err}");
    let missing = dir.path().join("missing.f32");
    let err =
        fails(&["codec", "decode", "--format", "F16", "--input", p(&missing), "--output", p(&out)]);
    assert!(err.contains("missing.f32") && err.contains("cannot read"), "{err}");
    assert!(!out.exists());
}

#[test]
fn imatrix_length_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (x_path, w_path, out) =
        (dir.path().join("x.f32"), dir.path().join("w.f32"), dir.path().join("o"));
    write_f32(&x_path, &values(64));
    write_f32(&w_path, &[1.0; 8]);
    let err = fails(&[
        "codec",
        "encode",
        "--format",
        "ROCMFP2",
        "--input",
        p(&x_path),
        "--output",
        p(&out),
        "--imatrix",
        p(&w_path),
    ]);
    assert!(
        err.contains("w.f32") && err.contains("8 importance weights") && err.contains("K = 64"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn demo_runs_on_float_formats() {
    let out = ok(&["demo", "--rows", "2", "--cols", "256", "--format", "F32", "--format", "BF16"]);
    assert!(
        out.contains("lowbit demo")
            && out.contains("BF16")
            && out.contains("2 encoded, 0 unsupported, 0 failed"),
        "{out}"
    );
    let err = fails(&["demo", "--cols", "100"]);
    assert!(err.contains("multiple of 256"), "{err}");
}

//! End-to-end tests of `lowbit quantize`, `lowbit dequantize` and `lowbit eval-tensors` (and
//! the default command): the built binary run on small synthetic models, on GGUF files made
//! here with lowbit's writer, and on hand-written safetensors files.
//!
//! Expected formats come from the recipes' documented rules (`quant::recipe`), and the error
//! figures are cross-checked between two paths (the quantize command's in-memory comparison and
//! `eval-tensors` on files), never copied from an earlier run.

use std::path::Path;
use std::process::{Command, Output};

use lowbit_core::{codec, Dialect, EncodeOptions, FormatId, Rule};
use lowbit_runtime::gguf::{Array, GgufFile, GgufWriter, TensorSpec, Value, ValueType};

/// A small synthetic llama: vocab 259, dim 256, 1 layer, FFN 352 (not a multiple of 128),
/// 4 heads / 2 KV heads.
const SHAPE: &str = "259,256,1,352,4,2";

fn lowbit_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowbit"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run lowbit")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = lowbit_in(dir, args);
    assert!(o.status.success(), "lowbit {args:?} failed: {}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.stderr.is_empty(), "unexpected stderr: {}", text(&o.stderr));
    text(&o.stdout)
}

fn fails(dir: &Path, args: &[&str]) -> String {
    let o = lowbit_in(dir, args);
    assert!(!o.status.success(), "lowbit {args:?} should fail: {}", text(&o.stdout));
    let err = text(&o.stderr);
    assert!(!err.contains("panicked"), "lowbit {args:?} panicked: {err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn quantize_synth(dir: &Path, recipe: &str, out: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "quantize",
        "-o",
        out,
        "--recipe",
        recipe,
        "--synthetic-shape",
        SHAPE,
        "--threads",
        "2",
    ];
    args.extend_from_slice(extra);
    ok(dir, &args)
}

/// The format each built-in recipe's rules give a tensor of the test shape (rows of 256, and
/// 352 for ffn_down), from the rules documented in `quant::recipe`.
fn expected_format(recipe: &str, name: &str, dims: &[u64]) -> FormatId {
    if dims.len() == 1 {
        return FormatId::F32; // 1-D tensors (norms) stay F32 in every built-in recipe.
    }
    let k = dims[0];
    let ffn = name.contains(".ffn_");
    match recipe {
        "fpx-ifp2" if name.contains(".ffn_down") => FormatId::RocmFp3,
        "fpx-ifp2" if ffn => FormatId::Q4_0,
        "fpx-ifp2" if name.contains(".attn_") || name == "token_embd.weight" => FormatId::Q5_0,
        "fpx-ifp2" | "q8_0" => FormatId::Q8_0,
        "q4_0" => FormatId::Q4_0,
        "hfp4" | "mfp4" | "ternary" if name == "token_embd.weight" => FormatId::Q8_0,
        "ternary" if name == "output.weight" => FormatId::Q8_0,
        "hfp4" => FormatId::Hfp4G32,
        "mfp4" if k % 256 == 0 => FormatId::Mfp4G32,
        "mfp4" => FormatId::Hfp4G32,
        "ternary" if k % 128 == 0 => FormatId::Pq2_0,
        "ternary" => FormatId::Q4_0,
        _ => panic!("unknown recipe {recipe}"),
    }
}

/// The per-tensor lines of an error table (from the header line to the totals line).
fn table_rows(s: &str) -> Vec<String> {
    let start = s.rfind("tensor                               source").expect("error table");
    s[start..].lines().skip(1).take_while(|l| !l.starts_with("total:")).map(str::to_owned).collect()
}

/// Every built-in recipe on the synthetic model; the output read back (formats per the
/// recipe's rules), inspected, dequantized, and evaluated against the dequantized file (zero
/// error) and against the F32 source written by a TOML recipe (the same table quantize printed).
#[test]
fn synthetic_each_recipe_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("f32.toml"),
        "name = \"f32\"\n[[rule]]\nmatch = \"*\"\nformat = \"F32\"\n",
    )
    .unwrap();
    let src_out = quantize_synth(d, "f32.toml", "src.gguf", &[]);
    assert!(src_out.contains("fallbacks: 0"), "{src_out}");
    for recipe in ["fpx-ifp2", "hfp4", "mfp4", "ternary", "q4_0", "q8_0"] {
        let out = format!("{recipe}.gguf");
        let stdout = quantize_synth(d, recipe, &out, &[]);
        assert!(stdout.contains(&format!("recipe: {recipe}")), "{stdout}");
        assert!(stdout.contains("per format:") && stdout.contains("peak buffers"), "{stdout}");
        let g = GgufFile::open(d.join(&out), None).unwrap();
        assert_eq!(g.tensors().len(), 2 + 9 + 1);
        let mut fallbacks = 0;
        for t in g.tensors() {
            let want = expected_format(recipe, &t.name, &t.dims);
            assert_eq!(t.format, want, "{recipe}: {}", t.name);
            if t.dims.len() > 1 && want != expected_format(recipe, &t.name, &[256, 1]) {
                fallbacks += 1;
                let line = format!("{}: {want} instead of", t.name);
                assert!(stdout.contains(&line), "{recipe}: no fallback line {line:?}\n{stdout}");
            }
        }
        assert!(stdout.contains(&format!("fallbacks: {fallbacks}\n")), "{recipe}: {stdout}");
        // Metadata carried over, lowbit's keys added.
        assert_eq!(g.get("llama.block_count"), Some(&Value::U32(1)));
        assert!(g.get("lowbit.formats").is_some() && g.get("general.file_type").is_none());

        let insp = ok(d, &["inspect", &out]);
        assert!(insp.contains("blk.0.ffn_up.weight"), "{insp}");
        let want_up = expected_format(recipe, "blk.0.ffn_up.weight", &[256, 352]);
        assert!(insp.contains(want_up.name()), "{recipe}: {insp}");

        let deq = format!("{recipe}.f32.gguf");
        ok(d, &["dequantize", &out, &deq]);
        let dg = GgufFile::open(d.join(&deq), None).unwrap();
        for (a, b) in dg.tensors().iter().zip(g.tensors()) {
            assert_eq!((&a.name, &a.dims, a.format), (&b.name, &b.dims, FormatId::F32));
        }
        let zero = ok(d, &["eval-tensors", &deq, &out]);
        for row in table_rows(&zero) {
            assert!(row.contains(" 0.000000     0.000000"), "{recipe}: nonzero error {row}");
        }
        let ev = ok(d, &["eval-tensors", "src.gguf", &out, "--json", "ev.json"]);
        assert_eq!(table_rows(&ev), table_rows(&stdout), "{recipe}: eval-tensors vs quantize");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("ev.json")).unwrap()).unwrap();
        assert_eq!(j["tensors"].as_array().unwrap().len(), 12);
        let nrmse = j["total"]["nrmse_pooled"].as_f64().unwrap();
        assert!(nrmse > 0.0 && nrmse < 0.7, "{recipe}: pooled NRMSE {nrmse}");
    }
}

#[test]
fn byte_identical_across_threads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // vocab 1100: the embedding and output have several row groups of the pipeline's tasks.
    for recipe in ["hfp4", "fpx-ifp2"] {
        let mut outs = Vec::new();
        for (i, threads) in ["1", "2", "2"].iter().enumerate() {
            let out = format!("{recipe}.{i}.gguf");
            ok(
                d,
                &[
                    "quantize",
                    "-o",
                    &out,
                    "--recipe",
                    recipe,
                    "--synthetic-shape",
                    "1100,128,1,352,2,1",
                    "--threads",
                    threads,
                ],
            );
            outs.push(std::fs::read(d.join(out)).unwrap());
        }
        assert!(outs[0].len() > 100_000);
        assert!(outs[0] == outs[1], "{recipe}: --threads 1 and 2 differ");
        assert!(outs[1] == outs[2], "{recipe}: two runs differ");
    }
    // A different seed gives different bytes (the comparison above can fail).
    ok(d, &["quantize", "-o", "s.gguf", "--recipe", "q8_0", "--synthetic-shape", SHAPE]);
    ok(
        d,
        &[
            "quantize",
            "-o",
            "t.gguf",
            "--recipe",
            "q8_0",
            "--synthetic-shape",
            SHAPE,
            "--seed",
            "7",
        ],
    );
    assert_ne!(std::fs::read(d.join("s.gguf")).unwrap(), std::fs::read(d.join("t.gguf")).unwrap());
}

#[test]
fn refuses_output_equal_to_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    quantize_synth(d, "q8_0", "m.gguf", &[]);
    let before = std::fs::read(d.join("m.gguf")).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::hard_link(d.join("m.gguf"), d.join("link.gguf")).unwrap();
    for out in ["m.gguf", "./sub/../m.gguf", "link.gguf"] {
        let err = fails(d, &["quantize", "m.gguf", out, "--recipe", "q4_0"]);
        assert!(err.contains("is the input"), "{out}: {err}");
        let err = fails(d, &["dequantize", "m.gguf", out]);
        assert!(err.contains("is the input"), "{out}: {err}");
    }
    assert_eq!(std::fs::read(d.join("m.gguf")).unwrap(), before);
    assert_eq!(files_in(d), ["link.gguf", "m.gguf", "sub"]);
    // A different name is accepted.
    ok(d, &["quantize", "m.gguf", "n.gguf", "--recipe", "q4_0"]);
}

#[test]
fn corrupt_input_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    quantize_synth(d, "q8_0", "m.gguf", &[]);
    let full = std::fs::read(d.join("m.gguf")).unwrap();
    std::fs::remove_file(d.join("m.gguf")).unwrap();
    std::fs::write(d.join("cut.gguf"), &full[..full.len() / 2]).unwrap();
    let err = fails(d, &["quantize", "cut.gguf", "out.gguf", "--recipe", "q4_0"]);
    assert!(err.contains("cut.gguf") && err.contains("offset"), "{err}");
    let err = fails(d, &["dequantize", "cut.gguf", "out.gguf"]);
    assert!(err.contains("cut.gguf"), "{err}");
    std::fs::write(d.join("junk.bin"), b"not a model at all").unwrap();
    let err = fails(d, &["quantize", "junk.bin", "out.gguf", "--recipe", "q4_0"]);
    assert!(err.contains("neither a GGUF file") && err.contains("junk.bin"), "{err}");
    assert_eq!(files_in(d), ["cut.gguf", "junk.bin"]);

    // A failure in the middle of writing (the second tensor holds a NaN): the first tensor
    // was already written to the temporary file, which must be gone too.
    let good: Vec<f32> = (0..64 * 4).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut bad = good.clone();
    bad[100] = f32::NAN;
    write_gguf(
        &d.join("nan.gguf"),
        &[
            ("a.weight", &[64, 4], FormatId::F32, f32_bytes(&good)),
            ("b.weight", &[64, 4], FormatId::F32, f32_bytes(&bad)),
        ],
    );
    let err = fails(d, &["quantize", "nan.gguf", "out.gguf", "--recipe", "q8_0"]);
    assert!(err.contains("b.weight") && err.contains("row 1"), "{err}");
    assert_eq!(files_in(d), ["cut.gguf", "junk.bin", "nan.gguf"]);
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

type TensorData<'a> = (&'a str, &'a [u64], FormatId, Vec<u8>);

fn write_gguf_meta(path: &Path, meta: &[(String, Value)], tensors: &[TensorData<'_>]) {
    let specs: Vec<TensorSpec> =
        tensors.iter().map(|(n, dims, f, _)| TensorSpec::new(*n, dims, *f)).collect();
    let mut w = GgufWriter::create(path, Dialect::Ggml, meta, &specs).unwrap();
    for (n, _, _, data) in tensors {
        w.write_tensor(n, data).unwrap();
    }
    w.finish().unwrap();
}

fn write_gguf(path: &Path, tensors: &[TensorData<'_>]) {
    let meta = vec![("general.architecture".to_owned(), Value::String("llama".into()))];
    write_gguf_meta(path, &meta, tensors);
}

fn legacy_imatrix(entries: &[(&str, Vec<f32>)]) -> Vec<u8> {
    // llama.cpp tools/imatrix/imatrix.cpp save_imatrix_legacy: n_entries, then per entry
    // name_len, name, ncall, nval, values (int32 / f32 little-endian).
    let mut b = (entries.len() as i32).to_le_bytes().to_vec();
    for (n, v) in entries {
        b.extend((n.len() as i32).to_le_bytes());
        b.extend(n.as_bytes());
        b.extend(1i32.to_le_bytes());
        b.extend((v.len() as i32).to_le_bytes());
        b.extend(f32_bytes(v));
    }
    b
}

fn gguf_imatrix(path: &Path, name: &str, values: &[f32]) {
    // llama.cpp imatrix.cpp save_imatrix: <name>.in_sum2 [ne0, 1] and <name>.counts [1, 1].
    let meta = vec![
        ("general.type".to_owned(), Value::String("imatrix".into())),
        (
            "imatrix.datasets".to_owned(),
            Value::Array(Array { elem: ValueType::String, items: vec![Value::String("t".into())] }),
        ),
        ("imatrix.chunk_count".to_owned(), Value::U32(1)),
        ("imatrix.chunk_size".to_owned(), Value::U32(512)),
    ];
    let s2 = format!("{name}.in_sum2");
    let c = format!("{name}.counts");
    write_gguf_meta(
        path,
        &meta,
        &[
            (&s2, &[values.len() as u64, 1], FormatId::F32, f32_bytes(values)),
            (&c, &[1, 1], FormatId::F32, f32_bytes(&[2.0])),
        ],
    );
}

#[test]
fn imatrix_files_used_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let w: Vec<f32> = (0..256).map(|i| 1.0 + (i % 7) as f32).collect();
    // Good files of both layouts: hfp4's improved encoder takes the weights.
    std::fs::write(d.join("good.dat"), legacy_imatrix(&[("blk.0.attn_q.weight", w.clone())]))
        .unwrap();
    gguf_imatrix(&d.join("good.imatrix.gguf"), "blk.0.attn_q.weight", &w);
    let mut outs = Vec::new();
    for f in ["good.dat", "good.imatrix.gguf"] {
        let out = format!("{f}.out.gguf");
        let s = quantize_synth(d, "hfp4", &out, &["--imatrix", f]);
        let line = s.lines().find(|l| l.starts_with("blk.0.attn_q.weight ")).unwrap();
        assert!(line.contains("improved+imat"), "{f}: {line}");
        let other = s.lines().find(|l| l.starts_with("blk.0.attn_k.weight ")).unwrap();
        assert!(!other.contains("+imat"), "{other}");
        outs.push(std::fs::read(d.join(out)).unwrap());
    }
    // The weights change the encoding (compared with no imatrix).
    quantize_synth(d, "hfp4", "plain.gguf", &[]);
    assert_ne!(outs[0], std::fs::read(d.join("plain.gguf")).unwrap(), "imatrix had no effect");

    // Wrong length: an error naming the tensor, for a format that takes weights and for one
    // that does not (q4_0), in both layouts; nothing written.
    std::fs::write(d.join("bad.dat"), legacy_imatrix(&[("blk.0.ffn_down.weight", vec![1.0; 100])]))
        .unwrap();
    gguf_imatrix(&d.join("bad.imatrix.gguf"), "blk.0.ffn_down.weight", &[1.0; 100]);
    for f in ["bad.dat", "bad.imatrix.gguf"] {
        for recipe in ["hfp4", "q4_0"] {
            let err = fails(
                d,
                &[
                    "quantize",
                    "-o",
                    "x.gguf",
                    "--recipe",
                    recipe,
                    "--synthetic-shape",
                    SHAPE,
                    "--imatrix",
                    f,
                ],
            );
            assert!(err.contains("blk.0.ffn_down.weight") && err.contains("100"), "{err}");
        }
    }
    assert!(!d.join("x.gguf").exists());
    let err = fails(
        d,
        &["quantize", "-o", "x.gguf", "--synthetic-shape", SHAPE, "--imatrix", "plain.gguf"],
    );
    assert!(err.contains("imatrix"), "{err}");
}

#[test]
fn requantize_from_q4_1_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (k, rows) = (64usize, 8usize);
    let w: Vec<f32> = (0..k * rows).map(|i| (i as f32 * 0.173).cos() * 0.1).collect();
    let opts = EncodeOptions { rule: Rule::Reference, importance: None };
    let mut q41 = Vec::new();
    for r in w.chunks_exact(k) {
        q41.extend(codec::encode_to_vec(FormatId::Q4_1, k, r, &opts).unwrap());
    }
    let norm = f32_bytes(&[1.0; 64]);
    write_gguf(
        &d.join("q41.gguf"),
        &[
            ("blk.0.attn_norm.weight", &[64], FormatId::F32, norm),
            ("blk.0.ffn_up.weight", &[64, 8], FormatId::Q4_1, q41.clone()),
        ],
    );
    let s = ok(d, &["quantize", "q41.gguf", "out.gguf", "--recipe", "q8_0"]);
    assert!(s.contains("requantized (dequantized exactly first): 1\n"), "{s}");
    assert!(s.contains("  blk.0.ffn_up.weight: Q4_1 -> Q8_0"), "{s}");
    // The Q8_0 output is close to the Q4_1 values (decoded exactly), not to anything else.
    let deq = codec::decode_to_vec(FormatId::Q4_1, k, &q41).unwrap();
    let g = GgufFile::open(d.join("out.gguf"), None).unwrap();
    let t = g.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!(t.format, FormatId::Q8_0);
    let got = codec::decode_to_vec(FormatId::Q8_0, k, g.tensor_data(t)).unwrap();
    let max = deq.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(max < 0.1 / 127.0 * 1.5, "max error {max}");
    // Same-format tensors are copied, not requantized: Q4_1 under a recipe asking for Q4_1.
    std::fs::write(d.join("q41.toml"), "[[rule]]\nmatch = \"*\"\nformat = \"Q4_1\"\n").unwrap();
    let s = ok(d, &["quantize", "q41.gguf", "same.gguf", "--recipe", "q41.toml"]);
    assert!(s.contains("requantized (dequantized exactly first): 0\n"), "{s}");
    let g2 = GgufFile::open(d.join("same.gguf"), None).unwrap();
    assert_eq!(g2.tensor_data(g2.tensor("blk.0.ffn_up.weight").unwrap()), &q41[..]);
}

/// A safetensors file: 8-byte header length, JSON header, data (huggingface/safetensors
/// docs, "Format"). Shapes are row-major.
fn write_safetensors(path: &Path, tensors: &[(&str, &str, &[u64], Vec<u8>)]) {
    let mut header = String::from("{");
    let mut data = Vec::new();
    for (i, (name, dtype, shape, bytes)) in tensors.iter().enumerate() {
        let begin = data.len();
        data.extend_from_slice(bytes);
        let shape: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{begin},{}]}}",
            shape.join(","),
            data.len()
        ));
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.extend(data);
    std::fs::write(path, out).unwrap();
}

#[test]
fn safetensors_input_quantizes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let w: Vec<f32> = (0..16 * 64).map(|i| (i as f32 * 0.29).sin() * 0.05).collect();
    // bf16 1.0 = 0x3f80.
    let norm: Vec<u8> = (0..64).flat_map(|_| 0x3f80u16.to_le_bytes()).collect();
    // A name without the .safetensors extension: recognised by content.
    let st = d.join("model.bin");
    write_safetensors(
        &st,
        &[
            ("blk.0.ffn_up.weight", "F32", &[16, 64], f32_bytes(&w)),
            ("blk.0.ffn_norm.weight", "BF16", &[64], norm),
        ],
    );
    let o = lowbit_in(d, &["quantize", "model.bin", "out.gguf", "--recipe", "q4_0", "--verbose"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (s, e) = (text(&o.stdout), text(&o.stderr));
    assert!(s.contains("safetensors"), "{s}");
    // --verbose with stderr not a terminal: one line per tensor.
    assert!(e.contains("[1/2] blk.0.ffn_up.weight: F32 -> Q4_0"), "{e}");
    assert_eq!(e.lines().count(), 2, "{e}");
    let g = GgufFile::open(d.join("out.gguf"), None).unwrap();
    let up = g.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!((up.format, up.dims.clone()), (FormatId::Q4_0, vec![64, 16]));
    let norm_t = g.tensor("blk.0.ffn_norm.weight").unwrap();
    assert_eq!(norm_t.format, FormatId::F32);
    assert_eq!(g.tensor_data(norm_t), &f32_bytes(&[1.0; 64])[..]);
    // eval-tensors with a safetensors SOURCE: the Q4_0 error of the weight, measured here too.
    let ev = ok(d, &["eval-tensors", "model.bin", "out.gguf"]);
    let got = codec::decode_to_vec(FormatId::Q4_0, 64, g.tensor_data(up)).unwrap();
    let max =
        w.iter().zip(&got).map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs()).fold(0.0, f64::max);
    let row = ev.lines().find(|l| l.starts_with("blk.0.ffn_up.weight ")).unwrap();
    assert!(row.trim_end().ends_with(&format!("{max:.6}")), "{row} vs {max}");
    // dequantize reads safetensors too.
    ok(d, &["dequantize", "model.bin", "deq.gguf"]);
    let dg = GgufFile::open(d.join("deq.gguf"), None).unwrap();
    assert_eq!(dg.tensor_data(dg.tensor("blk.0.ffn_up.weight").unwrap()), &f32_bytes(&w)[..]);
}

#[test]
fn eval_tensors_errors_name_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = f32_bytes(&[0.5; 64]);
    write_gguf(&d.join("a.gguf"), &[("x.weight", &[32, 2], FormatId::F32, a.clone())]);
    write_gguf(&d.join("b.gguf"), &[("x.weight", &[64, 1], FormatId::F32, a.clone())]);
    write_gguf(&d.join("c.gguf"), &[("y.weight", &[32, 2], FormatId::F32, a)]);
    let err = fails(d, &["eval-tensors", "a.gguf", "b.gguf"]);
    assert!(err.contains("x.weight") && err.contains("dims"), "{err}");
    let err = fails(d, &["eval-tensors", "a.gguf", "c.gguf"]);
    assert!(err.contains("y.weight") && err.contains("not in the source"), "{err}");
    let two = f32_bytes(&[0.5; 64]);
    write_gguf(
        &d.join("d.gguf"),
        &[
            ("x.weight", &[32, 2], FormatId::F32, two.clone()),
            ("z.weight", &[32, 2], FormatId::F32, two),
        ],
    );
    let err = fails(d, &["eval-tensors", "d.gguf", "a.gguf"]);
    assert!(err.contains("z.weight") && err.contains("missing from the quantized"), "{err}");
    let s = ok(d, &["eval-tensors", "a.gguf", "a.gguf"]);
    assert!(s.contains("total: 1 tensors, 64 elements, NRMSE 0.000000"), "{s}");
}

/// `lowbit` with no arguments quantizes the built-in synthetic model with fpx-ifp2 into the
/// current directory and prints the summary and the error table.
#[test]
fn default_command_quantizes_the_synthetic_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = ok(d, &[]);
    assert_eq!(files_in(d), ["lowbit-synthetic.fpx-ifp2.gguf"]);
    assert!(s.contains("recipe: fpx-ifp2") && s.contains("synthetic llama"), "{s}");
    assert!(s.contains("error of the output against the synthetic source"), "{s}");
    let g = GgufFile::open(d.join("lowbit-synthetic.fpx-ifp2.gguf"), None).unwrap();
    assert_eq!(g.tensors().len(), 2 + 2 * 9 + 1);
    assert_eq!(g.dialect().single(), Some(Dialect::RocmFpx));
    assert_eq!(g.tensor("blk.1.ffn_down.weight").unwrap().format, FormatId::RocmFp3);
    assert_eq!(table_rows(&s).len(), 21);
}

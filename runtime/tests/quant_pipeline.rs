//! The quantization pipeline: determinism across thread counts, equality with direct codec
//! calls (row order, per-expert importance slices), requantization and copies, fallbacks in the
//! summary, bounded memory, and errors that name the tensor.

use std::borrow::Cow;
use std::collections::BTreeMap;

use lowbit_core::{codec, EncodeOptions, Error as CoreError, FormatId, Rule};
use lowbit_runtime::quant::imatrix::{ImportanceEntry, ImportanceMatrix};
use lowbit_runtime::quant::pipeline::{
    quantize, quantize_with_progress, takes_importance, Action, ImportanceUse, QuantizedTensor,
    SourceTensor, Summary,
};
use lowbit_runtime::quant::recipe::{Recipe, BUILTIN_NAMES};
use lowbit_runtime::quant::synthetic::{synthetic_llama, LlamaShape, SyntheticModel};
use lowbit_runtime::quant::QuantError;

fn small_model() -> SyntheticModel {
    let shape = LlamaShape {
        vocab: 300,
        dim: 128,
        layers: 1,
        ffn: 352,
        heads: 4,
        kv_heads: 2,
        context: 64,
    };
    synthetic_llama(&shape, 7).unwrap()
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn sources(m: &SyntheticModel) -> Vec<SourceTensor<'static>> {
    m.tensors
        .iter()
        .map(|t| SourceTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            format: FormatId::F32,
            data: Cow::Owned(f32_bytes(&t.data)),
        })
        .collect()
}

fn run(
    srcs: Vec<SourceTensor<'_>>,
    recipe: &Recipe,
    imatrix: Option<&ImportanceMatrix>,
    threads: usize,
) -> Result<(Vec<QuantizedTensor>, Summary), QuantError> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let mut out = Vec::new();
        let s = quantize(srcs, recipe, imatrix, |q, _| {
            out.push(q);
            Ok(())
        })?;
        Ok((out, s))
    })
}

#[test]
fn every_builtin_is_deterministic_across_thread_counts_and_matches_the_codec() {
    let m = small_model();
    for name in BUILTIN_NAMES {
        let r = Recipe::builtin(name).unwrap();
        let (a, sa) = run(sources(&m), &r, None, 1).unwrap();
        let (b, sb) = run(sources(&m), &r, None, 4).unwrap();
        assert_eq!(a, b, "{name}: 1 vs 4 threads");
        assert_eq!(sa.tensors, sb.tensors);
        assert_eq!(a.len(), m.tensors.len());
        for (q, t) in a.iter().zip(&m.tensors) {
            assert_eq!((&q.name, &q.dims), (&t.name, &t.dims), "{name}: order");
            let plan = r.plan(&t.name, &t.dims).unwrap();
            assert_eq!(q.format, plan.format);
            let k = t.dims[0] as usize;
            let opts = EncodeOptions { rule: plan.encoder, importance: None };
            let direct = codec::encode_to_vec(plan.format, k, &t.data, &opts).unwrap();
            assert!(q.data == direct, "{name}: {} differs from a direct encode", t.name);
        }
        let bytes: u64 = a.iter().map(|q| q.data.len() as u64).sum();
        assert_eq!(sa.bytes_out(), bytes);
        assert_eq!(sa.bytes_in(), m.tensors.iter().map(|t| 4 * t.data.len() as u64).sum::<u64>());
        let text = sa.render();
        assert!(text.contains("total:") && text.contains("output.weight"), "{text}");
    }
}

#[test]
fn fallbacks_are_listed() {
    let m = small_model();
    let (_, s) = run(sources(&m), &Recipe::builtin("ternary").unwrap(), None, 2).unwrap();
    // PQ2_0 needs multiples of 128: 128-wide rows fit, 352-wide ffn_down rows do not.
    let fb: Vec<_> = s.fallbacks().map(|(t, f)| (t.name.clone(), t.format, f.wanted)).collect();
    assert_eq!(fb, vec![("blk.0.ffn_down.weight".to_owned(), FormatId::Q4_0, FormatId::Pq2_0)]);
    assert!(s.render().contains("blk.0.ffn_down.weight: Q4_0 instead of PQ2_0"));
    let per = s.per_format();
    assert_eq!(per[&FormatId::Pq2_0].tensors, 6);
    assert_eq!(per[&FormatId::F32].tensors, 3);
}

/// The importance flag per format and rule agrees with what the core accepts.
#[test]
fn takes_importance_agrees_with_the_core() {
    let x = lowbit_runtime::demo::synthetic_weights(1, 256, 11);
    let w: Vec<f32> = (0..256).map(|i| if i % 7 == 0 { 50.0 } else { 0.01 }).collect();
    for f in FormatId::ALL {
        for rule in [Rule::Reference, Rule::Exhaustive, Rule::Improved] {
            let enc = f.info().encoders;
            let offered = match rule {
                Rule::Reference => enc.reference,
                Rule::Exhaustive => enc.exhaustive,
                Rule::Improved => enc.improved,
            };
            if !offered || f.row_bytes(256).is_err() {
                continue;
            }
            let mut dst = vec![0u8; f.row_bytes(256).unwrap()];
            let mut plain = dst.clone();
            let opts = EncodeOptions { rule, importance: Some(&w) };
            codec::encode_row(f, &x, &EncodeOptions { rule, importance: None }, &mut plain)
                .unwrap();
            match codec::encode_row(f, &x, &opts, &mut dst) {
                // Accepted: either the rule uses them, or (TQ1_0 / TQ2_0 reference) it ignores
                // them, which the pipeline must then not claim as "used".
                Ok(()) if takes_importance(f, rule) => {}
                Ok(()) => assert_eq!(dst, plain, "{f} {rule:?} uses weights the flag denies"),
                Err(CoreError::Unsupported { .. }) => {
                    assert!(!takes_importance(f, rule), "{f} {rule:?} refused weights")
                }
                Err(e) => panic!("{f} {rule:?}: {e}"),
            }
        }
    }
}

#[test]
fn importance_is_sliced_per_expert() {
    let (k, n, e) = (64usize, 8usize, 3usize);
    let data: Vec<f32> =
        (0..k * n * e).map(|i| (((i * 7919) % 1013) as f32 - 506.0) / 300.0).collect();
    let mut imp = Vec::new();
    for x in 0..e {
        // Each expert cares about a different quarter of the columns.
        imp.extend((0..k).map(|c| if c / 16 == x { 100.0 } else { 0.01 }));
    }
    let name = "blk.0.ffn_up_exps.weight";
    let mut entries = BTreeMap::new();
    entries.insert(name.to_owned(), ImportanceEntry { values: imp.clone(), n_mat: Some(e) });
    entries.insert(
        "blk.0.attn_q.weight".to_owned(),
        ImportanceEntry { values: vec![1.0; k], n_mat: None },
    );
    let im = ImportanceMatrix { entries, ..Default::default() };
    let src = |nm: &str, dims: Vec<u64>, d: &[f32]| SourceTensor {
        name: nm.to_owned(),
        dims,
        format: FormatId::F32,
        data: Cow::Owned(f32_bytes(d)),
    };
    let srcs = vec![
        src(name, vec![k as u64, n as u64, e as u64], &data),
        src("blk.0.attn_q.weight", vec![k as u64, n as u64], &data[..k * n]),
    ];
    let r = Recipe::builtin("fpx-ifp2").unwrap();
    let (out, s) = run(srcs.clone(), &r, Some(&im), 3).unwrap();
    assert_eq!(s.tensors[0].importance, ImportanceUse::Used);
    assert_eq!(s.tensors[1].importance, ImportanceUse::NotTaken); // Q5_0 takes none
    let rb = FormatId::RocmFp2.row_bytes(k).unwrap();
    let mut expect = Vec::new();
    for x in 0..e {
        let opts =
            EncodeOptions { rule: Rule::Reference, importance: Some(&imp[x * k..(x + 1) * k]) };
        let rows = &data[x * n * k..(x + 1) * n * k];
        expect.extend(codec::encode_to_vec(FormatId::RocmFp2, k, rows, &opts).unwrap());
    }
    assert_eq!(out[0].data.len(), e * n * rb);
    assert!(out[0].data == expect, "per-expert importance slices");
    let (plain, _) = run(srcs, &r, None, 1).unwrap();
    assert!(plain[0].data != out[0].data, "the imatrix changed nothing");

    // An entry of the wrong size is an error naming the tensor.
    let mut bad = im.clone();
    bad.entries.get_mut(name).unwrap().values.pop();
    let srcs = vec![src(name, vec![k as u64, n as u64, e as u64], &data)];
    let err = run(srcs, &r, Some(&bad), 1).unwrap_err().to_string();
    assert!(err.contains(name), "{err}");
}

#[test]
fn requantize_and_copy() {
    let m = small_model();
    let t = m.tensors.iter().find(|t| t.name == "blk.0.attn_q.weight").unwrap();
    let k = t.dims[0] as usize;
    let q8 = codec::encode_to_vec(FormatId::Q8_0, k, &t.data, &EncodeOptions::default()).unwrap();
    let src = || SourceTensor {
        name: t.name.clone(),
        dims: t.dims.clone(),
        format: FormatId::Q8_0,
        data: Cow::Borrowed(&q8[..]),
    };
    let (out, s) = run(vec![src()], &Recipe::builtin("q4_0").unwrap(), None, 2).unwrap();
    assert_eq!(s.tensors[0].action, Action::Requantized);
    assert_eq!(s.requantized().count(), 1);
    assert!(s.render().contains("Q8_0 -> Q4_0"));
    let deq = codec::decode_to_vec(FormatId::Q8_0, k, &q8).unwrap();
    let want = codec::encode_to_vec(FormatId::Q4_0, k, &deq, &EncodeOptions::default()).unwrap();
    assert!(out[0].data == want);

    let (out, s) = run(vec![src()], &Recipe::builtin("q8_0").unwrap(), None, 2).unwrap();
    assert_eq!((s.tensors[0].action, out[0].format), (Action::Copied, FormatId::Q8_0));
    assert!(out[0].data == q8);

    // A copied tensor is still checked: a NaN scale in row 3 is refused, naming the row.
    let mut bad = q8.clone();
    let rb = FormatId::Q8_0.row_bytes(k).unwrap();
    bad[3 * rb..3 * rb + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
    let s = SourceTensor { data: Cow::Borrowed(&bad[..]), ..src() };
    match run(vec![s], &Recipe::builtin("q8_0").unwrap(), None, 2) {
        Err(QuantError::Codec { row: 3, stage: "decoding the source", .. }) => {}
        other => panic!("{other:?}"),
    }
    let nan_norm = SourceTensor {
        name: "output_norm.weight".into(),
        dims: vec![2],
        format: FormatId::F32,
        data: Cow::Owned(f32_bytes(&[1.0, f32::NAN])),
    };
    let e = run(vec![nan_norm], &Recipe::builtin("q8_0").unwrap(), None, 1).unwrap_err();
    assert!(e.to_string().contains("output_norm.weight") && e.to_string().contains("element 1"));

    // F16 norms become F32 exactly.
    let h: Vec<u8> =
        [1.0f32, -2.5, 0.125].iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect();
    let n = SourceTensor {
        name: "output_norm.weight".into(),
        dims: vec![3],
        format: FormatId::F16,
        data: Cow::Borrowed(&h[..]),
    };
    let (out, s) = run(vec![n], &Recipe::builtin("q8_0").unwrap(), None, 1).unwrap();
    assert_eq!((out[0].format, s.tensors[0].action), (FormatId::F32, Action::Encoded));
    assert_eq!(out[0].data, f32_bytes(&[1.0, -2.5, 0.125]));
}

#[test]
fn errors_name_the_tensor() {
    let r = Recipe::builtin("q4_0").unwrap();
    let mut x = vec![0.5f32; 64 * 4];
    x[64 * 2 + 5] = f32::NAN;
    let s = SourceTensor {
        name: "blk.0.attn_v.weight".into(),
        dims: vec![64, 4],
        format: FormatId::F32,
        data: Cow::Owned(f32_bytes(&x)),
    };
    match run(vec![s.clone()], &r, None, 4) {
        Err(QuantError::Codec { tensor, row, stage, .. }) => {
            assert_eq!((tensor.as_str(), row, stage), ("blk.0.attn_v.weight", 2, "encoding"))
        }
        other => panic!("{other:?}"),
    }
    let short = SourceTensor { data: Cow::Owned(vec![0u8; 10]), ..s.clone() };
    let e = run(vec![short], &r, None, 1).unwrap_err().to_string();
    assert!(e.contains("blk.0.attn_v.weight") && e.contains("10 bytes"), "{e}");
    let good = SourceTensor { data: Cow::Owned(f32_bytes(&[0.5; 256])), ..s };
    let e = quantize(vec![good], &r, None, |_, _| Err("disk full".into())).unwrap_err();
    assert!(e.to_string().contains("blk.0.attn_v.weight") && e.to_string().contains("disk full"));
}

#[test]
fn peak_memory_is_a_few_tensors() {
    let m = synthetic_llama(&LlamaShape::default(), 3).unwrap();
    let total: usize = m.tensors.iter().map(|t| t.data.len() * 4).sum();
    let largest = m.tensors.iter().map(|t| t.data.len() * 4).max().unwrap();
    let k_max = m.tensors.iter().map(|t| t.dims[0] as usize).max().unwrap();
    let owned = sources(&m);
    // Owned sources count while they are processed: source + output (<= source size) + rows.
    let (_, s) = run(owned, &Recipe::builtin("q8_0").unwrap(), None, 4).unwrap();
    assert!(s.peak_bytes >= largest, "peak {} below the largest source {largest}", s.peak_bytes);
    assert!(s.peak_bytes <= 2 * largest + 64 * k_max * 4, "peak {} of {total}", s.peak_bytes);
    // Borrowed sources: only outputs and row buffers.
    let blobs: Vec<Vec<u8>> = m.tensors.iter().map(|t| f32_bytes(&t.data)).collect();
    let borrowed: Vec<SourceTensor<'_>> = m
        .tensors
        .iter()
        .zip(&blobs)
        .map(|(t, b)| SourceTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            format: FormatId::F32,
            data: Cow::Borrowed(&b[..]),
        })
        .collect();
    let (_, s) = run(borrowed, &Recipe::builtin("q8_0").unwrap(), None, 4).unwrap();
    assert!(s.peak_bytes < largest, "peak {} vs largest f32 tensor {largest}", s.peak_bytes);
    assert!(s.peak_bytes > 0);
}

/// Figures for the docs: every built-in recipe on the default synthetic model (bpw, NRMSE,
/// peak buffers, wall time on 1 thread and on every core). Run with
/// `cargo test -p lowbit-runtime --test quant_pipeline -- --ignored --nocapture`.
#[test]
#[ignore]
fn figures_builtin_recipes_on_synthetic() {
    use lowbit_runtime::quant::eval::{compare_encoded, EvalReport};
    let m = synthetic_llama(&LlamaShape::default(), lowbit_runtime::quant::synthetic::DEFAULT_SEED)
        .unwrap();
    let blobs: Vec<Vec<u8>> = m.tensors.iter().map(|t| f32_bytes(&t.data)).collect();
    let srcs = || -> Vec<SourceTensor<'_>> {
        m.tensors
            .iter()
            .zip(&blobs)
            .map(|(t, b)| SourceTensor {
                name: t.name.clone(),
                dims: t.dims.clone(),
                format: FormatId::F32,
                data: Cow::Borrowed(&b[..]),
            })
            .collect()
    };
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "recipe      bpw     NRMSE(w)  NRMSE(pooled) fallbacks peak_bytes  s(1 thr)  s({all} thr)"
    );
    let mut recipes: Vec<(String, Recipe)> =
        BUILTIN_NAMES.iter().map(|n| (n.to_string(), Recipe::builtin(n).unwrap())).collect();
    for n in ["hfp4", "mfp4", "ternary"] {
        let r = Recipe::builtin(n).unwrap().with_encoder(Rule::Reference);
        recipes.push((format!("{n}/ref"), r));
    }
    for (name, r) in &recipes {
        let r = r.clone();
        let mut times = Vec::new();
        let mut last = None;
        for threads in [1, all] {
            let t0 = std::time::Instant::now();
            let res = run(srcs(), &r, None, threads).unwrap();
            times.push(t0.elapsed().as_secs_f64());
            last = Some(res);
        }
        let (out, s) = last.unwrap();
        let mut ev = EvalReport::default();
        for ((t, b), q) in m.tensors.iter().zip(&blobs).zip(&out) {
            ev.tensors.push(
                compare_encoded(&t.name, &t.dims, FormatId::F32, b, q.format, &q.data).unwrap(),
            );
        }
        println!(
            "{name:<11} {:.4}  {:.5}   {:.5}        {:>3}     {:>9}   {:.3}     {:.3}",
            s.bpw(),
            ev.weighted_nrmse(),
            ev.pooled_nrmse(),
            s.fallbacks().count(),
            s.peak_bytes,
            times[0],
            times[1]
        );
    }
}

#[test]
fn progress_adds_up_and_synthetic_sources_stream() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let m = small_model();
    let done = AtomicU64::new(0);
    let calls = AtomicU64::new(0);
    let progress = |_: &str, n: u64| {
        done.fetch_add(n, Ordering::Relaxed);
        calls.fetch_add(1, Ordering::Relaxed);
    };
    let mut seen = 0;
    let s = quantize_with_progress(
        m.sources(),
        &Recipe::builtin("q4_0").unwrap(),
        None,
        &progress,
        |q, _| {
            seen += 1;
            assert_eq!(q.name, m.tensors[seen - 1].name);
            Ok(())
        },
    )
    .unwrap();
    let total: u64 = m.tensors.iter().map(|t| t.data.len() as u64).sum();
    assert_eq!((s.elements(), done.load(Ordering::Relaxed)), (total, total));
    assert!(calls.load(Ordering::Relaxed) >= m.tensors.len() as u64);
    // The streamed sources equal the hand-made ones.
    let (a, _) = run(sources(&m), &Recipe::builtin("q4_0").unwrap(), None, 1).unwrap();
    let (b, _) = run(m.sources().collect(), &Recipe::builtin("q4_0").unwrap(), None, 1).unwrap();
    assert_eq!(a, b);
}

#[test]
fn gptq_uses_each_experts_covariance_and_names_the_tensor_in_errors() {
    use lowbit_runtime::quant::gptq;
    use lowbit_runtime::quant::imatrix::CovarianceEntry;
    let (k, n, e) = (64usize, 40usize, 2usize);
    let data: Vec<f32> =
        (0..k * n * e).map(|i| (((i * 7919) % 1013) as f32 - 506.0) / 3000.0).collect();
    // Expert x: inputs correlated between neighbouring columns, with strength x.
    let mut cov = Vec::new();
    for x in 0..e {
        for i in 0..k {
            for j in 0..k {
                let d = i.abs_diff(j);
                cov.push(if d == 0 {
                    2.0
                } else if d == 1 {
                    0.6 + 0.3 * x as f32
                } else {
                    0.0
                });
            }
        }
    }
    let name = "blk.0.ffn_down_exps.weight";
    let mut im = ImportanceMatrix::default();
    im.covariance.insert(name.to_owned(), CovarianceEntry { k, n_mat: e, sums: cov.clone() });
    let r = Recipe::from_toml(
        "[[rule]]\nmatch = '*'\nformat = 'ROCMFP2'\nencoder = 'gptq'\ngptq_damp = 0.05\n",
        "t",
    )
    .unwrap();
    let srcs = vec![SourceTensor {
        name: name.to_owned(),
        dims: vec![k as u64, n as u64, e as u64],
        format: FormatId::F32,
        data: Cow::Owned(f32_bytes(&data)),
    }];
    let (a, s) = run(srcs.clone(), &r, Some(&im), 1).unwrap();
    let (b, _) = run(srcs.clone(), &r, Some(&im), 3).unwrap();
    assert_eq!(a, b);
    assert!(s.tensors[0].gptq);
    assert!(s.render().contains("gptq"));
    let rb = FormatId::RocmFp2.row_bytes(k).unwrap();
    for x in 0..e {
        let p = gptq::prepare(&cov[x * k * k..(x + 1) * k * k], k, 0.05).unwrap();
        let mut want = vec![0u8; n * rb];
        gptq::encode_rows(FormatId::RocmFp2, &p, &data[x * n * k..(x + 1) * n * k], &mut want)
            .unwrap();
        assert_eq!(&a[0].data[x * n * rb..(x + 1) * n * rb], &want[..], "expert {x}");
    }
    // No covariance: an error naming the tensor.
    let e1 = run(srcs.clone(), &r, None, 1).unwrap_err().to_string();
    assert!(e1.contains(name) && e1.contains("covariance"), "{e1}");
    // A NaN in H.
    let mut bad = im.clone();
    bad.covariance.get_mut(name).unwrap().sums[k * k + 3] = f32::NAN;
    let e2 = run(srcs.clone(), &r, Some(&bad), 1).unwrap_err().to_string();
    assert!(e2.contains(name) && e2.contains("matrix 1") && e2.contains("NaN"), "{e2}");
    // A covariance of the wrong size.
    let mut small = ImportanceMatrix::default();
    small
        .covariance
        .insert(name.to_owned(), CovarianceEntry { k: 32, n_mat: e, sums: vec![0.0; 32 * 32 * e] });
    let e3 = run(srcs, &r, Some(&small), 1).unwrap_err().to_string();
    assert!(e3.contains(name) && e3.contains("32 x 32"), "{e3}");
    // gptq_damp without gptq is refused when the recipe is read.
    let e4 = Recipe::from_toml("[[rule]]\nmatch='*'\nformat='Q4_0'\ngptq_damp=0.1\n", "t")
        .unwrap_err()
        .to_string();
    assert!(e4.contains("gptq_damp"), "{e4}");
}

//! Recipes against whole models: every built-in recipe plans every tensor of the synthetic
//! model and of SmolLM2-135M's shape (and a MoE layer) to a format that holds its row length,
//! with the formats the recipe documents; recipe files load from disk.

use lowbit_core::{FormatId, Rule};
use lowbit_runtime::quant::recipe::{Recipe, BUILTIN_NAMES};
use lowbit_runtime::quant::synthetic::LlamaShape;

fn moe_layer() -> Vec<(String, Vec<u64>)> {
    vec![
        ("blk.0.ffn_gate_inp.weight".into(), vec![2048, 64]),
        ("blk.0.ffn_gate_exps.weight".into(), vec![2048, 768, 64]),
        ("blk.0.ffn_up_exps.weight".into(), vec![2048, 768, 64]),
        ("blk.0.ffn_down_exps.weight".into(), vec![768, 2048, 64]),
        ("blk.0.ffn_up_shexp.weight".into(), vec![2048, 768]),
        ("blk.0.attn_q_norm.weight".into(), vec![128]),
    ]
}

fn all_shapes() -> Vec<(String, Vec<u64>)> {
    let mut v = LlamaShape::default().tensor_shapes();
    v.extend(LlamaShape::smollm2_135m().tensor_shapes());
    v.extend(moe_layer());
    v
}

#[test]
fn every_builtin_plans_every_tensor_to_a_fitting_format() {
    for name in BUILTIN_NAMES {
        let r = Recipe::builtin(name).unwrap();
        for (t, dims) in all_shapes() {
            let p = r.plan(&t, &dims).unwrap_or_else(|e| panic!("{name}: {e}"));
            let k = dims[0] as usize;
            assert!(p.format.row_bytes(k).is_ok(), "{name}: {t} {dims:?} -> {}", p.format);
            let enc = p.format.info().encoders;
            let offered = match p.encoder {
                Rule::Reference => enc.reference,
                Rule::Exhaustive => enc.exhaustive,
                Rule::Improved => enc.improved,
            };
            assert!(offered, "{name}: {t}: {} does not offer {:?}", p.format, p.encoder);
            if dims.len() == 1 {
                assert_eq!(p.format, FormatId::F32, "{name}: 1-D {t}");
            }
            if let Some(fb) = &p.fallback_used {
                assert!(fb.wanted.row_bytes(k).is_err(), "{name}: {t}: needless fallback");
                assert!(fb.reason.contains(&k.to_string()), "{}", fb.reason);
            }
        }
    }
}

/// The formats each recipe documents, on SmolLM2's tensors (row multiples from FORMATS.md:
/// 32 for Q4_0/Q8_0/ROCmFP2/HFP4G32, 128 for PQ2_0, 256 for MFP4G32; 576 = 18 x 32 = 4.5 x 128,
/// 1536 = 6 x 256).
#[test]
fn documented_formats_on_smollm2() {
    let smol = LlamaShape::smollm2_135m().tensor_shapes();
    let plan = |recipe: &str, t: &str| {
        let r = Recipe::builtin(recipe).unwrap();
        let dims = &smol.iter().find(|(n, _)| n == t).unwrap().1;
        r.plan(t, dims).unwrap()
    };
    use FormatId as F;
    for t in ["blk.3.ffn_gate.weight", "blk.3.ffn_up.weight"] {
        assert_eq!(plan("fpx-ifp2", t).format, F::Q4_0, "{t}");
    }
    assert_eq!(plan("fpx-ifp2", "blk.3.ffn_down.weight").format, F::RocmFp3);
    for t in ["blk.3.attn_q.weight", "blk.3.attn_v.weight", "token_embd.weight"] {
        assert_eq!(plan("fpx-ifp2", t).format, F::Q5_0, "{t}");
    }
    assert_eq!(plan("fpx-ifp2", "output.weight").format, F::Q8_0);
    assert_eq!(plan("fpx-ifp2", "blk.3.ffn_norm.weight").format, F::F32);

    // ternary: only the 1536-wide rows (ffn_down) hold 128-blocks.
    let p = plan("ternary", "blk.0.ffn_down.weight");
    assert_eq!((p.format, p.encoder, p.fallback_used), (F::Pq2_0, Rule::Improved, None));
    let p = plan("ternary", "blk.0.ffn_up.weight");
    assert_eq!(p.format, F::Q4_0);
    assert_eq!(p.fallback_used.unwrap().wanted, F::Pq2_0);
    assert_eq!(plan("ternary", "token_embd.weight").format, F::Q8_0);

    let p = plan("mfp4", "blk.0.attn_k.weight");
    assert_eq!((p.format, p.fallback_used.unwrap().wanted), (F::Hfp4G32, F::Mfp4G32));
    assert_eq!(plan("mfp4", "blk.0.ffn_down.weight").format, F::Mfp4G32);
    assert_eq!(plan("hfp4", "output.weight").format, F::Hfp4G32);
    assert_eq!(plan("hfp4", "token_embd.weight").format, F::Q8_0);
    assert_eq!(plan("q4_0", "blk.29.attn_output.weight").format, F::Q4_0);
    assert_eq!(plan("q8_0", "output.weight").format, F::Q8_0);
}

#[test]
fn moe_router_and_experts() {
    let r = Recipe::builtin("fpx-ifp2").unwrap();
    let m = moe_layer();
    let f = |i: usize| r.plan(&m[i].0, &m[i].1).unwrap().format;
    assert_eq!(f(0), FormatId::F32);
    assert_eq!((f(1), f(2), f(3)), (FormatId::RocmFp2, FormatId::RocmFp2, FormatId::RocmFp2));
    assert_eq!(f(4), FormatId::Q8_0);
}

#[test]
fn recipe_file_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mine.toml");
    std::fs::write(&p, "[[rule]]\nmatch = 'blk.*'\nformat = 'q8_0'\n").unwrap();
    let r = Recipe::from_name_or_file(p.to_str().unwrap()).unwrap();
    assert_eq!(r.name, "mine");
    assert_eq!(r.plan("blk.0.attn_q.weight", &[64, 64]).unwrap().format, FormatId::Q8_0);
    std::fs::write(&p, "[[rule]]\nmatch = 'blk.*'\nformat = 'q8_0'\nextra = 1\n").unwrap();
    let e = Recipe::from_name_or_file(p.to_str().unwrap()).unwrap_err().to_string();
    assert!(e.contains("mine.toml") && e.contains("extra"), "{e}");
    let e = Recipe::from_name_or_file("/nonexistent/r.toml").unwrap_err().to_string();
    assert!(e.contains("fpx-ifp2") && e.contains("/nonexistent/r.toml"), "{e}");
}

//! The synthetic llama: deterministic, llama-shaped (names, dims, metadata), with the weight
//! statistics its documentation promises (scale ~ 1/sqrt(fan_in), outlier columns, norms ~ 1).

use lowbit_runtime::quant::synthetic::{synthetic_llama, LlamaShape, DEFAULT_SEED};
use lowbit_runtime::quant::MetaValue;

#[test]
fn deterministic_and_seed_dependent() {
    let s = LlamaShape::default();
    let a = synthetic_llama(&s, DEFAULT_SEED).unwrap();
    let b = synthetic_llama(&s, DEFAULT_SEED).unwrap();
    assert_eq!(a, b);
    let c = synthetic_llama(&s, DEFAULT_SEED + 1).unwrap();
    assert_ne!(a.tensors[1].data, c.tensors[1].data);
    // A tensor's values do not depend on the model's other tensors: one more layer leaves
    // the first layer's tensors alone.
    let d = synthetic_llama(&LlamaShape { layers: 3, ..s }, DEFAULT_SEED).unwrap();
    assert_eq!(a.tensors[1], d.tensors[1]);
}

#[test]
fn llama_metadata_keys() {
    let s = LlamaShape::default();
    let m = synthetic_llama(&s, 1).unwrap();
    let get = |k: &str| {
        m.metadata
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(get("general.architecture"), MetaValue::String("llama".into()));
    assert_eq!(get("llama.block_count"), MetaValue::U32(2));
    assert_eq!(get("llama.embedding_length"), MetaValue::U32(256));
    assert_eq!(get("llama.feed_forward_length"), MetaValue::U32(704));
    assert_eq!(get("llama.attention.head_count"), MetaValue::U32(4));
    assert_eq!(get("llama.attention.head_count_kv"), MetaValue::U32(2));
    assert_eq!(get("llama.rope.dimension_count"), MetaValue::U32(64));
    assert!(matches!(get("llama.rope.freq_base"), MetaValue::F32(f) if f == 10000.0));
    assert!(matches!(get("llama.attention.layer_norm_rms_epsilon"), MetaValue::F32(_)));
    let MetaValue::StringArray(tokens) = get("tokenizer.ggml.tokens") else { panic!() };
    let MetaValue::F32Array(scores) = get("tokenizer.ggml.scores") else { panic!() };
    let MetaValue::I32Array(types) = get("tokenizer.ggml.token_type") else { panic!() };
    assert_eq!((tokens.len(), scores.len(), types.len()), (512, 512, 512));
    assert_eq!(&tokens[..3], ["<unk>", "<s>", "</s>"]);
    assert_eq!(tokens[3 + 0x41], "<0x41>");
    // Keys are unique.
    let mut keys: Vec<_> = m.metadata.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), m.metadata.len());
}

#[test]
fn weight_statistics() {
    let m = synthetic_llama(&LlamaShape::default(), 2).unwrap();
    let q = m.tensors.iter().find(|t| t.name == "blk.0.attn_q.weight").unwrap();
    let k = q.dims[0] as usize;
    // Median |w| of a Gaussian is 0.674 sigma; sigma ~ 1/sqrt(256) = 0.0625 (per-row factor
    // 0.5..1.5 averages 1): the median must be near 0.042 whatever the outliers do.
    let mut abs: Vec<f32> = q.data.iter().map(|x| x.abs()).collect();
    abs.sort_by(f32::total_cmp);
    let med = abs[abs.len() / 2];
    assert!((0.03..0.055).contains(&med), "median |w| {med}");
    // Outlier columns: some column's RMS is at least 5x the median column RMS.
    let mut col_rms: Vec<f64> = (0..k)
        .map(|c| {
            let s: f64 = q.data.iter().skip(c).step_by(k).map(|x| f64::from(*x).powi(2)).sum();
            (s / q.dims[1] as f64).sqrt()
        })
        .collect();
    col_rms.sort_by(f64::total_cmp);
    assert!(col_rms[k - 1] > 5.0 * col_rms[k / 2], "{} vs {}", col_rms[k - 1], col_rms[k / 2]);
    let norm = m.tensors.iter().find(|t| t.name == "output_norm.weight").unwrap();
    let mean = norm.data.iter().map(|x| f64::from(*x)).sum::<f64>() / norm.data.len() as f64;
    assert!((mean - 1.0).abs() < 0.02, "{mean}");
}

#[test]
fn smollm2_shape_tensor_list() {
    let s = LlamaShape::smollm2_135m();
    let t = s.tensor_shapes();
    assert_eq!(t.len(), 2 + 30 * 9 + 1);
    let find = |n: &str| t.iter().find(|(x, _)| x == n).unwrap().1.clone();
    assert_eq!(find("token_embd.weight"), vec![576, 49152]);
    assert_eq!(find("blk.29.attn_k.weight"), vec![576, 192]);
    assert_eq!(find("blk.29.ffn_down.weight"), vec![1536, 576]);
}

//! Per-tensor error measurement on encoded tensors: the streaming row-by-row comparison equals
//! an independent f64 computation over fully decoded tensors, does not depend on the thread
//! count, and reports bad inputs with the tensor's name.

use std::borrow::Cow;

use lowbit_core::{codec, EncodeOptions, FormatId};
use lowbit_runtime::quant::eval::{compare_encoded, EvalReport};
use lowbit_runtime::quant::pipeline::{quantize, SourceTensor};
use lowbit_runtime::quant::recipe::Recipe;
use lowbit_runtime::quant::synthetic::{synthetic_llama, LlamaShape};

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn streaming_comparison_matches_f64_reference() {
    let m = synthetic_llama(&LlamaShape::default(), 5).unwrap();
    let srcs: Vec<SourceTensor<'_>> = m
        .tensors
        .iter()
        .map(|t| SourceTensor {
            name: t.name.clone(),
            dims: t.dims.clone(),
            format: FormatId::F32,
            data: Cow::Owned(f32_bytes(&t.data)),
        })
        .collect();
    let mut outs = Vec::new();
    quantize(srcs, &Recipe::builtin("fpx-ifp2").unwrap(), None, |q, _| {
        outs.push(q);
        Ok(())
    })
    .unwrap();
    let mut report = EvalReport::default();
    for (t, q) in m.tensors.iter().zip(&outs) {
        let src = f32_bytes(&t.data);
        let e = compare_encoded(&t.name, &t.dims, FormatId::F32, &src, q.format, &q.data).unwrap();
        // Independent: decode the whole tensor, then plain f64 loops.
        let k = t.dims[0] as usize;
        let dec = codec::decode_to_vec(q.format, k, &q.data).unwrap();
        let (mut num, mut den, mut mx) = (0f64, 0f64, 0f64);
        for (a, b) in t.data.iter().zip(&dec) {
            let d = f64::from(*a) - f64::from(*b);
            num += d * d;
            den += f64::from(*a).powi(2);
            mx = mx.max(d.abs());
        }
        let want = (num / den).sqrt();
        assert!(
            (e.nrmse - want).abs() <= 1e-12 * want.max(1e-30),
            "{}: {} vs {want}",
            t.name,
            e.nrmse
        );
        assert_eq!(e.max_abs, mx, "{}", t.name);
        if q.format == FormatId::F32 {
            assert_eq!((e.nrmse, e.max_abs), (0.0, 0.0));
        } else {
            assert!(e.nrmse > 0.0 && e.nrmse < 1.0, "{}: {}", t.name, e.nrmse);
        }
        report.tensors.push(e);
    }
    let text = report.render();
    assert!(text.contains("blk.1.ffn_down.weight") && text.contains("ROCMFP3"), "{text}");
    assert!(report.weighted_nrmse() > 0.0 && report.pooled_nrmse() > 0.0);
}

#[test]
fn thread_count_does_not_change_sums() {
    let m = synthetic_llama(&LlamaShape::default(), 9).unwrap();
    let t = &m.tensors[0];
    let k = t.dims[0] as usize;
    let q = codec::encode_to_vec(FormatId::Q4_0, k, &t.data, &EncodeOptions::default()).unwrap();
    let src = f32_bytes(&t.data);
    let at = |n| {
        rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap().install(|| {
            compare_encoded(&t.name, &t.dims, FormatId::F32, &src, FormatId::Q4_0, &q).unwrap()
        })
    };
    let (a, b) = (at(1), at(4));
    assert_eq!(a.sum_sq_err.to_bits(), b.sum_sq_err.to_bits());
    assert_eq!(a, b);
}

#[test]
fn bad_inputs_name_the_tensor() {
    let src = f32_bytes(&[1.0; 64]);
    let e = compare_encoded("w", &[32, 2], FormatId::F32, &src, FormatId::Q8_0, &[0u8; 10]);
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("tensor w") && msg.contains("10 bytes"), "{msg}");
    // A NaN scale in the quantized tensor's second row (Q8_0: f16 scale first in the block).
    let mut q =
        codec::encode_to_vec(FormatId::Q8_0, 32, &[1.0; 64], &EncodeOptions::default()).unwrap();
    q[34..36].copy_from_slice(&0x7e00u16.to_le_bytes());
    let msg = compare_encoded("w", &[32, 2], FormatId::F32, &src, FormatId::Q8_0, &q)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("tensor w") && msg.contains("row 1"), "{msg}");
}

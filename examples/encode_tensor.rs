//! Encoding a tensor in a few lines with the `lowbit` facade: quantize a weight matrix row by
//! row, decode it back, measure the error, and take a reference dot product.
//!
//! `cargo run --release --example encode_tensor -- [FORMAT]` (default Q4_0; try ROCMFP2,
//! HFP4G32, TQ2_0, ... from `lowbit formats`).

use lowbit::{codec, EncodeOptions, FormatId, Rule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "Q4_0".into());
    let format = FormatId::from_name(&name).ok_or(format!("unknown format {name}"))?;

    // A 16 x 1024 weight matrix (row-major) and an activation vector.
    let (rows, k) = (16, 1024);
    let w: Vec<f32> =
        (0..rows * k).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.02).collect();
    let x: Vec<f32> = (0..k).map(|i| (i as f32 * 0.01).cos()).collect();

    // Encode every row (the reference rule; Rule::Improved where the format offers one).
    let opts = EncodeOptions { rule: Rule::Reference, importance: None };
    let bytes = codec::encode_to_vec(format, k, &w, &opts)?;
    let back = codec::decode_to_vec(format, k, &bytes)?;

    let err: f32 = w.iter().zip(&back).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
    let norm: f32 = w.iter().map(|a| a * a).sum::<f32>().sqrt();
    println!(
        "{format}: {} bytes for {} weights ({:.3} bits per weight), NRMSE {:.4}",
        bytes.len(),
        w.len(),
        format.bits_per_weight(k)?,
        err / norm
    );

    // The reference dot product of row 0 with x (activations prepared as the format wants).
    let row_bytes = format.row_bytes(k)?;
    let y = codec::dot_row_f32(format, &bytes[..row_bytes], &x)?;
    let exact: f32 = w[..k].iter().zip(&x).map(|(a, b)| a * b).sum();
    println!("row 0 . x = {y:.5} (unquantized {exact:.5})");
    Ok(())
}

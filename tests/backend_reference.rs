//! The reference backend: uploads validate every row, and `matmul` equals one reference dot
//! product per output, computed independently here through an f64 sum of decoded values.

use lowbit::backend::{Backend, MatrixDesc, ReferenceBackend};
use lowbit::{codec, EncodeOptions, Error, FormatId};

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 2.0
        })
        .collect()
}

#[test]
fn matmul_matches_decoded_f64_products_within_bound() {
    let rb = ReferenceBackend;
    for format in
        [FormatId::Q8_0, FormatId::Q4_0, FormatId::RocmFp2, FormatId::Tq2_0, FormatId::F16]
    {
        let (rows, cols, n) = (5, 512, 3);
        let w = data(rows * cols, 7);
        let bytes = codec::encode_to_vec(format, cols, &w, &EncodeOptions::default()).unwrap();
        let m = rb.upload(MatrixDesc { format, rows, cols }, &bytes).unwrap();
        let x = data(n * cols, 11);
        let mut y = vec![0f32; n * rows];
        rb.matmul(&m, &x, n, &mut y).unwrap();
        let wd = codec::decode_to_vec(format, cols, &bytes).unwrap();
        for j in 0..n {
            for r in 0..rows {
                let (mut exact, mut mag) = (0f64, 0f64);
                for k in 0..cols {
                    let t = wd[r * cols + k] as f64 * x[j * cols + k] as f64;
                    exact += t;
                    mag += t.abs();
                }
                // Activation quantization (8-bit) dominates: allow 1% of the magnitude.
                let got = y[j * rows + r] as f64;
                assert!(
                    (got - exact).abs() <= 0.01 * mag + 1e-6,
                    "{format} r{r} c{j}: {got} vs {exact}"
                );
            }
        }
    }
}

#[test]
fn upload_rejects_bad_length_and_bad_blocks() {
    let rb = ReferenceBackend;
    let desc = MatrixDesc { format: FormatId::RocmFp2, rows: 2, cols: 32 };
    assert!(matches!(rb.upload(desc, &[0u8; 19]), Err(Error::Length { .. })));
    let mut bytes = [0u8; 20];
    bytes[10 + 9] = 0x7F; // row 1, scale e[1]
    match rb.upload(desc, &bytes) {
        Err(Error::IllegalByte { offset, byte: 0x7F, .. }) => assert_eq!(offset, 19),
        other => panic!("{other:?}"),
    }
    assert!(rb.supports(FormatId::Q4K));
}

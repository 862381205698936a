//! The bodies of lowbit's fuzz targets, as plain functions so that they also run (and are
//! tested) on stable Rust without libFuzzer: `cargo test --manifest-path fuzz/Cargo.toml`
//! feeds them a fixed set of inputs; `cargo +nightly fuzz run decode` feeds them libFuzzer's.
//!
//! `decode` and `encode_decode` cover every format in `FormatId::ALL` (the first input byte
//! picks the format); `gguf_read` feeds whole files to the GGUF reader.

use lowbit_core::{codec, EncodeOptions, Error, FormatId, Rule};

/// Picks a format and a row length from the first three bytes: byte 0 indexes
/// `FormatId::ALL` (modulo its length), bytes 1..3 (little-endian u16, modulo 64, plus 1) give
/// the number of row multiples in the row.
fn pick(data: &[u8]) -> Option<(FormatId, usize, &[u8])> {
    let (&[f, a, b], rest) = data.split_first_chunk::<3>()?;
    let format = FormatId::ALL[usize::from(f) % FormatId::ALL.len()];
    let m = usize::from(u16::from_le_bytes([a, b]) % 64) + 1;
    Some((format, m * format.geometry().row_multiple, rest))
}

/// Checks the invariants every error must keep: it names the format, and byte offsets point
/// inside the buffer.
fn check_error(format: FormatId, e: &Error, len: usize) {
    let text = e.to_string();
    assert!(text.contains(format.name()), "{format}: error does not name the format: {text}");
    if let Error::IllegalByte { offset, .. }
    | Error::NonFiniteScale { offset, .. }
    | Error::NotRepresentable { offset, .. } = *e
    {
        assert!(offset < len, "{format}: offset {offset} outside {len} bytes: {text}");
    }
}

/// Target `decode`: decodes the rest of the input as rows of the picked format and row length
/// (as many whole rows as fit; a trailing partial row must be a length error). Never panics;
/// an `Ok` result has exactly rows * k values; errors are well-formed.
pub fn decode(data: &[u8]) {
    let Some((format, k, bytes)) = pick(data) else { return };
    let Ok(rb) = format.row_bytes(k) else { panic!("{format}: k = {k} should be valid") };
    let whole = bytes.len() / rb * rb;
    if whole > 0 {
        match codec::decode_to_vec(format, k, &bytes[..whole]) {
            Ok(v) => assert_eq!(v.len(), whole / rb * k, "{format}: wrong number of values"),
            Err(e) => check_error(format, &e, whole),
        }
    }
    if bytes.len() != whole {
        match codec::decode_to_vec(format, k, bytes) {
            Err(Error::Length { .. }) => {}
            other => panic!("{format}: a partial row gave {other:?}"),
        }
    }
}

/// Target `encode_decode`: byte 3 picks the rule (and whether to pass importance weights),
/// the rest is read as little-endian f32 values (NaN and infinities included, which must be
/// rejected) and truncated to whole rows; encodes, then decodes what was encoded. Never
/// panics; an encoder's output always decodes.
pub fn encode_decode(data: &[u8]) {
    let Some((format, k, rest)) = pick(data) else { return };
    let Some((&opt, rest)) = rest.split_first() else { return };
    let rule = match opt % 3 {
        0 => Rule::Reference,
        1 => Rule::Exhaustive,
        _ => Rule::Improved,
    };
    let x: Vec<f32> =
        rest.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let rows = x.len() / k;
    if rows == 0 {
        return;
    }
    let x = &x[..rows * k];
    // Importance weights: |x| of the first row, when asked for.
    let w: Vec<f32> = x[..k].iter().map(|v| v.abs()).collect();
    let opts = EncodeOptions { rule, importance: (opt & 4 != 0).then_some(&w[..]) };
    match codec::encode_to_vec(format, k, x, &opts) {
        Ok(bytes) => {
            assert_eq!(bytes.len(), rows * format.row_bytes(k).unwrap_or(0), "{format}");
            match codec::decode_to_vec(format, k, &bytes) {
                Ok(y) => assert_eq!(y.len(), x.len(), "{format}"),
                // A codec that is not in this build yet may refuse to decode.
                Err(Error::Unsupported { .. }) => {}
                Err(e) => panic!("{format} {rule:?}: encoder output does not decode: {e}"),
            }
        }
        Err(e) => {
            check_error(format, &e, 0);
            if let Error::BadInput { index, .. } = e {
                assert!(index < x.len(), "{format}: bad input index {index}");
            }
        }
    }
}

/// Target `gguf_read`: parses the input as a GGUF file (dialect from its metadata, then under
/// every stated dialect). Never panics; on success every tensor's data range lies inside the
/// input and has the size its dims and format give; every error that points at a byte offset
/// points inside the input (or at its end) and says so in its message.
pub fn gguf_read(data: &[u8]) {
    use lowbit_runtime::gguf;
    let stated = [None].into_iter().chain(lowbit_core::Dialect::ALL.map(Some));
    for dialect in stated {
        match gguf::parse(data, dialect) {
            Ok(h) => {
                for t in &h.tensors {
                    let end = t.data_offset() as usize + t.bytes();
                    assert!(end <= data.len(), "tensor '{}' ends at {end}", t.name);
                    assert_eq!(t.data_offset() % h.alignment, 0);
                    let want = gguf::tensor_bytes(t.format, &t.dims);
                    assert_eq!(want, Ok(t.bytes() as u64), "tensor '{}'", t.name);
                }
            }
            Err(e) => {
                let text = e.to_string();
                if let Some(off) = e.offset() {
                    assert!(off <= data.len() as u64, "offset {off} past the input: {text}");
                    assert!(text.contains(&off.to_string()), "{text}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GGUF corpus: the oracle fixtures (gguf-py wrote them), every truncation of the
    /// smallest, and byte flips of each.
    fn gguf_corpus() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
        let mut files: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        files.sort_by_key(Vec::len);
        assert!(files.len() >= 3, "fixtures missing in {}", dir.display());
        let mut out = files.clone();
        out.extend((0..files[0].len()).map(|n| files[0][..n].to_vec()));
        let mut s = 0x9E37_79B9u32;
        for f in &files {
            for _ in 0..300 {
                let mut v = f.clone();
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let i = s as usize % v.len();
                v[i] ^= (s >> 24) as u8 | 1;
                out.push(v);
            }
        }
        out
    }

    #[test]
    fn gguf_read_target_on_the_corpus() {
        for input in gguf_corpus() {
            gguf_read(&input);
        }
        gguf_read(&[]);
        gguf_read(b"GGUF");
    }

    /// A small deterministic corpus: every format, a few row lengths, assorted bytes.
    fn corpus() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut s = 0x9E37_79B9u32;
        for f in 0..FormatId::ALL.len() as u8 {
            for (m, len) in [(0u16, 40usize), (1, 700), (63, 3000), (2, 5000)] {
                for fill in 0..3u8 {
                    let mut v = vec![f, m as u8, (m >> 8) as u8, fill];
                    v.extend((0..len).map(|i| match fill {
                        0 => 0,
                        1 => 0xFF,
                        _ => {
                            s ^= s << 13;
                            s ^= s >> 17;
                            s ^= s << 5;
                            (s >> (i % 24)) as u8
                        }
                    }));
                    out.push(v);
                }
            }
        }
        out
    }

    #[test]
    fn decode_target_on_the_corpus() {
        for input in corpus() {
            decode(&input);
        }
        decode(&[]);
        decode(&[1]);
    }

    #[test]
    fn encode_decode_target_on_the_corpus() {
        for input in corpus() {
            encode_decode(&input);
        }
        // Finite values for F16, one row of 2: must encode and decode.
        let mut v = vec![1u8, 1, 0, 0];
        v.extend(1.5f32.to_le_bytes());
        v.extend((-2.0f32).to_le_bytes());
        encode_decode(&v);
    }
}

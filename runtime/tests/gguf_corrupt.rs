//! Hostile and broken GGUF bytes: every truncation of the oracle fixtures, absurd counts and
//! lengths, bad tensor geometry, overlapping and out-of-range offsets, random byte flips. All
//! must be errors that name what and where (key or tensor, byte offset), never panics.
//! Also the writer's failure paths: no partial output, no leftover temporary file, an existing
//! target left as it was.

use std::path::{Path, PathBuf};

use lowbit_core::{Dialect, FormatId};
use lowbit_runtime::gguf::{self, GgufError, GgufFile, GgufWriter, TensorSpec, Value};

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf").join(name);
    std::fs::read(p).unwrap()
}

fn err(bytes: &[u8]) -> GgufError {
    match gguf::parse(bytes, None) {
        Ok(_) => panic!("accepted bad bytes"),
        Err(e) => e,
    }
}

#[test]
fn every_truncation_is_an_error_within_the_file() {
    for name in ["quant_a64.gguf", "quant_a32.gguf", "meta_all.gguf"] {
        let bytes = fixture(name);
        let h = gguf::parse(&bytes, None).unwrap();
        // Past the end of the last tensor's data only padding is missing: still a valid file.
        let end = h.tensors.iter().map(|t| t.data_offset() as usize + t.bytes()).max().unwrap();
        for cut in 0..bytes.len() {
            match gguf::parse(&bytes[..cut], None) {
                Ok(_) => assert!(cut >= end, "{name}: cut at {cut} accepted"),
                Err(e) => {
                    assert!(cut < end, "{name}: cut at {cut} rejected: {e}");
                    let off = e.offset().unwrap_or_else(|| panic!("{name} cut {cut}: {e}"));
                    assert!(off <= cut as u64, "{name} cut {cut}: offset {off} beyond: {e}");
                    assert!(e.to_string().contains(&off.to_string()), "{e}");
                }
            }
        }
    }
}

#[test]
fn random_byte_flips_never_panic() {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let (mut ok, mut bad) = (0, 0);
    for name in ["quant_a64.gguf", "meta_all.gguf"] {
        let base = fixture(name);
        for _ in 0..3000 {
            let mut b = base.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % b.len() as u64) as usize;
                b[i] = next() as u8;
            }
            match gguf::parse(&b, None) {
                Ok(h) => {
                    ok += 1;
                    for t in &h.tensors {
                        assert!(t.data_offset() as usize + t.bytes() <= b.len());
                    }
                }
                Err(e) => {
                    bad += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    assert!(ok > 0 && bad > 0, "ok {ok}, bad {bad}");
}

/// A hand-built GGUF file.
#[derive(Default)]
struct Builder {
    kv: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
}

fn s(out: &mut Vec<u8>, x: &str) {
    out.extend((x.len() as u64).to_le_bytes());
    out.extend(x.as_bytes());
}

impl Builder {
    fn kv_raw(mut self, key: &str, type_code: u32, value: &[u8]) -> Self {
        s(&mut self.kv, key);
        self.kv.extend(type_code.to_le_bytes());
        self.kv.extend(value);
        self.n_kv += 1;
        self
    }

    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.kv_raw(key, 4, &v.to_le_bytes())
    }

    fn kv_str(self, key: &str, v: &str) -> Self {
        let mut b = Vec::new();
        s(&mut b, v);
        self.kv_raw(key, 8, &b)
    }

    fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Self {
        s(&mut self.infos, name);
        self.infos.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(type_id.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    /// Header, metadata, infos, padding to 32, then `data` bytes.
    fn build(&self, data: usize) -> Vec<u8> {
        self.build_counts(self.n_tensors, self.n_kv, data)
    }

    fn build_counts(&self, n_tensors: u64, n_kv: u64, data: usize) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(n_tensors.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b.extend(&self.kv);
        b.extend(&self.infos);
        while b.len() % 32 != 0 {
            b.push(0);
        }
        b.extend(vec![0u8; data]);
        b
    }
}

/// The error text for `bytes`, which must mention every one of `words`.
fn rejects(bytes: &[u8], words: &[&str]) {
    let e = err(bytes).to_string();
    for w in words {
        assert!(e.contains(w), "expected {w:?} in: {e}");
    }
}

#[test]
fn a_valid_hand_built_file_is_accepted() {
    let b = Builder::default()
        .kv_str("general.name", "x")
        .tensor("a", &[32, 2], 2, 0)
        .tensor("b", &[8], 0, 64)
        .build(96);
    let h = gguf::parse(&b, None).unwrap();
    assert_eq!(h.tensors[0].format, FormatId::Q4_0);
    assert_eq!(h.tensors[0].bytes(), 36);
    assert_eq!(h.tensors[1].bytes(), 32);
}

#[test]
fn header_errors() {
    rejects(b"GGU", &["header", "magic"]);
    rejects(b"GGML\x03\0\0\0", &["not a GGUF file"]);
    let mut v1 = Builder::default().build(0);
    v1[4] = 1;
    rejects(&v1, &["version 1"]);
    let mut be = Builder::default().build(0);
    be[4..8].copy_from_slice(&3u32.to_be_bytes());
    rejects(&be, &["big-endian"]);
    let mut v9 = Builder::default().build(0);
    v9[4] = 9;
    rejects(&v9, &["version 9"]);
    // Version 2 has the same layout and is read.
    let mut v2 = Builder::default().kv_u32("k", 1).build(0);
    v2[4] = 2;
    assert_eq!(gguf::parse(&v2, None).unwrap().version, 2);
}

#[test]
fn absurd_counts_and_lengths() {
    let b = Builder::default();
    rejects(&b.build_counts(u64::MAX, 0, 0), &["tensor count", "byte offset 24"]);
    rejects(&b.build_counts(0, u64::MAX, 0), &["metadata count", "byte offset 16"]);
    rejects(&b.build_counts(0, 1 << 40, 0), &["metadata count"]);
    // A key length of 2^64 - 1.
    let mut k = Builder::default().kv_u32("key", 1).build(0);
    k[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    rejects(&k, &["name of metadata entry #0", "byte offset 24"]);
    // A string value longer than the file.
    let mut v = Vec::new();
    v.extend((1u64 << 62).to_le_bytes());
    rejects(&Builder::default().kv_raw("s", 8, &v).build(0), &["metadata key 's'", "string"]);
    // An array of 2^61 u64s.
    let mut a = 10u32.to_le_bytes().to_vec();
    a.extend((1u64 << 61).to_le_bytes());
    rejects(&Builder::default().kv_raw("arr", 9, &a).build(0), &["'arr'", "cannot fit"]);
    // 200 levels of nested arrays.
    let mut n = Vec::new();
    for _ in 0..200 {
        n.extend(9u32.to_le_bytes());
        n.extend(1u64.to_le_bytes());
    }
    rejects(&Builder::default().kv_raw("deep", 9, &n).build(0), &["'deep'", "nested"]);
    // Unknown value and element types; a bool that is not 0 or 1; invalid UTF-8.
    rejects(&Builder::default().kv_raw("t", 13, &[0]).build(0), &["'t'", "unknown value type 13"]);
    let mut e = 77u32.to_le_bytes().to_vec();
    e.extend(0u64.to_le_bytes());
    rejects(&Builder::default().kv_raw("e", 9, &e).build(0), &["'e'", "element type 77"]);
    rejects(&Builder::default().kv_raw("b", 7, &[2]).build(0), &["'b'", "bool"]);
    let mut bad = Vec::new();
    s(&mut bad, "ok");
    let mut f = Builder::default().kv_raw("u", 8, &bad).build(0);
    let i = f.len() - 1 - f.iter().rev().position(|&c| c == b'k').unwrap();
    f[i] = 0xFF;
    rejects(&f, &["'u'", "UTF-8", &format!("byte offset {i}")]);
    // Duplicate keys.
    rejects(&Builder::default().kv_u32("d", 1).kv_u32("d", 2).build(0), &["'d'", "duplicate"]);
}

#[test]
fn alignment_key_must_be_a_u32_power_of_two() {
    rejects(&Builder::default().kv_u32("general.alignment", 48).build(0), &["general.alignment"]);
    rejects(&Builder::default().kv_u32("general.alignment", 0).build(0), &["power of two"]);
    let b = Builder::default().kv_raw("general.alignment", 10, &64u64.to_le_bytes()).build(0);
    rejects(&b, &["general.alignment", "UINT32"]);
}

#[test]
fn bad_tensor_infos() {
    let t = |dims: &[u64], id: u32, off: u64| Builder::default().tensor("w", dims, id, off);
    rejects(&t(&[1, 1, 1, 1, 1], 0, 0).build(64), &["tensor 'w'", "5 dimensions"]);
    rejects(&t(&[4, 0], 0, 0).build(64), &["tensor 'w'", "dimension 1 is 0"]);
    rejects(&t(&[1 << 40, 1 << 40], 0, 0).build(64), &["tensor 'w'", "overflows"]);
    rejects(&t(&[u64::MAX], 0, 0).build(64), &["tensor 'w'"]);
    rejects(&t(&[33], 2, 0).build(64), &["tensor 'w'", "Q4_0"]);
    rejects(&t(&[8], 0, 16).build(64), &["tensor 'w'", "multiple of the alignment"]);
    rejects(&t(&[8], 0, 64).build(64), &["tensor 'w'", "past the end"]);
    rejects(&t(&[8], 0, u64::MAX - 31).build(64), &["tensor 'w'", "past the end"]);
    rejects(&t(&[8], 0, 0).build(31), &["tensor 'w'", "past the end"]);
    rejects(&t(&[8], 9999, 0).build(64), &["tensor 'w'", "type id 9999"]);
    // A fork's id under the default (ggml) dialect: an error that says what it would be.
    rejects(&t(&[32], 107, 0).build(64), &["tensor 'w'", "107", "rocmfpx", "ROCMFP2"]);
    assert!(gguf::parse(&t(&[32], 107, 0).build(64), Some(Dialect::RocmFpx)).is_ok());
    // Duplicate names and overlapping data.
    let dup = Builder::default().tensor("w", &[8], 0, 0).tensor("w", &[8], 0, 32).build(64);
    rejects(&dup, &["tensor 'w'", "duplicate"]);
    let overlap = Builder::default().tensor("a", &[16], 0, 0).tensor("b", &[8], 0, 32).build(96);
    rejects(&overlap, &["tensor 'b'", "overlaps tensor 'a'"]);
    let same = Builder::default().tensor("a", &[8], 0, 0).tensor("b", &[8], 0, 0).build(64);
    rejects(&same, &["overlaps"]);
    // Evidence that contradicts the ids: lowbit.formats lists Q8_0 but the tensor is Q4_0.
    let mut list = 8u32.to_le_bytes().to_vec();
    list.extend(1u64.to_le_bytes());
    s(&mut list, "Q8_0");
    let lie = Builder::default().kv_raw("lowbit.formats", 9, &list).tensor("w", &[32], 2, 0);
    rejects(&lie.build(64), &["tensor 'w'", "Q4_0", "lowbit.formats"]);
    // An unknown lowbit.dialect.
    let unk = Builder::default().kv_str("lowbit.dialect", "ik_llama");
    rejects(&unk.build(0), &["ik_llama"]);
}

#[test]
fn fork_metadata_selects_the_dialect() {
    // Prism's ftype makes 142 PQ2_0; ROCmFPX's makes 107 ROCMFP2 (row of 128: fits both).
    let p = Builder::default().kv_u32("general.file_type", 141).tensor("w", &[128], 142, 0);
    let h = gguf::parse(&p.build(64), None).unwrap();
    assert_eq!((h.tensors[0].format, h.dialect.single()), (FormatId::Pq2_0, Some(Dialect::Prism)));
    let r = Builder::default().kv_u32("general.file_type", 119).tensor("w", &[128], 107, 0);
    let h = gguf::parse(&r.build(64), None).unwrap();
    assert_eq!(h.tensors[0].format, FormatId::RocmFp2);
    // A stated dialect overrides the metadata.
    let e = gguf::parse(&p.build(64), Some(Dialect::RocmFpx)).unwrap_err().to_string();
    assert!(e.contains("142") && e.contains("PQ2_0"), "{e}");
}

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("lowbit-tmp"))
        .collect()
}

#[test]
fn writer_failures_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.gguf");
    std::fs::write(&target, b"previous contents").unwrap();
    let specs =
        [TensorSpec::new("a", &[32, 2], FormatId::Q8_0), TensorSpec::new("b", &[4], FormatId::F32)];
    let mut w = GgufWriter::create(&target, Dialect::Ggml, &[], &specs).unwrap();
    assert_eq!(temp_files(dir.path()).len(), 1);
    let e = w.write_tensor("b", &[0; 16]).unwrap_err().to_string();
    assert!(e.contains("out of order") && e.contains("'a'"), "{e}");
    let e = w.write_tensor("a", &[0; 67]).unwrap_err().to_string();
    assert!(e.contains("67") && e.contains("68"), "{e}");
    w.write_tensor("a", &[0; 68]).unwrap();
    let e = w.finish().unwrap_err().to_string();
    assert!(e.contains("'b' is missing"), "{e}");
    assert!(temp_files(dir.path()).is_empty());
    assert_eq!(std::fs::read(&target).unwrap(), b"previous contents");

    // Dropped without finish: the same.
    let w = GgufWriter::create(&target, Dialect::Ggml, &[], &specs).unwrap();
    drop(w);
    assert!(temp_files(dir.path()).is_empty());
    assert_eq!(std::fs::read(&target).unwrap(), b"previous contents");

    // Finished: replaced atomically, nothing else left.
    let mut w = GgufWriter::create(&target, Dialect::Ggml, &[], &specs).unwrap();
    w.write_tensor("a", &[1; 68]).unwrap();
    w.write_tensor("b", &[2; 16]).unwrap();
    assert!(w.write_tensor("c", &[]).is_err());
    w.finish().unwrap();
    assert!(temp_files(dir.path()).is_empty());
    let g = GgufFile::open(&target, None).unwrap();
    assert_eq!(g.tensor_data(g.tensor("b").unwrap()), &[2; 16]);
}

#[test]
fn writer_rejects_what_it_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.gguf");
    let one = |f, dims: &[u64], d| {
        GgufWriter::create(&p, d, &[], &[TensorSpec::new("w", dims, f)]).unwrap_err().to_string()
    };
    let e = one(FormatId::RocmFp2, &[32], Dialect::Ggml);
    assert!(e.contains("ROCMFP2") && e.contains("rocmfpx"), "{e}");
    let e = one(FormatId::Iq3S, &[256], Dialect::Hipfire);
    assert!(e.contains("IQ3_S") && e.contains("hipfire"), "{e}");
    assert!(one(FormatId::Q4_0, &[33], Dialect::Ggml).contains("'w'"));
    assert!(one(FormatId::Q4_0, &[32, 0], Dialect::Ggml).contains("dims"));
    assert!(one(FormatId::F32, &[], Dialect::Ggml).contains("dims"));
    let two =
        [TensorSpec::new("w", &[4], FormatId::F32), TensorSpec::new("w", &[4], FormatId::F32)];
    assert!(GgufWriter::create(&p, Dialect::Ggml, &[], &two).is_err());
    let meta = vec![("general.alignment".to_string(), Value::U32(24))];
    assert!(GgufWriter::create(&p, Dialect::Ggml, &meta, &[]).is_err());
    let mixed = vec![(
        "m".to_string(),
        Value::Array(gguf::Array { elem: gguf::ValueType::U8, items: vec![Value::U16(1)] }),
    )];
    assert!(GgufWriter::create(&p, Dialect::Ggml, &mixed, &[])
        .unwrap_err()
        .to_string()
        .contains("'m'"));
    assert!(temp_files(dir.path()).is_empty() && !p.exists());
}

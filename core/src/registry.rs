//! The format registry: every format lowbit knows, with its name, block geometry, bits per
//! weight, activation format, encoders, and its type id in each dialect.
//!
//! Type ids are the only integers that name formats, and they exist only at file boundaries:
//! inside lowbit a format is always a [`FormatId`]. Every lookup here is an exhaustive `match`,
//! so adding a format fails to compile until every table has a row for it.
//!
//! Sources of the ids (see also `FORMATS.md`):
//! * ggml: `ggml/include/ggml.h` `enum ggml_type` (gguf-py `GGMLQuantizationType` agrees).
//! * ROCmFPX: github ciru-ai/ROCmFPX `ggml/include/ggml.h` (Q3_0_ROCMFPX = 104,
//!   Q2_0_ROCMFPX = 107) on top of ggml's own ids.
//! * Prism: github PrismML-Eng/llama.cpp branch `prism` (PQ2_0 = 142, PTQ1_0 = 143) on top of
//!   ggml's own ids.
//! * hipfire: github warpfront/hipfire `crates/hipfire-quantize` quant-type ids (HFP4G32 = 21,
//!   MFP4G32 = 24, MFP4G32P = 33); hipfire's `.hfq` container, not GGUF.

use core::fmt;

use crate::error::{Error, Result};

/// Every weight and activation format lowbit implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FormatId {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    Bf16,
    /// ggml Q4_0: 32 × 4-bit, one f16 scale.
    Q4_0,
    /// ggml Q4_1: 32 × 4-bit, f16 scale and minimum.
    Q4_1,
    /// ggml Q5_0: 32 × 5-bit, one f16 scale.
    Q5_0,
    /// ggml Q5_1: 32 × 5-bit, f16 scale and minimum.
    Q5_1,
    /// ggml Q8_0: 32 × int8, one f16 scale.
    Q8_0,
    /// ggml Q8_1: 32 × int8, f16 scale and f16 `d * sum(q)` (an activation format).
    Q8_1,
    /// ggml Q2_K super-block (256).
    Q2K,
    /// ggml Q3_K super-block (256).
    Q3K,
    /// ggml Q4_K super-block (256).
    Q4K,
    /// ggml Q5_K super-block (256).
    Q5K,
    /// ggml Q6_K super-block (256).
    Q6K,
    /// ggml Q8_K: 256 × int8, f32 scale, 16 partial sums (an activation format).
    Q8K,
    /// ggml IQ2_XXS (256, grid codebook).
    Iq2Xxs,
    /// ggml IQ2_XS (256, grid codebook).
    Iq2Xs,
    /// ggml IQ3_XXS (256, grid codebook).
    Iq3Xxs,
    /// ggml IQ1_S (256, grid codebook).
    Iq1S,
    /// ggml IQ4_NL (32, non-linear 16-entry codebook).
    Iq4Nl,
    /// ggml IQ3_S (256, grid codebook).
    Iq3S,
    /// ggml IQ2_S (256, grid codebook).
    Iq2S,
    /// ggml IQ4_XS (256, non-linear codebook, 6-bit sub-scales).
    Iq4Xs,
    /// ggml IQ1_M (256, grid codebook).
    Iq1M,
    /// ggml TQ1_0: ternary, five trits per byte.
    Tq1_0,
    /// ggml TQ2_0: ternary, 2 bits per trit.
    Tq2_0,
    /// ggml MXFP4: OCP MX E2M1 with a UE8M0 scale per 32.
    Mxfp4,
    /// ggml NVFP4: E2M1 with a UE4M3 scale per 16, 64 per block.
    Nvfp4,
    /// ROCmFPX ROCmFP2 ("FPX-IFP2"): 2.5-bit codebook {-4,-1,+1,+4}, two UE4M3-b8 scales.
    RocmFp2,
    /// ROCmFPX ROCmFP3: 3.5-bit codebook {0,±1,±2,±4}, two UE4M3-b8 scales.
    RocmFp3,
    /// hipfire HFP4G32: E2M1 + UE8M0 per 32 + f16 row scale in a 16-byte row header.
    Hfp4G32,
    /// hipfire MFP4G32: HFP4G32 on rows rotated by the seeded FWHT-256.
    Mfp4G32,
    /// hipfire MFP4G32P: MFP4G32 with an OCP E4M3 block scale instead of UE8M0.
    Mfp4G32P,
    /// Prism PQ2_0: ternary, 2 bits per trit, f16 scale per 128.
    Pq2_0,
    /// Prism PTQ1_0: ternary, base-3 packed, f16 scale per 128.
    Ptq1_0,
    /// 1bit packed ternary: 68 bytes per 256 (two u16 scales, 2-bit codes), repacked from Q4_0.
    Ternary68,
}

/// Which project a format comes from; decides the module that implements it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Plain floats (F32, F16, BF16).
    Float,
    /// ggml / llama.cpp types.
    Ggml,
    /// ROCmFPX (ROCmFP2, ROCmFP3).
    RocmFpx,
    /// hipfire (HFP4/MFP4).
    Hipfire,
    /// PrismML (PQ2_0, PTQ1_0).
    Prism,
    /// 1bit-MONSTER's packed ternary repack.
    Onebit,
}

/// A numbering of type ids: the same integer means different formats in different forks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Upstream ggml / GGUF.
    Ggml,
    /// The ROCmFPX fork: ggml's ids plus 100..=107.
    RocmFpx,
    /// The PrismML fork: ggml's ids plus 142, 143.
    Prism,
    /// hipfire's own quant-type ids (its `.hfq` container).
    Hipfire,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: [Dialect; 4] =
        [Dialect::Ggml, Dialect::RocmFpx, Dialect::Prism, Dialect::Hipfire];

    /// Lower-case name used on the command line and in metadata.
    pub const fn name(self) -> &'static str {
        match self {
            Dialect::Ggml => "ggml",
            Dialect::RocmFpx => "rocmfpx",
            Dialect::Prism => "prism",
            Dialect::Hipfire => "hipfire",
        }
    }
}

/// The activation format a weight format's dot product consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// Plain `f32` activations.
    F32,
    /// Activations quantized to Q8_0 blocks.
    Q8_0,
    /// Activations quantized to Q8_1 blocks.
    Q8_1,
    /// Activations quantized to Q8_K blocks.
    Q8K,
}

/// A rotation the activations must go through before a dot product with the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rotation {
    /// None.
    None,
    /// hipfire's seeded FWHT-256 ([`crate::rotate::fwht256`]) on every 256-element segment.
    Fwht256,
}

/// Storage geometry of a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Elements per block.
    pub block_elems: usize,
    /// Bytes per block.
    pub block_bytes: usize,
    /// Bytes of per-row header before the first block (hipfire: 16; everything else: 0).
    pub row_header_bytes: usize,
    /// A row length K must be a positive multiple of this.
    pub row_multiple: usize,
}

/// Which encoders a format offers (see [`crate::codec::Rule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Encoders {
    /// Byte-exact with the public rule.
    pub reference: bool,
    /// A separate exhaustive search that returns the same bytes as `reference`.
    pub exhaustive: bool,
    /// lowbit's lower-error encoder (same format, different choices).
    pub improved: bool,
    /// Some offered encoder takes importance weights.
    pub importance: bool,
}

/// Everything the registry knows about one format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FormatInfo {
    /// The format.
    pub id: FormatId,
    /// Canonical upper-case name (ggml's spelling for ggml types).
    pub name: &'static str,
    /// The family (and module) that implements it.
    pub family: Family,
    /// Storage geometry.
    pub geometry: Geometry,
    /// What the reference dot product consumes.
    pub activation: ActFormat,
    /// What must be applied to activations first.
    pub rotation: Rotation,
    /// Encoders offered.
    pub encoders: Encoders,
}

const fn geo(block_elems: usize, block_bytes: usize) -> Geometry {
    Geometry { block_elems, block_bytes, row_header_bytes: 0, row_multiple: block_elems }
}

const NONE: Encoders =
    Encoders { reference: false, exhaustive: false, improved: false, importance: false };
const REF: Encoders =
    Encoders { reference: true, exhaustive: false, improved: false, importance: false };
const REF_IMPROVED: Encoders =
    Encoders { reference: true, exhaustive: false, improved: true, importance: true };
const SEARCH: Encoders =
    Encoders { reference: true, exhaustive: true, improved: false, importance: true };

const fn info(
    id: FormatId,
    name: &'static str,
    family: Family,
    geometry: Geometry,
    activation: ActFormat,
    encoders: Encoders,
) -> FormatInfo {
    FormatInfo { id, name, family, geometry, activation, rotation: Rotation::None, encoders }
}

impl FormatId {
    /// Every format, in registry order.
    pub const ALL: [FormatId; 36] = [
        FormatId::F32,
        FormatId::F16,
        FormatId::Bf16,
        FormatId::Q4_0,
        FormatId::Q4_1,
        FormatId::Q5_0,
        FormatId::Q5_1,
        FormatId::Q8_0,
        FormatId::Q8_1,
        FormatId::Q2K,
        FormatId::Q3K,
        FormatId::Q4K,
        FormatId::Q5K,
        FormatId::Q6K,
        FormatId::Q8K,
        FormatId::Iq2Xxs,
        FormatId::Iq2Xs,
        FormatId::Iq3Xxs,
        FormatId::Iq1S,
        FormatId::Iq4Nl,
        FormatId::Iq3S,
        FormatId::Iq2S,
        FormatId::Iq4Xs,
        FormatId::Iq1M,
        FormatId::Tq1_0,
        FormatId::Tq2_0,
        FormatId::Mxfp4,
        FormatId::Nvfp4,
        FormatId::RocmFp2,
        FormatId::RocmFp3,
        FormatId::Hfp4G32,
        FormatId::Mfp4G32,
        FormatId::Mfp4G32P,
        FormatId::Pq2_0,
        FormatId::Ptq1_0,
        FormatId::Ternary68,
    ];

    /// The registry entry.
    pub const fn info(self) -> FormatInfo {
        use ActFormat as A;
        use Family as F;
        use FormatId as Id;
        match self {
            Id::F32 => info(self, "F32", F::Float, geo(1, 4), A::F32, REF),
            Id::F16 => info(self, "F16", F::Float, geo(1, 2), A::F32, REF),
            Id::Bf16 => info(self, "BF16", F::Float, geo(1, 2), A::F32, REF),
            Id::Q4_0 => info(self, "Q4_0", F::Ggml, geo(32, 18), A::Q8_0, REF),
            Id::Q4_1 => info(self, "Q4_1", F::Ggml, geo(32, 20), A::Q8_1, REF),
            Id::Q5_0 => info(self, "Q5_0", F::Ggml, geo(32, 22), A::Q8_0, REF),
            Id::Q5_1 => info(self, "Q5_1", F::Ggml, geo(32, 24), A::Q8_1, REF),
            Id::Q8_0 => info(self, "Q8_0", F::Ggml, geo(32, 34), A::Q8_0, REF),
            Id::Q8_1 => info(self, "Q8_1", F::Ggml, geo(32, 36), A::Q8_1, REF),
            Id::Q2K => info(self, "Q2_K", F::Ggml, geo(256, 84), A::Q8K, NONE),
            Id::Q3K => info(self, "Q3_K", F::Ggml, geo(256, 110), A::Q8K, NONE),
            Id::Q4K => info(self, "Q4_K", F::Ggml, geo(256, 144), A::Q8K, NONE),
            Id::Q5K => info(self, "Q5_K", F::Ggml, geo(256, 176), A::Q8K, NONE),
            Id::Q6K => info(self, "Q6_K", F::Ggml, geo(256, 210), A::Q8K, NONE),
            Id::Q8K => info(self, "Q8_K", F::Ggml, geo(256, 292), A::Q8K, REF),
            Id::Iq2Xxs => info(self, "IQ2_XXS", F::Ggml, geo(256, 66), A::Q8K, NONE),
            Id::Iq2Xs => info(self, "IQ2_XS", F::Ggml, geo(256, 74), A::Q8K, NONE),
            Id::Iq3Xxs => info(self, "IQ3_XXS", F::Ggml, geo(256, 98), A::Q8K, NONE),
            Id::Iq1S => info(self, "IQ1_S", F::Ggml, geo(256, 50), A::Q8K, NONE),
            Id::Iq4Nl => info(self, "IQ4_NL", F::Ggml, geo(32, 18), A::Q8_0, NONE),
            Id::Iq3S => info(self, "IQ3_S", F::Ggml, geo(256, 110), A::Q8K, NONE),
            Id::Iq2S => info(self, "IQ2_S", F::Ggml, geo(256, 82), A::Q8K, NONE),
            Id::Iq4Xs => info(self, "IQ4_XS", F::Ggml, geo(256, 136), A::Q8K, NONE),
            Id::Iq1M => info(self, "IQ1_M", F::Ggml, geo(256, 56), A::Q8K, NONE),
            Id::Tq1_0 => info(self, "TQ1_0", F::Ggml, geo(256, 54), A::Q8K, REF_IMPROVED),
            Id::Tq2_0 => info(self, "TQ2_0", F::Ggml, geo(256, 66), A::Q8K, REF_IMPROVED),
            Id::Mxfp4 => info(self, "MXFP4", F::Ggml, geo(32, 17), A::Q8_0, REF),
            Id::Nvfp4 => info(self, "NVFP4", F::Ggml, geo(64, 36), A::Q8_0, REF),
            Id::RocmFp2 => info(self, "ROCMFP2", F::RocmFpx, geo(32, 10), A::Q8_0, SEARCH),
            Id::RocmFp3 => info(self, "ROCMFP3", F::RocmFpx, geo(32, 14), A::Q8_0, SEARCH),
            Id::Hfp4G32 => FormatInfo {
                geometry: Geometry {
                    block_elems: 32,
                    block_bytes: 17,
                    row_header_bytes: 16,
                    row_multiple: 32,
                },
                ..info(self, "HFP4G32", F::Hipfire, geo(32, 17), A::F32, REF_IMPROVED)
            },
            Id::Mfp4G32 => FormatInfo {
                geometry: Geometry {
                    block_elems: 32,
                    block_bytes: 17,
                    row_header_bytes: 16,
                    row_multiple: 256,
                },
                rotation: Rotation::Fwht256,
                ..info(self, "MFP4G32", F::Hipfire, geo(32, 17), A::F32, REF_IMPROVED)
            },
            Id::Mfp4G32P => FormatInfo {
                geometry: Geometry {
                    block_elems: 32,
                    block_bytes: 17,
                    row_header_bytes: 16,
                    row_multiple: 256,
                },
                rotation: Rotation::Fwht256,
                ..info(self, "MFP4G32P", F::Hipfire, geo(32, 17), A::F32, REF)
            },
            Id::Pq2_0 => info(self, "PQ2_0", F::Prism, geo(128, 34), A::Q8_0, REF_IMPROVED),
            Id::Ptq1_0 => info(self, "PTQ1_0", F::Prism, geo(128, 28), A::Q8_0, REF_IMPROVED),
            Id::Ternary68 => info(self, "TERNARY68", F::Onebit, geo(256, 68), A::F32, NONE),
        }
    }

    /// Canonical name, e.g. `"Q4_0"`, `"ROCMFP2"`.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Storage geometry.
    pub const fn geometry(self) -> Geometry {
        self.info().geometry
    }

    /// The type id of this format in `dialect`, or `None` if the dialect has no id for it.
    pub const fn type_id(self, dialect: Dialect) -> Option<u32> {
        use FormatId as Id;
        let ggml = match self {
            Id::F32 => Some(0),
            Id::F16 => Some(1),
            Id::Q4_0 => Some(2),
            Id::Q4_1 => Some(3),
            Id::Q5_0 => Some(6),
            Id::Q5_1 => Some(7),
            Id::Q8_0 => Some(8),
            Id::Q8_1 => Some(9),
            Id::Q2K => Some(10),
            Id::Q3K => Some(11),
            Id::Q4K => Some(12),
            Id::Q5K => Some(13),
            Id::Q6K => Some(14),
            Id::Q8K => Some(15),
            Id::Iq2Xxs => Some(16),
            Id::Iq2Xs => Some(17),
            Id::Iq3Xxs => Some(18),
            Id::Iq1S => Some(19),
            Id::Iq4Nl => Some(20),
            Id::Iq3S => Some(21),
            Id::Iq2S => Some(22),
            Id::Iq4Xs => Some(23),
            Id::Iq1M => Some(29),
            Id::Bf16 => Some(30),
            Id::Tq1_0 => Some(34),
            Id::Tq2_0 => Some(35),
            Id::Mxfp4 => Some(39),
            Id::Nvfp4 => Some(40),
            Id::RocmFp2
            | Id::RocmFp3
            | Id::Hfp4G32
            | Id::Mfp4G32
            | Id::Mfp4G32P
            | Id::Pq2_0
            | Id::Ptq1_0
            | Id::Ternary68 => None,
        };
        match dialect {
            Dialect::Ggml => ggml,
            Dialect::RocmFpx => match self {
                Id::RocmFp3 => Some(104),
                Id::RocmFp2 => Some(107),
                _ => ggml,
            },
            Dialect::Prism => match self {
                Id::Pq2_0 => Some(142),
                Id::Ptq1_0 => Some(143),
                _ => ggml,
            },
            Dialect::Hipfire => match self {
                Id::Hfp4G32 => Some(21),
                Id::Mfp4G32 => Some(24),
                Id::Mfp4G32P => Some(33),
                _ => None,
            },
        }
    }

    /// The format that `id` names in `dialect`, if lowbit implements it.
    pub fn from_type_id(dialect: Dialect, id: u32) -> Option<FormatId> {
        FormatId::ALL.into_iter().find(|f| f.type_id(dialect) == Some(id))
    }

    /// Looks a format up by name, case-insensitively; accepts the canonical name and the
    /// aliases other projects use (`q2_0_rocmfpx`, `fp2`, `q2k`, ...).
    pub fn from_name(name: &str) -> Option<FormatId> {
        let canon = |s: &str, t: &str| {
            let mut a = s.bytes().filter(|b| *b != b'_' && *b != b'-');
            let mut b = t.bytes().filter(|b| *b != b'_' && *b != b'-');
            loop {
                match (a.next(), b.next()) {
                    (None, None) => return true,
                    (Some(x), Some(y)) if x.eq_ignore_ascii_case(&y) => {}
                    _ => return false,
                }
            }
        };
        if let Some(f) = FormatId::ALL.into_iter().find(|f| canon(f.name(), name)) {
            return Some(f);
        }
        const ALIASES: [(&str, FormatId); 7] = [
            ("q2_0_rocmfpx", FormatId::RocmFp2),
            ("fp2", FormatId::RocmFp2),
            ("ifp2", FormatId::RocmFp2),
            ("q3_0_rocmfpx", FormatId::RocmFp3),
            ("fp3", FormatId::RocmFp3),
            ("hfp4", FormatId::Hfp4G32),
            ("mfp4", FormatId::Mfp4G32),
        ];
        ALIASES.into_iter().find(|(a, _)| canon(a, name)).map(|(_, f)| f)
    }

    /// Bytes of one row of `k` elements, or an error if the format cannot hold such a row.
    pub const fn row_bytes(self, k: usize) -> Result<usize> {
        let g = self.geometry();
        if k == 0 || k % g.row_multiple != 0 {
            return Err(Error::RowLength { format: self, k, multiple_of: g.row_multiple });
        }
        Ok(g.row_header_bytes + k / g.block_elems * g.block_bytes)
    }

    /// Bits per weight of a row of `k` elements (row headers included).
    pub fn bits_per_weight(self, k: usize) -> Result<f64> {
        Ok(self.row_bytes(k)? as f64 * 8.0 / k as f64)
    }

    /// Bits per weight of a long row (row headers amortised away).
    pub fn nominal_bits_per_weight(self) -> f64 {
        let g = self.geometry();
        g.block_bytes as f64 * 8.0 / g.block_elems as f64
    }
}

impl fmt::Display for FormatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_per_dialect() {
        for d in Dialect::ALL {
            for (i, a) in FormatId::ALL.iter().enumerate() {
                for b in &FormatId::ALL[i + 1..] {
                    if let (Some(x), Some(y)) = (a.type_id(d), b.type_id(d)) {
                        assert_ne!(x, y, "{a} and {b} share id {x} in {d:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn all_lists_every_format_once_and_names_round_trip() {
        for (i, f) in FormatId::ALL.iter().enumerate() {
            assert!(FormatId::ALL[i + 1..].iter().all(|g| g != f));
            assert_eq!(FormatId::from_name(f.name()), Some(*f));
            assert_eq!(f.info().id, *f);
        }
        assert_eq!(FormatId::from_name("q2_0_rocmfpx"), Some(FormatId::RocmFp2));
        assert_eq!(FormatId::from_name("iq2xxs"), Some(FormatId::Iq2Xxs));
        assert_eq!(FormatId::from_name("nope"), None);
    }

    #[test]
    fn ambiguous_ids_differ_across_dialects() {
        // hipfire's 21 is HFP4G32; ggml's 21 is IQ3_S.
        assert_eq!(FormatId::from_type_id(Dialect::Hipfire, 21), Some(FormatId::Hfp4G32));
        assert_eq!(FormatId::from_type_id(Dialect::Ggml, 21), Some(FormatId::Iq3S));
        assert_eq!(FormatId::from_type_id(Dialect::Ggml, 107), None);
        assert_eq!(FormatId::from_type_id(Dialect::RocmFpx, 107), Some(FormatId::RocmFp2));
    }

    #[test]
    fn geometry_and_bpw() {
        assert_eq!(FormatId::RocmFp2.nominal_bits_per_weight(), 2.5);
        assert_eq!(FormatId::Q8_1.geometry().block_bytes, 36);
        assert_eq!(FormatId::Hfp4G32.row_bytes(64), Ok(16 + 2 * 17));
        assert_eq!(FormatId::Hfp4G32.bits_per_weight(4096).unwrap(), 4.25 + 128.0 / 4096.0);
        assert!(FormatId::Mfp4G32.row_bytes(32).is_err());
        assert!(FormatId::Q4_0.row_bytes(0).is_err());
    }
}

//! Decoding a block with `lowbit-core` on a `no_std` host (firmware, a kernel, WebAssembly
//! without WASI).
//!
//! A firmware crate depends on the core alone, without its default features, so that it needs
//! neither `std` nor an allocator:
//!
//! ```toml
//! [dependencies]
//! lowbit-core = { version = "0.1", default-features = false }
//! ```
//!
//! Everything the [`firmware`] module below calls exists in that build: the registry, every
//! decoder, encoder and reference dot product, writing into caller-provided buffers. (The
//! `alloc` feature adds only `Vec`-returning conveniences; `std` adds nothing else.)
//!
//! This example is itself `#![no_std]`, so [`firmware`] sees only `core`'s prelude; `main`
//! pulls in `std` explicitly just to print. Run it with
//! `cargo run --example decode_block_no_std`.
#![no_std]
#![forbid(unsafe_code)]

extern crate std;

/// What a firmware image would contain: no `std`, no heap, fixed-size buffers.
mod firmware {
    use lowbit_core::{codec, Error, FormatId};

    /// Bytes of one ROCmFP2 block (the registry knows; no bare numbers).
    pub const FP2_BLOCK_BYTES: usize = FormatId::RocmFp2.geometry().block_bytes;
    /// Weights per ROCmFP2 block.
    pub const FP2_BLOCK_ELEMS: usize = FormatId::RocmFp2.geometry().block_elems;

    /// Decodes one ROCmFP2 block (`qs[8]`, two UE4M3-b8 scales) into 32 weights. Illegal scale
    /// bytes (0x7F and above) are an error, never a value.
    pub fn decode_fp2_block(
        block: &[u8; FP2_BLOCK_BYTES],
        out: &mut [f32; FP2_BLOCK_ELEMS],
    ) -> Result<(), Error> {
        codec::decode_row(FormatId::RocmFp2, block, out)
    }

    /// The same for a row of any format held in a caller-provided buffer: `out.len()` is the
    /// row length K, and `row` must hold exactly `format.row_bytes(K)` bytes.
    pub fn decode_row(format: FormatId, row: &[u8], out: &mut [f32]) -> Result<(), Error> {
        codec::decode_row(format, row, out)
    }
}

fn main() -> std::process::ExitCode {
    use std::println;

    // FORMATS.md's ROCmFP2 test vector: codes 0,1,2,3 repeated (byte 0xE4), scales 0x12
    // (0.01953125) for weights 0..16 and 0x7E (224) for weights 16..32.
    let mut block = [0xE4u8; firmware::FP2_BLOCK_BYTES];
    block[8] = 0x12;
    block[9] = 0x7E;
    let mut w = [0f32; firmware::FP2_BLOCK_ELEMS];
    match firmware::decode_fp2_block(&block, &mut w) {
        Ok(()) => {
            println!("ROCmFP2 block decoded: first four {:?}, last four {:?}", &w[..4], &w[28..])
        }
        Err(e) => {
            println!("decode failed: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    // An illegal scale byte is reported with its offset.
    block[9] = 0x7F;
    if let Err(e) = firmware::decode_fp2_block(&block, &mut w) {
        println!("as expected, a bad block is refused: {e}");
    }
    // A row of F16 values through the generic entry point.
    let row = [0x00, 0x3C, 0x00, 0xC0]; // 1.0, -2.0
    let mut out = [0f32; 2];
    match firmware::decode_row(lowbit_core::FormatId::F16, &row, &mut out) {
        Ok(()) => println!("F16 row decoded: {out:?}"),
        Err(e) => println!("decode failed: {e}"),
    }
    std::process::ExitCode::SUCCESS
}

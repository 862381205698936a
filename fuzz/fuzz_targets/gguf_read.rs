//! Fuzz the GGUF reader with whole files: `cargo +nightly fuzz run gguf_read
//! fuzz/corpus/gguf_read tests/fixtures/gguf` (see `lowbit_fuzz::gguf_read`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lowbit_fuzz::gguf_read(data));

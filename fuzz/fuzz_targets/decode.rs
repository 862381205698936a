//! Fuzz every decoder: `cargo +nightly fuzz run decode` (see `lowbit_fuzz::decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lowbit_fuzz::decode(data));

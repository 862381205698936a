//! Fuzz every encoder then decoder: `cargo +nightly fuzz run encode_decode`
//! (see `lowbit_fuzz::encode_decode`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lowbit_fuzz::encode_decode(data));

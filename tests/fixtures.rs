//! Every oracle fixture under `tests/fixtures/`, one test per family (see `common/mod.rs`).

mod common;

#[test]
fn ggml_basic() {
    common::run_manifest("ggml_basic");
}

#[test]
fn ggml_fp4_ternary() {
    common::run_manifest("ggml_fp4_ternary");
}

#[test]
fn ggml_kquant() {
    common::run_manifest("ggml_kquant");
}

#[test]
fn ggml_iq() {
    common::run_manifest("ggml_iq");
}

#[test]
fn rocmfpx() {
    common::run_manifest("rocmfpx");
}

#[test]
fn hipfire() {
    common::run_manifest("hipfire");
}

#[test]
fn prism() {
    common::run_manifest("prism");
}

#[test]
fn onebit() {
    common::run_manifest("onebit");
}

// The block factor of MFP4G32P: OCP E4M3 (bias 7; exponent 0: m * 2^-9), which is twice the
// halved UE4M3 of common.wgsl. Upload has rejected 0x7F and bytes with the sign bit set.
fn block_factor(e: u32) -> f32 {
    return 2.0 * ue4m3_b8(e);
}

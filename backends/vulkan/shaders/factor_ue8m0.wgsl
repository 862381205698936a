// The block factor of HFP4G32 / MFP4G32: UE8M0, 2^(e - 127) (e = 0: the subnormal 2^-127;
// upload has rejected e = 0xFF).
fn block_factor(e: u32) -> f32 {
    return select(bitcast<f32>(e << 23u), bitcast<f32>(0x00400000u), e == 0u);
}

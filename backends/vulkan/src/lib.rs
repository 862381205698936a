//! lowbit-vulkan (skeleton while building).
pub struct Kernel { pub shader: &'static str, pub wg: u32, pub tpr: u32, pub rpt: u32, pub ncols: u32, pub dot4: bool, pub spirv: &'static [u8] }
include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

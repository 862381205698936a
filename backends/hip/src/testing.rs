//! Test support (hidden from the docs): the pieces of the upload and activation preparation
//! that the host-emulation test (`tests/vs_reference.rs`, `host_emulation_matches_reference`)
//! needs to drive the kernels compiled for the CPU: the device planes of a matrix, the kernel
//! the backend would launch, and activations in the device layout built from the core's
//! prepared activations. Nothing here touches a device.
//!
//! What must not live here: anything the backend itself uses (it stays in backend.rs and
//! layout.rs; this module only calls them).

use lowbit_core::backend::{MatrixDesc, PreparedActivations};
use lowbit_core::registry::FormatId;

use crate::backend::{kernel_choice, validated_planes};
use crate::layout;

/// The planes of a validated matrix (q, s, g, r), as uploaded.
pub type Planes = [Vec<u8>; 4];

/// Validates `bytes` as `upload` does and returns its device planes.
pub fn planes(desc: MatrixDesc, bytes: &[u8]) -> Result<Planes, String> {
    let (_, p) = validated_planes(desc, bytes).map_err(|e| e.to_string())?;
    Ok([p.q, p.s, p.g, p.r])
}

/// The kernel `matmul` launches on an NVIDIA device with tensor cores for `n` columns of a
/// matrix with `cols` columns: (name, column tile, rows per block on the device, the
/// `lb_mma_acts` order for a tensor-core kernel); `forced` = (rows per warp, pipeline depth) as
/// the tuning setters take them, (0, 0) for the defaults.
pub fn kernel(
    format: FormatId,
    n: usize,
    cols: usize,
    forced: (usize, usize),
) -> Option<(String, usize, usize, Option<u32>)> {
    layout::split(format).map(|sp| {
        let k = kernel_choice(&sp, n, forced, cols / 32, true);
        (k.name, k.nc, k.rows_per_block, k.mma_order)
    })
}

/// The forced rows-per-warp codes that select the tensor-core variants (backend.rs).
pub fn mma_variant_codes() -> Vec<usize> {
    crate::backend::MMA_VARIANTS.iter().map(|v| v.0).collect()
}

/// Activations in the device layout: (Q8 quants, per-unit scales, per-unit extra words,
/// interleaved f32).
pub type DeviceActs = (Vec<i8>, Vec<f32>, Vec<u32>, Vec<f32>);

/// The activations of the columns of `x` (each `cols` long) in the device layout a kernel reads
/// (`mma`: a tensor-core one), from the core's [`PreparedActivations`]; `codebook_pos` maps an
/// element of a half unit (0..16) to its stored position for the 2-bit kernels in codebook
/// order (the vendor's lb_codebook4_pos). In the transposed order (the ternary dp4a kernels)
/// Q8_0's extra word is the unit's integer quant sum.
pub fn activations(
    format: FormatId,
    x: &[f32],
    cols: usize,
    codebook_pos: fn(usize) -> usize,
    mma: bool,
) -> Result<DeviceActs, String> {
    let sp = layout::split(format).ok_or("unsupported format")?;
    let order = crate::backend::act_order(&sp, mma);
    let nu = cols / 32;
    let (mut aq, mut ad, mut ae, mut xt) =
        (vec![0i8; x.len()], vec![], vec![], vec![0f32; x.len()]);
    for (c, col) in x.chunks_exact(cols).enumerate() {
        let act = PreparedActivations::new(format, col).map_err(|e| e.to_string())?;
        let mut put = |q: &[i8], d: f32, e: u32, b: usize| {
            for (j, &v) in q.iter().enumerate() {
                let e = j % 16;
                let p = match order {
                    1 => codebook_pos(e),
                    2 => 4 * (e & 3) + (e >> 2),
                    _ => e,
                };
                aq[c * cols + (j / 16) * nu * 16 + b * 16 + p] = v;
            }
            ad.push(d);
            ae.push(e);
        };
        match &act {
            PreparedActivations::Q8_0(blocks) => {
                for (b, blk) in blocks.iter().enumerate() {
                    let sum: i32 = blk.qs.iter().map(|&q| i32::from(q)).sum();
                    put(&blk.qs, blk.d.to_f32(), if order == 2 { sum as u32 } else { 0 }, b);
                }
            }
            PreparedActivations::Q8_1(blocks) => {
                for (b, blk) in blocks.iter().enumerate() {
                    put(&blk.qs, blk.d.to_f32(), blk.s.to_f32().to_bits(), b);
                }
            }
            PreparedActivations::Q8K(blocks) => {
                for (i, blk) in blocks.iter().enumerate() {
                    for u in 0..8 {
                        let sums = blk.bsums[2 * u] as u16 as u32
                            | (blk.bsums[2 * u + 1] as u16 as u32) << 16;
                        put(&blk.qs[32 * u..32 * u + 32], blk.d, sums, 8 * i + u);
                    }
                }
            }
            PreparedActivations::F32(v) => {
                for (t, chunk) in v.chunks_exact(4).enumerate() {
                    let (b, i) = (t / 8, t % 8);
                    let o = c * cols + (i * nu + b) * 4;
                    xt[o..o + 4].copy_from_slice(chunk);
                }
            }
        }
    }
    Ok((aq, ad, ae, xt))
}

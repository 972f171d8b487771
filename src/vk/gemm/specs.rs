//! The GEMM kernels' specs: the shared push-constant block, the tiles and
//! every product kernel (f32, f16/bf16-in tiled, f16 tiled, cooperative
//! matrices, planted faults).

use crate::vk::kernel::{Access, KernelSpec, PushConstants};
use crate::vk::shaders::{self, optional};

/// The push-constant block of `shaders/gemm_f32.comp` (16 × u32), shared by
/// `gemm_splitk_reduce.comp` and `gemm_f16_coopmat.comp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GemmPush {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    pub a_off: u32,
    pub b_off: u32,
    pub c_off: u32,
    pub ta: u32,
    pub tb: u32,
    pub accumulate: u32,
    /// Workgroup `z` of the tiled kernel covers `k` in `[z·k_chunk, (z+1)·k_chunk)`.
    pub k_chunk: u32,
    /// Elements between the output planes of successive `z` (split-K partials).
    pub c_stride: u32,
    /// The reduce kernel: how many partial planes it adds.
    pub slices: u32,
    /// 0, or 1 + the offset in B's binding of a row vector added to every
    /// row of C ([`super::gemm_bias`]; never on a split product).
    pub bias: u32,
}
const _: () = assert!(std::mem::size_of::<GemmPush>() == 64);
// SAFETY: `repr(C)`, sixteen `u32` fields, no padding; matches the shaders' block.
unsafe impl PushConstants for GemmPush {}

/// The tiled kernel's output tile (rows × columns) and K-slice.
pub const GEMM_TILE_M: usize = 128;
pub const GEMM_TILE_N: usize = 64;
pub const GEMM_TILE_K: usize = 16;

/// 128×64 output tile per workgroup of 128 threads (8×8 values per thread);
/// A and B slices of 16×(128+4) and 16×(64+4) floats in shared memory, two
/// of each (double-buffered): 25 KiB.
pub static GEMM_F32: KernelSpec = KernelSpec {
    name: "gemm_f32",
    spirv: shaders::GEMM_F32,
    recurrence: false,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [GEMM_TILE_N as u32, GEMM_TILE_M as u32, 1],
    shared_bytes: (2 * GEMM_TILE_K * (GEMM_TILE_M + 4) + 2 * GEMM_TILE_K * (GEMM_TILE_N + 4)) as u32 * 4,
};

/// The second pass of a split-K product: adds the partial planes in order
/// (grid-stride over the `m×n` outputs).
pub static GEMM_SPLITK_REDUCE: KernelSpec = KernelSpec {
    name: "gemm_splitk_reduce",
    spirv: shaders::GEMM_SPLITK_REDUCE,
    recurrence: false,
    bindings: &[Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [256, 1, 1],
    shared_bytes: 0,
};

/// The tiled kernel with every staged input rounded to f16 (f32 accumulation):
/// the f16 precision on devices without cooperative matrices.
pub static GEMM_F16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_f16in_tiled", spirv: shaders::GEMM_F16IN_TILED, ..GEMM_F32 };

/// The tiled kernel with every staged input rounded to bfloat16.
pub static GEMM_BF16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_bf16in_tiled", spirv: shaders::GEMM_BF16IN_TILED, ..GEMM_F32 };

/// 64×64 output tile per workgroup of 4 subgroups of 32; A and B staged as f16
/// (64×40 and 32×72 halves), C through a 64×64 f32 block. Never split along K.
pub static GEMM_F16_COOPMAT: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat",
    spirv: optional(shaders::GEMM_F16_COOPMAT),
    recurrence: false,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [64, 64, 1],
    shared_bytes: 64 * 40 * 2 + 32 * 72 * 2 + 64 * 64 * 4,
};

/// The 128×128 cooperative-matrix kernel's output tile and K-slice.
pub const COOPMAT_BIG_TILE: (usize, usize, usize) = (128, 128, 32);

/// 128×128 output tile per workgroup of 4 subgroups of 32 (each a 64×64 block
/// of 4×4 accumulators); A and B staged as f16 in their memory order, 16 bytes
/// per load, two stages of 32-deep slices; fragments wholly inside C stored
/// directly, the edges through a 16×16 f32 block per subgroup; split along K
/// like the tiled kernel.
pub static GEMM_F16_COOPMAT_BIG: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG),
    recurrence: false,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [COOPMAT_BIG_TILE.1 as u32, COOPMAT_BIG_TILE.0 as u32, 1],
    shared_bytes: (2 * 2 * 1280 * 8 + 4 * 256 * 4) as u32,
};

/// The 128×128 kernel with its multiply-adds alone (fragments loaded once)
/// or without its global loads: `DUALSCOPE_COOPMAT_PROBE=mma|no_global` in
/// a `lab` build (timing only; the results are wrong on purpose).
#[cfg(feature = "lab")]
pub static GEMM_F16_COOPMAT_BIG_PROBE_MMA: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big_probe_mma",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG_PROBE_MMA),
    ..GEMM_F16_COOPMAT_BIG
};
#[cfg(feature = "lab")]
pub static GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big_probe_no_global",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL),
    ..GEMM_F16_COOPMAT_BIG
};

/// The 128×128 kernel the f16 products run on: in a `lab` build, a probe's
/// variant where `DUALSCOPE_COOPMAT_PROBE` asks for one.
pub(super) fn coopmat_big_spec() -> &'static KernelSpec {
    #[cfg(feature = "lab")]
    {
        use crate::vk::switches::{CoopmatProbe, switches};
        match switches().lab.coopmat_probe {
            Some(CoopmatProbe::MmaOnly) => return &GEMM_F16_COOPMAT_BIG_PROBE_MMA,
            Some(CoopmatProbe::NoGlobal) => return &GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL,
            None => {}
        }
    }
    &GEMM_F16_COOPMAT_BIG
}

/// The f16 tiled kernel's output tile and K-slice.
pub const F16_TILED_TILE: (usize, usize, usize) = (64, 64, 16);

/// f16 inputs (precision and range, as a conversion to float16_t gives them),
/// f32 accumulation, on any device: 64×64 tile per 16×16 workgroup.
pub static GEMM_F16_TILED: KernelSpec = KernelSpec {
    name: "gemm_f16_tiled",
    spirv: shaders::GEMM_F16_TILED,
    recurrence: false,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [16, 16, 1],
    items_per_group: [F16_TILED_TILE.1 as u32, F16_TILED_TILE.0 as u32, 1],
    shared_bytes: (16 * 65 * 2 * 4) as u32,
};

/// The f32 kernel with the `gemm_no_bounds` fault planted.
pub static GEMM_F32_FAULT_NO_BOUNDS: KernelSpec =
    KernelSpec { name: "gemm_f32_fault_no_bounds", spirv: shaders::GEMM_F32_FAULT_NO_BOUNDS, ..GEMM_F32 };

/// The f16-input tiled kernel with the `f16_stage_skip_slice` fault planted.
pub static GEMM_F16IN_FAULT_SKIP_SLICE: KernelSpec =
    KernelSpec { name: "gemm_f16in_fault_skip_slice", spirv: shaders::GEMM_F16IN_FAULT_SKIP_SLICE, ..GEMM_F32 };

/// The f32 kernel with the `f16_accum_no_scale` fault planted.
pub static GEMM_F32_FAULT_F16_ACCUM: KernelSpec =
    KernelSpec { name: "gemm_f32_fault_f16_accum", spirv: shaders::GEMM_F32_FAULT_F16_ACCUM, ..GEMM_F32 };

/// The f32 kernel on GPUs (`gemm_f32_big.comp`): output tile and K-slice.
/// The K-slice is the 128×64 kernel's, so both sum alike.
pub const GEMM_BIG_TILE: (usize, usize, usize) = (128, 128, GEMM_TILE_K);

/// 128×128 output tile per workgroup of 256 threads (8×8 values per thread,
/// as 2×2 blocks of 4×4); A and B slices of 16×128 floats, swizzled rather
/// than padded, two of each: exactly 32 KiB.
pub static GEMM_F32_BIG: KernelSpec = KernelSpec {
    name: "gemm_f32_big",
    spirv: shaders::GEMM_F32_BIG,
    recurrence: false,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [GEMM_BIG_TILE.1 as u32, GEMM_BIG_TILE.0 as u32, 1],
    shared_bytes: (2 * GEMM_BIG_TILE.2 * (GEMM_BIG_TILE.0 + GEMM_BIG_TILE.1)) as u32 * 4,
};

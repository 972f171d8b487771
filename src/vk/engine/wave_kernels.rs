//! The wavefront kernels' specs (`gru_fwd_wave.comp`, `gru_bwd_wave.comp`
//! and their variants): both layers' recurrences of one direction in one
//! dispatch, their products on cooperative matrices (`_cm`) or as f32 FMAs
//! (`_fma`). Which of them a step runs is `Engine::wave_spec`'s (policy.rs).

use super::kernels::GRU_FWD_GRID_CM;
use crate::vk::kernel::Access::{Read as R, ReadWrite as RW, Write as W};
use crate::vk::kernel::KernelSpec;
use crate::vk::shaders;

/// Both layers of a two-layer forward in one dispatch, as a wavefront (layer
/// 1 one step behind layer 0, its input projection computed in the kernel):
/// T + 1 dependent intervals instead of 2T. Tiled as `GRU_FWD_GRID_CM`.
pub static GRU_FWD_WAVE_CM: KernelSpec = KernelSpec {
    name: "gru_fwd_wave_cm",
    spirv: shaders::optional(shaders::GRU_FWD_WAVE_CM),
    bindings: &[R, R, W, W, RW, RW, RW, RW, W, W, W, RW, RW],
    // 8 subgroups' staging of 4 f16 tiles (16×16) and their 16×48 f32 partial sums.
    shared_bytes: 8 * 4 * 512 + 8 * 16 * 48 * 4,
    ..GRU_FWD_GRID_CM
};
/// `GRU_FWD_WAVE_CM` with its operands (the f16 copies) read without
/// `coherent`, where that is safe (`Engine::wave_noncoherent`).
pub static GRU_FWD_WAVE_CM_NC: KernelSpec =
    KernelSpec { name: "gru_fwd_wave_cm_nc", spirv: shaders::optional(shaders::GRU_FWD_WAVE_CM_NC), ..GRU_FWD_WAVE_CM };
/// Both layers' backward in one dispatch, as a wavefront (layer 0 two steps
/// behind layer 1, its gradient from above `d_gi1 · W_ih1` computed in the
/// kernel, half by each layer): T + 2 dependent intervals instead of 2T. Tiled as `GRU_BWD_GRID_CM`.
pub static GRU_BWD_WAVE_CM: KernelSpec = KernelSpec {
    name: "gru_bwd_wave_cm",
    spirv: shaders::optional(shaders::GRU_BWD_WAVE_CM),
    bindings: &[R, R, R, R, RW, RW, W, W, RW, RW, RW, R, R, R, R, RW, W, W, RW, RW],
    // 8 subgroups' staging of 6 f16 tiles (16×16) and their two 16×16 f32 partial sums.
    shared_bytes: 8 * 6 * 512 + 2 * 8 * 16 * 16 * 4,
    ..GRU_FWD_GRID_CM
};
/// `GRU_BWD_WAVE_CM` with its operands (the f16 copies) read without
/// `coherent`, where that is safe (`Engine::wave_noncoherent`).
pub static GRU_BWD_WAVE_CM_NC: KernelSpec =
    KernelSpec { name: "gru_bwd_wave_cm_nc", spirv: shaders::optional(shaders::GRU_BWD_WAVE_CM_NC), ..GRU_BWD_WAVE_CM };
/// Most rows for which the wavefronts take their products as FMAs by
/// default (`Engine::wave_scalar`).
pub const WAVE_SCALAR_ROWS: usize = 1;
/// `GRU_FWD_WAVE_CM_NC` with its products as f32 FMAs of the f16 values, for
/// rows below B only (a 16-row fragment wastes most of its work at B = 1):
/// where `Engine::wave_scalar` picks it.
pub static GRU_FWD_WAVE_FMA_NC: KernelSpec = KernelSpec {
    name: "gru_fwd_wave_fma_nc",
    spirv: shaders::optional(shaders::GRU_FWD_WAVE_FMA_NC),
    ..GRU_FWD_WAVE_CM
};
/// `GRU_BWD_WAVE_CM_NC` likewise.
pub static GRU_BWD_WAVE_FMA_NC: KernelSpec = KernelSpec {
    name: "gru_bwd_wave_fma_nc",
    spirv: shaders::optional(shaders::GRU_BWD_WAVE_FMA_NC),
    ..GRU_BWD_WAVE_CM
};

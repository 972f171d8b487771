//! SPIR-V that build.rs compiled from `shaders/*.comp`, embedded in the binary.

macro_rules! spirv {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv"))
    };
}

pub static GEMM_F32: &[u8] = spirv!("gemm_f32");
pub static GEMM_F32_BIG: &[u8] = spirv!("gemm_f32_big");
pub static GEMM_F16IN_TILED: &[u8] = spirv!("gemm_f16in_tiled");
pub static GEMM_BF16IN_TILED: &[u8] = spirv!("gemm_bf16in_tiled");
pub static GEMM_SPLITK_REDUCE: &[u8] = spirv!("gemm_splitk_reduce");
pub static GEMM_F16_TILED: &[u8] = spirv!("gemm_f16_tiled");

// The cooperative-matrix kernels (`GEMM_F16_COOPMAT`, `GEMM_F16_COOPMAT_BIG`,
// `GRU_FWD_GRID_CM`, `GRU_BWD_GRID_CM`, ...: `Option<&[u8]>`): present when
// build.rs found glslang 13.
include!(concat!(env!("OUT_DIR"), "/optional_shaders.rs"));

// The model's kernels (src/vk/engine).
pub static EMBED_FWD: &[u8] = spirv!("embed_fwd");
pub static EMBED_BWD: &[u8] = spirv!("embed_bwd");
pub static BIAS_ADD: &[u8] = spirv!("bias_add");
pub static ADD: &[u8] = spirv!("add");
pub static COL_SUM: &[u8] = spirv!("col_sum");
pub static COL_SUM_FINAL: &[u8] = spirv!("col_sum_final");
pub static ATTN_FWD: &[u8] = spirv!("attn_fwd");
pub static ATTN_BWD_Q: &[u8] = spirv!("attn_bwd_q");
pub static ATTN_BWD_KV: &[u8] = spirv!("attn_bwd_kv");
// The attention kernels in blocks of 64 (attn_wide.glsl).
pub static ATTN_WIDE_FWD: &[u8] = spirv!("attn_wide_fwd");
pub static ATTN_WIDE_BWD_Q: &[u8] = spirv!("attn_wide_bwd_q");
pub static ATTN_WIDE_BWD_KV: &[u8] = spirv!("attn_wide_bwd_kv");
pub static LOSS: &[u8] = spirv!("loss");
pub static TOKEN_GUARD: &[u8] = spirv!("token_guard");
pub static SUMSQ: &[u8] = spirv!("sumsq");
pub static GRAD_NORMS: &[u8] = spirv!("grad_norms");
pub static STATE: &[u8] = spirv!("state");
pub static SCALE_GRADS: &[u8] = spirv!("scale_grads");
pub static ADAMW: &[u8] = spirv!("adamw");
pub static GRU_FWD_SEQ: &[u8] = spirv!("gru_fwd_seq");
pub static GRU_BWD_SEQ: &[u8] = spirv!("gru_bwd_seq");
pub static GRU_FWD_SEQ_WG256: &[u8] = spirv!("gru_fwd_seq_wg256");
pub static GRU_BWD_SEQ_WG256: &[u8] = spirv!("gru_bwd_seq_wg256");
pub static TRANSPOSE: &[u8] = spirv!("transpose");
// A precision map's f16 and bf16 recurrence and embedding stages.
pub static GRU_FWD_SEQ_F16: &[u8] = spirv!("gru_fwd_seq_f16");
pub static GRU_FWD_SEQ_WG256_F16: &[u8] = spirv!("gru_fwd_seq_wg256_f16");
pub static GRU_FWD_SEQ_BF16: &[u8] = spirv!("gru_fwd_seq_bf16");
pub static GRU_FWD_SEQ_WG256_BF16: &[u8] = spirv!("gru_fwd_seq_wg256_bf16");
pub static GRU_BWD_SEQ_F16: &[u8] = spirv!("gru_bwd_seq_f16");
pub static GRU_BWD_SEQ_WG256_F16: &[u8] = spirv!("gru_bwd_seq_wg256_f16");
pub static GRU_BWD_SEQ_BF16: &[u8] = spirv!("gru_bwd_seq_bf16");
pub static GRU_BWD_SEQ_WG256_BF16: &[u8] = spirv!("gru_bwd_seq_wg256_bf16");
pub static EMBED_FWD_F16: &[u8] = spirv!("embed_fwd_f16");
pub static EMBED_FWD_BF16: &[u8] = spirv!("embed_fwd_bf16");
pub static GRU_FWD_GRID: &[u8] = spirv!("gru_fwd_grid");
pub static GRU_BWD_GRID: &[u8] = spirv!("gru_bwd_grid");
pub static GRU_FWD_GRID_VEC4: &[u8] = spirv!("gru_fwd_grid_vec4");
pub static GRU_BWD_GRID_VEC4: &[u8] = spirv!("gru_bwd_grid_vec4");
pub static GRU_FWD_GRID_NC: &[u8] = spirv!("gru_fwd_grid_nc");
pub static GRU_BWD_GRID_NC: &[u8] = spirv!("gru_bwd_grid_nc");
// The one-workgroup recurrences' product as f32 FMAs (`GRU_*_WG_CM` above: on
// cooperative matrices).
pub static GRU_FWD_WG_FMA: &[u8] = spirv!("gru_fwd_wg_fma");
pub static GRU_BWD_WG_FMA: &[u8] = spirv!("gru_bwd_wg_fma");

// The fault catalogue's planted bugs.
pub static GEMM_F32_FAULT_NO_BOUNDS: &[u8] = spirv!("gemm_f32_fault_no_bounds");
pub static GEMM_F16IN_FAULT_SKIP_SLICE: &[u8] = spirv!("gemm_f16in_fault_skip_slice");
pub static GEMM_F32_FAULT_F16_ACCUM: &[u8] = spirv!("gemm_f32_fault_f16_accum");
pub static GRU_FWD_SEQ_FAULT_NO_BARRIER: &[u8] = spirv!("gru_fwd_seq_fault_no_barrier");
pub static GRU_FWD_SEQ_FAULT_RESET_BEFORE: &[u8] = spirv!("gru_fwd_seq_fault_reset_before");
pub static ATTN_FWD_FAULT_NO_MAX: &[u8] = spirv!("attn_fwd_fault_no_max");
pub static ATTN_FWD_FAULT_WINDOW: &[u8] = spirv!("attn_fwd_fault_window");
pub static LOSS_FAULT_NO_MASK: &[u8] = spirv!("loss_fault_no_mask");
pub static LOSS_FAULT_NO_CLEAR: &[u8] = spirv!("loss_fault_no_clear");

/// An optional shader's SPIR-V, or none (the kernel then reports it was not built).
pub(crate) const fn optional(spirv: Option<&'static [u8]>) -> &'static [u8] {
    match spirv {
        Some(s) => s,
        None => &[],
    }
}

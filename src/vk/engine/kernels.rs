//! The model's kernels (every shader but the GEMMs) and their shared
//! push-constant block, `shaders/include/model.glsl`.

use crate::step::Precision;
use crate::vk::kernel::{Access, KernelSpec, PushConstants};
use crate::vk::shaders;

pub use super::attn_kernels::*;
pub use super::wave_kernels::*;

/// The push-constant block of `model.glsl` (16 words).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelPush {
    pub t_len: u32,
    pub b: u32,
    pub d: u32,
    pub h: u32,
    pub a: u32,
    pub nh: u32,
    pub w: u32,
    pub v: u32,
    pub t: u32,
    pub n: u32,
    pub off0: u32,
    pub off1: u32,
    pub off2: u32,
    pub flag: u32,
    pub f0: f32,
    pub f1: f32,
}
const _: () = assert!(std::mem::size_of::<ModelPush>() == 64);
// SAFETY: `repr(C)`, sixteen 4-byte fields, no padding; matches `model.glsl`.
unsafe impl PushConstants for ModelPush {}

/// Words of the step-state buffer (`model.glsl`'s `ST_*` and `HP_*`).
pub mod st {
    pub const SCALE: usize = 0;
    pub const GROWTH: usize = 1;
    pub const STEP: usize = 2;
    pub const SKIP: usize = 3;
    pub const NORM: usize = 4;
    pub const POST_CLIP: usize = 5;
    pub const CLIPPED: usize = 6;
    pub const LOSS: usize = 7;
    pub const CAPPED: usize = 8;
    pub const STEP_SCALE: usize = 9;
    pub const CLIP_FACTOR: usize = 10;
    pub const SKIPPED_TOTAL: usize = 11;
    pub const GRID_FAIL: usize = 13;
    pub const N_TARGETS: usize = 14;
    pub const LR: usize = 16;
    pub const BETA1: usize = 17;
    pub const BETA2: usize = 18;
    pub const EPS: usize = 19;
    pub const WD: usize = 20;
    pub const CLIP: usize = 21;
    pub const DYNAMIC: usize = 22;
    pub const GROWTH_INTERVAL: usize = 23;
    pub const GROWTH_FACTOR: usize = 24;
    pub const BACKOFF: usize = 25;
    pub const WORDS: usize = 32;
}

/// `state.comp`'s operations.
pub mod state_op {
    pub const BEGIN: u32 = 0;
    pub const LOSS: u32 = 1;
    pub const NORM: u32 = 2;
    pub const POST_CLIP: u32 = 3;
    pub const FINISH: u32 = 4;
}

/// Values one `sumsq` workgroup reduces.
pub const SUMSQ_CHUNK: usize = 4096;

use Access::{Read as R, ReadWrite as RW, Write as W};

macro_rules! spec {
    ($id:ident, $name:literal, $spirv:ident, [$($acc:expr),*], $items:expr) => {
        pub static $id: KernelSpec = KernelSpec {
            name: $name,
            spirv: shaders::$spirv,
            bindings: &[$($acc),*],
            push_size: 64,
            local_size: [256, 1, 1],
            items_per_group: [$items, 1, 1],
            shared_bytes: 1024,
        };
    };
}

// Element-wise kernels: 256 items per workgroup (grid-stride past the limit).
spec!(EMBED_FWD, "embed_fwd", EMBED_FWD, [R, R, W], 256);
spec!(EMBED_BWD, "embed_bwd", EMBED_BWD, [R, R, RW, W], 256);
spec!(BIAS_ADD, "bias_add", BIAS_ADD, [R, RW], 256);
spec!(ADD, "add", ADD, [R, R, W], 256);
spec!(TRANSPOSE, "transpose", TRANSPOSE, [R, W], 256);
// Four positions per workgroup.
spec!(TOKEN_GUARD, "token_guard", TOKEN_GUARD, [R, R, W, W, RW], 4);
spec!(SCALE_GRADS, "scale_grads", SCALE_GRADS, [R, RW], 256);
spec!(ADAMW, "adamw", ADAMW, [R, RW, R, RW, RW, R], 256);
// Column sums, pass 2: one invocation per column adds the chunks' sums.
spec!(COL_SUM_FINAL, "col_sum_final", COL_SUM_FINAL, [R, W], 256);
// Eight rows of logits per workgroup.
spec!(LOSS, "loss", LOSS, [R, R, R, W, W, RW], 8);
// One workgroup per 4096 values.
spec!(SUMSQ, "sumsq", SUMSQ, [R, W], 4096);
// A single workgroup.
spec!(STATE, "state", STATE, [RW, R], 1 << 30);

/// Per-tensor gradient norms (`norms.rs`), pass 1: one workgroup per chunk of
/// the gradients (grid-stride past the limit).
pub static GRAD_NORMS: KernelSpec = KernelSpec {
    name: "grad_norms",
    spirv: shaders::GRAD_NORMS,
    bindings: &[R, R, RW, W],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [1, 1, 1],
    shared_bytes: 3 * 256 * 4,
};

/// Pass 2 (the same shader, flag 1): one invocation per tensor.
pub static GRAD_NORMS_TENSORS: KernelSpec =
    KernelSpec { name: "grad_norms_tensors", items_per_group: [256, 1, 1], ..GRAD_NORMS };

/// Column sums, pass 1: a workgroup of 32 columns × 8 lanes per block of 32
/// columns (x) and chunk of rows (y); see `reduce.rs`.
pub static COL_SUM: KernelSpec = KernelSpec {
    name: "col_sum",
    spirv: shaders::COL_SUM,
    bindings: &[R, W],
    push_size: 64,
    local_size: [32, 8, 1],
    items_per_group: [32, 1, 1],
    shared_bytes: 8 * 32 * 4,
};

/// Widest hidden state the recurrence kernels hold in shared memory.
pub const MAX_HIDDEN: usize = 1024;

/// One workgroup per batch row walks every timestep.
pub static GRU_FWD_SEQ: KernelSpec = KernelSpec {
    name: "gru_fwd_seq",
    spirv: shaders::GRU_FWD_SEQ,
    bindings: &[R, R, W, W, RW, R, R],
    push_size: 64,
    local_size: [1024, 1, 1],
    items_per_group: [1, 1, 1],
    shared_bytes: 2 * 1024 * 4,
};
/// 256 invocations: for layers of H ≤ 256, where the rest would idle.
pub static GRU_FWD_SEQ_WG256: KernelSpec =
    KernelSpec { name: "gru_fwd_seq_wg256", spirv: shaders::GRU_FWD_SEQ_WG256, local_size: [256, 1, 1], ..GRU_FWD_SEQ };
pub static GRU_FWD_SEQ_FAULT_NO_BARRIER: KernelSpec = KernelSpec {
    name: "gru_fwd_seq_fault_no_barrier",
    spirv: shaders::GRU_FWD_SEQ_FAULT_NO_BARRIER,
    ..GRU_FWD_SEQ_WG256
};
pub static GRU_FWD_SEQ_FAULT_RESET_BEFORE: KernelSpec = KernelSpec {
    name: "gru_fwd_seq_fault_reset_before",
    spirv: shaders::GRU_FWD_SEQ_FAULT_RESET_BEFORE,
    shared_bytes: 3 * 1024 * 4,
    ..GRU_FWD_SEQ_WG256
};
pub static GRU_BWD_SEQ: KernelSpec = KernelSpec {
    name: "gru_bwd_seq",
    spirv: shaders::GRU_BWD_SEQ,
    bindings: &[R, R, R, R, R, RW, W, RW, R],
    push_size: 64,
    local_size: [1024, 1, 1],
    items_per_group: [1, 1, 1],
    shared_bytes: 2 * 3 * 1024 * 4,
};
pub static GRU_BWD_SEQ_WG256: KernelSpec =
    KernelSpec { name: "gru_bwd_seq_wg256", spirv: shaders::GRU_BWD_SEQ_WG256, local_size: [256, 1, 1], ..GRU_BWD_SEQ };
/// The per-row recurrences with their products' operands rounded to f16 or
/// bfloat16 (`STAGE_F16`, `STAGE_BF16`): a precision map's recurrence stage
/// in that precision on the per-row kernels.
macro_rules! seq_variant {
    ($name:ident, $id:literal, $base:ident) => {
        pub static $name: KernelSpec = KernelSpec { name: $id, spirv: shaders::$name, ..$base };
    };
}
seq_variant!(GRU_FWD_SEQ_F16, "gru_fwd_seq_f16", GRU_FWD_SEQ);
seq_variant!(GRU_FWD_SEQ_WG256_F16, "gru_fwd_seq_wg256_f16", GRU_FWD_SEQ_WG256);
seq_variant!(GRU_FWD_SEQ_BF16, "gru_fwd_seq_bf16", GRU_FWD_SEQ);
seq_variant!(GRU_FWD_SEQ_WG256_BF16, "gru_fwd_seq_wg256_bf16", GRU_FWD_SEQ_WG256);
seq_variant!(GRU_BWD_SEQ_F16, "gru_bwd_seq_f16", GRU_BWD_SEQ);
seq_variant!(GRU_BWD_SEQ_WG256_F16, "gru_bwd_seq_wg256_f16", GRU_BWD_SEQ_WG256);
seq_variant!(GRU_BWD_SEQ_BF16, "gru_bwd_seq_bf16", GRU_BWD_SEQ);
seq_variant!(GRU_BWD_SEQ_WG256_BF16, "gru_bwd_seq_wg256_bf16", GRU_BWD_SEQ_WG256);
seq_variant!(EMBED_FWD_F16, "embed_fwd_f16", EMBED_FWD);
seq_variant!(EMBED_FWD_BF16, "embed_fwd_bf16", EMBED_FWD);

/// The per-row recurrence kernels (forward, backward) for layers of width
/// `h` with their products in `fwd` and `bwd` precision.
pub fn seq_specs(h: usize, fwd: Precision, bwd: Precision) -> (&'static KernelSpec, &'static KernelSpec) {
    let narrow = h <= 256;
    let f = match (fwd, narrow) {
        (Precision::F32, true) => &GRU_FWD_SEQ_WG256,
        (Precision::F32, false) => &GRU_FWD_SEQ,
        (Precision::F16, true) => &GRU_FWD_SEQ_WG256_F16,
        (Precision::F16, false) => &GRU_FWD_SEQ_F16,
        (Precision::Bf16, true) => &GRU_FWD_SEQ_WG256_BF16,
        (Precision::Bf16, false) => &GRU_FWD_SEQ_BF16,
    };
    let b = match (bwd, narrow) {
        (Precision::F32, true) => &GRU_BWD_SEQ_WG256,
        (Precision::F32, false) => &GRU_BWD_SEQ,
        (Precision::F16, true) => &GRU_BWD_SEQ_WG256_F16,
        (Precision::F16, false) => &GRU_BWD_SEQ_F16,
        (Precision::Bf16, true) => &GRU_BWD_SEQ_WG256_BF16,
        (Precision::Bf16, false) => &GRU_BWD_SEQ_BF16,
    };
    (f, b)
}

/// The embedding's gather with its rows in `p` (f32: copied as they are).
pub fn embed_spec(p: Precision) -> &'static KernelSpec {
    match p {
        Precision::F32 => &EMBED_FWD,
        Precision::F16 => &EMBED_FWD_F16,
        Precision::Bf16 => &EMBED_FWD_BF16,
    }
}

/// Hidden units one workgroup of the grid recurrence owns (`U` in the shaders).
pub const GRID_UNITS: usize = 4;
/// Widest layer the grid recurrence takes (its W_hh slice in shared memory).
pub const GRID_MAX_HIDDEN: usize = 512;
/// Workgroups of a grid recurrence at most (one barrier flag each).
pub const GRID_MAX_GROUPS: usize = GRID_MAX_HIDDEN / GRID_UNITS;
/// Workgroups of a wavefront at most where two share an SM
/// (`DUALSCOPE_WAVE_WIDE=1`; the barrier polls one flag per invocation of 256).
pub const WAVE_WIDE_MAX_GROUPS: usize = 256;
/// Words per barrier flag (a 128-byte line; `GRID_FLAG_STRIDE` in grid.glsl).
pub const GRID_FLAG_WORDS: usize = 32;

/// The recurrence spread over ceil(H/4) workgroups, each owning 4 units for
/// every row; a grid-wide barrier between steps, or one step per dispatch.
pub static GRU_FWD_GRID: KernelSpec = KernelSpec {
    name: "gru_fwd_grid",
    spirv: shaders::GRU_FWD_GRID,
    bindings: &[R, R, W, W, RW, RW, RW],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [1, 1, 1],
    shared_bytes: (3 * GRID_MAX_HIDDEN + 128 * 3) as u32 * 16,
};
pub static GRU_BWD_GRID: KernelSpec = KernelSpec {
    name: "gru_bwd_grid",
    spirv: shaders::GRU_BWD_GRID,
    bindings: &[R, R, R, R, R, RW, W, RW, RW, RW],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [1, 1, 1],
    shared_bytes: (3 * GRID_MAX_HIDDEN + 128) as u32 * 16,
};

/// The grid kernels where H % 4 == 0: h and d_gh read as vec4.
pub static GRU_FWD_GRID_VEC4: KernelSpec =
    KernelSpec { name: "gru_fwd_grid_vec4", spirv: shaders::GRU_FWD_GRID_VEC4, ..GRU_FWD_GRID };
pub static GRU_BWD_GRID_VEC4: KernelSpec =
    KernelSpec { name: "gru_bwd_grid_vec4", spirv: shaders::GRU_BWD_GRID_VEC4, ..GRU_BWD_GRID };
/// The vec4 grid kernels with the product's operand loads not `coherent`
/// (H % 32 == 0; `Engine::grid_noncoherent`).
pub static GRU_FWD_GRID_NC: KernelSpec =
    KernelSpec { name: "gru_fwd_grid_nc", spirv: shaders::GRU_FWD_GRID_NC, ..GRU_FWD_GRID };
pub static GRU_BWD_GRID_NC: KernelSpec =
    KernelSpec { name: "gru_bwd_grid_nc", spirv: shaders::GRU_BWD_GRID_NC, ..GRU_BWD_GRID };

/// The mixed step's grid kernels with the recurrent products on cooperative
/// matrices (f16 × f16 → f32): a workgroup owns 16 rows × 16 units, its
/// W_hh slice in registers, and reads only its rows' f16 copy of `h` (or
/// `d_gh`). Where they run: `Engine::recurrence_on_coopmat`.
pub static GRU_FWD_GRID_CM: KernelSpec = KernelSpec {
    name: "gru_fwd_grid_cm",
    spirv: crate::vk::shaders::optional(shaders::GRU_FWD_GRID_CM),
    bindings: &[R, R, W, W, RW, RW, RW, RW],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [1, 1, 1],
    // 8 subgroups' staging of 4 f16 tiles (16×16) and their 16×48 f32 partial sums.
    shared_bytes: 8 * 4 * 512 + 8 * 16 * 48 * 4,
};
pub static GRU_BWD_GRID_CM: KernelSpec = KernelSpec {
    name: "gru_bwd_grid_cm",
    spirv: crate::vk::shaders::optional(shaders::GRU_BWD_GRID_CM),
    bindings: &[R, R, R, R, R, RW, W, W, RW, RW, RW],
    // 8 subgroups' staging of 6 f16 tiles (16×16) and their 16×16 f32 partial sums.
    shared_bytes: 8 * 6 * 512 + 8 * 16 * 16 * 4,
    ..GRU_FWD_GRID_CM
};
/// The cooperative-matrix grid kernels with the f16 copies read without
/// `coherent` (H % 64 == 0; `Engine::grid_noncoherent`).
pub static GRU_FWD_GRID_CM_NC: KernelSpec = KernelSpec {
    name: "gru_fwd_grid_cm_nc",
    spirv: crate::vk::shaders::optional(shaders::GRU_FWD_GRID_CM_NC),
    ..GRU_FWD_GRID_CM
};
pub static GRU_BWD_GRID_CM_NC: KernelSpec = KernelSpec {
    name: "gru_bwd_grid_cm_nc",
    spirv: crate::vk::shaders::optional(shaders::GRU_BWD_GRID_CM_NC),
    ..GRU_BWD_GRID_CM
};
/// The `_nc` grid kernels with the timing probe's switches (`pc.flag` bits
/// 2-16, `Engine::probe_grid_cm`), which the step's kernels do not carry.
pub static GRU_FWD_GRID_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_fwd_grid_cm_nc_probe",
    spirv: crate::vk::shaders::optional(shaders::GRU_FWD_GRID_CM_NC_PROBE),
    ..GRU_FWD_GRID_CM
};
pub static GRU_BWD_GRID_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_bwd_grid_cm_nc_probe",
    spirv: crate::vk::shaders::optional(shaders::GRU_BWD_GRID_CM_NC_PROBE),
    ..GRU_BWD_GRID_CM
};
/// Rows and units of a workgroup of the cooperative-matrix grid kernels.
pub const GRID_CM_TILE: usize = 16;

/// The forward and backward grid kernels for layers of width `h`.
/// With `noncoherent`, the variants whose operand loads are not `coherent`
/// where H allows them (H % 32 == 0: rows of whole cache lines).
pub fn grid_specs(h: usize, noncoherent: bool) -> (&'static KernelSpec, &'static KernelSpec) {
    if noncoherent && h.is_multiple_of(32) {
        (&GRU_FWD_GRID_NC, &GRU_BWD_GRID_NC)
    } else if h.is_multiple_of(4) {
        (&GRU_FWD_GRID_VEC4, &GRU_BWD_GRID_VEC4)
    } else {
        (&GRU_FWD_GRID, &GRU_BWD_GRID)
    }
}

pub static LOSS_FAULT_NO_MASK: KernelSpec =
    KernelSpec { name: "loss_fault_no_mask", spirv: shaders::LOSS_FAULT_NO_MASK, ..LOSS };
pub static LOSS_FAULT_NO_CLEAR: KernelSpec =
    KernelSpec { name: "loss_fault_no_clear", spirv: shaders::LOSS_FAULT_NO_CLEAR, ..LOSS };

/// Loop iterations one invocation of a recurrence kernel may run in one
/// dispatch. Mesa's lavapipe counts every pass through the end of any loop
/// (all loops of the shader together, nested ones included, the pass that
/// leaves a loop too) in one counter per invocation and ends every loop once
/// it passes 65535 (a guard against hangs). So a long recurrence is split
/// into chunks of timesteps, each its own dispatch, resuming from the state
/// the previous chunk left in memory; the rest of 65535 covers the loops a
/// dispatch runs once. On other devices the chunks cost a few dispatches per
/// sequence. `docs/shader-loops.md` lists every shader's loops.
pub const LOOP_BUDGET: usize = 60000;

/// Loop passes lavapipe counts for one `barrier()` (measured: see
/// `docs/shader-loops.md`).
pub const BARRIER_LOOPS: usize = 2;

/// Loop passes of one timestep of `gru_fwd_seq` for width `h`, counted from
/// the shader (one unit per invocation, as `WG_SIZE` ≥ H): the step loop
/// (1), the unit loop (1 + its exit), the k-pair loop (H/2 + exit), the odd
/// k (H % 2 + exit) and the step's barrier; the reset-before fault variant
/// adds a unit loop, a k loop (2 + H + 1) and a barrier. On lavapipe this is
/// the count exactly (10 at H = 5 and 6, 39 at H = 64: the guard ends the
/// 6555th step of one dispatch at H = 5).
pub fn fwd_step_loops(h: usize, reset_before: bool) -> usize {
    let base = 1 + 2 + (h / 2 + 1) + (h % 2 + 1) + BARRIER_LOOPS;
    if reset_before { base + 2 + h + 1 + BARRIER_LOOPS } else { base }
}

/// Loop passes of one timestep of `gru_bwd_seq` for width `h`, an upper
/// bound: the step loop (1), the carry's four-slot clear (5, should the
/// compiler keep it a loop), the two unit loops (2 each), the loop over
/// four rows of W_hh (3H/4 + exit), its tail (at most 3 + exit) and the
/// barrier. Lavapipe counts 15 at H = 5 and 57 at H = 64 (it unrolls the
/// clear): 20 and 62 here.
pub fn bwd_step_loops(h: usize) -> usize {
    1 + 5 + 2 + (3 * h / 4 + 1) + 4 + 2 + BARRIER_LOOPS
}

/// Timesteps per chunk (dispatch) of the forward recurrence.
pub fn fwd_chunk(h: usize, reset_before: bool) -> usize {
    (LOOP_BUDGET / fwd_step_loops(h, reset_before)).max(1)
}

/// Timesteps per chunk (dispatch) of the backward recurrence.
pub fn bwd_chunk(h: usize) -> usize {
    (LOOP_BUDGET / bwd_step_loops(h)).max(1)
}

/// Loop passes one invocation of an attention kernel takes at most, for a
/// window `w`, `t` positions and head width `dh`, counted from
/// `attn_tile.glsl` and the kernels with room to spare: about 40 passes per
/// (chunk of 64 keys, chunk of 64 dims) pair in each kernel, 128 counted; the
/// clearing of the slots before each of the block's 16 rows (W/256 + 2
/// each), and the row reductions (256 in all).
pub fn attn_loops(w: usize, t: usize, dh: usize) -> usize {
    let key_chunks = (w.min(t) + ATTN_BLOCK as usize - 1).div_ceil(64);
    let tiled = 128 * (key_chunks + 1) * (dh.div_ceil(64) + 1) + 16 * (w / 256 + 2) + 256;
    // The wide kernels (`attn_wide.glsl`, their loops of 4 unrolled): per
    // (chunk of 64 keys, chunk of 64 dims) 17 passes of the dot products and
    // 17 of the weighted sums with two barriers each, about 44 (64 counted);
    // the clearing before each of the block's 64 rows; the reductions (~60).
    let wide_chunks = (w.min(t) + ATTN_WIDE_BLOCK as usize - 1).div_ceil(64);
    let wide = 64 * (wide_chunks + 1) * (dh.div_ceil(64) + 1) + 64 * (w / 256 + 2) + 256;
    tiled.max(wide)
}

/// Refuses a batch whose loops would run past lavapipe's guard on a device
/// that has it (`guarded`: a CPU device), where the guard would end them
/// early and leave values unwritten: an attention window and head width
/// whose tiles do not fit one dispatch. Everywhere, a batch of more rows
/// than the per-row recurrence kernels take (one workgroup a row, at most
/// 65535 in a dispatch).
pub fn check_loop_bounds(cfg: &crate::model::Config, (t, b): (usize, usize), guarded: bool) -> Result<(), String> {
    if b > 65535 {
        return Err(format!("a batch of {b} rows: the recurrence kernels take at most 65535 rows"));
    }
    let loops = attn_loops(cfg.window, t, cfg.head_dim());
    if guarded && loops > LOOP_BUDGET {
        return Err(format!(
            "window {} with head width {}: the attention kernels would run {loops} loop passes per invocation, \
             past the {LOOP_BUDGET} this device (lavapipe) allows; use a smaller window or more heads",
            cfg.window,
            cfg.head_dim()
        ));
    }
    Ok(())
}

/// Whether `ctx`'s device ends long loops early: a CPU device (lavapipe).
pub fn loop_guarded(ctx: &crate::vk::Context) -> bool {
    ctx.report().device_type == "cpu"
}

/// Where the device has the loop guard: the grid barriers' polls a dispatch
/// may make in all (`pc.f1` of the grid kernels, see `include/grid.glsl`),
/// and the loop passes left to its arithmetic.
pub const GRID_POLL_BUDGET: u32 = 30000;
pub const GRID_ARITH_BUDGET: usize = 30000;

/// The grid kernels' `pc.f1` on `ctx`'s device: [`GRID_POLL_BUDGET`] where it
/// has the loop guard, else 0 (no budget).
pub fn grid_poll_budget(ctx: &crate::vk::Context) -> f32 {
    if loop_guarded(ctx) { GRID_POLL_BUDGET as f32 } else { 0.0 }
}

/// Loop passes of one step (or wavefront interval) of the grid recurrence
/// kernels for `b` rows, an upper bound counted from the shaders: passes
/// over the rows of at least 16 each (b/16 + 2), each with the accumulator
/// clears (21), the K chunks (≤ 5 at H ≤ 512), the subgroup sums (21), the
/// gate loop (3) and two barriers (4), 64 counted; the step loop and a grid
/// barrier's loops and barriers (16).
/// The cooperative-matrix kernels (16 rows a workgroup) take fewer.
pub fn grid_step_loops(b: usize) -> usize {
    (b / 16 + 2) * 64 + 16
}

/// Steps per dispatch of a grid or wavefront recurrence, on every device: its
/// loop passes stay under the guard lavapipe has (and any device might).
pub fn grid_chunk(b: usize) -> usize {
    (GRID_ARITH_BUDGET / grid_step_loops(b)).max(1)
}

/// Widest layer and most rows the one-workgroup recurrences take
/// (`gru_*_wg_cm`: W_hh of H = 128 in the registers of one workgroup,
/// the 16 rows of one cooperative-matrix tile).
pub const WG_MAX_HIDDEN: usize = 128;
pub const WG_MAX_ROWS: usize = 16;

/// One layer's recurrence in ONE workgroup (768 invocations forward, 512
/// backward: the registers NVIDIA gives a lane at those sizes hold the
/// fragments) for small layers (B ≤ 16, H ≤ 128, H % 16 == 0): W_hh in registers as f16
/// cooperative-matrix fragments, h_{t-1} through shared memory, workgroup
/// barriers only. The buffers of `GRU_FWD_GRID_CM` without the grid's sync
/// words and f16 copy. Where it runs: `Engine::recurrence_wg`.
pub static GRU_FWD_WG_CM: KernelSpec = KernelSpec {
    name: "gru_fwd_wg_cm",
    spirv: crate::vk::shaders::optional(shaders::GRU_FWD_WG_CM),
    bindings: &[R, R, W, W, RW],
    push_size: 64,
    local_size: [768, 1, 1],
    items_per_group: [1, 1, 1],
    // h_{t-1} (f16, two buffers), a K-tile of W_hh^T (f16), the 16 × 3H product.
    shared_bytes: 2 * 16 * 128 * 2 + 16 * 384 * 2 + 16 * 384 * 4,
};
pub static GRU_BWD_WG_CM: KernelSpec = KernelSpec {
    name: "gru_bwd_wg_cm",
    spirv: crate::vk::shaders::optional(shaders::GRU_BWD_WG_CM),
    bindings: &[R, R, R, R, R, RW, W, RW],
    local_size: [512, 1, 1],
    // d_gh (f16, two buffers of 16 × 3H) and two 16 × H partial sums.
    shared_bytes: 2 * 16 * 384 * 2 + 2 * 16 * 128 * 4,
    ..GRU_FWD_WG_CM
};
/// The same kernels with the product as f32 FMAs over the same f16-rounded
/// operands (W_hh read from memory each step): what runs them on devices
/// without cooperative matrices (lavapipe's tests), only where asked for
/// (`DUALSCOPE_WG=fma`).
pub static GRU_FWD_WG_FMA: KernelSpec = KernelSpec {
    name: "gru_fwd_wg_fma",
    spirv: shaders::GRU_FWD_WG_FMA,
    // h_{t-1} rounded, as f32, two buffers.
    shared_bytes: 2 * 16 * 128 * 4,
    ..GRU_FWD_WG_CM
};
pub static GRU_BWD_WG_FMA: KernelSpec = KernelSpec {
    name: "gru_bwd_wg_fma",
    spirv: shaders::GRU_BWD_WG_FMA,
    // d_gh[t+1] rounded, as f32, 16 × 3H.
    shared_bytes: 16 * 384 * 4,
    ..GRU_BWD_WG_CM
};

/// Loop passes of one step of the one-workgroup recurrences of width `h`,
/// an upper bound counted from the shaders: the FMA variant's product loops
/// (backward, the larger: four (row, unit) pairs an invocation, each over
/// 3h rows, 4 · (3h + 1); forward three over h), the pair loops and the step
/// loop (16, should the compiler keep them loops), three barriers (6); the
/// cooperative-matrix variant has only the last two (its product loops are
/// unrolled).
pub fn wg_step_loops(h: usize, fma: bool) -> usize {
    let product = if fma { 4 * (3 * h + 1) } else { 0 };
    product + 16 + 3 * BARRIER_LOOPS
}

/// Steps per dispatch of a one-workgroup recurrence: under the loop guard
/// after the once-per-dispatch loops (the W_hh staging: at most 24 rounds of
/// 2 passes and two barriers, and the operand loads), 2000 counted.
pub fn wg_chunk(h: usize, fma: bool) -> usize {
    ((LOOP_BUDGET - 2000) / wg_step_loops(h, fma)).max(1)
}

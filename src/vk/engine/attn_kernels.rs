//! The attention kernels' specs (`attn_*.comp`: blocks of 16 positions;
//! `attn_wide_*.comp`: blocks of 64) and which of them a step runs.

use crate::vk::kernel::Access::{Read as R, ReadWrite as RW, Write as W};
use crate::vk::kernel::KernelSpec;
use crate::vk::shaders;

/// Positions (queries, or keys for `attn_bwd_kv`) one attention workgroup
/// owns: `ATTN_QB` of `shaders/include/attn_tile.glsl`. The attention kernels
/// are dispatched over `[T, B, NH]` work items, one workgroup per block of
/// positions of one (row, head).
pub const ATTN_BLOCK: u32 = 16;

/// The attention kernels' shared memory (`attn_tile.glsl`): a 64×4 vec4 row
/// block, a 64×65 float tile and 16×64 floats of row reductions.
const ATTN_SHARED: u32 = (64 * 4 * 4 + 64 * 65 + 16 * 64) * 4;

pub static ATTN_FWD: KernelSpec = KernelSpec {
    name: "attn_fwd",
    spirv: shaders::ATTN_FWD,
    recurrence: false,
    bindings: &[R, R, R, RW, W, R, R],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [ATTN_BLOCK, 1, 1],
    shared_bytes: ATTN_SHARED,
};
pub static ATTN_BWD_Q: KernelSpec =
    KernelSpec { name: "attn_bwd_q", spirv: shaders::ATTN_BWD_Q, bindings: &[R, R, R, R, RW, W, R, R], ..ATTN_FWD };
pub static ATTN_BWD_KV: KernelSpec =
    KernelSpec { name: "attn_bwd_kv", spirv: shaders::ATTN_BWD_KV, bindings: &[R, R, R, R, W, W, W, W], ..ATTN_FWD };
pub static ATTN_FWD_FAULT_NO_MAX: KernelSpec =
    KernelSpec { name: "attn_fwd_fault_no_max", spirv: shaders::ATTN_FWD_FAULT_NO_MAX, ..ATTN_FWD };
pub static ATTN_FWD_FAULT_WINDOW: KernelSpec =
    KernelSpec { name: "attn_fwd_fault_window", spirv: shaders::ATTN_FWD_FAULT_WINDOW, ..ATTN_FWD };

/// Positions one workgroup of the wide attention kernels owns: `AW_QB` of
/// `shaders/include/attn_wide.glsl` (64 queries, or keys for the key kernel,
/// with 4 × 4 register tiles).
pub const ATTN_WIDE_BLOCK: u32 = 64;

/// The wide attention kernels' shared memory: two 64-row tiles of 16 vec4s
/// (the row reductions share the second), 32 KiB.
const ATTN_WIDE_SHARED: u32 = 2 * 64 * 16 * 4 * 4;

pub static ATTN_WIDE_FWD: KernelSpec = KernelSpec {
    name: "attn_wide_fwd",
    spirv: shaders::ATTN_WIDE_FWD,
    items_per_group: [ATTN_WIDE_BLOCK, 1, 1],
    shared_bytes: ATTN_WIDE_SHARED,
    ..ATTN_FWD
};
pub static ATTN_WIDE_BWD_Q: KernelSpec = KernelSpec {
    name: "attn_wide_bwd_q",
    spirv: shaders::ATTN_WIDE_BWD_Q,
    items_per_group: [ATTN_WIDE_BLOCK, 1, 1],
    shared_bytes: ATTN_WIDE_SHARED,
    ..ATTN_BWD_Q
};
pub static ATTN_WIDE_BWD_KV: KernelSpec = KernelSpec {
    name: "attn_wide_bwd_kv",
    spirv: shaders::ATTN_WIDE_BWD_KV,
    items_per_group: [ATTN_WIDE_BLOCK, 1, 1],
    shared_bytes: ATTN_WIDE_SHARED,
    ..ATTN_BWD_KV
};

/// Which attention kernels a step runs (`DUALSCOPE_ATTN`, [`super::EngineEnv`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttnKernels {
    /// The wide kernels where [`AttnKernels::wide_for`] expects them to be faster.
    #[default]
    Auto,
    /// The blocks of 16 queries (`attn_fwd`, `attn_bwd_q`, `attn_bwd_kv`) everywhere.
    Narrow,
    /// The blocks of 64 (`attn_wide_*`) everywhere.
    Wide,
}

impl AttnKernels {
    /// `auto`, `narrow` or `wide`.
    pub fn parse(s: &str) -> Result<AttnKernels, String> {
        match s {
            "auto" => Ok(AttnKernels::Auto),
            "narrow" => Ok(AttnKernels::Narrow),
            "wide" => Ok(AttnKernels::Wide),
            other => Err(format!("unknown attention kernels {other:?} (expected auto, narrow or wide)")),
        }
    }

    /// Whether a step of `t` positions, `b` rows, `heads` heads and window `w`
    /// runs the wide attention kernels. `Auto` takes them for windows of 64
    /// and more (a block of 64 queries sees W + 63 keys: at smaller windows
    /// most of its score tile is masked) when the grid still has at least 256
    /// workgroups (about two per SM of a large GPU: B = 1 rows of 512 keep the
    /// blocks of 16, whose 128 workgroups fill the device better than 32 wide
    /// ones).
    pub fn wide_for(self, t: usize, b: usize, heads: usize, w: usize) -> bool {
        match self {
            AttnKernels::Narrow => false,
            AttnKernels::Wide => true,
            AttnKernels::Auto => w >= 64 && t.div_ceil(ATTN_WIDE_BLOCK as usize) * b * heads >= 256,
        }
    }
}

//! Matrix products on the device: the kernels' specs, the path choice
//! (precision, device, user's choice), split-K, recording a product into a
//! sequence, host-side conveniences and the throughput benchmark.

mod host;
mod path;
mod record;
mod specs;
mod split;

pub use host::{gemm_host, gemm_host_timed, gemm_throughput, split_scratch};
pub use path::{F32Kernel, GemmPath, coopmat_f16_unavailable, coopmat_unavailable, path_for, pick_path};
pub use record::{Later, flush, gemm, gemm_bias, gemm_split, gemm_split_later, gemm_with};
pub use specs::*;
#[cfg(feature = "lab")]
pub use split::SPLIT_K_PROBE_SLICES;
pub use split::{
    GemmShape, MatRef, SPLIT_K_FEW_TILES, SPLIT_K_FEW_TILES_GROUPS, SPLIT_K_MAX_SHORT_SLICES, SPLIT_K_MIN_SHORT_SLICE,
    SPLIT_K_MIN_SLICE, SPLIT_K_SMALL_OUTPUT, SPLIT_K_TARGET_GROUPS, SplitK, part, split_k_min_slice, split_k_plan,
    split_k_scratch_len,
};

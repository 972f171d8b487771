//! What the layers above the engine may hold of the Vulkan engine without
//! driving a step: the device context (opened once and shared), what it
//! reports, how a step is timed, its errors, and the products' kernels for the
//! throughput benchmark and the ladder's first rung. Everything else of `vk`
//! stays behind [`super::Engine`] (docs/architecture.md, "The engine's surface").

pub use crate::vk::engine::default_map;
pub use crate::vk::gemm::{F32Kernel, GemmPath, GemmShape, gemm_throughput, pick_path};
pub use crate::vk::shader_dir::{self, ShaderDir};
pub use crate::vk::{Context, ContextOptions, DeviceReport, Timing, VkError, kernels_created};

/// A Vulkan context shared by several engines (the GUI opens one and keeps it),
/// handed to a training plan.
#[derive(Clone)]
pub struct SharedGpu(pub std::sync::Arc<Context>);

impl std::fmt::Debug for SharedGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedGpu")
    }
}

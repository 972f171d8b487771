//! The Vulkan engine: a context (instance, device, queue, allocator), buffers,
//! kernels (pipeline + layouts + push constants) and sequences (record many
//! dispatches, submit once, wait, read timestamps). It knows nothing of the CLI
//! or the UI; Vulkan is loaded at run time, so a machine without it gets a
//! clear [`VkError::NoLoader`] / [`VkError::NoDevice`], not a link failure.
//!
//! Module order (each uses only those above it): `error`, `validation`, `device`, `inner`
//! (the shared device state), `kernel`, `context`, `buffer`, `recorder`,
//! `gemm`, `engine`; and `switches` (the environment's switches, read once),
//! which any of them reads.

mod buffer;
mod context;
mod device;
pub mod engine;
mod error;
pub mod gemm;
mod inner;
mod kernel;
mod recorder;
mod shader_build;
pub mod shader_dir;
mod shaders;
mod spirv;
pub mod switches;
mod validation;

pub use buffer::{Buffer, MemoryKind};
pub use context::{Context, ContextOptions, MessageCounts};
pub use device::{DeviceReport, DeviceSummary, Features, Limits};
pub use error::{VkError, VkResult};
pub use kernel::{Access, Kernel, KernelSpec, PushConstants, created as kernels_created, group_counts};
pub use recorder::{Bind, Dispatch, Recording, Sequence, Timing, Timings, kernel_of};
pub use validation::{Validation, ValidationSummary};

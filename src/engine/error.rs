//! What can go wrong in an [`Engine`](super::Engine): Vulkan missing or
//! unable to do what was asked (the front ends' "engine unavailable"), the
//! Vulkan engine failing once open, validation errors, a request that makes
//! no sense for the engine, or the CPU reference refusing a batch.

use crate::cpu::CpuError;
use crate::vk::VkError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No Vulkan device could be opened (no loader, no device, no such index).
    #[error("{0}")]
    NoVulkan(VkError),
    /// The open device or this build lacks what was asked of it.
    #[error("{0}")]
    Unsupported(VkError),
    /// The Vulkan engine failed once open (allocation, lost device, …).
    #[error("{0}")]
    Vulkan(VkError),
    /// The validation layer reported this many errors: no result is trustworthy.
    #[error("the Vulkan validation layer reported {0} error(s) (see above)")]
    Validation(u64),
    /// A request the engine cannot take (say, the mixed-precision step on the CPU).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Cpu(#[from] CpuError),
}

impl EngineError {
    /// Whether the engine asked for is not available here (as opposed to a
    /// failure of the work itself).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, EngineError::NoVulkan(_) | EngineError::Unsupported(_) | EngineError::Usage(_))
    }
}

/// An error of the Vulkan engine once the device is open: what the device or
/// this build cannot do is [`EngineError::Unsupported`], anything else a
/// failure.
impl From<VkError> for EngineError {
    fn from(e: VkError) -> Self {
        match e {
            VkError::NoLoader(_) | VkError::NoDevice(_) | VkError::BadDeviceIndex { .. } | VkError::Unsupported(_) => {
                EngineError::Unsupported(e)
            }
            e => EngineError::Vulkan(e),
        }
    }
}

//! The Vulkan engine's error type.

use ash::vk;

#[derive(Debug, thiserror::Error)]
pub enum VkError {
    /// `libvulkan.so.1` could not be loaded (no Vulkan loader installed).
    #[error(
        "no Vulkan loader: {0} (install libvulkan1 and a driver, e.g. mesa-vulkan-drivers for the lavapipe software device)"
    )]
    NoLoader(String),
    /// The loader works but lists no usable device.
    #[error("no Vulkan device: {0}")]
    NoDevice(String),
    /// The device index asked for does not exist.
    #[error("Vulkan device {index} does not exist: {count} device(s) found ({names})")]
    BadDeviceIndex { index: usize, count: usize, names: String },
    /// The device was lost (driver reset, hang, or a kernel that faulted).
    #[error("Vulkan device lost during {0}")]
    DeviceLost(&'static str),
    /// Any other failing Vulkan call.
    #[error("Vulkan call {what} failed: {result}")]
    Call { what: &'static str, result: vk::Result },
    #[error("GPU memory allocation of {name:?} ({bytes} bytes) failed: {msg}")]
    Alloc { name: String, bytes: u64, msg: String },
    /// A request past a device limit (group counts, buffer range, …).
    #[error("{0}")]
    Limit(String),
    /// A caller mistake the engine can name: wrong lengths, mismatched sizes.
    #[error("{0}")]
    Invalid(String),
    /// The device or this build lacks what an optional path needs.
    #[error("{0}")]
    Unsupported(String),
    #[error("timed out after {secs} s waiting for the GPU ({what})")]
    Timeout { what: &'static str, secs: u64 },
}

pub type VkResult<T> = Result<T, VkError>;

impl From<crate::step::ParseError> for VkError {
    fn from(e: crate::step::ParseError) -> VkError {
        VkError::Invalid(e.0)
    }
}

/// Maps a failing `vk::Result` to `VkError`, keeping device loss apart.
pub(crate) fn call(what: &'static str) -> impl Fn(vk::Result) -> VkError {
    move |result| match result {
        vk::Result::ERROR_DEVICE_LOST => VkError::DeviceLost(what),
        result => VkError::Call { what, result },
    }
}

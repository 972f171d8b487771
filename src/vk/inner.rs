//! The device-level state every Vulkan object shares: the instance, the
//! device, its queue and allocator, the validation counters and the parts
//! finished sequences leave for the next ones. Buffers, kernels, sequences
//! and the context each hold an `Arc<Inner>`, so the device outlives them
//! all. Below both `context` (which builds it) and `kernel` (which uses it).

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use ash::vk;
use gpu_allocator::vulkan::Allocator;

use super::device::Limits;

/// Validation messages seen so far, by severity.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub error: AtomicU64,
    pub warning: AtomicU64,
    pub info: AtomicU64,
    pub verbose: AtomicU64,
}

/// The owner of every Vulkan handle that lives as long as the context.
pub(crate) struct Inner {
    pub _entry: ash::Entry,
    pub instance: ash::Instance,
    pub debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    pub device: ash::Device,
    pub queue_family: u32,
    /// Queue submission must be externally synchronised.
    pub queue: Mutex<vk::Queue>,
    /// `None` only while dropping (it must go before the device).
    pub allocator: Mutex<Option<Allocator>>,
    pub limits: Limits,
    /// Nanoseconds per timestamp tick; `None` when the queue has no timestamps.
    pub timestamp_period: Option<f64>,
    /// How long a submit may take: a software device (lavapipe) runs a `bench`
    /// step in minutes, a GPU in milliseconds.
    pub fence_timeout_s: u64,
    /// How long a submit's wait polls its fence before it sleeps in the
    /// driver: zero on a software device, whose work runs on the same cores.
    pub fence_spin: std::time::Duration,
    pub counters: Box<Counters>,
    /// What finished sequences leave for the next ones (command pool and
    /// buffer, fence, timestamp pool, descriptor pools): creating and
    /// destroying them took about 0.9 ms per sequence on the H200, most of
    /// the host's share of a recorded training step.
    pub recycled: Mutex<Vec<SequenceParts>>,
    /// With `DUALSCOPE_PIPELINE_STATS=1` (a `lab` build) on a device that has
    /// it: the driver's statistics of each kernel, printed as it is built
    /// (`kernel.rs`).
    #[cfg(feature = "lab")]
    pub pipeline_stats: Option<ash::khr::pipeline_executable_properties::Device>,
}

/// The handles a sequence owns besides its recording (see `recorder`).
pub(crate) struct SequenceParts {
    pub pool: vk::CommandPool,
    pub cmd: vk::CommandBuffer,
    pub fence: vk::Fence,
    pub queries: vk::QueryPool,
    pub desc_pools: Vec<vk::DescriptorPool>,
}

impl SequenceParts {
    /// Destroys every handle (null ones are no-ops).
    ///
    /// # Safety
    /// No submitted work may still use them.
    pub unsafe fn destroy(self, d: &ash::Device) {
        // SAFETY: the caller guarantees no pending use; each handle is owned here.
        unsafe {
            for p in self.desc_pools {
                d.destroy_descriptor_pool(p, None);
            }
            d.destroy_query_pool(self.queries, None);
            d.destroy_fence(self.fence, None);
            d.destroy_command_pool(self.pool, None);
        }
    }
}

/// How many finished sequences' parts a context keeps.
pub(crate) const RECYCLED_SEQUENCES: usize = 4;

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: this is the last owner: every buffer, kernel and sequence
        // holds an `Arc<Inner>`, so all of them are gone. Waiting for idle
        // first means no submitted work still uses what is destroyed; the
        // order is the reverse of creation.
        unsafe {
            let _ = self.device.device_wait_idle();
            for parts in self.recycled.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
                parts.destroy(&self.device);
            }
        }
        drop(self.allocator.lock().unwrap_or_else(|p| p.into_inner()).take());
        // SAFETY: as above; the allocator, the last user of the device, is gone.
        unsafe {
            self.device.destroy_device(None);
            if let Some((utils, messenger)) = self.debug.take() {
                utils.destroy_debug_utils_messenger(messenger, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

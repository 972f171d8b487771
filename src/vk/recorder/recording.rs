//! The owned part of a sequence: its command buffer and handles, ended
//! once and submitted any number of times, and their recycling on drop.

use std::collections::HashMap;
use std::sync::Arc;

use ash::vk;

use super::MAX_TIMED;
use super::barriers::Tracker;
use super::timings::{Dispatch, Timing, Timings};
use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult, call};
use crate::vk::inner::{Inner, RECYCLED_SEQUENCES, SequenceParts};
use crate::vk::kernel::{Kernel, KernelSpec};

/// A descriptor set's layout and the byte ranges of the buffers it binds.
pub(super) type SetKey = (vk::DescriptorSetLayout, Vec<(vk::Buffer, std::ops::Range<u64>)>);

/// A command buffer with everything it needs besides its buffers: the
/// handles it owns (pool, fence, timestamps, descriptor pools), the barrier
/// state, the labels and the kernels it dispatches (kept alive by `Arc`). A
/// [`super::Sequence`] records into one while it borrows its buffers;
/// [`super::Sequence::into_recording`] hands it over once recording ended,
/// for a caller that keeps the buffers alive by other means.
pub struct Recording {
    pub(super) inner: Arc<Inner>,
    pub(super) pool: vk::CommandPool,
    pub(super) cmd: vk::CommandBuffer,
    pub(super) fence: vk::Fence,
    pub(super) queries: vk::QueryPool,
    pub(super) desc_pools: Vec<vk::DescriptorPool>,
    /// Recycled descriptor pools (reset, empty), used before new ones are made.
    pub(super) spare_desc_pools: Vec<vk::DescriptorPool>,
    pub(super) sets_left: u32,
    pub(super) tracker: Tracker,
    /// Each dispatch's label, timestamp slot and kernel.
    pub(super) labels: Vec<(String, Option<u32>, &'static KernelSpec)>,
    pub(super) timed: u32,
    pub(super) kernels: Vec<Arc<Kernel>>,
    /// Descriptor sets already written, by layout and bound buffers: a kernel
    /// dispatched many times on the same buffers (a recurrence) reuses one.
    pub(super) sets: HashMap<SetKey, vk::DescriptorSet>,
    pub(super) submitted: bool,
    pub(super) timing: Timing,
    /// Recording ended ([`super::Sequence::end`]): the buffer can be submitted again and again.
    pub(super) ended: bool,
    /// The last dispatch was a recurrence (`DUALSCOPE_BARRIER_PROBE=overlap` only).
    #[cfg(feature = "lab")]
    pub(super) last_recurrence: bool,
    /// Pipeline barriers recorded between commands so far.
    pub(super) barriers: usize,
}

impl Recording {
    /// A command buffer in the recording state, timed as `timing` says.
    pub(super) fn begin(ctx: &Context, timing: Timing) -> VkResult<Recording> {
        let inner = ctx.inner.clone();
        let mut s = Recording {
            inner,
            pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            queries: vk::QueryPool::null(),
            desc_pools: Vec::new(),
            spare_desc_pools: Vec::new(),
            sets_left: 0,
            tracker: Tracker::default(),
            labels: Vec::new(),
            timed: 0,
            kernels: Vec::new(),
            sets: HashMap::new(),
            submitted: false,
            timing,
            ended: false,
            #[cfg(feature = "lab")]
            last_recurrence: false,
            barriers: 0,
        };
        let recycled = s.inner.recycled.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let d = &s.inner.device;
        if let Some(parts) = recycled {
            // Owned by `s` from here: its `Drop` destroys or recycles them.
            s.pool = parts.pool;
            s.cmd = parts.cmd;
            s.fence = parts.fence;
            s.queries = parts.queries;
            s.spare_desc_pools = parts.desc_pools;
            // SAFETY: the parts come from a sequence whose work had finished
            // (see `Drop`); resetting returns the command buffer to the
            // initial state, frees every descriptor set, unsignals the fence.
            unsafe {
                d.reset_command_pool(s.pool, vk::CommandPoolResetFlags::empty()).map_err(call("vkResetCommandPool"))?;
                for &p in &s.spare_desc_pools {
                    d.reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty())
                        .map_err(call("vkResetDescriptorPool"))?;
                }
                d.reset_fences(&[s.fence]).map_err(call("vkResetFences"))?;
            }
        } else {
            // SAFETY: create-infos point into locals; every handle is owned by
            // `s`, whose `Drop` destroys it, also when a later step fails.
            unsafe {
                s.pool = d
                    .create_command_pool(
                        &vk::CommandPoolCreateInfo::default()
                            .queue_family_index(s.inner.queue_family)
                            .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                        None,
                    )
                    .map_err(call("vkCreateCommandPool"))?;
                s.cmd = d
                    .allocate_command_buffers(
                        &vk::CommandBufferAllocateInfo::default()
                            .command_pool(s.pool)
                            .level(vk::CommandBufferLevel::PRIMARY)
                            .command_buffer_count(1),
                    )
                    .map_err(call("vkAllocateCommandBuffers"))?[0];
                s.fence = d.create_fence(&vk::FenceCreateInfo::default(), None).map_err(call("vkCreateFence"))?;
                if s.inner.timestamp_period.is_some() {
                    s.queries = d
                        .create_query_pool(
                            &vk::QueryPoolCreateInfo::default()
                                .query_type(vk::QueryType::TIMESTAMP)
                                .query_count(2 * MAX_TIMED),
                            None,
                        )
                        .map_err(call("vkCreateQueryPool"))?;
                }
            }
        }
        // SAFETY: the command buffer is in the initial state (new or reset).
        unsafe {
            d.begin_command_buffer(s.cmd, &vk::CommandBufferBeginInfo::default())
                .map_err(call("vkBeginCommandBuffer"))?;
            if s.queries != vk::QueryPool::null() {
                d.cmd_reset_query_pool(s.cmd, s.queries, 0, 2 * MAX_TIMED);
                if timing == Timing::Span {
                    d.cmd_write_timestamp(s.cmd, vk::PipelineStageFlags::TOP_OF_PIPE, s.queries, 0);
                }
            }
        }
        Ok(s)
    }

    /// Ends recording (with every pending write made visible to the host).
    pub(super) fn end(&mut self) -> VkResult<()> {
        if self.ended {
            return Ok(());
        }
        let host = vk::PipelineStageFlags::HOST;
        let mut list = Vec::new();
        self.tracker.host_reads(&mut list);
        self.barrier(host, &list);
        // SAFETY: the command buffer is recording and is ended once (`ended`);
        // query 1 was reset at the start and is written once.
        unsafe {
            if self.timing == Timing::Span && self.queries != vk::QueryPool::null() {
                let bottom = vk::PipelineStageFlags::BOTTOM_OF_PIPE;
                self.inner.device.cmd_write_timestamp(self.cmd, bottom, self.queries, 1);
            }
            self.inner.device.end_command_buffer(self.cmd).map_err(call("vkEndCommandBuffer"))?
        };
        self.ended = true;
        Ok(())
    }

    /// Submits the ended recording once more, waits, and returns its
    /// per-dispatch times (the timestamp queries are reset by the recorded
    /// commands themselves).
    pub fn replay(&mut self) -> VkResult<Timings> {
        if !self.ended {
            return Err(VkError::Invalid("replay of a sequence still being recorded (call end first)".into()));
        }
        let d = &self.inner.device;
        // SAFETY: the command buffer is executable (ended) and not pending:
        // every earlier submit was waited for below; the fence is ours and is
        // reset only when no submit uses it; the queue is used under its mutex.
        unsafe {
            if self.submitted {
                d.reset_fences(&[self.fence]).map_err(call("vkResetFences"))?;
                self.submitted = false;
            }
            let cmds = [self.cmd];
            let info = [vk::SubmitInfo::default().command_buffers(&cmds)];
            let queue = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
            d.queue_submit(*queue, &info, self.fence).map_err(call("vkQueueSubmit"))?;
            self.submitted = true;
            drop(queue);
            let timeout_s = self.inner.fence_timeout_s;
            // Poll first, as CUDA's synchronize does by default: a thread
            // woken from vkWaitForFences can add tens of microseconds to a
            // step of a few milliseconds. Past `fence_spin` (zero on a
            // software device) it sleeps in the driver.
            let spin_until = std::time::Instant::now() + self.inner.fence_spin;
            while std::time::Instant::now() < spin_until {
                if d.get_fence_status(self.fence).map_err(call("vkGetFenceStatus"))? {
                    break;
                }
                std::hint::spin_loop();
            }
            match d.wait_for_fences(&[self.fence], true, timeout_s * 1_000_000_000) {
                Ok(()) => {}
                Err(vk::Result::TIMEOUT) => {
                    return Err(VkError::Timeout { what: "a submitted sequence", secs: timeout_s });
                }
                Err(e) => return Err(call("vkWaitForFences")(e)),
            }
        }
        let span = self.timing == Timing::Span && self.queries != vk::QueryPool::null();
        let written = if span { 2 } else { 2 * self.timed as usize };
        let mut stamps = vec![0u64; written];
        if written > 0 {
            // SAFETY: the fence signalled, so every written query is available.
            unsafe {
                d.get_query_pool_results(
                    self.queries,
                    0,
                    &mut stamps,
                    vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
                )
            }
            .map_err(call("vkGetQueryPoolResults"))?;
        }
        let period = self.inner.timestamp_period.unwrap_or(0.0);
        let dispatches = self
            .labels
            .iter()
            .map(|(label, slot, spec)| {
                let ns = slot.map(|q| {
                    let (a, b) = (stamps[2 * q as usize], stamps[2 * q as usize + 1]);
                    b.wrapping_sub(a) as f64 * period
                });
                Dispatch { label: label.clone(), ns, kernel: spec.name, recurrence: spec.recurrence }
            })
            .collect();
        let span_ns = span.then(|| stamps[1].wrapping_sub(stamps[0]) as f64 * period);
        Ok(Timings { dispatches, span_ns })
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let d = &self.inner.device;
        let parts = SequenceParts {
            pool: std::mem::take(&mut self.pool),
            cmd: std::mem::take(&mut self.cmd),
            fence: std::mem::take(&mut self.fence),
            queries: std::mem::take(&mut self.queries),
            desc_pools: self.desc_pools.drain(..).chain(self.spare_desc_pools.drain(..)).collect(),
        };
        // SAFETY: if the work was submitted we wait for it (or, failing that,
        // for the whole device) before the handles are destroyed or handed
        // on; only parts whose work is known to have finished are recycled.
        unsafe {
            let wait_ns = self.inner.fence_timeout_s * 1_000_000_000;
            let finished = !self.submitted || d.wait_for_fences(&[parts.fence], true, wait_ns).is_ok();
            if !finished {
                let _ = d.device_wait_idle();
            }
            let complete = parts.pool != vk::CommandPool::null()
                && parts.fence != vk::Fence::null()
                && (parts.queries != vk::QueryPool::null() || self.inner.timestamp_period.is_none());
            if finished && complete {
                let mut spare = self.inner.recycled.lock().unwrap_or_else(|p| p.into_inner());
                if spare.len() < RECYCLED_SEQUENCES {
                    spare.push(parts);
                    return;
                }
            }
            parts.destroy(d);
        }
    }
}

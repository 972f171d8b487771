//! A sequence: many dispatches and copies recorded into one command buffer,
//! with buffer barriers wherever one command depends on another, submitted
//! once, waited for on a fence, and timed per dispatch with timestamp queries.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use ash::vk;

use super::buffer::Buffer;
use super::context::{Context, Inner, RECYCLED_SEQUENCES, SequenceParts};
use super::error::{VkError, VkResult, call};
use super::kernel::{Kernel, PushConstants};

/// Dispatches timed per sequence; later ones run untimed.
const MAX_TIMED: u32 = 32768;
/// Descriptor sets per descriptor pool chunk.
const SETS_PER_POOL: u32 = 64;
/// Storage buffers per set at most (the widest kernel, `gru_bwd_wave_cm`, has 20).
const DESCRIPTORS_PER_SET: u32 = 24;

/// Per-dispatch device times of a finished sequence.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// `(label, nanoseconds)`; `None` when the device has no timestamps, the
    /// dispatch was past the timed capacity, or the sequence was timed as a
    /// whole ([`Timing::Span`]).
    pub dispatches: Vec<(String, Option<f64>)>,
    /// Nanoseconds from the sequence's first command to its last, for a
    /// sequence timed as a whole.
    pub span_ns: Option<f64>,
}

/// How a sequence is timed on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// A timestamp before and after every dispatch: the per-kernel
    /// breakdown. Each pair waits for its dispatch to finish, so dispatches
    /// that do not depend on each other cannot overlap.
    PerDispatch,
    /// One timestamp at the start and one at the end, as CUDA events around a
    /// graph: nothing is serialized that the barriers do not serialize.
    Span,
}

/// The kernel a dispatch label names, for per-kernel sums:
/// `gemm 8192x1536x256 tb` stays, `gru.l1 fwd recurrence` → `gru fwd recurrence`,
/// `adamw head.bias` → `adamw`.
pub fn kernel_of(label: &str) -> String {
    if label.starts_with("gemm") {
        return label.to_string();
    }
    if let Some(rest) = label.strip_prefix("gru.l") {
        return format!("gru{}", rest.trim_start_matches(|c: char| c.is_ascii_digit()));
    }
    label.split(' ').next().unwrap_or(label).to_string()
}

impl Timings {
    /// Milliseconds per kernel ([`kernel_of`] of each label), largest first.
    pub fn per_kernel_ms(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for (label, ns) in &self.dispatches {
            let Some(ns) = ns else { continue };
            let k = kernel_of(label);
            match out.iter_mut().find(|(n, _)| *n == k) {
                Some(x) => x.1 += ns / 1e6,
                None => out.push((k, ns / 1e6)),
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    /// Sum of the timed dispatches, in milliseconds, or for a sequence timed
    /// as a whole its span (`None` if nothing was timed).
    pub fn total_ms(&self) -> Option<f64> {
        let timed: Vec<f64> = self.dispatches.iter().filter_map(|d| d.1).collect();
        if timed.is_empty() {
            return self.span_ns.map(|ns| ns / 1e6);
        }
        Some(timed.iter().sum::<f64>() / 1e6)
    }
}

/// Pending accesses to one buffer since its last barrier.
#[derive(Clone, Copy, Default)]
struct Pending {
    /// Last write: its stage and access.
    write: Option<(vk::PipelineStageFlags, vk::AccessFlags)>,
    /// Stages the last write was made visible to.
    visible: vk::PipelineStageFlags,
    /// Stages that read since the last write.
    reads: vk::PipelineStageFlags,
}

/// One command buffer being recorded. Buffers used are borrowed for `'a`, so
/// they outlive the work; kernels are kept alive by `Arc`.
pub struct Sequence<'a> {
    inner: Arc<Inner>,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    fence: vk::Fence,
    queries: vk::QueryPool,
    desc_pools: Vec<vk::DescriptorPool>,
    /// Recycled descriptor pools (reset, empty), used before new ones are made.
    spare_desc_pools: Vec<vk::DescriptorPool>,
    sets_left: u32,
    pending: HashMap<vk::Buffer, Pending>,
    labels: Vec<(String, Option<u32>)>,
    timed: u32,
    kernels: Vec<Arc<Kernel>>,
    /// Descriptor sets already written, by layout and bound buffers: a kernel
    /// dispatched many times on the same buffers (a recurrence) reuses one.
    sets: HashMap<(vk::DescriptorSetLayout, Vec<vk::Buffer>), vk::DescriptorSet>,
    submitted: bool,
    timing: Timing,
    /// Recording ended ([`Sequence::end`]): the buffer can be submitted again and again.
    ended: bool,
    _buffers: PhantomData<&'a Buffer>,
}

impl<'a> Sequence<'a> {
    /// A sequence timed per dispatch ([`Timing::PerDispatch`]).
    pub fn new(ctx: &Context) -> VkResult<Sequence<'a>> {
        Self::with_timing(ctx, Timing::PerDispatch)
    }

    /// A sequence timed as `timing` says.
    pub fn with_timing(ctx: &Context, timing: Timing) -> VkResult<Sequence<'a>> {
        let inner = ctx.inner.clone();
        let mut s = Sequence {
            inner,
            pool: vk::CommandPool::null(),
            cmd: vk::CommandBuffer::null(),
            fence: vk::Fence::null(),
            queries: vk::QueryPool::null(),
            desc_pools: Vec::new(),
            spare_desc_pools: Vec::new(),
            sets_left: 0,
            pending: HashMap::new(),
            labels: Vec::new(),
            timed: 0,
            kernels: Vec::new(),
            sets: HashMap::new(),
            submitted: false,
            timing,
            ended: false,
            _buffers: PhantomData,
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

    fn check_recording(&self) -> VkResult<()> {
        if self.ended {
            return Err(VkError::Invalid("a command recorded after the sequence ended".into()));
        }
        Ok(())
    }

    fn check_buffer(&self, b: &Buffer) -> VkResult<()> {
        if !b.same_context(&self.inner) {
            return Err(VkError::Invalid(format!("buffer {:?} belongs to another Vulkan context", b.name())));
        }
        let range = self.inner.limits.max_storage_buffer_range as u64;
        if b.bytes() > range {
            return Err(VkError::Limit(format!(
                "buffer {:?} is {} bytes, past the device's maxStorageBufferRange {range}",
                b.name(),
                b.bytes()
            )));
        }
        Ok(())
    }

    /// Records the access of `buf` at `stage`, queueing the barrier it needs
    /// after earlier commands (read after write, write after read or write).
    fn access(
        &mut self,
        buf: vk::Buffer,
        stage: vk::PipelineStageFlags,
        read: vk::AccessFlags,
        write: vk::AccessFlags,
        out: &mut Vec<(vk::Buffer, vk::PipelineStageFlags, vk::AccessFlags, vk::AccessFlags)>,
    ) {
        let p = self.pending.entry(buf).or_default();
        if !write.is_empty() {
            if p.write.is_some() || !p.reads.is_empty() {
                let (ws, wa) = p.write.unwrap_or_default();
                out.push((buf, ws | p.reads, wa, read | write));
            }
            *p = Pending { write: Some((stage, write)), ..Default::default() };
        } else {
            if let Some((ws, wa)) = p.write
                && !p.visible.contains(stage)
            {
                out.push((buf, ws, wa, read));
                p.visible |= stage;
            }
            p.reads |= stage;
        }
    }

    fn barrier(
        &self,
        dst_stage: vk::PipelineStageFlags,
        list: &[(vk::Buffer, vk::PipelineStageFlags, vk::AccessFlags, vk::AccessFlags)],
    ) {
        if list.is_empty() {
            return;
        }
        let src_stage = list.iter().fold(vk::PipelineStageFlags::empty(), |s, b| s | b.1);
        let src_stage = if src_stage.is_empty() { vk::PipelineStageFlags::TOP_OF_PIPE } else { src_stage };
        let barriers: Vec<vk::BufferMemoryBarrier> = list
            .iter()
            .map(|&(buffer, _, src, dst)| {
                vk::BufferMemoryBarrier::default()
                    .src_access_mask(src)
                    .dst_access_mask(dst)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .buffer(buffer)
                    .offset(0)
                    .size(vk::WHOLE_SIZE)
            })
            .collect();
        // SAFETY: recording into our command buffer, which is in the recording
        // state; the buffers are borrowed for `'a` and so stay alive.
        unsafe {
            self.inner.device.cmd_pipeline_barrier(
                self.cmd,
                src_stage,
                dst_stage,
                vk::DependencyFlags::empty(),
                &[],
                &barriers,
                &[],
            )
        };
    }

    /// Dispatches recorded so far (the index the next one gets in [`Timings`]).
    pub fn dispatch_count(&self) -> usize {
        self.labels.len()
    }

    /// Copies `bytes` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    pub fn copy(
        &mut self,
        src: &'a Buffer,
        src_offset: u64,
        dst: &'a Buffer,
        dst_offset: u64,
        bytes: u64,
    ) -> VkResult<()> {
        self.check_recording()?;
        if src_offset + bytes > src.bytes() || dst_offset + bytes > dst.bytes() {
            return Err(VkError::Invalid(format!(
                "copy of {bytes} bytes from {:?}+{src_offset} ({} bytes) to {:?}+{dst_offset} ({} bytes) is out of range",
                src.name(),
                src.bytes(),
                dst.name(),
                dst.bytes()
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        let t = vk::PipelineStageFlags::TRANSFER;
        let mut list = Vec::new();
        self.access(src.handle, t, vk::AccessFlags::TRANSFER_READ, vk::AccessFlags::empty(), &mut list);
        self.access(dst.handle, t, vk::AccessFlags::empty(), vk::AccessFlags::TRANSFER_WRITE, &mut list);
        self.barrier(t, &list);
        let region = [vk::BufferCopy { src_offset, dst_offset, size: bytes }];
        // SAFETY: both buffers are live, of this device, borrowed for `'a`,
        // and the region lies inside both (checked above).
        unsafe { self.inner.device.cmd_copy_buffer(self.cmd, src.handle, dst.handle, &region) };
        Ok(())
    }

    /// Fills the whole of `dst` with the 32-bit word `value`.
    pub fn fill(&mut self, dst: &'a Buffer, value: u32) -> VkResult<()> {
        self.check_recording()?;
        self.check_buffer(dst)?;
        let t = vk::PipelineStageFlags::TRANSFER;
        let mut list = Vec::new();
        self.access(dst.handle, t, vk::AccessFlags::empty(), vk::AccessFlags::TRANSFER_WRITE, &mut list);
        self.barrier(t, &list);
        // SAFETY: the buffer is live, of this device and borrowed for `'a`;
        // WHOLE_SIZE fills it to its end (its size is a multiple of 4).
        unsafe { self.inner.device.cmd_fill_buffer(self.cmd, dst.handle, 0, vk::WHOLE_SIZE, value) };
        Ok(())
    }

    /// Records one dispatch of `kernel` over `work` items with `buffers` bound
    /// to its bindings in order. Checks the group counts against the device.
    pub fn dispatch<P: PushConstants>(
        &mut self,
        kernel: &Arc<Kernel>,
        buffers: &[&'a Buffer],
        push: &P,
        work: [u64; 3],
        label: &str,
    ) -> VkResult<()> {
        self.check_recording()?;
        let spec = kernel.spec;
        if buffers.len() != spec.bindings.len() {
            return Err(VkError::Invalid(format!(
                "kernel {} takes {} buffers, {} given",
                spec.name,
                spec.bindings.len(),
                buffers.len()
            )));
        }
        if std::mem::size_of::<P>() != spec.push_size as usize {
            return Err(VkError::Invalid(format!(
                "kernel {}: push constants of {} bytes, the shader's block is {}",
                spec.name,
                std::mem::size_of::<P>(),
                spec.push_size
            )));
        }
        for b in buffers {
            self.check_buffer(b)?;
        }
        let groups = kernel.group_counts(&self.inner.limits, work)?;
        let key = (kernel.set_layout, buffers.iter().map(|b| b.handle).collect::<Vec<_>>());
        let (set, fresh) = match self.sets.get(&key) {
            Some(&set) => (set, false),
            None => {
                let set = self.descriptor_set(kernel)?;
                self.sets.insert(key, set);
                (set, true)
            }
        };
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
            .iter()
            .map(|b| [vk::DescriptorBufferInfo { buffer: b.handle, offset: 0, range: vk::WHOLE_SIZE }])
            .collect();
        let writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        let cs = vk::PipelineStageFlags::COMPUTE_SHADER;
        let mut list = Vec::new();
        for (b, acc) in buffers.iter().zip(spec.bindings) {
            let r = if acc.reads() { vk::AccessFlags::SHADER_READ } else { vk::AccessFlags::empty() };
            let w = if acc.writes() { vk::AccessFlags::SHADER_WRITE } else { vk::AccessFlags::empty() };
            self.access(b.handle, cs, r, w, &mut list);
        }
        self.barrier(cs, &list);
        let per_dispatch = self.timing == Timing::PerDispatch && self.queries != vk::QueryPool::null();
        let slot = (per_dispatch && self.timed < MAX_TIMED).then_some(self.timed);
        let d = &self.inner.device;
        // SAFETY: a fresh set is written before any command uses it, a reused
        // one already holds exactly these buffers (the cache key); the command
        // buffer is recording; pipeline, layouts and set match (one kernel);
        // the push bytes have the size of the layout's range (checked above).
        unsafe {
            if fresh {
                d.update_descriptor_sets(&writes, &[]);
            }
            if let Some(q) = slot {
                d.cmd_write_timestamp(self.cmd, cs, self.queries, 2 * q);
            }
            d.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, kernel.pipeline);
            d.cmd_bind_descriptor_sets(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                kernel.pipeline_layout,
                0,
                &[set],
                &[],
            );
            if spec.push_size > 0 {
                d.cmd_push_constants(
                    self.cmd,
                    kernel.pipeline_layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    push.as_bytes(),
                );
            }
            d.cmd_dispatch(self.cmd, groups[0], groups[1], groups[2]);
            if let Some(q) = slot {
                d.cmd_write_timestamp(self.cmd, cs, self.queries, 2 * q + 1);
            }
        }
        if slot.is_some() {
            self.timed += 1;
        }
        self.labels.push((label.to_string(), slot));
        if !self.kernels.iter().any(|k| Arc::ptr_eq(k, kernel)) {
            self.kernels.push(kernel.clone());
        }
        Ok(())
    }

    fn descriptor_set(&mut self, kernel: &Kernel) -> VkResult<vk::DescriptorSet> {
        let d = &self.inner.device;
        if self.sets_left == 0
            && let Some(pool) = self.spare_desc_pools.pop()
        {
            self.desc_pools.push(pool);
            self.sets_left = SETS_PER_POOL;
        }
        if self.sets_left == 0 {
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: SETS_PER_POOL * DESCRIPTORS_PER_SET,
            }];
            // SAFETY: a valid create-info; the pool is owned by `self`.
            let pool = unsafe {
                d.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default().max_sets(SETS_PER_POOL).pool_sizes(&sizes),
                    None,
                )
            }
            .map_err(call("vkCreateDescriptorPool"))?;
            self.desc_pools.push(pool);
            self.sets_left = SETS_PER_POOL;
        }
        if kernel.spec.bindings.len() as u32 > DESCRIPTORS_PER_SET {
            return Err(VkError::Invalid(format!(
                "kernel {} has more than {DESCRIPTORS_PER_SET} bindings",
                kernel.spec.name
            )));
        }
        let layouts = [kernel.set_layout];
        let pool = *self.desc_pools.last().expect("pushed above");
        // SAFETY: the pool has room (counted by `sets_left`); the layout is live.
        let set = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts),
            )
        }
        .map_err(call("vkAllocateDescriptorSets"))?[0];
        self.sets_left -= 1;
        Ok(set)
    }

    /// Ends recording, submits, waits, and returns the per-dispatch times.
    /// Host-visible buffers written by the sequence can be read afterwards.
    pub fn submit(mut self) -> VkResult<Timings> {
        self.end()?;
        self.replay()
    }

    /// Ends recording (with every pending write made visible to the host).
    /// The recorded commands can then be run any number of times with
    /// [`Sequence::replay`], as a CUDA graph is: the same dispatches on the
    /// same buffers, with the push constants they were recorded with.
    pub fn end(&mut self) -> VkResult<()> {
        if self.ended {
            return Ok(());
        }
        let host = vk::PipelineStageFlags::HOST;
        let mut list = Vec::new();
        let bufs: Vec<vk::Buffer> = self.pending.keys().copied().collect();
        for b in bufs {
            self.access(b, host, vk::AccessFlags::HOST_READ, vk::AccessFlags::empty(), &mut list);
        }
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

    /// Submits the ended sequence once more, waits, and returns its
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
            .map(|(label, slot)| {
                let ns = slot.map(|q| {
                    let (a, b) = (stamps[2 * q as usize], stamps[2 * q as usize + 1]);
                    b.wrapping_sub(a) as f64 * period
                });
                (label.clone(), ns)
            })
            .collect();
        let span_ns = span.then(|| stamps[1].wrapping_sub(stamps[0]) as f64 * period);
        Ok(Timings { dispatches, span_ns })
    }
}

impl Drop for Sequence<'_> {
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

//! Recording commands: copies, fills and dispatches, each after the buffer
//! barriers its accesses need, and the descriptor sets the dispatches bind.

use std::sync::Arc;

use ash::vk;

use super::Bind;
use super::MAX_TIMED;
use super::barriers::BufferBarrier;
use super::recording::Recording;
use super::timings::Timing;
use crate::vk::buffer::Buffer;
use crate::vk::error::{VkError, VkResult, call};
use crate::vk::kernel::{Kernel, PushConstants};

/// A `lab` build's `DUALSCOPE_BARRIER_PROBE`.
#[cfg(feature = "lab")]
fn barrier_probe() -> Option<crate::vk::switches::BarrierProbe> {
    crate::vk::switches::switches().lab.barrier_probe
}

/// Descriptor sets per descriptor pool chunk.
const SETS_PER_POOL: u32 = 64;
/// Storage buffers per set at most (the widest kernel, `gru_bwd_wave_cm`, has 20).
const DESCRIPTORS_PER_SET: u32 = 24;

impl Recording {
    pub(super) fn check_recording(&self) -> VkResult<()> {
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

    pub(super) fn barrier(&mut self, dst_stage: vk::PipelineStageFlags, list: &[BufferBarrier]) {
        if list.is_empty() {
            return;
        }
        self.barriers += 1;
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
        // state; the buffers are alive while the recording is
        // (the borrow of `Sequence`, or the promise of `Sequence::into_recording`).
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

    /// The barrier of `DUALSCOPE_BARRIER_PROBE=overlap` (a `lab` build): a
    /// full memory barrier before and after every dispatch of a recurrence
    /// kernel ([`crate::vk::KernelSpec::recurrence`]), none between other
    /// dispatches, so that these overlap as far as the device lets them. A
    /// timing probe of what dependency tracking could gain at best: the
    /// results are meaningless.
    #[cfg(feature = "lab")]
    fn overlap_probe_barrier(&mut self, recurrence: bool) {
        if recurrence || self.last_recurrence {
            let cs = vk::PipelineStageFlags::COMPUTE_SHADER;
            let rw = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE;
            let all = [vk::MemoryBarrier::default().src_access_mask(rw).dst_access_mask(rw)];
            // SAFETY: recording into our command buffer, which is in the recording state.
            unsafe {
                self.inner.device.cmd_pipeline_barrier(self.cmd, cs, cs, vk::DependencyFlags::empty(), &all, &[], &[])
            };
        }
        self.last_recurrence = recurrence;
    }

    /// The bytes a binding covers: the whole buffer, or its part, which must
    /// start on the device's storage-buffer offset alignment and lie inside.
    fn bound_range(&self, b: &Bind<'_>) -> VkResult<std::ops::Range<u64>> {
        let Some((offset, len)) = b.part else { return Ok(0..b.buf.bytes()) };
        let align = self.inner.limits.min_storage_buffer_offset_alignment.max(1);
        if len == 0 || !offset.is_multiple_of(align) || offset.checked_add(len).is_none_or(|e| e > b.buf.bytes()) {
            return Err(VkError::Invalid(format!(
                "a binding of {len} bytes at {offset} of buffer {:?} ({} bytes): empty, outside it, or not on the device's {align}-byte offset alignment",
                b.buf.name(),
                b.buf.bytes()
            )));
        }
        Ok(offset..offset + len)
    }

    /// Dispatches recorded so far (the index the next one gets in [`Timings`]).
    pub(super) fn dispatch_count(&self) -> usize {
        self.labels.len()
    }

    /// Copies `bytes` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    pub(super) fn copy(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
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
        let (read, write) = (vk::AccessFlags::TRANSFER_READ, vk::AccessFlags::TRANSFER_WRITE);
        let none = vk::AccessFlags::empty();
        self.tracker.access(src.handle, src_offset..src_offset + bytes, t, read, none, &mut list);
        self.tracker.access(dst.handle, dst_offset..dst_offset + bytes, t, none, write, &mut list);
        self.barrier(t, &list);
        let region = [vk::BufferCopy { src_offset, dst_offset, size: bytes }];
        // SAFETY: both buffers are live, of this device, alive while the recording is,
        // and the region lies inside both (checked above).
        unsafe { self.inner.device.cmd_copy_buffer(self.cmd, src.handle, dst.handle, &region) };
        Ok(())
    }

    /// Fills the whole of `dst` with the 32-bit word `value`.
    pub(super) fn fill(&mut self, dst: &Buffer, value: u32) -> VkResult<()> {
        self.check_recording()?;
        self.check_buffer(dst)?;
        let t = vk::PipelineStageFlags::TRANSFER;
        let mut list = Vec::new();
        let write = vk::AccessFlags::TRANSFER_WRITE;
        self.tracker.access(dst.handle, 0..dst.bytes(), t, vk::AccessFlags::empty(), write, &mut list);
        self.barrier(t, &list);
        // SAFETY: the buffer is live, of this device and alive while the recording is;
        // WHOLE_SIZE fills it to its end (its size is a multiple of 4).
        unsafe { self.inner.device.cmd_fill_buffer(self.cmd, dst.handle, 0, vk::WHOLE_SIZE, value) };
        Ok(())
    }

    /// Records one dispatch of `kernel` over `work` items with `buffers` bound
    /// to its bindings in order, each whole or the part a [`Bind`] names.
    /// Checks the group counts against the device.
    pub(super) fn dispatch<P: PushConstants>(
        &mut self,
        kernel: &Arc<Kernel>,
        buffers: &[Bind<'_>],
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
        let mut ranges = Vec::with_capacity(buffers.len());
        for b in buffers {
            self.check_buffer(b.buf)?;
            ranges.push(self.bound_range(b)?);
        }
        let groups = kernel.group_counts(&self.inner.limits, work)?;
        let key = (kernel.set_layout, buffers.iter().zip(&ranges).map(|(b, r)| (b.buf.handle, r.clone())).collect());
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
            .zip(&ranges)
            .map(|(b, r)| {
                let range = if b.part.is_some() { r.end - r.start } else { vk::WHOLE_SIZE };
                [vk::DescriptorBufferInfo { buffer: b.buf.handle, offset: r.start, range }]
            })
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
        // The barriers this dispatch needs, from its kernel's declared access
        // to each binding's bytes.
        let cs = vk::PipelineStageFlags::COMPUTE_SHADER;
        let mut list = Vec::new();
        for ((b, range), acc) in buffers.iter().zip(ranges).zip(spec.bindings) {
            let r = if acc.reads() { vk::AccessFlags::SHADER_READ } else { vk::AccessFlags::empty() };
            let w = if acc.writes() { vk::AccessFlags::SHADER_WRITE } else { vk::AccessFlags::empty() };
            #[cfg(feature = "lab")]
            let range =
                if barrier_probe() == Some(crate::vk::switches::BarrierProbe::Whole) { 0..u64::MAX } else { range };
            self.tracker.access(b.buf.handle, range, cs, r, w, &mut list);
        }
        #[cfg(feature = "lab")]
        if barrier_probe() == Some(crate::vk::switches::BarrierProbe::Overlap) {
            self.overlap_probe_barrier(spec.recurrence);
            list.clear();
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
        self.labels.push((label.to_string(), slot, spec));
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
}

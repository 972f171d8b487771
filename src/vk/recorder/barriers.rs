//! Which barriers a command needs: each buffer's accesses since its last
//! barrier (read after write, write after read or write).

use std::collections::HashMap;

use ash::vk;

/// A buffer barrier to record: the buffer, the stages to wait for, the
/// accesses to make available, the accesses to make them visible to.
pub(super) type BufferBarrier = (vk::Buffer, vk::PipelineStageFlags, vk::AccessFlags, vk::AccessFlags);

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

/// The pending accesses of every buffer a recording used.
#[derive(Default)]
pub(super) struct Tracker {
    pending: HashMap<vk::Buffer, Pending>,
}

impl Tracker {
    /// Records the access of `buf` at `stage`, queueing the barrier it needs
    /// after earlier commands (read after write, write after read or write).
    pub(super) fn access(
        &mut self,
        buf: vk::Buffer,
        stage: vk::PipelineStageFlags,
        read: vk::AccessFlags,
        write: vk::AccessFlags,
        out: &mut Vec<BufferBarrier>,
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

    /// Queues the barriers that make every buffer's last write visible to
    /// host reads (the end of a recording).
    pub(super) fn host_reads(&mut self, out: &mut Vec<BufferBarrier>) {
        let bufs: Vec<vk::Buffer> = self.pending.keys().copied().collect();
        for b in bufs {
            self.access(b, vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ, vk::AccessFlags::empty(), out);
        }
    }
}

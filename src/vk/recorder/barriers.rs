//! Which barriers a command needs: each buffer's accesses since its last
//! barrier, by byte range (read after write, write after read or write). Two
//! commands that touch disjoint ranges of one buffer need no barrier between
//! them, so independent dispatches (the weight gradients, each writing its
//! own tensor) may run at the same time.

use std::collections::HashMap;
use std::ops::Range;

use ash::vk;

/// A buffer barrier to record: the buffer, the stages to wait for, the
/// accesses to make available, the accesses to make them visible to.
pub(super) type BufferBarrier = (vk::Buffer, vk::PipelineStageFlags, vk::AccessFlags, vk::AccessFlags);

/// Pending accesses to one buffer since its last barrier.
#[derive(Clone, Default)]
struct Pending {
    /// Writes since the last barrier: bytes, stage, access.
    writes: Vec<(Range<u64>, vk::PipelineStageFlags, vk::AccessFlags)>,
    /// Reads since the last barrier: bytes, stage.
    reads: Vec<(Range<u64>, vk::PipelineStageFlags)>,
    /// Accesses before the last barrier: their stages and write accesses.
    settled: Option<(vk::PipelineStageFlags, vk::AccessFlags)>,
    /// The stage the last barrier made them visible to (and ordered
    /// before), and the accesses it made them visible to.
    settled_for: vk::PipelineStageFlags,
    settled_for_access: vk::AccessFlags,
}

/// The accesses of `stage` a barrier makes earlier writes visible to: both
/// reads and writes of a shader or a transfer, so that either may follow.
fn visible_to(stage: vk::PipelineStageFlags, access: vk::AccessFlags) -> vk::AccessFlags {
    if stage == vk::PipelineStageFlags::COMPUTE_SHADER {
        access | vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE
    } else if stage == vk::PipelineStageFlags::TRANSFER {
        access | vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE
    } else {
        access
    }
}

fn overlap(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The pending accesses of every buffer a recording used.
#[derive(Default)]
pub(super) struct Tracker {
    pending: HashMap<vk::Buffer, Pending>,
}

impl Tracker {
    /// Records the access of bytes `range` of `buf` at `stage`, queueing the
    /// barrier it needs after earlier commands: one over the whole buffer,
    /// waiting for every access since the last one, where this access
    /// overlaps a write not yet behind a barrier (read or write after write),
    /// a write overlaps a read (write after read), or an earlier barrier did
    /// not cover this stage and kind of access.
    pub(super) fn access(
        &mut self,
        buf: vk::Buffer,
        range: Range<u64>,
        stage: vk::PipelineStageFlags,
        read: vk::AccessFlags,
        write: vk::AccessFlags,
        out: &mut Vec<BufferBarrier>,
    ) {
        let p = self.pending.entry(buf).or_default();
        let writes = !write.is_empty();
        let hazard = p.writes.iter().any(|w| overlap(&w.0, &range))
            || (writes && p.reads.iter().any(|r| overlap(&r.0, &range)))
            || (p.settled.is_some() && !(p.settled_for.contains(stage) && p.settled_for_access.contains(read | write)));
        if hazard {
            let (mut src, mut src_access) = p.settled.unwrap_or_default();
            for w in &p.writes {
                src |= w.1;
                src_access |= w.2;
            }
            for r in &p.reads {
                src |= r.1;
            }
            let dst = visible_to(stage, read | write);
            out.push((buf, src, src_access, dst));
            *p = Pending {
                settled: Some((src, src_access)),
                settled_for: stage,
                settled_for_access: dst,
                ..Default::default()
            };
        }
        if writes {
            p.writes.push((range, stage, write));
        } else if !p.reads.iter().any(|r| r.1 == stage && r.0.start <= range.start && range.end <= r.0.end) {
            p.reads.push((range, stage));
        }
    }

    /// Queues the barriers that make every buffer's last write visible to
    /// host reads (the end of a recording).
    pub(super) fn host_reads(&mut self, out: &mut Vec<BufferBarrier>) {
        let bufs: Vec<vk::Buffer> = self.pending.keys().copied().collect();
        for b in bufs {
            let h = vk::PipelineStageFlags::HOST;
            self.access(b, 0..u64::MAX, h, vk::AccessFlags::HOST_READ, vk::AccessFlags::empty(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use ash::vk::Handle;

    use super::*;

    const CS: vk::PipelineStageFlags = vk::PipelineStageFlags::COMPUTE_SHADER;
    const R: vk::AccessFlags = vk::AccessFlags::SHADER_READ;
    const W: vk::AccessFlags = vk::AccessFlags::SHADER_WRITE;
    const NONE: vk::AccessFlags = vk::AccessFlags::empty();

    fn buf(i: u64) -> vk::Buffer {
        vk::Buffer::from_raw(i)
    }

    /// Barriers an access queues.
    fn access(t: &mut Tracker, b: u64, r: Range<u64>, read: bool, write: bool) -> usize {
        let mut out = Vec::new();
        t.access(buf(b), r, CS, if read { R } else { NONE }, if write { W } else { NONE }, &mut out);
        out.len()
    }

    #[test]
    fn disjoint_writes_need_no_barrier_and_overlapping_ones_do() {
        let mut t = Tracker::default();
        assert_eq!(access(&mut t, 1, 0..64, false, true), 0);
        assert_eq!(access(&mut t, 1, 64..128, false, true), 0, "disjoint write");
        assert_eq!(access(&mut t, 1, 100..101, false, true), 1, "write after write");
        // That barrier covered everything before it: the first range is free.
        assert_eq!(access(&mut t, 1, 0..64, false, true), 0);
        assert_eq!(access(&mut t, 2, 0..64, false, true), 0, "another buffer");
    }

    #[test]
    fn reads_wait_for_overlapping_writes_and_writes_for_overlapping_reads() {
        let mut t = Tracker::default();
        assert_eq!(access(&mut t, 1, 0..64, false, true), 0);
        assert_eq!(access(&mut t, 1, 64..128, true, false), 0, "read of another range");
        assert_eq!(access(&mut t, 1, 32..96, true, false), 1, "read after write");
        assert_eq!(access(&mut t, 1, 0..64, true, false), 0, "already visible to this stage");
        assert_eq!(access(&mut t, 1, 200..300, false, true), 0, "write beside the reads");
        assert_eq!(access(&mut t, 1, 60..70, false, true), 1, "write after read");
    }

    #[test]
    fn a_read_after_a_write_after_write_barrier_needs_none_and_sees_both() {
        let mut t = Tracker::default();
        access(&mut t, 1, 0..64, false, true);
        let mut out = Vec::new();
        t.access(buf(1), 0..64, CS, NONE, W, &mut out);
        assert_eq!(out.len(), 1, "write after write");
        assert!(out[0].3.contains(R | W), "made visible to reads too: {:?}", out[0].3);
        assert_eq!(access(&mut t, 1, 32..64, true, false), 1, "read of the newest write");
    }

    #[test]
    fn the_host_waits_for_every_write_even_one_already_behind_a_barrier() {
        let mut t = Tracker::default();
        access(&mut t, 1, 0..64, false, true);
        access(&mut t, 1, 0..64, true, false);
        let mut out = Vec::new();
        t.host_reads(&mut out);
        assert_eq!(out.len(), 1);
        let (_, src, src_access, dst) = out[0];
        assert!(src.contains(CS) && src_access.contains(W) && dst.contains(vk::AccessFlags::HOST_READ));
    }

    #[test]
    fn a_transfer_after_compute_writes_waits_for_them() {
        let mut t = Tracker::default();
        access(&mut t, 1, 0..64, false, true);
        access(&mut t, 1, 0..64, true, false);
        let mut out = Vec::new();
        let tr = vk::PipelineStageFlags::TRANSFER;
        t.access(buf(1), 1000..1004, tr, NONE, vk::AccessFlags::TRANSFER_WRITE, &mut out);
        assert_eq!(out.len(), 1, "a stage the last barrier did not cover");
    }
}

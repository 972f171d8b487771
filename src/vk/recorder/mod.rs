//! A sequence: many dispatches and copies recorded into one command buffer,
//! with buffer barriers wherever one command depends on another, submitted
//! once, waited for on a fence, and timed per dispatch with timestamp queries.
//!
//! [`Sequence`] borrows the buffers it records, so the compiler holds them
//! alive for as long as it can run; [`Recording`] is the same command buffer
//! without the borrow, for a cache that guarantees that by other means.

mod barriers;
mod commands;
mod recording;
mod timings;

use std::marker::PhantomData;
use std::sync::Arc;

pub use recording::Recording;
pub use timings::{Dispatch, Timing, Timings, kernel_of};

use super::buffer::Buffer;
use super::context::Context;
use super::error::VkResult;
use super::kernel::{Kernel, PushConstants};

/// Dispatches timed per sequence; later ones run untimed.
const MAX_TIMED: u32 = 32768;

/// What one binding of a dispatch sees: the whole buffer, or `part`, its
/// bytes `(offset, len)` (the offset on the device's
/// `minStorageBufferOffsetAlignment`).
#[derive(Clone, Copy, Debug)]
pub struct Bind<'a> {
    pub buf: &'a Buffer,
    pub part: Option<(u64, u64)>,
}

impl<'a> Bind<'a> {
    pub fn whole(buf: &'a Buffer) -> Bind<'a> {
        Bind { buf, part: None }
    }
}

/// One command buffer being recorded. Buffers used are borrowed for `'a`, so
/// they outlive the work; kernels are kept alive by `Arc`.
pub struct Sequence<'a> {
    rec: Recording,
    _buffers: PhantomData<&'a Buffer>,
}

impl<'a> Sequence<'a> {
    /// A sequence timed per dispatch ([`Timing::PerDispatch`]).
    pub fn new(ctx: &Context) -> VkResult<Sequence<'a>> {
        Self::with_timing(ctx, Timing::PerDispatch)
    }

    /// A sequence timed as `timing` says.
    pub fn with_timing(ctx: &Context, timing: Timing) -> VkResult<Sequence<'a>> {
        Ok(Sequence { rec: Recording::begin(ctx, timing)?, _buffers: PhantomData })
    }

    /// Dispatches recorded so far (the index the next one gets in [`Timings`]).
    pub fn dispatch_count(&self) -> usize {
        self.rec.dispatch_count()
    }

    /// Pipeline barriers recorded between commands so far: commands with no
    /// barrier between them may run at the same time.
    pub fn barrier_count(&self) -> usize {
        self.rec.barriers
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
        self.rec.copy(src, src_offset, dst, dst_offset, bytes)
    }

    /// Fills the whole of `dst` with the 32-bit word `value`.
    pub fn fill(&mut self, dst: &'a Buffer, value: u32) -> VkResult<()> {
        self.rec.fill(dst, value)
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
        let binds: Vec<Bind<'a>> = buffers.iter().map(|&buf| Bind::whole(buf)).collect();
        self.rec.dispatch(kernel, &binds, push, work, label)
    }

    /// [`Sequence::dispatch`] with each binding whole or a part of its
    /// buffer: the kernel then sees only that part (its indices start at the
    /// part's first byte), and only that part counts for the barriers, so
    /// dispatches that write disjoint parts of one buffer may overlap.
    pub fn dispatch_bound<P: PushConstants>(
        &mut self,
        kernel: &Arc<Kernel>,
        binds: &[Bind<'a>],
        push: &P,
        work: [u64; 3],
        label: &str,
    ) -> VkResult<()> {
        self.rec.dispatch(kernel, binds, push, work, label)
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
        self.rec.end()
    }

    /// Submits the ended sequence once more, waits, and returns its
    /// per-dispatch times (the timestamp queries are reset by the recorded
    /// commands themselves).
    pub fn replay(&mut self) -> VkResult<Timings> {
        self.rec.replay()
    }

    /// Ends recording and hands the command buffer over without the borrow
    /// of its buffers, to be replayed later ([`Recording::replay`]).
    ///
    /// # Safety
    /// Every buffer recorded into this sequence must stay alive, and must not
    /// be replaced by another, for as long as the returned [`Recording`]
    /// exists (its drop waits for work in flight, so its last replay is done
    /// by then).
    pub unsafe fn into_recording(mut self) -> VkResult<Recording> {
        self.end()?;
        Ok(self.rec)
    }
}

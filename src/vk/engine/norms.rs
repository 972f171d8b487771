//! The controller's inputs on the device, and the training step split around
//! them without reading any gradient back (docs/gpu-step.md, "The controller's split step").
//!
//! `grad_norms.comp` reduces the flat gradient buffer's tensor segments (see
//! [`ParamLayout`]) into each tensor's sum of squares, a float-float pair (hi,
//! lo: about 48 bits, as good as the host's f64 sum for the controller), and
//! its count of non-finite values, in an order fixed by the layout alone. The
//! host reads back 12 bytes per tensor and the 128 bytes of state words.
//!
//! [`Engine::compute_split`] runs forward, backward and the norms in one
//! submit and leaves the gradients as backward left them (scaled by this
//! step's loss scale); [`Engine::apply_split`] then runs the optimizer stage
//! on them, as [`super::Plan::Stages`] with [`Stage::Optim`] would (its own
//! unscale included). Both are recorded once and replayed, as the whole step
//! of [`super::Replay::Yes`].

use super::io::state_words;
use super::kernels::{GRAD_NORMS, GRAD_NORMS_TENSORS, ModelPush, st};
use super::layout::ParamLayout;
use super::{Engine, Stage};
use crate::dataset::Batch;
use crate::step::StepReport;
use crate::vk::recorder::Recording;
use crate::vk::{Buffer, Context, Sequence, Timings, VkError, VkResult};

/// Values one chunk of the norms' first pass holds at most (one workgroup of
/// 256 lanes, 16 values each: far from lavapipe's loop guard).
pub const NORM_CHUNK: usize = 4096;

/// The chunks' table (`grad_norms.comp`): each chunk's offset and length,
/// then each tensor's first chunk and chunk count. Returns the words, the
/// chunk count and where the tensors' entries start.
pub fn norm_table(layout: &ParamLayout) -> (Vec<u32>, usize, usize) {
    let mut chunks = Vec::new();
    let mut tensors = Vec::new();
    for e in &layout.entries {
        let first = chunks.len() / 2;
        let mut at = 0;
        while at < e.len {
            let len = NORM_CHUNK.min(e.len - at);
            chunks.extend([(e.offset + at) as u32, len as u32]);
            at += len;
        }
        tensors.extend([first as u32, (chunks.len() / 2 - first) as u32]);
    }
    let n = chunks.len() / 2;
    let at = chunks.len();
    chunks.extend(tensors);
    (chunks, n, at)
}

/// The norms' buffers: the table, the chunks' partial sums, each tensor's
/// result and its host-visible copy.
pub struct NormBufs {
    table: Buffer,
    part: Buffer,
    out: Buffer,
    host: Buffer,
    chunks: usize,
    tensors: usize,
    tensors_at: usize,
}

impl NormBufs {
    pub(super) fn new(ctx: &Context, layout: &ParamLayout) -> VkResult<NormBufs> {
        let (words, chunks, tensors_at) = norm_table(layout);
        let tensors = layout.entries.len();
        let table = Buffer::device_f32(ctx, "norms.table", words.len())?;
        let part = Buffer::device_f32(ctx, "norms.partials", 3 * chunks.max(1))?;
        let out = Buffer::device_f32(ctx, "norms.out", 3 * tensors.max(1))?;
        let host = Buffer::readback_f32(ctx, "norms.host", 3 * tensors.max(1))?;
        Ok(NormBufs { table, part, out, host, chunks, tensors, tensors_at })
    }

    /// The table's words, which the engine uploads once.
    pub(super) fn table_words(layout: &ParamLayout) -> Vec<f32> {
        norm_table(layout).0.into_iter().map(f32::from_bits).collect()
    }

    pub(super) fn table(&self) -> &Buffer {
        &self.table
    }
}

/// Each tensor's gradient sum of squares and non-finite count, canonical order,
/// of the gradients as the device holds them (scaled by the step's loss scale
/// after [`Engine::compute_split`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceNorms {
    pub sumsq: Vec<f64>,
    pub nonfinite: Vec<u64>,
}

impl DeviceNorms {
    fn from_words(w: &[f32], tensors: usize) -> DeviceNorms {
        let (mut sumsq, mut nonfinite) = (Vec::with_capacity(tensors), Vec::with_capacity(tensors));
        for t in w.chunks_exact(3).take(tensors) {
            let (hi, lo) = (t[0] as f64, t[1] as f64);
            // A non-finite hi carries its own meaning; lo is then NaN.
            sumsq.push(if hi.is_finite() { hi + lo } else { hi });
            nonfinite.push(t[2].to_bits() as u64);
        }
        DeviceNorms { sumsq, nonfinite }
    }
}

/// What the first half of a split step read back.
#[derive(Clone, Debug)]
pub struct Computed {
    pub loss: f64,
    pub n_targets: usize,
    pub capped: usize,
    /// The loss scale the gradients carry.
    pub scale: f64,
    pub norms: DeviceNorms,
}

/// The split step's two recordings (see [`Engine::compute_split`]).
#[derive(Default)]
pub struct SplitRecordings {
    compute: Option<Recording>,
    apply: Option<Recording>,
}

impl Engine {
    /// Records both passes of the norms over the gradients, then the copy of
    /// the results into their host-visible buffer.
    pub(super) fn record_grad_norms<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let nb = &self.norms;
        let p = ModelPush {
            n: nb.chunks as u32,
            t: nb.tensors as u32,
            off0: nb.tensors_at as u32,
            flag: 0,
            ..ModelPush::default()
        };
        let bufs = [&self.grads, &nb.table, &nb.part, &nb.out];
        self.dispatch(seq, &GRAD_NORMS, &bufs, &p, nb.chunks, "grad norms (chunks)")?;
        let p = ModelPush { flag: 1, ..p };
        self.dispatch(seq, &GRAD_NORMS_TENSORS, &bufs, &p, nb.tensors, "grad norms (tensors)")?;
        seq.copy(&nb.out, 0, &nb.host, 0, (3 * nb.tensors * 4) as u64)
    }

    /// The norms of the gradients the device holds now (any step's, or an
    /// upload's), in one submit of their own.
    pub fn grad_norms_now(&self) -> VkResult<DeviceNorms> {
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_grad_norms(&mut seq)?;
        seq.end()?;
        seq.replay()?;
        drop(seq);
        Ok(DeviceNorms::from_words(&self.norms.host.read_f32()?, self.norms.tensors))
    }

    /// Whether the split step can run: not while every plan is poisoned
    /// (`DUALSCOPE_POISON`, whose fills depend on the host's last writes), nor
    /// under a `lab` build's `DUALSCOPE_HOST_NORMS=1`.
    pub fn split_available(&self) -> bool {
        !self.poison && !self.env.host_norms()
    }

    /// The first half of a training step on `batch`: forward, backward and the
    /// gradient norms in one submit (recorded once per batch shape, then
    /// replayed); reads back the state words and the norms, no gradient.
    pub fn compute_split(&mut self, batch: &Batch) -> VkResult<(Computed, Timings)> {
        if !self.split_available() {
            return Err(VkError::Invalid("the split step does not run on a poisoned engine or with host norms".into()));
        }
        self.set_batch(batch)?;
        let timings = {
            let mut cache = self.split.lock().unwrap_or_else(|p| p.into_inner());
            if cache.compute.is_none() {
                let mut seq = Sequence::with_timing(&self.ctx, self.timing)?;
                self.record_begin(&mut seq)?;
                for &s in Stage::FORWARD_BACKWARD {
                    self.record_stage(&mut seq, s)?;
                }
                self.record_grad_norms(&mut seq)?;
                seq.copy(&self.state, 0, &self.state_host, 0, (st::WORDS * 4) as u64)?;
                // SAFETY: as the replayed step's (run.rs): every buffer
                // recorded is this engine's own, the recordings are dropped
                // before any of them, and `forget_replay` drops them before
                // the workspace is replaced.
                cache.compute = Some(unsafe { seq.into_recording()? });
            }
            cache.compute.as_mut().expect("recorded above").replay()?
        };
        let w = state_words(&self.state_host.read_f32()?);
        let r = self.report_from(&w)?;
        let norms = DeviceNorms::from_words(&self.norms.host.read_f32()?, self.norms.tensors);
        let computed = Computed {
            loss: r.loss,
            n_targets: r.n_targets,
            capped: r.capped_tokens,
            scale: f32::from_bits(w[st::STEP_SCALE]) as f64,
            norms,
        };
        Ok((computed, timings))
    }

    /// The second half: the optimizer stage (unscale, norm and guard, clip,
    /// AdamW, the loss scale's update) on the gradients `compute_split` left,
    /// recorded once and replayed; reads back the state words.
    pub fn apply_split(&mut self) -> VkResult<(StepReport, Timings)> {
        let timings = {
            let mut cache = self.split.lock().unwrap_or_else(|p| p.into_inner());
            if cache.apply.is_none() {
                let mut seq = Sequence::with_timing(&self.ctx, self.timing)?;
                self.record_begin(&mut seq)?;
                self.record_stage(&mut seq, Stage::Optim)?;
                seq.copy(&self.state, 0, &self.state_host, 0, (st::WORDS * 4) as u64)?;
                // SAFETY: as in `compute_split`.
                cache.apply = Some(unsafe { seq.into_recording()? });
            }
            cache.apply.as_mut().expect("recorded above").replay()?
        };
        let w = state_words(&self.state_host.read_f32()?);
        Ok((self.report_from(&w)?, timings))
    }
}

//! The whole training step of docs/model.md on the Vulkan engine.
//!
//! Parameters, gradients and the AdamW moments live in flat device buffers
//! (one [`ParamLayout`]); a [`Workspace`] holds one batch shape's
//! intermediates in the CPU trace's layouts. A step is recorded into one
//! sequence and submitted once: the loss scale, the guard, the clip and the
//! optimizer's step counter live in a small state buffer that only the device
//! reads and writes, so nothing comes back to the host in between. The host
//! reads back what it asks for afterwards.
//!
//! The step is split into the ladder's stages, so that the ladder can run one
//! stage alone from the CPU's inputs (isolated mode) or all of them from the
//! engine's own outputs (chained mode).
//!
//! Files: `env` (the engine's switches), `policy` (how the
//! recurrences run), `record` (what every stage's recording shares),
//! `forward`, `backward` and `optim` (each stage's commands), `io` (buffer
//! I/O), `probes` (the `lab` feature's timing probes), `run` (the entry points: [`Engine::run`],
//! [`Engine::grads`], [`Engine::train_step`], [`Engine::report`]), `norms`
//! (per-tensor gradient norms on the device and the split step around them).

mod attn_kernels;
mod backward;
mod env;
mod forward;
mod io;
mod kernels;
mod layout;
mod norms;
mod optim;
mod policy;
mod precision;
#[cfg(feature = "lab")]
mod probes;
mod record;
mod reduce;
mod run;
mod wave_kernels;
mod workspace;

pub use attn_kernels::{ATTN_BLOCK, ATTN_WIDE_BLOCK};
pub use env::EngineEnv;
#[cfg(feature = "lab")]
pub use env::EngineLab;
pub use kernels::{AttnKernels, MAX_HIDDEN, ModelPush, WAVE_SCALAR_ROWS, bwd_chunk, fwd_chunk, probe_bits, st};
pub use layout::{ParamEntry, ParamLayout};
pub use norms::{Computed, DeviceNorms, NORM_CHUNK, norm_table};
pub use policy::{Recurrence, WgChoice};
pub use precision::default_map;
#[cfg(feature = "lab")]
pub use probes::WaveVariant;
pub use reduce::{ColSum, col_sum_chunks, col_sum_scratch_len, record_col_sum, record_col_sum_later};
pub use run::{Plan, Replay};
pub use workspace::{Slot, Workspace, scratch_len, scratch_len_for, step_products, workspace_bytes};

use std::sync::{Arc, Mutex};

use crate::model::{Config, Params};
use crate::step::Fault;
use crate::step::{GemmChoice, Precision, PrecisionMap};
use crate::step::{LossScale, StepOptions};
use crate::vk::gemm::{self, GemmPath};
use crate::vk::recorder::Recording;
use crate::vk::{Buffer, Context, Timing, Timings, VkError, VkResult};

/// A stage of the step, in the ladder's order (rung 1, `gemm`, has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    EmbedFwd,
    GruFwd,
    AttnFwd,
    HeadFwd,
    Loss,
    HeadBwd,
    AttnBwd,
    GruBwd,
    EmbedBwd,
    Optim,
}

impl Stage {
    /// The whole training step: forward, backward, the optimizer.
    pub const STEP: [Stage; 10] = [
        Stage::EmbedFwd,
        Stage::GruFwd,
        Stage::AttnFwd,
        Stage::HeadFwd,
        Stage::Loss,
        Stage::HeadBwd,
        Stage::AttnBwd,
        Stage::GruBwd,
        Stage::EmbedBwd,
        Stage::Optim,
    ];

    /// Forward and backward: the step without its optimizer.
    pub const FORWARD_BACKWARD: &[Stage] = Stage::STEP.split_last().expect("the step has stages").1;
}

/// A submitted step's timings and each stage's device milliseconds.
pub type Staged = (Timings, Vec<(Stage, Option<f64>)>);

/// Flat per-parameter buffers: parameters, gradients, the AdamW moments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlatBuf {
    Params,
    Grads,
    M,
    V,
}

/// The Vulkan engine of the model.
pub struct Engine {
    /// The training step recorded once and replayed by
    /// [`Engine::train_step`] for batch after batch of one shape. The first
    /// field, so that it is dropped (waiting for its work) before the
    /// buffers it uses, all of them this engine's own; [`Engine::forget_replay`]
    /// drops it before anything it was recorded with changes (the workspace,
    /// the recurrence, the timing, a planted fault, the token cap).
    replay: Mutex<Option<Recording>>,
    /// The split step's two halves (`norms.rs`), recorded once and replayed
    /// like `replay`, dropped with it and before the buffers.
    split: Mutex<norms::SplitRecordings>,
    ctx: Arc<Context>,
    cfg: Config,
    layout: ParamLayout,
    params: Buffer,
    grads: Buffer,
    m: Buffer,
    v: Buffer,
    state: Buffer,
    /// A host-visible copy of the state words, which the replayed step
    /// writes as its last command (the replayed step reads its report there,
    /// with no second submit).
    state_host: Buffer,
    /// The runs of the flat buffers that AdamW's weight decay applies to
    /// (`u32`: the count, then start and end of each; see adamw.comp).
    decay_runs: Buffer,
    /// The per-tensor gradient norms' table, partial sums and results.
    norms: norms::NormBufs,
    opts: StepOptions,
    path: GemmPath,
    /// Each stage's precision (None: every product on `path`, today's step;
    /// see `precision.rs`).
    pmap: Option<PrecisionMap>,
    /// The kernel of the map's f16 stages: `path` where it is an f16 path.
    f16_path: GemmPath,
    recurrence: Recurrence,
    /// The recurrence was the default choice (not `DUALSCOPE_RECURRENCE`
    /// nor [`Engine::set_recurrence`]): a grid that cannot keep all its
    /// workgroups resident falls back to [`Recurrence::Steps`].
    recurrence_auto: bool,
    /// The grid's residency was checked (once, at the first batch).
    grid_checked: bool,
    /// Why the default grid recurrence was given up, if it was.
    fallback: Option<String>,
    /// The switches the environment set when the engine was built.
    env: EngineEnv,
    /// How a step's sequence is timed: per dispatch (the breakdowns) or as
    /// a whole (`train`, the benchmark's headline figures).
    timing: Timing,
    fault: Option<Fault>,
    /// Fill every buffer a step writes (and the gradients) with NaN before
    /// each plan runs, so that a read of a value never written shows up as
    /// a non-finite result (`--poison`, `DUALSCOPE_POISON=1`).
    poison: bool,
    /// The buffers the host wrote since the last plan ran (their addresses):
    /// a poisoned plan keeps them, as they hold its inputs (the ladder's
    /// isolated rungs upload theirs).
    host_written: Mutex<Vec<usize>>,
    /// The scratch region the next product or column sum that needs one
    /// takes ([`Engine::scratch_for`]).
    scratch_next: std::sync::atomic::AtomicUsize,
    ws: Option<Workspace>,
    /// The state each row of the next batches starts from (docs/carry-state.md);
    /// `None`: docs/model.md's start from zero, recorded exactly as before.
    carry: Option<crate::step::Carry<f32>>,
}

/// Steps layer 0 runs behind layer 1 in the backward wavefront
/// (gru_bwd_wave_cm): T + 2 intervals.
pub const BWD_WAVE_LAG: usize = 2;
/// Steps layer 1 runs behind layer 0 in the forward wavefront
/// (gru_fwd_wave_cm): T + 1 intervals.
pub const FWD_WAVE_LAG: usize = 1;

/// Gradients of one batch, as `cpu::GradsResult`.
#[derive(Clone, Debug)]
pub struct GpuGrads {
    pub loss: f64,
    pub n_targets: usize,
    /// Unscaled gradient norm (f32 accumulation on the device).
    pub grad_norm: f64,
    pub capped: usize,
    pub grads: Params<f32>,
}

fn u(x: usize, what: &str) -> VkResult<u32> {
    u32::try_from(x).map_err(|_| VkError::Limit(format!("{what} = {x} does not fit in 32 bits")))
}

impl Engine {
    /// An engine holding `params`, with zero moments, step 0 and loss scale
    /// `scale`. `path` computes every matrix product. The switches come from
    /// the environment ([`EngineEnv::from_env`]).
    pub fn new(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        scale: &LossScale,
        path: GemmPath,
    ) -> VkResult<Engine> {
        Engine::with_env(ctx, cfg, params, opts, scale, path, &EngineEnv::from_env()?)
    }

    /// [`Engine::new`] with the switches `env`.
    pub fn with_env(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        scale: &LossScale,
        path: GemmPath,
        env: &EngineEnv,
    ) -> VkResult<Engine> {
        cfg.validate().map_err(|e| VkError::Invalid(e.to_string()))?;
        if cfg.hidden > MAX_HIDDEN {
            return Err(VkError::Limit(format!(
                "hidden = {}: the Vulkan recurrence keeps h in shared memory and takes at most {MAX_HIDDEN}",
                cfg.hidden
            )));
        }
        let layout = ParamLayout::new(cfg);
        let n = layout.total;
        u(n, "parameter count")?;
        let decay_runs = layout.decay_runs();
        let e = Engine {
            replay: Mutex::new(None),
            split: Mutex::new(norms::SplitRecordings::default()),
            ctx: ctx.clone(),
            cfg: cfg.clone(),
            params: Buffer::device_f32(ctx, "params", n)?,
            grads: Buffer::device_f32(ctx, "grads", n)?,
            m: Buffer::device_f32(ctx, "adam.m", n)?,
            v: Buffer::device_f32(ctx, "adam.v", n)?,
            state: Buffer::device_f32(ctx, "step.state", st::WORDS)?,
            state_host: Buffer::readback_f32(ctx, "step.state.host", st::WORDS)?,
            decay_runs: Buffer::device_f32(ctx, "adamw.decay_runs", 1 + 2 * decay_runs.len())?,
            norms: norms::NormBufs::new(ctx, &layout)?,
            layout,
            opts: *opts,
            path,
            pmap: None,
            f16_path: path,
            recurrence: env.recurrence_for(ctx, cfg.hidden)?,
            recurrence_auto: env.recurrence.is_none(),
            grid_checked: false,
            fallback: None,
            env: *env,
            timing: Timing::PerDispatch,
            fault: None,
            poison: env.poison,
            host_written: Mutex::new(Vec::new()),
            scratch_next: std::sync::atomic::AtomicUsize::new(0),
            ws: None,
            carry: None,
        };
        let zeros = vec![0f32; n];
        e.write_flat(FlatBuf::Params, &e.layout.flatten(params))?;
        e.write_flat(FlatBuf::Grads, &zeros)?;
        e.write_flat(FlatBuf::M, &zeros)?;
        e.write_flat(FlatBuf::V, &zeros)?;
        e.write_state(scale, 0, 0)?;
        let words: Vec<u32> = std::iter::once(decay_runs.len() as u32)
            .chain(decay_runs.iter().flat_map(|r| [r.start as u32, r.end as u32]))
            .collect();
        e.upload(&e.decay_runs, 0, &words.iter().map(|&w| f32::from_bits(w)).collect::<Vec<_>>())?;
        e.upload(e.norms.table(), 0, &norms::NormBufs::table_words(&e.layout))?;
        Ok(e)
    }

    /// An engine for a step in `precision`: the f32 step, or the
    /// mixed-precision step (every matrix product with f16 or bfloat16 inputs
    /// and f32 accumulation on the kernel [`gemm::path_for`] picks under
    /// `choice`; everything else in f32 with f32 master weights), starting
    /// from [`LossScale::for_precision`].
    pub fn with_precision(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        precision: Precision,
        choice: GemmChoice,
    ) -> VkResult<Engine> {
        let path = gemm::path_for(ctx, precision, choice)?;
        Engine::new(ctx, cfg, params, opts, &LossScale::for_precision(precision), path)
    }

    /// An engine for a step whose stages run in `map`'s precisions (the f16
    /// ones on the kernel [`gemm::path_for`] picks under `choice`), starting
    /// from [`LossScale::for_map`] the map.
    pub fn with_precision_map(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        map: &PrecisionMap,
        choice: GemmChoice,
    ) -> VkResult<Engine> {
        let path = gemm::path_for(ctx, map.headline(), choice)?;
        let mut e = Engine::new(ctx, cfg, params, opts, &LossScale::for_map(map), path)?;
        e.set_precision_map(Some(map.clone()), choice)?;
        Ok(e)
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The precision of the step's products (f32: the f32 step).
    pub fn precision(&self) -> Precision {
        self.path.input_precision()
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn layout(&self) -> &ParamLayout {
        &self.layout
    }

    pub fn gemm_path(&self) -> GemmPath {
        self.path
    }

    pub fn options(&self) -> &StepOptions {
        &self.opts
    }

    pub fn recurrence(&self) -> Recurrence {
        self.recurrence
    }

    /// The switches the environment set when the engine was built.
    pub fn env(&self) -> &EngineEnv {
        &self.env
    }

    /// How the steps' sequences are timed from here on: [`Timing::Span`]
    /// leaves the per-stage and per-kernel times out, and with them the
    /// waits that per-dispatch timestamps put between independent dispatches.
    pub fn set_timing(&mut self, timing: Timing) {
        self.forget_replay();
        self.timing = timing;
    }

    /// Plants a bug of the fault catalogue (None: the correct engine).
    pub fn set_fault(&mut self, fault: Option<Fault>) {
        self.forget_replay();
        self.fault = fault;
    }

    /// Whether every plan starts by filling the buffers a step writes with
    /// NaN (see the field `poison`; off by default).
    pub fn set_poison(&mut self, on: bool) {
        self.forget_replay();
        self.poison = on;
    }

    pub fn poison(&self) -> bool {
        self.poison
    }

    /// Drops the recorded step of [`Engine::train_step`] with `Replay::Yes` (waiting for
    /// its work, if any is in flight).
    /// Sets the carried state the next steps start from (written with each
    /// batch); a change of whether one is carried, or of its prefix length,
    /// records the step anew (the recurrence runs per row while carrying).
    pub fn set_carry(&mut self, carry: Option<crate::step::Carry<f32>>) {
        let shape = |c: &Option<crate::step::Carry<f32>>| c.as_ref().map(|c| c.prefix_len);
        if shape(&carry) != shape(&self.carry) {
            self.forget_replay();
        }
        self.carry = carry;
    }

    /// The carried prefix's length while carrying (None: no state).
    pub(super) fn carry_prefix(&self) -> Option<usize> {
        self.carry.as_ref().map(|c| c.prefix_len)
    }

    /// The state the last step left (while carrying): each layer's `h` at
    /// the last position and the top layer's last states after the old prefix.
    pub fn final_state(&self) -> VkResult<Option<crate::step::Carry<f32>>> {
        let Some(prev) = &self.carry else { return Ok(None) };
        let ws = self.ws()?;
        let (t, b, h) = (ws.t, ws.b, self.cfg.hidden);
        let bh = b * h;
        let keep = self.cfg.window.saturating_sub(1).min(prev.prefix_len + t);
        let (from_s, top) = (keep.min(t), &ws.layers.last().expect("layers >= 1").h);
        let mut ranges: Vec<(&Buffer, usize, usize)> = ws.layers.iter().map(|l| (&l.h, (t - 1) * bh, bh)).collect();
        if from_s > 0 {
            ranges.push((top, (t - from_s) * bh, from_s * bh));
        }
        let mut got = self.download(&ranges)?;
        let s_tail = if from_s > 0 { got.pop().expect("pushed") } else { Vec::new() };
        let from_old = keep - from_s;
        let mut prefix = prev.prefix[prev.prefix.len() - from_old * bh..].to_vec();
        prefix.extend(s_tail);
        Ok(Some(crate::step::Carry { rows: b, hidden: h, h0: got, prefix, prefix_len: keep }))
    }

    fn forget_replay(&mut self) {
        *self.replay.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
        *self.split.get_mut().unwrap_or_else(|p| p.into_inner()) = norms::SplitRecordings::default();
    }

    pub fn fault(&self) -> Option<Fault> {
        self.fault
    }

    /// The kernel the products run on now: the engine's, or a planted bug's.
    pub fn gemm_path_now(&self) -> GemmPath {
        match self.fault {
            Some(Fault::GemmNoBounds) => GemmPath::FaultNoBounds,
            Some(Fault::F16AccumNoScale) => GemmPath::FaultF16Accum,
            _ => self.path,
        }
    }
}

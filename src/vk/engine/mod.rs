//! The whole training step of MODEL.md on the Vulkan engine.
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

mod faults;
mod kernels;
mod layout;
mod reduce;
mod workspace;

pub use faults::Fault;
pub use kernels::{MAX_HIDDEN, ModelPush, st};
pub use layout::{ParamEntry, ParamLayout};
pub use reduce::{col_sum_chunks, col_sum_scratch_len, record_col_sum};
pub use workspace::{Workspace, scratch_len, scratch_len_for, step_products, workspace_bytes};

use std::sync::Arc;

use crate::cpu::{LossScale, OptimOutcome, OptimState, SkipReason, StepOptions, StepReport};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::vk::kernel::KernelSpec;
use crate::vk::ops::{self, GemmChoice, GemmPath, GemmShape, MatRef, Precision};
use crate::vk::{Buffer, Context, Sequence, Timing, Timings, VkError, VkResult};
use kernels::*;
use workspace::LayerBufs;

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
    pub const FORWARD_BACKWARD: [Stage; 9] = [
        Stage::EmbedFwd,
        Stage::GruFwd,
        Stage::AttnFwd,
        Stage::HeadFwd,
        Stage::Loss,
        Stage::HeadBwd,
        Stage::AttnBwd,
        Stage::GruBwd,
        Stage::EmbedBwd,
    ];
}

/// How the GRU recurrences run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recurrence {
    /// One workgroup per batch row walks the timesteps (`gru_*_seq`): any
    /// device, any width up to [`MAX_HIDDEN`].
    Seq,
    /// The grid kernels (`gru_*_grid`: the units spread over ceil(H/4)
    /// workgroups), one dispatch per timestep.
    Steps,
    /// The grid kernels walking every timestep in one dispatch, with a
    /// grid-wide barrier between steps: needs all workgroups resident at once (GPUs).
    Grid,
}

impl Recurrence {
    pub fn parse(s: &str) -> Result<Recurrence, String> {
        match s {
            "seq" => Ok(Recurrence::Seq),
            "steps" => Ok(Recurrence::Steps),
            "grid" => Ok(Recurrence::Grid),
            _ => Err(format!("unknown recurrence {s:?} (seq, steps or grid)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Recurrence::Seq => "seq",
            Recurrence::Steps => "steps",
            Recurrence::Grid => "grid",
        }
    }

    /// Whether `ctx` can run this mode for layers of width `h`, and if not, why.
    pub fn check(self, ctx: &Context, h: usize) -> VkResult<()> {
        if self == Recurrence::Seq {
            return Ok(());
        }
        if !ctx.report().features.subgroup_ops {
            return Err(VkError::Unsupported(format!(
                "the {} recurrence needs subgroup arithmetic and shuffles in compute shaders, which this device lacks",
                self.name()
            )));
        }
        if h > GRID_MAX_HIDDEN {
            return Err(VkError::Limit(format!(
                "hidden = {h}: the {} recurrence keeps its W_hh slice in shared memory and takes at most {GRID_MAX_HIDDEN}",
                self.name()
            )));
        }
        Ok(())
    }

    /// The default for `ctx` and width `h`: `DUALSCOPE_RECURRENCE` if set;
    /// else the grid on GPUs that can run it, and the per-row kernel on CPU
    /// devices (lavapipe), where a spinning barrier would starve the threads
    /// that run the other workgroups.
    pub fn default_for(ctx: &Context, h: usize) -> VkResult<Recurrence> {
        if let Ok(v) = std::env::var("DUALSCOPE_RECURRENCE") {
            let r = Recurrence::parse(v.trim()).map_err(|e| VkError::Invalid(format!("DUALSCOPE_RECURRENCE: {e}")))?;
            r.check(ctx, h)?;
            return Ok(r);
        }
        let gpu = ctx.report().device_type != "cpu";
        Ok(if gpu && Recurrence::Grid.check(ctx, h).is_ok() { Recurrence::Grid } else { Recurrence::Seq })
    }
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
    /// [`Engine::step_replayed`] for batch after batch of one shape. The
    /// first field, so that it is dropped (waiting for its work) before the
    /// buffers it uses. Its lifetime is erased: it refers to this engine's
    /// own buffers, and [`Engine::forget_replay`] drops it before anything it
    /// was recorded with changes (the workspace, the recurrence, the timing,
    /// a planted fault, the token cap).
    replay: std::sync::Mutex<Option<Sequence<'static>>>,
    ctx: Arc<Context>,
    cfg: Config,
    layout: ParamLayout,
    params: Buffer,
    grads: Buffer,
    m: Buffer,
    v: Buffer,
    state: Buffer,
    /// A host-visible copy of the state words, which the replayed step
    /// writes as its last command (`step_replayed` reads its report there,
    /// with no second submit).
    state_host: Buffer,
    /// The runs of the flat buffers that AdamW's weight decay applies to
    /// (`u32`: the count, then start and end of each; see adamw.comp).
    decay_runs: Buffer,
    opts: StepOptions,
    path: GemmPath,
    recurrence: Recurrence,
    /// The recurrence was the default choice (not `DUALSCOPE_RECURRENCE`
    /// nor [`Engine::set_recurrence`]): a grid that cannot keep all its
    /// workgroups resident falls back to [`Recurrence::Steps`].
    recurrence_auto: bool,
    /// The grid's residency was checked (once, at the first batch).
    grid_checked: bool,
    /// Why the default grid recurrence was given up, if it was.
    fallback: Option<String>,
    /// `DUALSCOPE_RECURRENCE_PRODUCT=f32`: the mixed step's recurrences on
    /// the f32 grid kernels even where the cooperative-matrix ones can run.
    recurrence_product_f32: bool,
    /// `DUALSCOPE_WAVE=0`: the layers' recurrences one after the other even
    /// where a wavefront kernel could run them together.
    wave_off: bool,
    /// `DUALSCOPE_WAVE_COHERENT=1`: the wavefronts' operand loads stay
    /// `coherent` even where [`Engine::wave_noncoherent`] allows otherwise.
    wave_coherent: bool,
    /// How a step's sequence is timed: per dispatch (the breakdowns) or as
    /// a whole (`train`, the benchmark's headline figures).
    timing: Timing,
    fault: Option<Fault>,
    ws: Option<Workspace>,
}

/// `DUALSCOPE_HOST_PROFILE`: print where the host's time goes in each step.
fn host_profile() -> bool {
    static PROFILE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROFILE.get_or_init(|| std::env::var_os("DUALSCOPE_HOST_PROFILE").is_some())
}

/// The state words from their f32 image (bits kept).
fn state_words(v: &[f32]) -> [u32; st::WORDS] {
    let mut w = [0u32; st::WORDS];
    w.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits());
    w
}

/// Steps layer 0 runs behind layer 1 in the backward wavefront
/// (gru_bwd_wave_cm): T + 2 intervals.
pub const BWD_WAVE_LAG: usize = 2;

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

/// The loss scale a step in `precision` starts from: GradScaler's dynamic
/// scale (2^16, ×2 after 2000 good steps, ×0.5 on a skipped one) for f16,
/// whose range needs it; none (S = 1) for f32 and for bfloat16, whose range is
/// f32's.
pub fn default_loss_scale(precision: Precision) -> LossScale {
    match precision {
        Precision::F16 => LossScale::dynamic(),
        Precision::F32 | Precision::Bf16 => LossScale::fixed(),
    }
}

fn u(x: usize, what: &str) -> VkResult<u32> {
    u32::try_from(x).map_err(|_| VkError::Limit(format!("{what} = {x} does not fit in 32 bits")))
}

impl Engine {
    /// An engine holding `params`, with zero moments, step 0 and loss scale
    /// `scale`. `path` computes every matrix product.
    pub fn new(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        scale: &LossScale,
        path: GemmPath,
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
            replay: std::sync::Mutex::new(None),
            ctx: ctx.clone(),
            cfg: cfg.clone(),
            params: Buffer::device_f32(ctx, "params", n)?,
            grads: Buffer::device_f32(ctx, "grads", n)?,
            m: Buffer::device_f32(ctx, "adam.m", n)?,
            v: Buffer::device_f32(ctx, "adam.v", n)?,
            state: Buffer::device_f32(ctx, "step.state", st::WORDS)?,
            state_host: Buffer::readback_f32(ctx, "step.state.host", st::WORDS)?,
            decay_runs: Buffer::device_f32(ctx, "adamw.decay_runs", 1 + 2 * decay_runs.len())?,
            layout,
            opts: *opts,
            path,
            recurrence: Recurrence::default_for(ctx, cfg.hidden)?,
            recurrence_auto: std::env::var_os("DUALSCOPE_RECURRENCE").is_none(),
            grid_checked: false,
            fallback: None,
            recurrence_product_f32: std::env::var("DUALSCOPE_RECURRENCE_PRODUCT").is_ok_and(|v| v.trim() == "f32"),
            wave_off: std::env::var("DUALSCOPE_WAVE").is_ok_and(|v| v.trim() == "0"),
            wave_coherent: std::env::var("DUALSCOPE_WAVE_COHERENT").is_ok_and(|v| v.trim() == "1"),
            timing: Timing::PerDispatch,
            fault: None,
            ws: None,
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
        Ok(e)
    }

    /// An engine for a step in `precision`: the f32 step, or the
    /// mixed-precision step (every matrix product with f16 or bfloat16 inputs
    /// and f32 accumulation on the kernel [`ops::path_for`] picks under
    /// `choice`; everything else in f32 with f32 master weights), starting
    /// from [`default_loss_scale`].
    pub fn with_precision(
        ctx: &Arc<Context>,
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        precision: Precision,
        choice: GemmChoice,
    ) -> VkResult<Engine> {
        let path = ops::path_for(ctx, precision, choice)?;
        Engine::new(ctx, cfg, params, opts, &default_loss_scale(precision), path)
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

    /// Chooses how the GRU recurrences run (an error where the device or the width cannot).
    pub fn set_recurrence(&mut self, r: Recurrence) -> VkResult<()> {
        r.check(&self.ctx, self.cfg.hidden)?;
        self.forget_replay();
        self.recurrence = r;
        self.recurrence_auto = false;
        Ok(())
    }

    /// The grid recurrence where this device keeps all its workgroups
    /// resident, else [`Recurrence::Steps`] (the same kernels, one dispatch
    /// per timestep): checked at the next batch, as the default choice is.
    pub fn prefer_grid(&mut self) -> VkResult<()> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        self.forget_replay();
        self.recurrence = Recurrence::Grid;
        self.recurrence_auto = true;
        self.grid_checked = false;
        self.fallback = None;
        Ok(())
    }

    /// Why the default grid recurrence was given up for one dispatch per
    /// timestep (its barrier gave up waiting: this device did not run all
    /// the workgroups at once), if it was.
    pub fn recurrence_fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Whether this engine's grid recurrences can take their products on
    /// cooperative matrices (`gru_*_grid_cm`): the mixed step on the
    /// cooperative-matrix GEMM path, H a multiple of 16 up to
    /// [`GRID_MAX_HIDDEN`], the kernels built, and not switched off with
    /// `DUALSCOPE_RECURRENCE_PRODUCT=f32`.
    fn coopmat_recurrence_capable(&self) -> bool {
        let h = self.cfg.hidden;
        self.path.coopmat()
            && !self.recurrence_product_f32
            && h.is_multiple_of(GRID_CM_TILE)
            && h <= GRID_MAX_HIDDEN
            && !GRU_FWD_GRID_CM.spirv.is_empty()
            && !GRU_BWD_GRID_CM.spirv.is_empty()
    }

    /// Workgroups of one layer's cooperative-matrix recurrence for `ws`'s
    /// batch: 16 rows × 16 units each.
    fn cm_groups(&self, ws: &Workspace) -> usize {
        ws.b.div_ceil(GRID_CM_TILE) * (self.cfg.hidden / GRID_CM_TILE)
    }

    /// Whether the current batch's recurrences run on the cooperative-matrix
    /// grid kernels: where [`Engine::coopmat_recurrence_capable`], with the
    /// grid kernels (not `seq`), and at most [`GRID_MAX_GROUPS`] workgroups
    /// of 16 rows × 16 units.
    pub fn recurrence_on_coopmat(&self) -> bool {
        let Some(ws) = self.ws.as_ref() else { return false };
        self.coopmat_recurrence_capable()
            && self.recurrence != Recurrence::Seq
            && self.cm_groups(ws) <= GRID_MAX_GROUPS
            && ws.layers.iter().all(|lb| lb.h16.is_some() && lb.d_gh16.is_some())
    }

    /// Whether the current batch's forward runs both layers in one wavefront
    /// dispatch (`gru_fwd_wave_cm`): on cooperative matrices, two layers, at
    /// most [`GRID_MAX_GROUPS`] workgroups for both, and not switched off
    /// with `DUALSCOPE_WAVE=0`.
    pub fn forward_wave(&self) -> bool {
        self.wave_fits(&GRU_FWD_WAVE_CM)
    }

    /// The same for the backward (`gru_bwd_wave_cm`).
    pub fn backward_wave(&self) -> bool {
        self.wave_fits(&GRU_BWD_WAVE_CM)
    }

    /// Whether the wavefront kernel of that direction runs and may read its
    /// operands (the f16 copies) without `coherent` (`*_wave_cm_nc`, see
    /// their headers): where rows are whole 128-byte lines (H % 64 == 0).
    /// `DUALSCOPE_WAVE_COHERENT=1` keeps the coherent loads everywhere.
    pub fn wave_noncoherent(&self, forward: bool) -> bool {
        let wave = if forward { self.forward_wave() } else { self.backward_wave() };
        wave && self.cfg.hidden.is_multiple_of(64) && !self.wave_coherent
    }

    /// The wavefront kernel of that direction: the variant without
    /// `coherent` operand loads where [`Engine::wave_noncoherent`] allows it.
    fn wave_spec(&self, forward: bool) -> &'static KernelSpec {
        match (forward, self.wave_noncoherent(forward)) {
            (true, true) => &GRU_FWD_WAVE_CM_NC,
            (true, false) => &GRU_FWD_WAVE_CM,
            (false, true) => &GRU_BWD_WAVE_CM_NC,
            (false, false) => &GRU_BWD_WAVE_CM,
        }
    }

    fn wave_fits(&self, spec: &KernelSpec) -> bool {
        let Some(ws) = self.ws.as_ref() else { return false };
        self.recurrence_on_coopmat()
            && self.cfg.layers == 2
            && 2 * self.cm_groups(ws) <= GRID_MAX_GROUPS
            && !spec.spirv.is_empty()
            && !self.wave_off
            && ws.layers.iter().all(|lb| lb.d_gi16.is_some())
    }

    /// The wavefront backward's push constants, buffers and workgroups.
    fn wave_bwd_args<'a>(&'a self, ws: &'a Workspace) -> VkResult<(ModelPush, Vec<&'a Buffer>, usize)> {
        let [l0, l1] = &ws.layers[..] else {
            return Err(VkError::Invalid("the wavefront backward takes two layers".into()));
        };
        let missing = || VkError::Invalid("the wavefront backward needs the f16 copies of d_gh and d_gi".into());
        let (d_gh0s, d_gh1s, d_gi1s) = (
            l0.d_gh16.as_ref().ok_or_else(missing)?,
            l1.d_gh16.as_ref().ok_or_else(missing)?,
            l1.d_gi16.as_ref().ok_or_else(missing)?,
        );
        let off = |name: &str| self.off(name) as u32;
        let p = ModelPush {
            off0: off("gru.weight_hh_l0"),
            off1: off("gru.weight_hh_l1"),
            off2: off("gru.weight_ih_l1"),
            ..self.push(ws)
        };
        let bufs = vec![
            &self.params,
            &l0.gh,
            &l0.gates,
            &l0.h,
            &l0.d_h,
            &l0.dh_tot,
            &l0.d_gi,
            &l0.d_gh,
            &self.state,
            &ws.sync,
            d_gh0s,
            &l1.gh,
            &l1.gates,
            &l1.h,
            &l1.d_h,
            &l1.dh_tot,
            &l1.d_gi,
            &l1.d_gh,
            d_gh1s,
            d_gi1s,
        ];
        Ok((p, bufs, 2 * self.cm_groups(ws)))
    }

    /// The wavefront forward's push constants, buffers and workgroups.
    fn wave_fwd_args<'a>(&'a self, ws: &'a Workspace) -> VkResult<(ModelPush, Vec<&'a Buffer>, usize)> {
        let [l0, l1] = &ws.layers[..] else {
            return Err(VkError::Invalid("the wavefront forward takes two layers".into()));
        };
        let (Some(h0s), Some(h1s)) = (l0.h16.as_ref(), l1.h16.as_ref()) else {
            return Err(VkError::Invalid("the wavefront forward needs the f16 copies of h".into()));
        };
        let off = |name: &str| self.off(name) as u32;
        let p = ModelPush {
            off0: off("gru.weight_hh_l0"),
            off1: off("gru.bias_hh_l0"),
            off2: off("gru.weight_ih_l1"),
            a: off("gru.bias_ih_l1"),
            nh: off("gru.weight_hh_l1"),
            w: off("gru.bias_hh_l1"),
            ..self.push(ws)
        };
        let bufs = vec![
            &self.params,
            &l0.gi,
            &l0.gh,
            &l0.gates,
            &l0.h,
            &self.state,
            &ws.sync,
            h0s,
            &l1.gi,
            &l1.gh,
            &l1.gates,
            &l1.h,
            h1s,
        ];
        Ok((p, bufs, 2 * self.cm_groups(ws)))
    }

    /// The forward and backward grid kernels of the current batch and the
    /// workgroups each dispatch takes.
    fn grid_kernels(&self, ws: &Workspace) -> (&'static KernelSpec, &'static KernelSpec, usize) {
        if self.recurrence_on_coopmat() {
            return (&GRU_FWD_GRID_CM, &GRU_BWD_GRID_CM, self.cm_groups(ws));
        }
        let (fwd, bwd) = grid_specs(self.cfg.hidden);
        (fwd, bwd, self.cfg.hidden.div_ceil(GRID_UNITS))
    }

    /// The forward grid kernel's buffers for layer `lb`, in binding order
    /// (the f16 copy of `h` last, for the cooperative-matrix kernel).
    fn grid_fwd_bufs<'a>(&'a self, ws: &'a Workspace, lb: &'a LayerBufs) -> Vec<&'a Buffer> {
        let mut bufs = vec![&self.params, &lb.gi, &lb.gh, &lb.gates, &lb.h, &self.state, &ws.sync];
        bufs.extend(lb.h16.as_ref().filter(|_| self.recurrence_on_coopmat()));
        bufs
    }

    /// The backward grid kernel's buffers for layer `lb`, in binding order
    /// (the f16 copy of `d_gh` last, for the cooperative-matrix kernel).
    fn grid_bwd_bufs<'a>(&'a self, ws: &'a Workspace, lb: &'a LayerBufs) -> Vec<&'a Buffer> {
        let mut bufs = vec![
            &self.params,
            &lb.gh,
            &lb.gates,
            &lb.h,
            &lb.d_h,
            &lb.dh_tot,
            &lb.d_gi,
            &lb.d_gh,
            &self.state,
            &ws.sync,
        ];
        bufs.extend(lb.d_gh16.as_ref().filter(|_| self.recurrence_on_coopmat()));
        bufs
    }

    /// Runs both grid kernels with their arithmetic switched off (a few
    /// grid barriers each, on the layer-0 buffers of the current batch):
    /// an error if a barrier gave up waiting, that is, if this device does
    /// not keep all the workgroups of a grid dispatch resident at once.
    pub fn check_grid_residency(&self) -> VkResult<()> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let (fwd, bwd, groups) = self.grid_kernels(ws);
        let p = ModelPush { flag: 1, t: 0, n: 4, ..self.push(ws) };
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        self.run(&mut seq, fwd, &self.grid_fwd_bufs(ws, lb), &p, groups, "grid residency (forward)")?;
        seq.fill(&ws.sync, 0)?;
        self.run(&mut seq, bwd, &self.grid_bwd_bufs(ws, lb), &p, groups, "grid residency (backward)")?;
        if self.forward_wave() {
            let (wp, bufs, groups) = self.wave_fwd_args(ws)?;
            let wp = ModelPush { flag: 1, t: 0, n: 4, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.run(&mut seq, &GRU_FWD_WAVE_CM, &bufs, &wp, groups, "grid residency (forward wavefront)")?;
        }
        if self.backward_wave() {
            let (wp, bufs, groups) = self.wave_bwd_args(ws)?;
            let wp = ModelPush { flag: 1, t: 0, n: 4, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.run(&mut seq, &GRU_BWD_WAVE_CM, &bufs, &wp, groups, "grid residency (backward wavefront)")?;
        }
        seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Unsupported(format!(
                "the grid recurrence's barrier gave up waiting: {} does not keep all {groups} workgroups of a \
                 grid dispatch resident at once",
                self.ctx.report().name
            )));
        }
        Ok(())
    }

    /// At the first batch, checks that a default grid recurrence can run
    /// here, and falls back to one dispatch per timestep where it cannot.
    fn settle_recurrence(&mut self) -> VkResult<()> {
        if self.recurrence != Recurrence::Grid || !self.recurrence_auto || self.grid_checked {
            return Ok(());
        }
        self.grid_checked = true;
        match self.check_grid_residency() {
            Ok(()) => Ok(()),
            Err(VkError::Unsupported(why)) => {
                self.forget_replay();
                self.recurrence = Recurrence::Steps;
                self.fallback = Some(format!("{why}; the recurrences run one dispatch per timestep instead"));
                Ok(())
            }
            Err(e) => Err(e),
        }
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

    /// Drops the recorded step of [`Engine::step_replayed`] (waiting for
    /// its work, if any is in flight).
    fn forget_replay(&mut self) {
        *self.replay.get_mut().unwrap_or_else(|p| p.into_inner()) = None;
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

    fn flat(&self, which: FlatBuf) -> &Buffer {
        match which {
            FlatBuf::Params => &self.params,
            FlatBuf::Grads => &self.grads,
            FlatBuf::M => &self.m,
            FlatBuf::V => &self.v,
        }
    }

    /// Copies `data` into `dst` at `offset` through a staging buffer (its own submit).
    pub fn upload(&self, dst: &Buffer, offset: usize, data: &[f32]) -> VkResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        let up = Buffer::upload_f32(&self.ctx, &format!("{}.upload", dst.name()), data)?;
        let mut seq = Sequence::new(&self.ctx)?;
        seq.copy(&up, 0, dst, offset as u64 * 4, data.len() as u64 * 4)?;
        seq.submit().map(|_| ())
    }

    /// Reads `(buffer, offset, len)` ranges back in one submit.
    pub fn download(&self, ranges: &[(&Buffer, usize, usize)]) -> VkResult<Vec<Vec<f32>>> {
        let backs = ranges
            .iter()
            .map(|(b, _, n)| Buffer::readback_f32(&self.ctx, &format!("{}.readback", b.name()), *n))
            .collect::<VkResult<Vec<_>>>()?;
        {
            let mut seq = Sequence::new(&self.ctx)?;
            for ((b, off, n), back) in ranges.iter().zip(&backs) {
                seq.copy(b, *off as u64 * 4, back, 0, *n as u64 * 4)?;
            }
            seq.submit()?;
        }
        backs
            .iter()
            .zip(ranges)
            .map(|(back, (_, _, n))| {
                let mut v = back.read_f32()?;
                v.truncate(*n);
                Ok(v)
            })
            .collect()
    }

    pub fn write_flat(&self, which: FlatBuf, data: &[f32]) -> VkResult<()> {
        if data.len() != self.layout.total {
            return Err(VkError::Invalid(format!("{} values for {} parameters", data.len(), self.layout.total)));
        }
        self.upload(self.flat(which), 0, data)
    }

    pub fn read_flat(&self, which: FlatBuf) -> VkResult<Vec<f32>> {
        Ok(self.download(&[(self.flat(which), 0, self.layout.total)])?.remove(0))
    }

    pub fn read_params(&self, which: FlatBuf) -> VkResult<Params<f32>> {
        Ok(self.layout.unflatten(&self.cfg, &self.read_flat(which)?))
    }

    pub fn set_params(&self, p: &Params<f32>) -> VkResult<()> {
        self.write_flat(FlatBuf::Params, &self.layout.flatten(p))
    }

    /// Writes one parameter-shaped tensor (`grad.`, `param.`, `adam.m.`, `adam.v.` + name).
    fn flat_slot(&self, name: &str) -> Option<(&Buffer, usize, usize)> {
        let (which, rest) = if let Some(r) = name.strip_prefix("grad.") {
            (FlatBuf::Grads, r)
        } else if let Some(r) = name.strip_prefix("param.") {
            (FlatBuf::Params, r)
        } else if let Some(r) = name.strip_prefix("adam.m.") {
            (FlatBuf::M, r)
        } else if let Some(r) = name.strip_prefix("adam.v.") {
            (FlatBuf::V, r)
        } else {
            return None;
        };
        let e = self.layout.get(rest)?;
        Some((self.flat(which), e.offset, e.len))
    }

    /// The device range holding a named tensor: the CPU trace's names, plus
    /// `param.`, `adam.m.` and `adam.v.` + a parameter name.
    pub fn slot(&self, name: &str) -> Option<(&Buffer, usize, usize)> {
        self.flat_slot(name).or_else(|| self.ws.as_ref().and_then(|w| w.slot(&self.cfg, name)))
    }

    pub fn read_named(&self, names: &[&str]) -> VkResult<Vec<Vec<f32>>> {
        let ranges = names
            .iter()
            .map(|n| self.slot(n).ok_or_else(|| VkError::Invalid(format!("no device tensor named {n:?}"))))
            .collect::<VkResult<Vec<_>>>()?;
        self.download(&ranges)
    }

    pub fn write_named(&self, name: &str, data: &[f32]) -> VkResult<()> {
        let (buf, off, len) =
            self.slot(name).ok_or_else(|| VkError::Invalid(format!("no device tensor named {name:?}")))?;
        if data.len() != len {
            return Err(VkError::Invalid(format!("{name}: {} values for a tensor of {len}", data.len())));
        }
        self.upload(buf, off, data)
    }

    /// The state words: loss scale, step counter, hyper-parameters.
    pub fn write_state(&self, scale: &LossScale, step: u64, skipped_total: u64) -> VkResult<()> {
        let o = &self.opts;
        let mut w = [0u32; st::WORDS];
        let f = |x: f64| (x as f32).to_bits();
        w[st::SCALE] = f(scale.scale);
        w[st::GROWTH] = scale.growth_tracker;
        w[st::STEP] = u32::try_from(step).map_err(|_| VkError::Limit("step counter past 2^32".into()))?;
        w[st::STEP_SCALE] = f(scale.scale);
        w[st::CLIP_FACTOR] = f(1.0);
        w[st::SKIPPED_TOTAL] = skipped_total.min(u32::MAX as u64) as u32;
        w[st::LR] = f(o.lr);
        w[st::BETA1] = f(o.beta1);
        w[st::BETA2] = f(o.beta2);
        w[st::EPS] = f(o.eps);
        w[st::WD] = f(o.weight_decay);
        w[st::CLIP] = f(o.clip);
        w[st::DYNAMIC] = scale.dynamic as u32;
        w[st::GROWTH_INTERVAL] = scale.growth_interval;
        w[st::GROWTH_FACTOR] = f(scale.growth_factor);
        w[st::BACKOFF] = f(scale.backoff_factor);
        let data: Vec<f32> = w.iter().map(|&x| f32::from_bits(x)).collect();
        self.upload(&self.state, 0, &data)
    }

    pub fn read_state(&self) -> VkResult<[u32; st::WORDS]> {
        Ok(state_words(&self.download(&[(&self.state, 0, st::WORDS)])?.remove(0)))
    }

    /// Changes the hyper-parameters (e.g. a learning-rate schedule), keeping
    /// the step counter, the loss scale and the moments.
    pub fn set_options(&mut self, opts: &StepOptions) -> VkResult<()> {
        // The token cap is recorded into the step; the rest lives in the state.
        if opts.token_cap != self.opts.token_cap {
            self.forget_replay();
        }
        self.opts = *opts;
        let (scale, step, skipped) = self.loss_scale_and_step()?;
        self.write_state(&scale, step, skipped)
    }

    /// The loss scale, the AdamW step counter and the skipped-step count.
    pub fn loss_scale_and_step(&self) -> VkResult<(LossScale, u64, u64)> {
        let w = self.read_state()?;
        let fl = |i: usize| f32::from_bits(w[i]) as f64;
        let scale = LossScale {
            dynamic: w[st::DYNAMIC] == 1,
            scale: fl(st::SCALE),
            growth_tracker: w[st::GROWTH],
            growth_interval: w[st::GROWTH_INTERVAL],
            growth_factor: fl(st::GROWTH_FACTOR),
            backoff_factor: fl(st::BACKOFF),
        };
        Ok((scale, w[st::STEP] as u64, w[st::SKIPPED_TOTAL] as u64))
    }

    pub fn set_optim_state(&self, s: &OptimState<f32>, scale: &LossScale) -> VkResult<()> {
        self.write_flat(FlatBuf::M, &self.layout.flatten(&s.m))?;
        self.write_flat(FlatBuf::V, &self.layout.flatten(&s.v))?;
        self.write_state(scale, s.step, 0)
    }

    pub fn optim_state(&self) -> VkResult<OptimState<f32>> {
        let (_, step, _) = self.loss_scale_and_step()?;
        Ok(OptimState { m: self.read_params(FlatBuf::M)?, v: self.read_params(FlatBuf::V)?, step })
    }

    /// Sizes the workspace for `batch` and writes its inputs.
    pub fn set_batch(&mut self, batch: &Batch) -> VkResult<()> {
        if batch.num_targets() == 0 {
            return Err(VkError::Invalid(
                "the batch has no target position (every row is shorter than 2 tokens)".into(),
            ));
        }
        u(batch.t * batch.rows * self.cfg.vocab.max(3 * self.cfg.hidden), "batch elements")?;
        let fits = self.ws.as_ref().is_some_and(|w| w.t == batch.t && w.b == batch.rows);
        if !fits {
            self.forget_replay();
            self.ws = None;
            let (path, copies) = (self.path, self.coopmat_recurrence_capable());
            let shape = (batch.t, batch.rows);
            self.ws = Some(Workspace::new(&self.ctx, &self.cfg, shape, self.layout.total, path, copies)?);
        }
        let ws = self.ws.as_mut().expect("set above");
        ws.write_batch(&self.cfg, batch)?;
        self.settle_recurrence()
    }

    pub fn workspace(&self) -> Option<&Workspace> {
        self.ws.as_ref()
    }

    fn ws(&self) -> VkResult<&Workspace> {
        self.ws.as_ref().ok_or_else(|| VkError::Invalid("no batch was set".into()))
    }

    fn push(&self, ws: &Workspace) -> ModelPush {
        let c = &self.cfg;
        ModelPush {
            t_len: ws.t as u32,
            b: ws.b as u32,
            d: c.d_embed as u32,
            h: c.hidden as u32,
            a: c.attn_dim as u32,
            nh: c.heads as u32,
            w: c.window as u32,
            v: c.vocab as u32,
            ..Default::default()
        }
    }

    fn run<'a>(
        &self,
        seq: &mut Sequence<'a>,
        spec: &'static KernelSpec,
        bufs: &[&'a Buffer],
        push: &ModelPush,
        items: usize,
        label: &str,
    ) -> VkResult<()> {
        let kernel = self.ctx.kernel(spec)?;
        // Grid-stride kernels cover any count with at most 65535 groups.
        let cap = 65535 * spec.items_per_group[0] as usize;
        seq.dispatch(&kernel, bufs, push, [items.clamp(1, cap) as u64, 1, 1], label)
    }

    /// An attention kernel: one workgroup per block of `ATTN_BLOCK` positions
    /// of one (row, head), a grid of `[T / ATTN_BLOCK, B, NH]` workgroups.
    fn run_attn<'a>(
        &self,
        seq: &mut Sequence<'a>,
        spec: &'static KernelSpec,
        bufs: &[&'a Buffer],
        push: &ModelPush,
        label: &str,
    ) -> VkResult<()> {
        let kernel = self.ctx.kernel(spec)?;
        let work = [push.t_len as u64, push.b as u64, push.nh as u64];
        seq.dispatch(&kernel, bufs, push, work, label)
    }

    /// Records a product, split along K where `ops::split_k_plan` says so
    /// (the partial sums go through the workspace's scratch).
    #[allow(clippy::too_many_arguments)]
    fn mm<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        (m, n, k): (usize, usize, usize),
        a: (&'a Buffer, usize, bool),
        b: (&'a Buffer, usize, bool),
        c: (&'a Buffer, usize),
        accumulate: bool,
    ) -> VkResult<()> {
        let shape = GemmShape { m, n, k, ta: a.2, tb: b.2, accumulate };
        let path = self.gemm_path_now();
        let scratch = &self.ws()?.scratch;
        debug_assert!(
            ops::split_k_scratch_len(path, &shape) <= scratch.len_f32(),
            "gemm {m}x{n}x{k}: its split-K scratch is missing from workspace::step_products"
        );
        ops::gemm_split(
            &self.ctx,
            seq,
            path,
            &shape,
            MatRef { buf: a.0, offset: a.1 },
            MatRef { buf: b.0, offset: b.1 },
            MatRef { buf: c.0, offset: c.1 },
            Some(scratch),
        )
    }

    /// Records the column sums of `x` (`[rows, d]`) into the gradients at `out_off`.
    fn col_sum<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        x: &'a Buffer,
        (rows, d): (usize, usize),
        out_off: usize,
        label: &str,
    ) -> VkResult<()> {
        let (x, out) = (MatRef::whole(x), MatRef { buf: &self.grads, offset: out_off });
        record_col_sum(&self.ctx, seq, x, rows, d, out, &self.ws()?.scratch, label)
    }

    fn off(&self, name: &str) -> usize {
        self.layout.offset(name)
    }

    /// Records the beginning of a step: this step's loss scale, counters cleared.
    pub fn record_begin<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let ws = self.ws()?;
        let p = ModelPush { flag: state_op::BEGIN, ..self.push(ws) };
        self.run(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "state begin")
    }

    /// Records one stage, reading its inputs from where the previous stages
    /// (or an upload) left them.
    pub fn record_stage<'a>(&'a self, seq: &mut Sequence<'a>, stage: Stage) -> VkResult<()> {
        let ws = self.ws()?;
        let cfg = &self.cfg;
        let base = self.push(ws);
        let rows = ws.rows;
        let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
        let pb = &self.params;
        let gb = &self.grads;
        match stage {
            Stage::EmbedFwd => {
                let p = ModelPush { n: u(rows * d, "n")?, off0: self.off("embed.weight") as u32, ..base };
                self.run(seq, &EMBED_FWD, &[&ws.tokens, pb, &ws.emb], &p, rows * d, "embed_fwd")?;
            }
            Stage::GruFwd => {
                let seq_fault = matches!(self.fault, Some(Fault::RecurrenceNoBarrier | Fault::ResetBeforeMatmul));
                let wave = self.forward_wave() && !seq_fault;
                for (l, lb) in ws.layers.iter().enumerate() {
                    if wave && l > 0 {
                        // Layer 1 runs inside the wavefront with layer 0.
                        break;
                    }
                    let n_in = cfg.gru_in(l);
                    let input = if l == 0 { &ws.emb } else { &ws.layers[l - 1].h };
                    let w_ih = self.off(&format!("gru.weight_ih_l{l}"));
                    self.mm(seq, (rows, 3 * h, n_in), (input, 0, false), (pb, w_ih, true), (&lb.gi, 0), false)?;
                    let p = ModelPush {
                        n: u(rows * 3 * h, "n")?,
                        d: (3 * h) as u32,
                        off1: self.off(&format!("gru.bias_ih_l{l}")) as u32,
                        ..base
                    };
                    self.run(seq, &BIAS_ADD, &[pb, &lb.gi], &p, rows * 3 * h, &format!("gru.l{l} bias_ih"))?;
                    let w_hh = self.off(&format!("gru.weight_hh_l{l}"));
                    let b_hh = self.off(&format!("gru.bias_hh_l{l}")) as u32;
                    let label = format!("gru.l{l} fwd recurrence");
                    if wave {
                        let (p, bufs, groups) = self.wave_fwd_args(ws)?;
                        let intervals = (0..=ws.t).map(|t| (t, 1));
                        let label = "gru.l0 fwd recurrence, wavefront with l1";
                        self.record_grid(seq, (self.wave_spec(true), groups), &bufs, &p, intervals, label)?;
                        continue;
                    }
                    if self.recurrence != Recurrence::Seq && !seq_fault {
                        let p = ModelPush { off0: w_hh as u32, off1: b_hh, ..base };
                        let bufs = self.grid_fwd_bufs(ws, lb);
                        let (spec, _, groups) = self.grid_kernels(ws);
                        self.record_grid(seq, (spec, groups), &bufs, &p, (0..ws.t).map(|t| (t, 1)), &label)?;
                        continue;
                    }
                    let p = ModelPush { n: u(3 * h * h, "n")?, d: h as u32, off0: w_hh as u32, ..base };
                    self.run(seq, &TRANSPOSE, &[pb, &ws.wt], &p, 3 * h * h, &format!("gru.l{l} W_hh^T"))?;
                    let p = ModelPush { off1: b_hh, ..base };
                    let spec = match self.fault {
                        Some(Fault::RecurrenceNoBarrier) => &GRU_FWD_SEQ_FAULT_NO_BARRIER,
                        Some(Fault::ResetBeforeMatmul) => &GRU_FWD_SEQ_FAULT_RESET_BEFORE,
                        _ if h <= 256 => &GRU_FWD_SEQ_WG256,
                        _ => &GRU_FWD_SEQ,
                    };
                    let bufs = [pb, &lb.gi, &lb.gh, &lb.gates, &lb.h, &ws.wt];
                    let chunk = fwd_chunk(h);
                    for t0 in (0..ws.t).step_by(chunk) {
                        let p = ModelPush { t: t0 as u32, n: chunk as u32, ..p };
                        self.run(seq, spec, &bufs, &p, ws.b, &label)?;
                    }
                }
            }
            Stage::AttnFwd => {
                let s = &ws.layers.last().expect("layers >= 1").h;
                for (name, out) in [("ctx.q.weight", &ws.q), ("ctx.k.weight", &ws.k), ("ctx.v.weight", &ws.v)] {
                    self.mm(seq, (rows, a, h), (s, 0, false), (pb, self.off(name), true), (out, 0), false)?;
                }
                let p = ModelPush { f0: (1.0 / (cfg.head_dim() as f64).sqrt()) as f32, ..base };
                let bufs = [&ws.q, &ws.k, &ws.v, &ws.attn, &ws.c];
                let spec = match self.fault {
                    Some(Fault::SoftmaxNoMax) => &ATTN_FWD_FAULT_NO_MAX,
                    Some(Fault::WindowOffByOne) => &ATTN_FWD_FAULT_WINDOW,
                    _ => &ATTN_FWD,
                };
                self.run_attn(seq, spec, &bufs, &p, "attn_fwd")?;
            }
            Stage::HeadFwd => {
                let s = &ws.layers.last().expect("layers >= 1").h;
                let tok = self.off("head.tok.weight");
                let ctxw = self.off("head.ctx.weight");
                self.mm(seq, (rows, v, h), (s, 0, false), (pb, tok, true), (&ws.logits, 0), false)?;
                self.mm(seq, (rows, v, a), (&ws.c, 0, false), (pb, ctxw, true), (&ws.logits, 0), true)?;
                let p = ModelPush { n: u(rows * v, "n")?, d: v as u32, off1: self.off("head.bias") as u32, ..base };
                self.run(seq, &BIAS_ADD, &[pb, &ws.logits], &p, rows * v, "head bias")?;
            }
            Stage::Loss => {
                // N and 1/N come with the batch (after the targets), not in
                // push constants: a recorded step replays on any batch.
                let bufs = [&ws.logits, &ws.targets, &ws.mask, &ws.token_loss, &ws.dlogits, &self.state];
                let spec = if self.fault == Some(Fault::MaskDropped) { &LOSS_FAULT_NO_MASK } else { &LOSS };
                self.run(seq, spec, &bufs, &base, rows, "loss")?;
                let p = ModelPush { flag: state_op::LOSS, n: rows as u32, ..base };
                self.run(seq, &STATE, &[&self.state, &ws.token_loss], &p, 1, "loss value")?;
            }
            Stage::HeadBwd => {
                let s = &ws.layers.last().expect("layers >= 1").h;
                let cap = self.opts.token_cap;
                let p = ModelPush { flag: cap.is_some() as u32, f0: cap.unwrap_or(0.0) as f32, ..base };
                let bufs = [&ws.dlogits, &ws.c, &ws.token_norm, &ws.dl_ctx, &self.state];
                self.run(seq, &TOKEN_GUARD, &bufs, &p, rows, "token_guard")?;
                let dl_ctx = if cap.is_some() { &ws.dl_ctx } else { &ws.dlogits };
                let tok = self.off("head.tok.weight");
                let ctxw = self.off("head.ctx.weight");
                self.mm(seq, (v, h, rows), (&ws.dlogits, 0, true), (s, 0, false), (gb, tok), false)?;
                self.mm(seq, (v, a, rows), (dl_ctx, 0, true), (&ws.c, 0, false), (gb, ctxw), false)?;
                self.col_sum(seq, &ws.dlogits, (rows, v), self.off("head.bias"), "head.bias grad")?;
                self.mm(seq, (rows, h, v), (&ws.dlogits, 0, false), (pb, tok, false), (&ws.d_s_head, 0), false)?;
                self.mm(seq, (rows, a, v), (&ws.dlogits, 0, false), (pb, ctxw, false), (&ws.d_c, 0), false)?;
            }
            Stage::AttnBwd => {
                let s = &ws.layers.last().expect("layers >= 1").h;
                let p = ModelPush { f0: (1.0 / (cfg.head_dim() as f64).sqrt()) as f32, ..base };
                let bufs = [&ws.k, &ws.v, &ws.attn, &ws.d_c, &ws.ds, &ws.d_q];
                self.run_attn(seq, &ATTN_BWD_Q, &bufs, &p, "attn_bwd_q")?;
                let bufs = [&ws.q, &ws.attn, &ws.ds, &ws.d_c, &ws.d_k, &ws.d_v];
                self.run_attn(seq, &ATTN_BWD_KV, &bufs, &p, "attn_bwd_kv")?;
                let parts = [("ctx.q.weight", &ws.d_q), ("ctx.k.weight", &ws.d_k), ("ctx.v.weight", &ws.d_v)];
                for (name, dx) in parts {
                    self.mm(seq, (a, h, rows), (dx, 0, true), (s, 0, false), (gb, self.off(name)), false)?;
                }
                for (i, (name, dx)) in parts.into_iter().enumerate() {
                    let w = self.off(name);
                    self.mm(seq, (rows, h, a), (dx, 0, false), (pb, w, false), (&ws.d_s_ctx, 0), i > 0)?;
                }
            }
            Stage::GruBwd => {
                let top = &ws.layers.last().expect("layers >= 1").d_h;
                let p = ModelPush { n: u(rows * h, "n")?, ..base };
                self.run(seq, &ADD, &[&ws.d_s_head, &ws.d_s_ctx, top], &p, rows * h, "d_s")?;
                // Both layers' recurrences in one wavefront dispatch, which
                // also computes layer 0's gradient from above.
                let wave = self.backward_wave();
                if wave {
                    let (p, bufs, groups) = self.wave_bwd_args(ws)?;
                    let intervals = (0..ws.t + BWD_WAVE_LAG).map(|t| (t, 1));
                    let label = "gru.l1 bwd recurrence, wavefront with l0";
                    self.record_grid(seq, (self.wave_spec(false), groups), &bufs, &p, intervals, label)?;
                }
                for l in (0..cfg.layers).rev() {
                    let lb = &ws.layers[l];
                    let n_in = cfg.gru_in(l);
                    let p = ModelPush { off0: self.off(&format!("gru.weight_hh_l{l}")) as u32, ..base };
                    let label = format!("gru.l{l} bwd recurrence");
                    if wave {
                        // Recorded above.
                    } else if self.recurrence != Recurrence::Seq {
                        let bufs = self.grid_bwd_bufs(ws, lb);
                        let steps = (0..ws.t).rev().map(|t| (t, 1));
                        let (_, spec, groups) = self.grid_kernels(ws);
                        self.record_grid(seq, (spec, groups), &bufs, &p, steps, &label)?;
                    } else {
                        let bufs = [pb, &lb.gh, &lb.gates, &lb.h, &lb.d_h, &lb.dh_tot, &lb.d_gi, &lb.d_gh];
                        let chunk = bwd_chunk(h);
                        let mut hi = ws.t;
                        while hi > 0 {
                            let n = chunk.min(hi);
                            let p = ModelPush { t: (hi - 1) as u32, n: n as u32, ..p };
                            let spec = if h <= 256 { &GRU_BWD_SEQ_WG256 } else { &GRU_BWD_SEQ };
                            self.run(seq, spec, &bufs, &p, ws.b, &label)?;
                            hi -= n;
                        }
                    }
                    let input = if l == 0 { &ws.emb } else { &ws.layers[l - 1].h };
                    let w_ih = self.off(&format!("gru.weight_ih_l{l}"));
                    let w_hh = self.off(&format!("gru.weight_hh_l{l}"));
                    self.mm(seq, (3 * h, n_in, rows), (&lb.d_gi, 0, true), (input, 0, false), (gb, w_ih), false)?;
                    // dW_hh pairs d_gh at t with h at t-1 (nothing at t = 0).
                    let shifted = rows - ws.b;
                    self.mm(
                        seq,
                        (3 * h, h, shifted),
                        (&lb.d_gh, ws.b * 3 * h, true),
                        (&lb.h, 0, false),
                        (gb, w_hh),
                        false,
                    )?;
                    for (name, src) in
                        [(format!("gru.bias_ih_l{l}"), &lb.d_gi), (format!("gru.bias_hh_l{l}"), &lb.d_gh)]
                    {
                        self.col_sum(seq, src, (rows, 3 * h), self.off(&name), &format!("{name} grad"))?;
                    }
                    let d_in = if l == 0 { &ws.d_emb } else { &ws.layers[l - 1].d_h };
                    if !(wave && l > 0) {
                        self.mm(seq, (rows, n_in, 3 * h), (&lb.d_gi, 0, false), (pb, w_ih, false), (d_in, 0), false)?;
                    }
                }
            }
            Stage::EmbedBwd => {
                // Chunk sums of the position lists, then each token value's
                // chunks added in order (embed_bwd.comp).
                let bufs = [&ws.csr, &ws.d_emb, &ws.emb_part, gb];
                let chunks = workspace::emb_chunks_max(rows, v) * d;
                let p = ModelPush { n: u(chunks, "n")?, flag: 0, ..base };
                self.run(seq, &EMBED_BWD, &bufs, &p, chunks, "embed_bwd chunks")?;
                let p = ModelPush { n: u(v * d, "n")?, flag: 1, off0: self.off("embed.weight") as u32, ..base };
                self.run(seq, &EMBED_BWD, &bufs, &p, v * d, "embed_bwd")?;
            }
            Stage::Optim => {
                self.record_unscale_and_norm(seq)?;
                let n = u(self.layout.total, "parameters")?;
                let p = ModelPush { flag: 1, n, ..base };
                self.run(seq, &SCALE_GRADS, &[&self.state, gb], &p, self.layout.total, "clip")?;
                self.record_norm(seq, state_op::POST_CLIP)?;
                let p = ModelPush { off0: 0, n, ..base };
                let bufs = [&self.state, pb, gb, &self.m, &self.v, &self.decay_runs];
                self.run(seq, &ADAMW, &bufs, &p, self.layout.total, "adamw")?;
                let p = ModelPush { flag: state_op::FINISH, ..base };
                self.run(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "state finish")?;
            }
        }
        Ok(())
    }

    /// Records a grid recurrence kernel (`gru_*_grid`, `gru_*_grid_cm`) of
    /// `groups` workgroups:
    /// with [`Recurrence::Steps`], one dispatch per `(t, 1)` of `steps`; with
    /// [`Recurrence::Grid`], one dispatch walking them all (from the first
    /// `t`, forward or backward as `spec` does), its barrier counter zeroed first.
    fn record_grid<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        (spec, groups): (&'static KernelSpec, usize),
        bufs: &[&'a Buffer],
        push: &ModelPush,
        mut steps: impl Iterator<Item = (usize, usize)>,
        label: &str,
    ) -> VkResult<()> {
        if self.recurrence == Recurrence::Grid {
            let Some((t0, _)) = steps.next() else { return Ok(()) };
            let n = 1 + steps.count();
            seq.fill(&self.ws()?.sync, 0)?;
            let p = ModelPush { t: t0 as u32, n: n as u32, ..*push };
            return self.run(seq, spec, bufs, &p, groups, label);
        }
        for (t, n) in steps {
            let p = ModelPush { t: t as u32, n: n as u32, ..*push };
            self.run(seq, spec, bufs, &p, groups, label)?;
        }
        Ok(())
    }

    /// Device milliseconds of `steps - 1` grid-wide barriers alone (the
    /// forward grid kernel with its arithmetic switched off): what the
    /// dependent steps of a recurrence cost at the least. `None` without
    /// timestamps.
    pub fn probe_grid_barrier(&self, steps: usize) -> VkResult<Option<f64>> {
        self.probe_grid(steps, 1)
    }

    /// Device milliseconds of the forward grid kernel over `steps` steps of
    /// layer 0 with parts switched off by `flag` (1: only the barriers; bits
    /// 2, 4, 8: no barrier, no product, no gates). A timing probe: what it
    /// writes is meaningless.
    pub fn probe_grid(&self, steps: usize, flag: u32) -> VkResult<Option<f64>> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        let p = ModelPush {
            flag,
            t: 0,
            n: u(steps, "steps")?,
            off0: self.off("gru.weight_hh_l0") as u32,
            off1: self.off("gru.bias_hh_l0") as u32,
            ..self.push(ws)
        };
        // The barrier alone on the kernel the step uses; the parts of a step
        // on the f32 kernel (the cooperative-matrix one has no such switches).
        let bufs = self.grid_fwd_bufs(ws, lb);
        let (spec, groups, bufs) = match self.grid_kernels(ws) {
            (fwd, _, groups) if flag == 1 => (fwd, groups, &bufs[..]),
            _ => {
                let f32_kernel = grid_specs(self.cfg.hidden).0;
                (f32_kernel, self.cfg.hidden.div_ceil(GRID_UNITS), &bufs[..f32_kernel.bindings.len()])
            }
        };
        self.run(&mut seq, spec, bufs, &p, groups, "grid barrier probe")?;
        let t = seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Invalid("the grid barrier gave up waiting: workgroups not resident at once".into()));
        }
        Ok(t.dispatches.last().and_then(|d| d.1).map(|ns| ns / 1e6))
    }

    /// Device milliseconds of the backward wavefront over the workspace's
    /// T + BWD_WAVE_LAG intervals with parts switched off by `flag` (gru_bwd_wave_cm:
    /// bits 2, 4, 8, 16: no operand loads, no products, no stores, no step
    /// inputs; 32: on the kernel variant whose operand loads are not
    /// `coherent`). A timing probe: what it writes is meaningless. `None` where
    /// the step has no backward wavefront or no timestamps.
    pub fn probe_bwd_wave(&self, flag: u32) -> VkResult<Option<f64>> {
        if !self.backward_wave() || self.recurrence != Recurrence::Grid {
            return Ok(None);
        }
        let ws = self.ws()?;
        let (p, bufs, groups) = self.wave_bwd_args(ws)?;
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        let spec = if flag & 32 != 0 { &GRU_BWD_WAVE_CM_NC } else { &GRU_BWD_WAVE_CM };
        let p = ModelPush { flag: flag & !32, ..p };
        let intervals = (0..ws.t + BWD_WAVE_LAG).map(|t| (t, 1));
        self.record_grid(&mut seq, (spec, groups), &bufs, &p, intervals, "bwd wave probe")?;
        let t = seq.submit()?;
        Ok(t.dispatches.last().and_then(|d| d.1).map(|ns| ns / 1e6))
    }

    fn record_norm<'a>(&'a self, seq: &mut Sequence<'a>, op: u32) -> VkResult<()> {
        let ws = self.ws()?;
        let base = self.push(ws);
        let total = self.layout.total;
        let p = ModelPush { n: total as u32, ..base };
        self.run(seq, &SUMSQ, &[&self.grads, &ws.partials], &p, total, "grad sumsq")?;
        let p = ModelPush { flag: op, n: total.div_ceil(SUMSQ_CHUNK) as u32, ..base };
        self.run(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "grad norm")
    }

    /// Unscales the gradients by this step's loss scale and takes their norm
    /// (and the guard's decision).
    pub fn record_unscale_and_norm<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let ws = self.ws()?;
        let p = ModelPush { flag: 0, n: self.layout.total as u32, ..self.push(ws) };
        if self.fault == Some(Fault::NormBeforeUnscale) {
            self.record_norm(seq, state_op::NORM)?;
            return self.run(seq, &SCALE_GRADS, &[&self.state, &self.grads], &p, self.layout.total, "unscale");
        }
        self.run(seq, &SCALE_GRADS, &[&self.state, &self.grads], &p, self.layout.total, "unscale")?;
        self.record_norm(seq, state_op::NORM)
    }

    /// Forward and backward of the batch set last, in one submit.
    pub fn run_grads(&self) -> VkResult<Timings> {
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_staged(&mut seq, false)?;
        seq.submit()
    }

    /// Records a whole training step (the batch set last) into `seq`, for
    /// [`Sequence::end`] and [`Sequence::replay`]: each replay is one more
    /// training step on the same batch, as a CUDA graph replays its kernels.
    pub fn record_step<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        self.record_staged(seq, true).map(|_| ())
    }

    /// Records the step's beginning, forward and backward, then the whole
    /// optimizer (`optim`) or unscale and norm; returns each stage's range of
    /// dispatches.
    fn record_staged<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        optim: bool,
    ) -> VkResult<Vec<(Stage, std::ops::Range<usize>)>> {
        self.record_begin(seq)?;
        let mut ranges = Vec::new();
        for s in Stage::FORWARD_BACKWARD.into_iter().chain(optim.then_some(Stage::Optim)) {
            let start = seq.dispatch_count();
            self.record_stage(seq, s)?;
            ranges.push((s, start..seq.dispatch_count()));
        }
        if !optim {
            self.record_unscale_and_norm(seq)?;
        }
        Ok(ranges)
    }

    /// A whole training step in one submit.
    pub fn run_step(&self) -> VkResult<Timings> {
        self.run_step_staged().map(|r| r.0)
    }

    /// A whole training step in one submit, with the device milliseconds of
    /// each stage (`None` without timestamps).
    pub fn run_step_staged(&self) -> VkResult<Staged> {
        self.run_staged(true)
    }

    /// Forward and backward (then unscale and norm, or with `optim` the whole
    /// optimizer) in one submit, with each stage's device milliseconds.
    pub fn run_staged(&self, optim: bool) -> VkResult<Staged> {
        let t0 = std::time::Instant::now();
        let mut seq = Sequence::with_timing(&self.ctx, self.timing)?;
        let t1 = std::time::Instant::now();
        let ranges = self.record_staged(&mut seq, optim)?;
        let t2 = std::time::Instant::now();
        seq.end()?;
        let t3 = std::time::Instant::now();
        let timings = seq.replay()?;
        let t4 = std::time::Instant::now();
        drop(seq);
        let t5 = std::time::Instant::now();
        if host_profile() {
            let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
            eprintln!(
                "host: new {:.3} record {:.3} end {:.3} submit+wait {:.3} drop {:.3} ms ({} dispatches)",
                ms(t0, t1),
                ms(t1, t2),
                ms(t2, t3),
                ms(t3, t4),
                ms(t4, t5),
                timings.dispatches.len()
            );
        }
        let per_stage = ranges
            .into_iter()
            .map(|(s, r)| {
                let ns: Option<Vec<f64>> = timings.dispatches[r].iter().map(|d| d.1).collect();
                (s, ns.map(|v| v.iter().sum::<f64>() / 1e6))
            })
            .collect();
        Ok((timings, per_stage))
    }

    /// Runs `stages` in one submit, after the step's beginning.
    pub fn run_stages(&self, stages: &[Stage]) -> VkResult<Timings> {
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        for &s in stages {
            self.record_stage(&mut seq, s)?;
        }
        seq.submit()
    }

    /// Loss and gradients (unscaled, S = the current scale) of `batch`.
    pub fn grads(&mut self, batch: &Batch) -> VkResult<GpuGrads> {
        self.set_batch(batch)?;
        self.run_grads()?;
        let r = self.report()?;
        Ok(GpuGrads {
            loss: r.loss,
            n_targets: r.n_targets,
            grad_norm: r.optim.grad_norm,
            capped: r.capped_tokens,
            grads: self.read_params(FlatBuf::Grads)?,
        })
    }

    /// One training step on `batch`, as [`Engine::step`] but replaying the
    /// step recorded for an earlier batch of the same shape (recording it
    /// first where there is none): the batch's data, its target count
    /// included, is in buffers the recorded commands read, so the host's work
    /// per step is writing the batch and one submit. What `train` runs.
    pub fn step_replayed(&mut self, batch: &Batch) -> VkResult<(StepReport, Timings)> {
        let t0 = std::time::Instant::now();
        self.set_batch(batch)?;
        let t1 = std::time::Instant::now();
        let timings = {
            let mut cache = self.replay.lock().unwrap_or_else(|p| p.into_inner());
            if cache.is_none() {
                let mut seq = Sequence::with_timing(&self.ctx, self.timing)?;
                self.record_step(&mut seq)?;
                let words = (st::WORDS * 4) as u64;
                seq.copy(&self.state, 0, &self.state_host, 0, words)?;
                seq.end()?;
                // SAFETY: the lifetime only ties the sequence to the buffers
                // it uses, all of them this engine's (parameters, gradients,
                // moments, state, decay table, workspace). The sequence is
                // kept in this engine's first field, dropped before the
                // others, and `forget_replay` drops it before the workspace
                // is replaced; no other buffer of the engine is ever replaced.
                *cache = Some(unsafe { std::mem::transmute::<Sequence<'_>, Sequence<'static>>(seq) });
            }
            cache.as_mut().expect("recorded above").replay()?
        };
        // The state words as the step left them (its last command).
        let w = state_words(&self.state_host.read_f32()?);
        if host_profile() {
            let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
            let t2 = std::time::Instant::now();
            eprintln!("host (replayed step): batch {:.3} record-or-replay, wait {:.3} ms", ms(t0, t1), ms(t1, t2));
        }
        Ok((self.report_from(&w)?, timings))
    }

    /// One training step on `batch`; reads back only the state words.
    pub fn step(&mut self, batch: &Batch) -> VkResult<(StepReport, Timings)> {
        self.set_batch(batch)?;
        let timings = self.run_step()?;
        Ok((self.report()?, timings))
    }

    /// What the last step did, from the state words.
    pub fn report(&self) -> VkResult<StepReport> {
        self.report_from(&self.read_state()?)
    }

    /// What a step did, from the state words `w` it left.
    fn report_from(&self, w: &[u32; st::WORDS]) -> VkResult<StepReport> {
        if w[st::GRID_FAIL] != 0 {
            return Err(VkError::Invalid(
                "the grid recurrence's barrier gave up waiting: this device did not run all its workgroups at once; \
                 run with DUALSCOPE_RECURRENCE=seq"
                    .into(),
            ));
        }
        let fl = |i: usize| f32::from_bits(w[i]) as f64;
        let skipped = match w[st::SKIP] {
            0 => None,
            1 => Some(SkipReason::NonFiniteNorm),
            2 => Some(SkipReason::ZeroNorm),
            3 => Some(SkipReason::NonFinitePostClip),
            _ => Some(SkipReason::ZeroPostClip),
        };
        Ok(StepReport {
            loss: fl(st::LOSS),
            n_targets: self.ws()?.n_targets,
            capped_tokens: w[st::CAPPED] as usize,
            optim: OptimOutcome {
                grad_norm: fl(st::NORM),
                clipped: w[st::CLIPPED] == 1,
                post_clip_norm: fl(st::POST_CLIP),
                skipped,
                scale: fl(st::STEP_SCALE),
                next_scale: fl(st::SCALE),
            },
        })
    }
}

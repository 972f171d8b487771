//! THE training loop: from a fresh model, a checkpoint's weights or a whole
//! saved run, step after step on batches that depend only on the seed and
//! the step; the controller judges each step's gradients before they are
//! applied, bad steps in a row roll back to the last good checkpoint, and
//! the run's state and logs are written to `--out` as it goes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::TrainError;
use super::captures::{self, CaptureInfo, CaptureOptions, Captures, StepCapture};
use super::carry::{CarryWalk, load_carry, save_carry};
use super::controller::{Action, ActionKind, Controller, ControllerConfig, Norms, Outcome};
use super::inject::{self, Injections};
use super::log::{CONTROLLER_FILE, JsonLog, LOG_FILE, LogEntry, keep_log_upto};
use super::start::{Start, batch_at, finite_unless_allowed, start};
use super::state::{RUN_STATE_VERSION, RunState, TRAIN_STATE_FILE, prepare_dir, remove_stale_temporaries, save_run};
use crate::checkpoint::{LoadOptions, save_params, write_atomic};
use crate::dataset::Dataset;
use crate::engine::gpu::SharedGpu;
use crate::engine::inputs::{check_memory, check_shape};
use crate::engine::{Engine, EngineKind, Guarded, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::step::{LossScale, StepOptions, StepReport};

/// When the loop checks that a batch's activations fit in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryCheck {
    /// The batch shape asked for, before anything is cut or allocated (`train`).
    Shape,
    /// The first batch as cut (`demo`).
    FirstBatch,
}

/// What to train, where from, and how (the `train` options).
#[derive(Clone, Debug)]
pub struct TrainPlan {
    /// The dataset's path as given, for messages.
    pub data: PathBuf,
    /// small, bench, tiny, or a JSON config file (default small; ignored with
    /// `checkpoint`, refused with `resume`).
    pub config: Option<String>,
    /// Start from this checkpoint's weights (fresh optimizer state).
    pub checkpoint: Option<PathBuf>,
    /// Continue this run (a `--out` directory, or its train_state.safetensors).
    pub resume: Option<PathBuf>,
    /// The step to train up to, counted from the start of the run.
    pub steps: u64,
    pub seq_len: Option<usize>,
    pub batch: Option<usize>,
    pub seed: Option<u64>,
    pub engine: EngineKind,
    pub vulkan: VulkanOptions,
    pub out: Option<PathBuf>,
    /// A parameter checkpoint `step_NNNNNN.safetensors` every this many steps (0: never).
    pub save_every: u64,
    /// The resumable checkpoint every this many steps, and at the end.
    pub checkpoint_every: u64,
    /// The loss scale of a fresh run (default: the precision's, or the
    /// precision map's).
    pub loss_scale: Option<LossScale>,
    /// `--precision-map`: each stage's precision over the precision's step
    /// (docs/precision.md), as given.
    pub precision_map: Option<String>,
    pub optim: StepOptions,
    pub controller: ControllerConfig,
    /// Testing aids: the planted events (`--inject`), one per step at most.
    pub inject: Injections,
    /// Which steps are captured, how many are kept, and the lead-up ring.
    pub captures: CaptureOptions,
    pub memory_check: MemoryCheck,
    /// How `checkpoint` and `resume` are loaded (non-finite weights refused by default).
    pub load: LoadOptions,
    /// `--carry-state`: rows walk stretches of the data with their state
    /// carried (`train::carry`); `None`: random windows from zero.
    pub carry: Option<CarryWalk>,
    /// Start from these weights instead of `config` or `checkpoint`, with a
    /// fresh optimizer state (the GUI's *Train here*).
    pub weights: Option<(Config, Params<f32>)>,
    /// The Vulkan context to run on (the GUI's shared one); `None`: one opened for the run.
    pub gpu: Option<SharedGpu>,
    /// Keep the last weights in [`TrainSummary::params`].
    pub keep_params: bool,
}

impl TrainPlan {
    /// The checks that need nothing but the plan (the CLI runs them before it
    /// opens the dataset).
    pub fn check(&self) -> Result<(), TrainError> {
        if self.steps == 0 {
            return Err(TrainError::Usage("--steps must be at least 1".into()));
        }
        if self.batch == Some(0) || self.seq_len == Some(0) {
            return Err(TrainError::Usage("--batch and --seq-len must be at least 1".into()));
        }
        // The summary keeps every step's log entry and loss.
        let per_step = (std::mem::size_of::<LogEntry>() + 64) as u64;
        let bytes = crate::engine::inputs::bytes_of(&[self.steps, per_step]);
        crate::engine::inputs::check_alloc(&format!("--steps {}", self.steps), bytes)
            .map_err(|e| TrainError::Failed(e.to_string()))?;
        if self.checkpoint_every == 0 {
            return Err(TrainError::Usage("--checkpoint-every must be at least 1".into()));
        }
        if self.resume.is_some() && (self.checkpoint.is_some() || self.config.is_some()) {
            return Err(TrainError::Usage("--resume keeps the run's model: drop --checkpoint and --config".into()));
        }
        if !self.captures.at.is_empty() && self.out.is_none() && self.resume.is_none() {
            return Err(TrainError::Usage(
                "--capture-at without --out: captures are written to OUT/captures/; give --out".into(),
            ));
        }
        inject::check(&self.inject, self.engine, self.vulkan.precision)
    }
}

/// The run about to start.
#[derive(Clone, Debug)]
pub struct Begin<'a> {
    /// Steps `first_step..=last_step` will run.
    pub first_step: u64,
    pub last_step: u64,
    /// The checkpoint resumed, if any.
    pub resumed: Option<&'a Path>,
    pub optim_step: u64,
    pub loss_scale: f64,
    pub lr_factor: f64,
}

/// One finished step.
#[derive(Clone, Debug)]
pub struct StepEvent<'a> {
    /// What `log.jsonl` gets for the step (its actions included).
    pub entry: &'a LogEntry,
    pub report: &'a StepReport,
    /// The run's first step (of this invocation).
    pub first: bool,
    /// Steps not applied so far in this invocation, this one included.
    pub skipped_total: usize,
    /// The controller's learning-rate factor after the step.
    pub lr_factor: f64,
    pub base_lr: f64,
}

/// What the loop tells as it goes; every method defaults to nothing.
pub trait Observer {
    fn begin(&mut self, _b: &Begin<'_>) {}
    /// A note from the engine (once: why the recurrence fell back).
    fn note(&mut self, _note: &str) {}
    fn step(&mut self, _s: &StepEvent<'_>) {}
    /// Each of the step's controller actions, after [`Observer::step`].
    fn action(&mut self, _a: &Action) {}
    /// A capture written (its folder, and why: the first trigger's reason).
    fn capture(&mut self, _path: &Path, _reason: &str) {}
    /// Asked before each step: `true` ends the run there with
    /// [`TrainError::Cancelled`] (the GUI's Stop), nothing more written.
    fn stop_requested(&mut self) -> bool {
        false
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct TrainSummary {
    pub config: Config,
    pub dataset: String,
    pub first_step: u64,
    pub last_step: u64,
    pub resumed_from: Option<PathBuf>,
    /// Where the checkpoints and logs are.
    pub out: Option<PathBuf>,
    /// Steps not applied.
    pub skipped: usize,
    /// Each step's loss, in order.
    pub losses: Vec<f64>,
    pub entries: Vec<LogEntry>,
    pub actions: Vec<Action>,
    pub controller: Controller,
    /// The captures written and kept (`OUT/captures/`), in order.
    pub captures: Vec<CaptureInfo>,
    /// `Engine::precision_and_path`.
    pub precision: &'static str,
    pub gemm_path: &'static str,
    /// The last weights, where [`TrainPlan::keep_params`] asked for them.
    pub params: Option<Params<f32>>,
}

/// The last good state: what a rollback returns to and what the checkpoint file holds.
struct Good {
    step: u64,
    state: TrainState,
    controller: Controller,
}

/// Runs `plan` on `ds`, telling `obs` as it goes.
pub fn train(plan: &TrainPlan, ds: &Dataset, obs: &mut dyn Observer) -> Result<TrainSummary, TrainError> {
    plan.check()?;
    let Start { config: cfg, state, controller: mut ctl, step: start, seed, rows, t, resumed } = start(plan, ds)?;
    if rows == 0 || t == 0 {
        return Err(TrainError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    if plan.memory_check == MemoryCheck::Shape {
        // A very long --seq-len is refused before anything is cut or allocated.
        check_shape(&cfg, rows, t, 4)?;
    }
    captures::check_ring(&plan.captures, rows, t)?;
    let out = plan.out.clone().or_else(|| plan.resume.as_ref().filter(|r| r.is_dir()).cloned());
    if let (Some(dir), None) = (&out, &resumed)
        && dir.join(TRAIN_STATE_FILE).exists()
    {
        return Err(TrainError::Usage(format!(
            "--out {0}: holds a training run; continue it with --resume {0}, or choose another --out",
            dir.display()
        )));
    }
    // The engine first, so that a missing device leaves no empty --out directory.
    let base_lr = plan.optim.lr;
    let run_opts = StepOptions { lr: base_lr * ctl.lr_factor, ..plan.optim };
    let mut engine = Engine::open_on(plan.engine, plan.gpu.as_ref(), &cfg, state.clone(), &run_opts, &plan.vulkan)?;
    if let Some(text) = &plan.precision_map {
        let map = engine.apply_precision_map(text, plan.vulkan.gemm)?;
        // A fresh run starts from the map's loss scale unless one was asked for.
        if plan.loss_scale.is_none() && plan.resume.is_none() {
            engine.set_loss_scale(&crate::step::LossScale::for_map(&map))?;
        }
    }
    // A carried step's capture holds the state it started from (carry.safetensors).
    let mut caps = Captures::new(plan, out.as_deref(), ds, &cfg, seed, &engine)?;
    let walk = plan.carry;
    // The walk opened once: its list of long documents is not rebuilt per step.
    let walker = walk.map(|w| w.open(ds, t)).transpose()?;
    // The state the next step starts from: a resumed run in the middle of an
    // episode reads what its last step left.
    let mut carried = match (&walk, &resumed) {
        (Some(w), Some(from)) if !start.is_multiple_of(w.windows) => {
            Some(load_carry(from.parent().unwrap_or(Path::new(".")), start, &cfg, rows)?)
        }
        _ => None,
    };
    let save_state = |dir: &Path, g: &Good| -> Result<(), TrainError> {
        let rs = RunState {
            version: RUN_STATE_VERSION,
            step: g.step,
            optim_step: g.state.optim.step,
            loss_scale: g.state.scale.clone(),
            controller: g.controller.clone(),
            seed,
            batch: rows,
            seq_len: t,
            dataset: ds.name().to_string(),
            dataset_hash: ds.content_hash(),
            carry: walk,
        };
        save_run(dir, &cfg, &g.state, &rs)
    };
    // The carried state beside the run state (a run at an episode's end has
    // none to keep: its next step starts from zero).
    let save_carried = |dir: &Path, step: u64, c: &Option<crate::step::Carry<f32>>| -> Result<(), TrainError> {
        match (c, &walk) {
            (Some(c), Some(w)) if !step.is_multiple_of(w.windows) => save_carry(dir, step, c),
            _ => Ok(()),
        }
    };
    let mut good = Good { step: start, state, controller: ctl.clone() };
    if let Some(dir) = &out {
        prepare_dir(dir)?;
        remove_stale_temporaries(dir);
        match &resumed {
            Some(from) => {
                let from_dir = from.parent().unwrap_or(Path::new("."));
                for f in [LOG_FILE, CONTROLLER_FILE] {
                    keep_log_upto(&from_dir.join(f), &dir.join(f), start)?;
                }
            }
            None => {
                for f in [LOG_FILE, CONTROLLER_FILE] {
                    write_atomic(&dir.join(f), b"")?;
                }
            }
        }
        // A checkpoint from the start: a kill at any moment leaves one to resume.
        if resumed.is_none() || plan.out.is_some() {
            save_state(dir, &good)?;
            save_carried(dir, start, &carried)?;
        }
    }
    let mut log = JsonLog::open(out.as_ref().map(|d| d.join(LOG_FILE)))?;
    let mut clog = JsonLog::open(out.as_ref().map(|d| d.join(CONTROLLER_FILE)))?;
    obs.begin(&Begin {
        first_step: start + 1,
        last_step: plan.steps,
        resumed: resumed.as_deref(),
        optim_step: good.state.optim.step,
        loss_scale: good.state.scale.scale,
        lr_factor: ctl.lr_factor,
    });
    let pad = plan.engine == EngineKind::Vulkan;
    let mut entries = Vec::new();
    let mut losses = Vec::new();
    let mut all_actions: Vec<Action> = Vec::new();
    let mut skipped_now = 0usize;
    let mut checkpoint_due = false;
    let mut lr_now = base_lr * ctl.lr_factor;
    let mut fast: Option<(StepReport, Norms)> = None;
    // The state before a step that may be captured, kept before it is applied.
    let mut pre: Option<TrainState> = None;
    for step in start + 1..=plan.steps {
        if obs.stop_requested() {
            return Err(TrainError::Cancelled { step });
        }
        let mut actions = ctl.begin_step(step);
        let lr = base_lr * ctl.lr_factor;
        if lr != lr_now {
            engine.set_lr(lr)?;
            lr_now = lr;
        }
        // The state this step starts from, kept for its capture.
        let mut started: Option<crate::step::Carry<f32>> = None;
        let (batch, origins) = match &walker {
            None => batch_at(ds, seed, step, rows, t + 1, pad)?,
            Some(w) => {
                let (batch, origins, fresh) = w.batch_at(ds, seed, step, rows)?;
                let from = if fresh { None } else { carried.take() };
                let from = from.unwrap_or_else(|| crate::step::Carry::zeros(&cfg, rows));
                if caps.on() {
                    started = Some(from.clone());
                }
                engine.set_carry(Some(from))?;
                (batch, origins)
            }
        };
        if plan.memory_check == MemoryCheck::FirstBatch && step == start + 1 {
            check_memory(&cfg, &batch, 4)?;
        }
        let t0 = Instant::now();
        // A planted event sets the engine up first (a kernel fault, a raised loss scale).
        let put_back = inject::before_step(&plan.inject, &mut engine, step)?;
        let poison = plan.inject.get(&step).and_then(|e| e.poison());
        let scale_full = engine.loss_scale()?;
        let scale_before = scale_full.scale;
        // Without the controller (and no spoilt gradients) the whole step is one
        // submit with nothing read back but the state words; the controller
        // needs every tensor's gradient norm before the optimizer runs.
        if !ctl.config.enabled && poison.is_none() {
            if caps.wanted(step, &plan.inject) {
                pre = Some(engine.snapshot()?);
            }
            let report = engine.step(&batch)?;
            if let Some(note) = engine.take_note() {
                obs.note(&note);
            }
            let norms = Norms { global: report.optim.grad_norm, tensors: Vec::new() };
            fast = Some((report, norms));
        }
        let (report, norms, verdict) = if let Some((report, norms)) = fast.take() {
            let verdict = ctl.assess(&norms);
            (report, norms, verdict)
        } else {
            let Guarded { report, norms, verdict, .. } = engine.guarded_step(
                &batch,
                poison,
                |n| ctl.assess(n),
                |v| v.skip.is_some(),
                |e, norms, v| {
                    if caps.wanted(step, &plan.inject) || caps.risky(norms, v.skip.is_some(), v.spike.is_some()) {
                        pre = Some(e.snapshot()?);
                    }
                    Ok(())
                },
            )?;
            (report, norms, verdict)
        };
        // An f16 overflow's raised scale is put back: what the next step runs with.
        let scale_after = match put_back {
            Some(s) => {
                engine.set_loss_scale(&s)?;
                s.scale
            }
            None => report.optim.next_scale,
        };
        // The forward ran, so the state moves on even if the step was skipped.
        if walk.is_some() {
            carried = engine.final_state().cloned();
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let by_engine = report.optim.skipped.is_some();
        let skipped = report.optim.skipped.map(|s| s.to_string()).or(verdict.skip.clone());
        let outcome = Outcome {
            norms: &norms,
            skipped: skipped.clone(),
            by_engine,
            spike: verdict.spike,
            scale_before,
            scale_after,
        };
        let levels = if caps.on() { captures::levels(&ctl) } else { Vec::new() };
        actions.extend(ctl.record(step, &outcome));
        let recorded = crate::capture::Recorded {
            loss: report.loss,
            grad_norm: norms.global,
            tensor_norms: norms.tensors.clone(),
            skipped: skipped.clone(),
            scale_after,
        };
        // The capture's state: kept before the step, or (a step only the
        // guard skipped, which changes nothing but the scale) read now.
        let mut cap = None;
        if !caps.why(step, &actions, &plan.inject).0.is_empty() {
            let state = match pre.take() {
                Some(s) => Some(s),
                None if skipped.is_some() => Some(TrainState { scale: scale_full.clone(), ..engine.snapshot()? }),
                None => None,
            };
            let optim = StepOptions { lr, ..plan.optim };
            cap = state.map(|state| StepCapture {
                step,
                state,
                batch: &batch,
                origins: &origins,
                optim,
                recorded: recorded.clone(),
                levels,
                carry: started.take(),
            });
        }
        pre = None;
        if let Some(stop) = actions.iter().find(|x| x.action == ActionKind::Stop) {
            for act in &actions {
                clog.push(act)?;
            }
            if let Some(c) = cap {
                caps.write(c, &actions, &plan.inject, obs)?;
            }
            return Err(TrainError::Stopped { step, reason: stop.reason.clone() });
        }
        skipped_now += skipped.is_some() as usize;
        if let Some(x) = actions.iter_mut().find(|x| x.action == ActionKind::Rollback) {
            // Back to the last good checkpoint; the data position goes on, and
            // the loss scale stays where the bad steps took it.
            let st = TrainState { scale: engine.loss_scale()?, ..good.state.clone() };
            engine.restore(&st)?;
            ctl.rolled_back(&good.controller);
            x.to_step = Some(good.step);
            x.reason += &format!(": back to the checkpoint of step {}", good.step);
        }
        let entry = LogEntry {
            step,
            loss: report.loss,
            grad_norm: report.optim.grad_norm,
            skipped,
            clipped: report.optim.clipped,
            capped_tokens: report.capped_tokens as u64,
            lr,
            scale: report.optim.scale,
            optim_step: engine.optim_step()?,
            actions,
            ms,
            risk_z: verdict.risk.as_ref().map(|r| r.0),
            risk_of: verdict.risk.as_ref().map(|r| r.1.clone()),
        };
        losses.push(report.loss);
        obs.step(&StepEvent {
            entry: &entry,
            report: &report,
            first: step == start + 1,
            skipped_total: skipped_now,
            lr_factor: ctl.lr_factor,
            base_lr,
        });
        for act in &entry.actions {
            obs.action(act);
            clog.push(act)?;
        }
        if let Some(c) = cap {
            caps.write(c, &entry.actions, &plan.inject, obs)?;
        }
        caps.push_ring(step, &batch, &origins, &recorded);
        all_actions.extend(entry.actions.iter().cloned());
        checkpoint_due |= step % plan.checkpoint_every == 0 || step == plan.steps;
        let good_now = ctl.consecutive_bad == 0;
        let mut snapshot = None;
        if checkpoint_due && (good_now || step == plan.steps) {
            snapshot = Some(engine.snapshot()?);
        }
        log.push(&entry)?;
        entries.push(entry);
        if let Some(st) = snapshot {
            finite_unless_allowed(&cfg, &st.params, step, good.step, plan.load)?;
            checkpoint_due = false;
            let g = Good { step, state: st, controller: ctl.clone() };
            if let Some(dir) = &out {
                log.sync();
                clog.sync();
                save_state(dir, &g)?;
                save_carried(dir, step, &carried)?;
            }
            if good_now {
                good = g;
            }
        }
        if let (Some(dir), true) = (&out, plan.save_every > 0 && step % plan.save_every == 0) {
            let params = engine.params()?;
            finite_unless_allowed(&cfg, &params, step, good.step, plan.load)?;
            save_params(&dir.join(format!("step_{step:06}.safetensors")), &cfg, &*params)?;
        }
    }
    if let Some(dir) = &out {
        let params = engine.params()?;
        finite_unless_allowed(&cfg, &params, plan.steps, good.step, plan.load)?;
        save_params(&dir.join("last.safetensors"), &cfg, &*params)?;
    }
    let (precision, gemm_path) = engine.precision_and_path();
    let params = if plan.keep_params { Some(engine.params()?.into_owned()) } else { None };
    Ok(TrainSummary {
        config: cfg,
        dataset: ds.name().to_string(),
        first_step: start + 1,
        last_step: plan.steps,
        resumed_from: resumed,
        out,
        skipped: skipped_now,
        losses,
        entries,
        actions: all_actions,
        captures: caps.written,
        controller: ctl,
        precision,
        gemm_path,
        params,
    })
}

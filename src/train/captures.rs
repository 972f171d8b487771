//! The captures a training run writes into `OUT/captures/step_NNNNNN/`: on
//! every guard skip and controller action (skip, scale back-off, learning-rate
//! cut, rollback), at every planted event's step, and at `--capture-at` steps;
//! each holds the state *before* the step, the batch with its rows' origins,
//! and why it was kept. A ring of the last `--capture-before` steps' batches
//! goes into a rollback's capture; `--max-captures` bounds the folder.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::TrainError;
use super::controller::{Action, ActionKind, Controller, Norms};
use super::inject::{Inject, Injections};
use super::run::TrainPlan;
use crate::capture::{
    self, BatchMeta, CAPTURE_FORMAT, CAPTURES_DIR, Capture, CaptureMeta, DatasetRef, LeadUp, NormLevel, Recorded,
};
use crate::dataset::{Batch, Dataset, RowOrigin};
use crate::engine::{Engine, EngineKind, TrainState};
use crate::model::Config;
use crate::step::Precision;
use crate::step::{LossScale, StepOptions};

/// The `train` options of the captures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Steps captured on request (`--capture-at`), whatever they do.
    pub at: BTreeSet<u64>,
    /// At most this many captures are kept: the first and the most recent
    /// (`--max-captures`; 0: none are written).
    pub max: usize,
    /// Steps of batches a rollback's capture holds (`--capture-before`).
    pub before: usize,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions { at: BTreeSet::new(), max: 64, before: 8 }
    }
}

/// A capture the run wrote (and kept).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaptureInfo {
    pub step: u64,
    pub path: PathBuf,
    /// The first reason, as the printed line shows it.
    pub reason: String,
}

/// A step about to be captured: what the loop knows of it.
pub(super) struct StepCapture<'a> {
    pub step: u64,
    /// The weights, moments and loss scale before the step.
    pub state: TrainState,
    pub batch: &'a Batch,
    pub origins: &'a [RowOrigin],
    /// The step's optimizer options (its learning rate).
    pub optim: StepOptions,
    pub recorded: Recorded,
    pub levels: Vec<NormLevel>,
    /// The carried state the step started from (`--carry-state`).
    pub carry: Option<crate::step::Carry<f32>>,
}

/// The run's captures: where they go, what every one of them shares, the
/// ring of recent batches, and those written.
pub(super) struct Captures {
    /// `OUT/captures`; `None` when captures are off (no `--out`, or `--max-captures 0`).
    dir: Option<PathBuf>,
    opts: CaptureOptions,
    /// What every capture of this run shares (the step's fields are filled per capture).
    template: CaptureMeta,
    config: Config,
    ring: VecDeque<(LeadUp, Batch)>,
    pub written: Vec<CaptureInfo>,
}

impl Captures {
    /// The captures of a run writing to `out` (none without it).
    pub(super) fn new(
        plan: &TrainPlan,
        out: Option<&Path>,
        ds: &Dataset,
        cfg: &Config,
        seed: u64,
        engine: &Engine,
    ) -> Result<Captures, TrainError> {
        let opts = &plan.captures;
        if out.is_none() && !opts.at.is_empty() {
            return Err(TrainError::Usage(
                "--capture-at: captures are written to OUT/captures/; give --out (or --resume a run folder)".into(),
            ));
        }
        let dir = out.filter(|_| opts.max > 0).map(|d| d.join(CAPTURES_DIR));
        if let Some(d) = &dir {
            capture::remove_stale(d);
        }
        let (engine_name, precision) = match engine.kind() {
            EngineKind::Cpu => ("cpu", Precision::F32),
            EngineKind::Vulkan => ("gpu", plan.vulkan.precision),
        };
        let path = std::fs::canonicalize(&plan.data).unwrap_or_else(|_| plan.data.clone());
        let template = CaptureMeta {
            format_version: CAPTURE_FORMAT,
            step: 0,
            triggers: Vec::new(),
            reasons: Vec::new(),
            engine: engine_name.into(),
            precision,
            gemm_path: engine.precision_and_path().1.into(),
            optim: StepOptions::default(),
            seed,
            loss_scale: LossScale::fixed(),
            optim_step: 0,
            dataset: DatasetRef {
                name: ds.name().to_string(),
                path: Some(path.display().to_string()),
                content_hash: ds.content_hash(),
                len_bytes: ds.len_bytes() as u64,
            },
            batch: BatchMeta { rows: 0, t: 0, lens: Vec::new(), origins: Vec::new(), tokens_hash: String::new() },
            recorded: None,
            norm_levels: Vec::new(),
            planted: None,
            lead_up: Vec::new(),
            written_by: env!("CARGO_PKG_VERSION").into(),
            precision_map: plan.precision_map.as_ref().and_then(|_| engine.precision_map()).map(|m| m.to_string()),
            carry: plan.carry.is_some(),
            carry_windows: plan.carry.map(|w| w.windows),
            carry_prefix_len: None,
        };
        Ok(Captures {
            dir,
            opts: opts.clone(),
            template,
            config: cfg.clone(),
            ring: VecDeque::new(),
            written: Vec::new(),
        })
    }

    /// Whether captures are written at all.
    pub(super) fn on(&self) -> bool {
        self.dir.is_some()
    }

    /// Whether step `step` is captured whatever it does (a planted event, `--capture-at`).
    pub(super) fn wanted(&self, step: u64, inject: &Injections) -> bool {
        self.on() && (inject.contains_key(&step) || self.opts.at.contains(&step))
    }

    /// Whether a step with these norms and this verdict may be captured (the
    /// controller or the guard may act on it), so its state must be kept
    /// before it is applied.
    pub(super) fn risky(&self, norms: &Norms, skip: bool, spike: bool) -> bool {
        self.on() && (skip || spike || !(norms.global.is_finite() && norms.global > 0.0))
    }

    /// Why step `step` is captured: the triggers and the reasons (every
    /// action line of the step, the planted event, the request); empty when
    /// it is not.
    pub(super) fn why(&self, step: u64, actions: &[Action], inject: &Injections) -> (Vec<String>, Vec<String>) {
        let (mut triggers, mut reasons) = (Vec::new(), Vec::new());
        if !self.on() {
            return (triggers, reasons);
        }
        let acts = [ActionKind::Skip, ActionKind::ScaleBackoff, ActionKind::LrCut, ActionKind::Rollback];
        for a in actions.iter().filter(|a| acts.contains(&a.action)) {
            if !triggers.iter().any(|t| t == a.action.name()) {
                triggers.push(a.action.name().to_string());
            }
        }
        if !triggers.is_empty() {
            reasons.extend(actions.iter().map(Action::line));
        }
        if let Some(ev) = inject.get(&step) {
            triggers.push("planted".into());
            reasons.push(format!("planted: {} at step {step}", ev.label()));
        }
        if self.opts.at.contains(&step) {
            triggers.push("requested".into());
            reasons.push("requested (--capture-at)".into());
        }
        (triggers, reasons)
    }

    /// Writes the capture of `s` (the step's `actions` as the log has them),
    /// keeps the folder within `--max-captures`, and tells `obs`.
    pub(super) fn write(
        &mut self,
        s: StepCapture<'_>,
        actions: &[Action],
        inject: &Injections,
        obs: &mut dyn super::Observer,
    ) -> Result<(), TrainError> {
        let Some(dir) = self.dir.clone() else { return Ok(()) };
        let (triggers, reasons) = self.why(s.step, actions, inject);
        let rollback = triggers.iter().any(|t| t == "rollback");
        let (lead_meta, lead_up): (Vec<LeadUp>, Vec<Batch>) =
            if rollback { self.ring.iter().cloned().unzip() } else { (Vec::new(), Vec::new()) };
        let mut meta = self.template.clone();
        meta.step = s.step;
        meta.optim = s.optim;
        meta.batch.origins = s.origins.to_vec();
        meta.recorded = Some(s.recorded);
        meta.norm_levels = s.levels;
        meta.planted = planted_at(inject, s.step);
        meta.lead_up = lead_meta;
        let summary = summary(actions, &reasons);
        meta.triggers = triggers;
        meta.reasons = reasons;
        let c = Capture {
            meta,
            config: self.config.clone(),
            state: s.state,
            batch: s.batch.clone(),
            lead_up,
            carry: s.carry,
        };
        let fail = |e: capture::CaptureError| TrainError::Failed(format!("capture of step {}: {e}", s.step));
        let path = capture::write(&c, &dir).map_err(fail)?;
        obs.capture(&path, &summary);
        self.written.retain(|w| w.step != s.step);
        self.written.push(CaptureInfo { step: s.step, path, reason: summary });
        let removed = capture::prune(&dir, self.opts.max).map_err(fail)?;
        self.written.retain(|w| !removed.contains(&w.step));
        Ok(())
    }

    /// Adds a finished step to the ring of recent batches (the lead-up of a
    /// later rollback's capture).
    pub(super) fn push_ring(&mut self, step: u64, batch: &Batch, origins: &[RowOrigin], recorded: &Recorded) {
        if !self.on() || self.opts.before == 0 {
            return;
        }
        if self.ring.len() == self.opts.before {
            self.ring.pop_front();
        }
        let lead = LeadUp {
            step,
            t: batch.t,
            lens: batch.lens.clone(),
            origins: origins.to_vec(),
            loss: recorded.loss,
            grad_norm: recorded.grad_norm,
            applied: recorded.skipped.is_none(),
        };
        self.ring.push_back((lead, batch.clone()));
    }
}

/// Refuses a `--capture-before` whose ring of batches (`rows × (t + 1)`
/// tokens each) would not fit in memory.
pub(super) fn check_ring(opts: &CaptureOptions, rows: usize, t: usize) -> Result<(), TrainError> {
    if opts.max == 0 || opts.before == 0 {
        return Ok(());
    }
    let bytes = crate::memory::bytes_of(&[opts.before as u64, rows as u64, t as u64 + 1]);
    crate::memory::check_alloc(&format!("--capture-before {}", opts.before), bytes)
        .map_err(|e| TrainError::Failed(e.to_string()))
}

/// The controller's running levels before the step (none without history).
pub(super) fn levels(ctl: &Controller) -> Vec<NormLevel> {
    let level =
        |name: &str, e: &super::Ema| NormLevel { name: name.into(), n: e.n, ln_mean: e.mean, ln_std: e.var.sqrt() };
    let mut out = Vec::new();
    if ctl.global.n > 0 {
        out.push(level("global", &ctl.global));
    }
    out.extend(ctl.tensors.iter().filter(|(_, e)| e.n > 0).map(|(n, e)| level(n, e)));
    out
}

/// The planted event of step `step` (`nan`, …), or the engine fault in
/// force there (`persistent=FAULT`, which a replay plants again: it is
/// part of the engine, so it takes precedence).
fn planted_at(inject: &Injections, step: u64) -> Option<String> {
    match super::inject::fault_at(inject, step) {
        Some(f) => Some(format!("persistent={f}")),
        None => inject.get(&step).map(|e: &Inject| e.label()),
    }
}

/// The printed line's reason: the first action's kind and reason, else the first reason.
fn summary(actions: &[Action], reasons: &[String]) -> String {
    let acts = [ActionKind::Skip, ActionKind::ScaleBackoff, ActionKind::LrCut, ActionKind::Rollback];
    match actions.iter().find(|a| acts.contains(&a.action)) {
        Some(a) => format!("{}: {}", a.action.name(), a.reason),
        None => reasons.first().cloned().unwrap_or_default(),
    }
}

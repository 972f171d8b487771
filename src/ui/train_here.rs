//! "Train N steps here": a [`Job`] that trains the GUI's current model on
//! the current dataset for a few steps with the library's engine
//! ([`engine::Engine`], the type `train`, `step` and `bench` drive), reporting
//! each step's loss, and ends with the trained parameters, which the app then
//! uses for every view. Cancelling keeps the model as it was.

use crate::ui::error::{UiError, UiResult};
use std::sync::Arc;

use std::path::PathBuf;

use crate::dataset::Dataset;
use crate::engine::gpu::SharedGpu;
use crate::engine::{EngineKind, VulkanOptions};
use crate::model::{Config, Params};
use crate::session::gpu;
use crate::session::job::{Job, Reporter, Waker};
use crate::step::{Precision, StepOptions};
use crate::train::{CaptureOptions, ControllerConfig, MemoryCheck, Observer, StepEvent, TrainError, TrainPlan, train};

/// The most steps one run takes (the control's range).
pub const MAX_STEPS: usize = 100_000;

/// What one run trains: the model it starts from and how.
pub struct TrainHereJob {
    pub config: Config,
    pub params: Params<f32>,
    pub dataset: Arc<Dataset>,
    pub steps: usize,
    /// Seeds the batches (those of `train --seed`).
    pub seed: u64,
    /// The optimizer settings (the learning rate the control shows).
    pub opts: StepOptions,
    /// The GPU step in this precision (mixed: f16/bf16 products); f32 on
    /// the CPU reference.
    pub precision: Precision,
}

/// One step done.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub loss: f64,
}

/// A finished run.
pub struct Trained {
    pub params: Params<f32>,
    pub steps: usize,
    pub first_loss: f64,
    pub last_loss: f64,
    pub engine: EngineKind,
}

/// The run in flight and the last progress it reported, and the control's
/// step count and learning rate.
pub struct TrainHere {
    job: Option<Job<Progress, UiResult<Option<Trained>>>>,
    /// Steps asked for in the run in flight (or the last one).
    pub steps: usize,
    /// The last step the run reported (kept after it ended).
    pub last: Option<Progress>,
    /// The control's step count for the next run.
    pub n: usize,
    /// The control's learning rate for the next run.
    pub lr: f64,
}

impl Default for TrainHere {
    fn default() -> Self {
        TrainHere { job: None, steps: 0, last: None, n: 50, lr: StepOptions::default().lr }
    }
}

impl TrainHere {
    pub fn is_busy(&self) -> bool {
        self.job.as_ref().is_some_and(|j| j.is_running())
    }

    /// Starts `job` on its own thread.
    pub fn start(&mut self, job: TrainHereJob, wake: Waker) -> UiResult<()> {
        if job.steps == 0 || job.steps > MAX_STEPS {
            return Err(UiError::refused(format!("steps must be from 1 to {MAX_STEPS}, got {}", job.steps)));
        }
        if !(job.opts.lr.is_finite() && job.opts.lr > 0.0) {
            return Err(UiError::refused(format!("the learning rate must be a positive number, got {}", job.opts.lr)));
        }
        self.steps = job.steps;
        self.last = None;
        let run = Job::spawn("train-here", wake, move |r| run(&job, r))
            .map_err(|e| UiError::refused(format!("cannot start the training thread: {e}")))?;
        self.job = Some(run);
        Ok(())
    }

    /// Asks the run to stop after its current step (the model stays as it was).
    pub fn cancel(&self) {
        if let Some(j) = &self.job {
            j.cancel();
        }
    }

    /// The run's result once it ended: `Ok(None)` when it was cancelled.
    pub fn poll(&mut self) -> Option<UiResult<Option<Trained>>> {
        let polled = self.job.as_mut()?.poll();
        if let Some(p) = polled.progress.last() {
            self.last = Some(*p);
        }
        let done = polled.done?;
        self.job = None;
        Some(done.map_err(UiError::from).and_then(|r| r))
    }
}

/// Tells the GUI each step's loss and passes on its Stop.
struct Reporting<'a> {
    r: &'a Reporter<Progress>,
    done: usize,
}

impl Observer for Reporting<'_> {
    fn step(&mut self, s: &StepEvent<'_>) {
        self.done += 1;
        self.r.progress(Progress { done: self.done, loss: s.report.loss });
    }

    fn stop_requested(&mut self) -> bool {
        self.r.cancelled()
    }
}

/// Trains `job.steps` steps with the training loop `train` runs (its batches,
/// its controller); `Ok(None)` when cancelled.
fn run(job: &TrainHereJob, r: &Reporter<Progress>) -> UiResult<Option<Trained>> {
    let cfg = &job.config;
    // Rows of the config's benchmark length, shortened to what the dataset holds.
    let len = (cfg.seq_len + 1).min(job.dataset.len_tokens());
    if len < 2 {
        return Err(UiError::refused(format!(
            "the dataset holds {} tokens: too few to train on",
            job.dataset.len_tokens()
        )));
    }
    crate::engine::inputs::check_batch(cfg, cfg.batch, len - 1, 4, "the training batch")?;
    let (engine, gpu) = if job.precision.is_mixed() {
        let ctx = gpu::shared()
            .map_err(|e| UiError::refused(format!("the {} step runs on the GPU: {e}", job.precision.name())))?;
        (EngineKind::Vulkan, Some(SharedGpu(ctx)))
    } else {
        (EngineKind::Cpu, None)
    };
    let plan = TrainPlan {
        data: PathBuf::from(job.dataset.name()),
        config: None,
        checkpoint: None,
        resume: None,
        steps: job.steps as u64,
        seq_len: Some(len - 1),
        batch: Some(cfg.batch),
        seed: Some(job.seed),
        engine,
        vulkan: VulkanOptions { precision: job.precision, ..Default::default() },
        out: None,
        save_every: 0,
        checkpoint_every: u64::MAX,
        loss_scale: None,
        precision_map: None,
        optim: job.opts,
        controller: ControllerConfig::default(),
        inject: Default::default(),
        captures: CaptureOptions { max: 0, ..Default::default() },
        memory_check: MemoryCheck::Shape,
        load: Default::default(),
        carry: None,
        weights: Some((cfg.clone(), job.params.clone())),
        gpu,
        keep_params: true,
    };
    let mut obs = Reporting { r, done: 0 };
    let s = match train(&plan, &job.dataset, &mut obs) {
        Ok(s) => s,
        Err(TrainError::Cancelled { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let params = s.params.ok_or("the training loop kept no weights")?;
    let (first_loss, last_loss) = (s.losses.first().copied(), s.losses.last().copied());
    Ok(Some(Trained {
        params,
        steps: s.losses.len(),
        first_loss: first_loss.unwrap_or(f64::NAN),
        last_loss: last_loss.unwrap_or(f64::NAN),
        engine,
    }))
}

//! "Train N steps here": a [`Job`] that trains the GUI's current model on
//! the current dataset for a few steps with the library's engine
//! ([`engine::Engine`], the type `train`, `step` and `bench` drive), reporting
//! each step's loss, and ends with the trained parameters, which the app then
//! uses for every view. Cancelling keeps the model as it was.

use std::sync::Arc;

use crate::dataset::Dataset;
use crate::engine::{self, EngineKind, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::session::gpu;
use crate::session::job::{Job, Reporter, Waker};
use crate::step::Precision;
use crate::step::{LossScale, StepOptions};

/// The most steps one run takes (the control's range).
pub const MAX_STEPS: usize = 100_000;

/// What one run trains: the model it starts from and how.
pub struct TrainHereJob {
    pub config: Config,
    pub params: Params<f32>,
    pub dataset: Arc<Dataset>,
    pub steps: usize,
    /// Seeds the batches (step `k` takes the windows of `seed ^ k`).
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
    job: Option<Job<Progress, Result<Option<Trained>, String>>>,
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
    pub fn start(&mut self, job: TrainHereJob, wake: Waker) -> Result<(), String> {
        if job.steps == 0 || job.steps > MAX_STEPS {
            return Err(format!("steps must be from 1 to {MAX_STEPS}, got {}", job.steps));
        }
        if !(job.opts.lr.is_finite() && job.opts.lr > 0.0) {
            return Err(format!("the learning rate must be a positive number, got {}", job.opts.lr));
        }
        self.steps = job.steps;
        self.last = None;
        let run = Job::spawn("train-here", wake, move |r| run(&job, r))
            .map_err(|e| format!("cannot start the training thread: {e}"))?;
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
    pub fn poll(&mut self) -> Option<Result<Option<Trained>, String>> {
        let polled = self.job.as_mut()?.poll();
        if let Some(p) = polled.progress.last() {
            self.last = Some(*p);
        }
        let done = polled.done?;
        self.job = None;
        Some(done.map_err(|lost| lost.to_string()).and_then(|r| r))
    }
}

/// Trains `job.steps` steps; `Ok(None)` when cancelled.
fn run(job: &TrainHereJob, r: &Reporter<Progress>) -> Result<Option<Trained>, String> {
    let cfg = &job.config;
    // Rows of the config's benchmark length, shortened to what the dataset holds.
    let len = (cfg.seq_len + 1).min(job.dataset.len_tokens());
    if len < 2 {
        return Err(format!("the dataset holds {} tokens: too few to train on", job.dataset.len_tokens()));
    }
    crate::engine::inputs::check_batch(cfg, cfg.batch, len - 1, 4, "the training batch").map_err(|e| e.to_string())?;
    let mut engine = if job.precision.is_mixed() {
        let vk = VulkanOptions { precision: job.precision, ..Default::default() };
        let state = TrainState::fresh(cfg, job.params.clone(), crate::step::LossScale::for_precision(job.precision));
        let ctx = gpu::shared().map_err(|e| format!("the {} step runs on the GPU: {e}", job.precision.name()))?;
        engine::Engine::vulkan(&ctx, cfg, &state, &job.opts, &vk).map_err(|e| e.to_string())?
    } else {
        engine::Engine::cpu(cfg, TrainState::fresh(cfg, job.params.clone(), LossScale::fixed()), &job.opts)
    };
    let mut first_loss = f64::NAN;
    let mut last_loss = f64::NAN;
    for k in 0..job.steps {
        if r.cancelled() {
            return Ok(None);
        }
        let batch = job.dataset.random_windows(job.seed ^ k as u64, cfg.batch, len).map_err(|e| e.to_string())?;
        let rep = engine.step(&batch).map_err(|e| e.to_string())?;
        if k == 0 {
            first_loss = rep.loss;
        }
        last_loss = rep.loss;
        r.progress(Progress { done: k + 1, loss: rep.loss });
    }
    let params = engine.params().map_err(|e| e.to_string())?.into_owned();
    Ok(Some(Trained { params, steps: job.steps, first_loss, last_loss, engine: engine.kind() }))
}

//! The trace worker: computes the CPU (and GPU) trace of a sequence off the
//! UI thread as a session [`Background`] job, one at a time. A request made
//! while a trace runs waits, and replaces any request already waiting, so only
//! the latest one is computed next; each report carries its generation.

use crate::ui::error::{UiError, UiResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::capture::Capture;
use crate::dataset::{Batch, Dataset};
use crate::engine::gpu::Timing;
use crate::engine::reference as cpu;
use crate::engine::{Engine, EngineError, TrainState, VulkanOptions};
use crate::model::Params;
use crate::session::gpu;
use crate::session::job::{Job as Background, Waker};
use crate::step::{LossScale, StepOptions};

use super::computed::{Computed, GpuTrace, JobSpec};
use crate::session::state::ConfigName;

pub struct Job {
    pub generation: u64,
    pub dataset: Arc<Dataset>,
    pub config: ConfigName,
    pub seed: u64,
    pub offset: usize,
    pub len: usize,
    /// Where the parameters come from (seed, embedded model, file, trained here).
    pub weights: crate::session::weights::Weights,
    /// Also compute the GPU's trace of the row (where a GPU exists).
    pub gpu: bool,
    /// The per-token guard's cap (None: off).
    pub token_cap: Option<f64>,
    /// An open capture: its configuration and weights instead of `config`,
    /// `seed` and `weights`.
    pub capture: Option<Arc<Capture>>,
}

pub enum Report {
    Progress { generation: u64, stage: &'static str },
    Done { generation: u64, result: UiResult<Box<Computed>> },
}

/// One trace in flight: its generation and the job (progress: the stage).
type Trace = (u64, Background<&'static str, UiResult<Box<Computed>>>);

pub struct Worker {
    wake: Waker,
    running: Option<Trace>,
    /// The newest request made while a trace ran.
    waiting: Option<Job>,
    /// Reports not yet polled that no job sent (a trace that could not start).
    ready: Vec<Report>,
}

impl Worker {
    /// No trace yet. `wake` is called after every report (to request a repaint).
    pub fn new(wake: Waker) -> Worker {
        Worker { wake, running: None, waiting: None, ready: Vec::new() }
    }

    /// Starts `job` now, or after the trace in flight (replacing any request
    /// still waiting).
    pub fn submit(&mut self, job: Job) {
        if self.running.is_some() {
            self.waiting = Some(job);
        } else {
            self.start(job);
        }
    }

    /// Reports that have arrived since the last call; once a trace has ended,
    /// the waiting request starts.
    pub fn poll(&mut self) -> Vec<Report> {
        let mut out = std::mem::take(&mut self.ready);
        if let Some((generation, job)) = &mut self.running {
            let generation = *generation;
            let polled = job.poll();
            out.extend(polled.progress.into_iter().map(|stage| Report::Progress { generation, stage }));
            if let Some(done) = polled.done {
                out.push(Report::Done { generation, result: done.map_err(UiError::from).and_then(|r| r) });
                self.running = None;
            }
        }
        if self.running.is_none()
            && let Some(next) = self.waiting.take()
        {
            self.start(next);
        }
        out
    }

    fn start(&mut self, job: Job) {
        let generation = job.generation;
        let spawned = Background::spawn("worker", self.wake.clone(), move |r| {
            compute(&job, &|stage| _ = r.progress(stage)).map(Box::new)
        });
        match spawned {
            Ok(running) => self.running = Some((generation, running)),
            Err(e) => {
                let result = Err(UiError::refused(format!("cannot start the trace thread: {e}")));
                self.ready.push(Report::Done { generation, result });
                self.wake.wake();
            }
        }
    }
}

fn compute(job: &Job, progress: &dyn Fn(&'static str)) -> UiResult<Computed> {
    let start = Instant::now();
    progress("reading the sequence");
    let tokens = job.dataset.window(job.offset, job.len)?;
    let batch = Batch::from_rows(&[&tokens])?;
    let (cfg, params) = match &job.capture {
        Some(c) => (c.config.clone(), c.state.params.clone()),
        None => {
            progress("initialising parameters");
            (job.config.config(), job.weights.params(job.config, job.seed)?)
        }
    };
    // The forward, the backward and the trace in f32, and the GPU's copy of
    // the per-position tensors: at most three times the activations.
    let what = format!("a sequence of {} tokens", job.len);
    crate::engine::inputs::check_batch(&cfg, 1, batch.t, 3 * 4, &what)?;
    progress("forward and backward");
    let (_, bwd, trace) = cpu::traced(&cfg, &params, &batch, 1.0, job.token_cap)?;
    progress("summarising");
    let spec = JobSpec {
        dataset_name: job.dataset.name().to_string(),
        config: job.config,
        seed: job.seed,
        offset: job.offset,
        len: job.len,
        model: job.weights.describe(job.seed),
    };
    let elapsed = start.elapsed();
    let mut c = Computed::new(job.generation, spec, cfg, tokens, trace, elapsed);
    c.token_cap = job.token_cap;
    c.capped = bwd.capped;
    c.gpu = if job.gpu {
        progress("GPU forward and backward");
        gpu_trace(&c, &params, &batch).map_err(|e| e.to_string())
    } else {
        Err("the GPU trace is off".to_string())
    };
    Ok(c)
}

/// The GPU's values of every per-position tensor of the CPU trace, from one
/// `Engine::grads` run on the same row and parameters (the f32 step).
fn gpu_trace(c: &Computed, params: &Params<f32>, batch: &Batch) -> UiResult<GpuTrace> {
    let ctx = gpu::engine()?;
    let start = Instant::now();
    let err = |e: EngineError| format!("the GPU trace: {e}");
    let opts = StepOptions { token_cap: c.token_cap, ..Default::default() };
    let state = TrainState::fresh(&c.cfg, params.clone(), LossScale::fixed());
    let vk = VulkanOptions { timing: Timing::PerDispatch, ..VulkanOptions::default() };
    let mut engine = Engine::vulkan(&ctx, &c.cfg, &state, &opts, &vk).map_err(err)?;
    let grads = engine.grads(batch).map_err(err)?;
    let names: Vec<&str> = c
        .trace
        .iter()
        .filter(|(n, t)| {
            !n.starts_with("grad.")
                && t.shape.len() >= 2
                && t.shape[0] == c.t
                && t.shape[1] == 1
                && engine.holds_on_device(n)
        })
        .map(|(n, _)| n)
        .collect();
    let read = engine.read_device(&names).map_err(err)?;
    let values: HashMap<String, Vec<f32>> = names.iter().map(|n| n.to_string()).zip(read).collect();
    Ok(GpuTrace::new(values, &c.trace, c.t, grads.loss, start.elapsed()))
}

//! The worker thread: computes the CPU trace of a sequence off the UI thread
//! and reports progress over a channel. One thread; a job queued while another
//! runs replaces any job still waiting, so only the latest request is computed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::cpu;
use crate::dataset::{Batch, Dataset};
use crate::model::Params;

use super::computed::{Computed, GpuTrace, JobSpec};
use super::state::ConfigName;

pub struct Job {
    pub generation: u64,
    pub dataset: Arc<Dataset>,
    pub config: ConfigName,
    pub seed: u64,
    pub offset: usize,
    pub len: usize,
    /// Parameters from this checkpoint instead of the seed's initialisation.
    pub checkpoint: Option<PathBuf>,
    /// Also compute the GPU's trace of the row (where a GPU exists).
    pub gpu: bool,
    /// The per-token guard's cap (None: off).
    pub token_cap: Option<f64>,
}

/// The parameters a job runs with: the checkpoint's, or the seed's
/// initialisation. A checkpoint of another config is an error that says so.
pub fn params(config: ConfigName, seed: u64, checkpoint: Option<&Path>) -> Result<Params<f32>, String> {
    let cfg = config.config();
    match checkpoint {
        None => Ok(Params::<f32>::init(&cfg, seed)),
        Some(p) => {
            let (got, params) = crate::checkpoint::load_params(p).map_err(|e| e.to_string())?;
            if got != cfg {
                return Err(format!(
                    "checkpoint {} holds another configuration than {} ({got:?})",
                    p.display(),
                    config.label()
                ));
            }
            Ok(params)
        }
    }
}

pub enum Report {
    Progress { generation: u64, stage: &'static str },
    Done { generation: u64, result: Result<Box<Computed>, String> },
}

pub struct Worker {
    jobs: Option<Sender<Job>>,
    reports: Receiver<Report>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread. `wake` is called after every report (to request a repaint).
    pub fn spawn(wake: Box<dyn Fn() + Send>) -> Worker {
        let (job_tx, job_rx) = channel::<Job>();
        let (rep_tx, rep_rx) = channel::<Report>();
        let thread = std::thread::Builder::new()
            .name("dualscope-worker".into())
            .spawn(move || worker_loop(job_rx, rep_tx, wake))
            .expect("spawning the worker thread");
        Worker { jobs: Some(job_tx), reports: rep_rx, thread: Some(thread) }
    }

    pub fn submit(&self, job: Job) {
        if let Some(tx) = &self.jobs {
            // The thread only ends when the sender is dropped; a send cannot fail before.
            let _ = tx.send(job);
        }
    }

    /// Reports that have arrived since the last call.
    pub fn poll(&self) -> Vec<Report> {
        self.reports.try_iter().collect()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the job channel ends the thread after its current job; it is
        // not joined, so that closing the window never waits for a long trace.
        self.jobs.take();
        self.thread.take();
    }
}

/// The worker's Vulkan context, opened on first use and kept.
type Gpu = Option<Result<Arc<crate::vk::Context>, String>>;

fn worker_loop(jobs: Receiver<Job>, reports: Sender<Report>, wake: Box<dyn Fn() + Send>) {
    let mut gpu: Gpu = None;
    while let Ok(mut job) = jobs.recv() {
        // Skip to the newest request.
        while let Ok(newer) = jobs.try_recv() {
            job = newer;
        }
        let generation = job.generation;
        let progress = |stage: &'static str| {
            let _ = reports.send(Report::Progress { generation, stage });
            wake();
        };
        let result = compute(&job, &mut gpu, &progress).map(Box::new);
        if reports.send(Report::Done { generation, result }).is_err() {
            return;
        }
        wake();
    }
}

fn compute(job: &Job, gpu: &mut Gpu, progress: &dyn Fn(&'static str)) -> Result<Computed, String> {
    let start = Instant::now();
    progress("reading the sequence");
    let tokens = job.dataset.window(job.offset, job.len).map_err(|e| e.to_string())?;
    let batch = Batch::from_rows(&[&tokens]).map_err(|e| e.to_string())?;
    let cfg = job.config.config();
    progress("initialising parameters");
    let params = params(job.config, job.seed, job.checkpoint.as_deref())?;
    progress("forward and backward");
    let (_, bwd, trace) = cpu::traced(&cfg, &params, &batch, 1.0, job.token_cap).map_err(|e| e.to_string())?;
    progress("summarising");
    let spec = JobSpec {
        dataset_name: job.dataset.name().to_string(),
        config: job.config,
        seed: job.seed,
        offset: job.offset,
        len: job.len,
    };
    let elapsed = start.elapsed();
    let mut c = Computed::new(job.generation, spec, cfg, tokens, trace, elapsed);
    c.token_cap = job.token_cap;
    c.capped = bwd.capped;
    c.gpu = if job.gpu {
        progress("GPU forward and backward");
        gpu_trace(gpu, &c, &params, &batch)
    } else {
        Err("the GPU trace is off".to_string())
    };
    Ok(c)
}

/// The GPU's values of every per-position tensor of the CPU trace, from one
/// `Engine::grads` run on the same row and parameters.
fn gpu_trace(gpu: &mut Gpu, c: &Computed, params: &Params<f32>, batch: &Batch) -> Result<GpuTrace, String> {
    use crate::vk::engine::Engine;
    let ctx = gpu
        .get_or_insert_with(|| {
            let opts = crate::vk::ContextOptions { device: None, validation: Some(false) };
            crate::vk::Context::new(&opts).map(Arc::new).map_err(|e| format!("no GPU engine: {e}"))
        })
        .clone()?;
    let start = Instant::now();
    let err = |e: crate::vk::VkError| format!("the GPU trace: {e}");
    let opts = cpu::StepOptions { token_cap: c.token_cap, ..Default::default() };
    let mut engine =
        Engine::new(&ctx, &c.cfg, params, &opts, &cpu::LossScale::fixed(), crate::vk::ops::GemmPath::TiledF32)
            .map_err(err)?;
    let grads = engine.grads(batch).map_err(err)?;
    let names: Vec<&str> = c
        .trace
        .iter()
        .filter(|(n, t)| {
            !n.starts_with("grad.")
                && t.shape.len() >= 2
                && t.shape[0] == c.t
                && t.shape[1] == 1
                && engine.slot(n).is_some()
        })
        .map(|(n, _)| n)
        .collect();
    let read = engine.read_named(&names).map_err(err)?;
    let values: HashMap<String, Vec<f32>> = names.iter().map(|n| n.to_string()).zip(read).collect();
    Ok(GpuTrace::new(values, &c.trace, c.t, grads.loss, start.elapsed()))
}

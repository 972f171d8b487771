//! The worker thread: computes the CPU trace of a sequence off the UI thread
//! and reports progress over a channel. One thread; a job queued while another
//! runs replaces any job still waiting, so only the latest request is computed.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::cpu;
use crate::dataset::{Batch, Dataset};
use crate::model::Params;

use super::computed::{Computed, JobSpec};
use super::state::ConfigName;

pub struct Job {
    pub generation: u64,
    pub dataset: Arc<Dataset>,
    pub config: ConfigName,
    pub seed: u64,
    pub offset: usize,
    pub len: usize,
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

fn worker_loop(jobs: Receiver<Job>, reports: Sender<Report>, wake: Box<dyn Fn() + Send>) {
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
        let result = compute(&job, &progress).map(Box::new);
        if reports.send(Report::Done { generation, result }).is_err() {
            return;
        }
        wake();
    }
}

fn compute(job: &Job, progress: &dyn Fn(&'static str)) -> Result<Computed, String> {
    let start = Instant::now();
    progress("reading the sequence");
    let tokens = job.dataset.window(job.offset, job.len).map_err(|e| e.to_string())?;
    let batch = Batch::from_rows(&[&tokens]).map_err(|e| e.to_string())?;
    let cfg = job.config.config();
    progress("initialising parameters");
    let params = Params::<f32>::init(&cfg, job.seed);
    progress("forward and backward");
    let (_, _, trace) = cpu::traced(&cfg, &params, &batch, 1.0, None).map_err(|e| e.to_string())?;
    progress("summarising");
    let spec = JobSpec {
        dataset_name: job.dataset.name().to_string(),
        config: job.config,
        seed: job.seed,
        offset: job.offset,
        len: job.len,
    };
    Ok(Computed::new(job.generation, spec, cfg, tokens, trace, start.elapsed()))
}

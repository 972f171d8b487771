//! The speedup run: a [`Job`] that trains the same model on the same batches
//! with both engines, alternating one CPU step and one GPU step, and reports
//! each step's time (wall time for both; the GPU's device time too, from its
//! timestamp queries, where the device has them). The UI polls the samples.

use crate::ui::error::{UiError, UiResult};
use std::sync::Arc;
use std::time::Instant;

use crate::dataset::Dataset;
use crate::engine::gpu::Timing;
use crate::engine::{self, EngineKind, Submit, TrainState, VulkanOptions};
use crate::session::gpu;
use crate::session::job::{Job, Reporter, Waker};
use crate::session::state::ConfigName;
use crate::step::{GemmChoice, Precision};
use crate::step::{LossScale, StepOptions};

/// One training step of one engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub engine: EngineKind,
    pub step: u64,
    pub wall_ms: f64,
    /// Device time of the step's dispatches (GPU with timestamps only).
    pub device_ms: Option<f64>,
    pub loss: f64,
}

enum Report {
    Sample(Sample),
    /// The last GPU step's device milliseconds per kernel, largest first.
    Kernels(Vec<(String, f64)>),
    /// The GPU cannot run (why); the CPU goes on alone.
    NoGpu(String),
}

/// What the speedup panel shows.
#[derive(Default)]
pub struct SpeedRun {
    pub samples: Vec<Sample>,
    /// Per-kernel device milliseconds of the last GPU steps (at most
    /// [`KERNEL_STEPS`]), for the breakdown chart.
    pub kernels: std::collections::VecDeque<Vec<(String, f64)>>,
    /// Why the GPU is not timed, if it is not.
    pub gpu_problem: Option<String>,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
    /// The config and batch shape of the run: `small · 8 × 128`.
    pub label: String,
    /// Step as `train` does with its controller on (compute, the
    /// controller's judgement, apply) instead of the whole step at once; read
    /// when a run starts.
    pub controller: bool,
    job: Option<Job<Report, UiResult<()>>>,
}

/// GPU steps the per-kernel breakdown is averaged over.
pub const KERNEL_STEPS: usize = 20;

/// Mean device milliseconds per kernel over the steps in `kernels`, largest first.
pub fn kernel_means(kernels: &std::collections::VecDeque<Vec<(String, f64)>>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for step in kernels {
        for (k, ms) in step {
            match out.iter_mut().find(|(n, _)| n == k) {
                Some(x) => x.1 += ms,
                None => out.push((k.clone(), *ms)),
            }
        }
    }
    let n = kernels.len().max(1) as f64;
    out.iter_mut().for_each(|x| x.1 /= n);
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Upper medians of the last `n` samples of each engine: (CPU wall, GPU
/// wall, GPU device).
pub fn medians(samples: &[Sample], n: usize) -> (Option<f64>, Option<f64>, Option<f64>) {
    let last = |e: EngineKind, device: bool| {
        let v: Vec<f64> = samples
            .iter()
            .rev()
            .filter(|s| s.engine == e)
            .take(n)
            .filter_map(|s| if device { s.device_ms } else { Some(s.wall_ms) })
            .collect();
        engine::stats::upper_median(v)
    };
    (last(EngineKind::Cpu, false), last(EngineKind::Vulkan, false), last(EngineKind::Vulkan, true))
}

impl SpeedRun {
    pub fn is_running(&self) -> bool {
        self.job.is_some()
    }

    /// Starts stepping both engines on random windows of `dataset` with the
    /// config's batch shape (shortened to what the dataset holds); the GPU
    /// step in `precision` (f32, or the mixed-precision step), the CPU's in f32.
    pub fn start(
        &mut self,
        dataset: Arc<Dataset>,
        config: ConfigName,
        seed: u64,
        weights: crate::session::weights::Weights,
        precision: Precision,
        wake: Waker,
    ) {
        if self.is_running() {
            return;
        }
        let cfg = config.config();
        let len = (cfg.seq_len + 1).min(dataset.len_tokens());
        self.samples.clear();
        self.kernels.clear();
        self.gpu_problem = None;
        self.error = None;
        self.label = format!("{} · batch {} × {} tokens", config.label(), cfg.batch, len.saturating_sub(1));
        if precision.is_mixed() {
            self.label += &format!(" · GPU step in mixed precision ({} products, f32 elsewhere)", precision.name());
        }
        let controller = self.controller;
        if controller {
            self.label += " · with the controller (norms, judgement, optimizer)";
        }
        let spawned = Job::spawn("speed", wake, move |r| {
            Run { dataset: &dataset, config, seed, precision, len, controller }.steps(&weights, r)
        });
        match spawned {
            Ok(job) => self.job = Some(job),
            Err(e) => self.error = Some(format!("cannot start the speed thread: {e}")),
        }
    }

    /// Asks the run to stop after its current step (dropping the job cancels
    /// it); samples still on their way are not taken.
    pub fn stop(&mut self) {
        self.job = None;
    }

    /// Takes the samples that have arrived.
    pub fn poll(&mut self) {
        let Some(job) = &mut self.job else { return };
        let polled = job.poll();
        for r in polled.progress {
            match r {
                Report::Sample(s) => self.samples.push(s),
                Report::Kernels(k) => {
                    if self.kernels.len() == KERNEL_STEPS {
                        self.kernels.pop_front();
                    }
                    self.kernels.push_back(k);
                }
                Report::NoGpu(why) => self.gpu_problem = Some(why),
            }
        }
        if let Some(done) = polled.done {
            // The run ends by itself only on an error (or a lost thread).
            self.error = done.map_err(UiError::from).and_then(|r| r).err().map(|e| e.to_string());
            self.job = None;
        }
    }
}

/// What one speed run steps on.
struct Run<'a> {
    dataset: &'a Dataset,
    config: ConfigName,
    seed: u64,
    precision: Precision,
    len: usize,
    controller: bool,
}

/// One training step of `e` on `batch`: whole, or as `train` runs it with the
/// controller on (`ctl` judges the norms of `compute` before `apply`, as
/// step `step`). The report and the device milliseconds (the sum of both
/// submits with the controller).
fn one_step(
    e: &mut engine::Engine,
    batch: &crate::dataset::Batch,
    ctl: Option<&mut crate::train::Controller>,
    step: u64,
) -> Result<(crate::step::StepReport, engine::StepTimes), engine::EngineError> {
    let Some(ctl) = ctl else { return e.step_timed(batch, Submit::Record) };
    ctl.begin_step(step);
    let engine::Guarded { report: rep, norms, verdict: v, device_ms } =
        e.guarded_step(batch, None, |n| ctl.assess(n), |v| v.skip.is_some(), |_, _, _| Ok(()))?;
    let outcome = crate::train::Outcome {
        norms: &norms,
        skipped: v.skip.clone(),
        by_engine: rep.optim.skipped.is_some(),
        spike: v.spike,
        scale_before: rep.optim.scale,
        scale_after: rep.optim.next_scale,
    };
    ctl.record(step, &outcome);
    Ok((rep, engine::StepTimes { device_ms, kernels: Vec::new() }))
}

impl Run<'_> {
    /// Alternates a CPU and a GPU step until cancelled (or nobody listens);
    /// a GPU that cannot run is reported once and the CPU goes on alone.
    fn steps(&self, weights: &crate::session::weights::Weights, r: &Reporter<Report>) -> UiResult<()> {
        let cfg = self.config.config();
        let opts = StepOptions::default();
        let init = weights.params(self.config, self.seed)?;
        let mut cpu = engine::Engine::cpu(&cfg, TrainState::fresh(&cfg, init.clone(), LossScale::fixed()), &opts);
        let vk = VulkanOptions { precision: self.precision, gemm: GemmChoice::Auto, timing: Timing::PerDispatch };
        let state = TrainState::fresh(&cfg, init, crate::step::LossScale::for_precision(self.precision));
        let mut gpu = gpu::shared()
            .and_then(|ctx| engine::Engine::vulkan(&ctx, &cfg, &state, &opts, &vk).map_err(|e| e.to_string()));
        drop(state); // the CPU's copy and the device's are all the run needs
        if let Err(why) = &gpu {
            r.progress(Report::NoGpu(why.clone()));
        }
        let judge =
            || self.controller.then(|| crate::train::Controller::new(crate::train::ControllerConfig::default()));
        let (mut cpu_ctl, mut gpu_ctl) = (judge(), judge());
        let mut step = 0u64;
        while !r.cancelled() {
            let batch = self.dataset.random_windows(self.seed ^ step, cfg.batch, self.len)?;
            let t = Instant::now();
            let rep = one_step(&mut cpu, &batch, cpu_ctl.as_mut(), step + 1)?.0;
            let wall_ms = t.elapsed().as_secs_f64() * 1e3;
            if !r.progress(Report::Sample(Sample {
                engine: EngineKind::Cpu,
                step,
                wall_ms,
                device_ms: None,
                loss: rep.loss,
            })) {
                return Ok(());
            }
            if r.cancelled() {
                break;
            }
            if let Ok(g) = &mut gpu {
                let t = Instant::now();
                match one_step(g, &batch, gpu_ctl.as_mut(), step + 1) {
                    Ok((rep, times)) => {
                        let s = Sample {
                            engine: EngineKind::Vulkan,
                            step,
                            wall_ms: t.elapsed().as_secs_f64() * 1e3,
                            device_ms: times.device_ms,
                            loss: rep.loss,
                        };
                        if !r.progress(Report::Sample(s)) || !r.progress(Report::Kernels(times.kernels)) {
                            return Ok(());
                        }
                    }
                    Err(e) => {
                        r.progress(Report::NoGpu(format!("the GPU step failed: {e}")));
                        gpu = Err(e.to_string());
                    }
                }
            }
            step += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_engine() {
        let s = |engine, wall_ms, device_ms| Sample { engine, step: 0, wall_ms, device_ms, loss: 0.0 };
        let samples = [
            s(EngineKind::Cpu, 10.0, None),
            s(EngineKind::Vulkan, 2.0, Some(1.0)),
            s(EngineKind::Cpu, 30.0, None),
            s(EngineKind::Vulkan, 4.0, None),
            s(EngineKind::Cpu, 20.0, None),
        ];
        assert_eq!(medians(&samples, 10), (Some(20.0), Some(4.0), Some(1.0)));
        assert_eq!(medians(&samples, 1), (Some(20.0), Some(4.0), None));
        assert_eq!(medians(&[], 5), (None, None, None));
    }
}

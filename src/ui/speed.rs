//! The speedup run: a thread that trains the same model on the same batches
//! with both engines, alternating one CPU step and one GPU step, and reports
//! each step's time (wall time for both; the GPU's device time too, from its
//! timestamp queries, where the device has them). The UI polls the samples.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

use super::engines::Engine;
use super::state::ConfigName;
use crate::cpu::{self, LossScale, OptimState, StepOptions};
use crate::dataset::Dataset;
use crate::vk::ops::{GemmChoice, Precision};

/// One training step of one engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub engine: Engine,
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
    Failed(String),
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
    stop: Option<Arc<AtomicBool>>,
    rx: Option<Receiver<Report>>,
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

/// Medians of the last `n` samples of each engine: (CPU wall, GPU wall, GPU device).
pub fn medians(samples: &[Sample], n: usize) -> (Option<f64>, Option<f64>, Option<f64>) {
    let median = |mut v: Vec<f64>| {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    };
    let last = |e: Engine, device: bool| {
        let v: Vec<f64> = samples
            .iter()
            .rev()
            .filter(|s| s.engine == e)
            .take(n)
            .filter_map(|s| if device { s.device_ms } else { Some(s.wall_ms) })
            .collect();
        median(v)
    };
    (last(Engine::Cpu, false), last(Engine::Vulkan, false), last(Engine::Vulkan, true))
}

impl SpeedRun {
    pub fn is_running(&self) -> bool {
        self.rx.is_some()
    }

    /// Starts stepping both engines on random windows of `dataset` with the
    /// config's batch shape (shortened to what the dataset holds); the GPU
    /// step in `precision` (f32, or the mixed-precision step), the CPU's in f32.
    pub fn start(
        &mut self,
        dataset: Arc<Dataset>,
        config: ConfigName,
        seed: u64,
        checkpoint: Option<std::path::PathBuf>,
        precision: Precision,
        wake: Box<dyn Fn() + Send>,
    ) {
        if self.is_running() {
            return;
        }
        let cfg = config.config();
        let len = (cfg.seq_len + 1).min(dataset.len_tokens());
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        self.samples.clear();
        self.kernels.clear();
        self.gpu_problem = None;
        self.error = None;
        self.label = format!("{} · batch {} × {} tokens", config.label(), cfg.batch, len.saturating_sub(1));
        if precision.is_mixed() {
            self.label += &format!(" · GPU step in mixed precision ({} products, f32 elsewhere)", precision.name());
        }
        self.stop = Some(stop.clone());
        self.rx = Some(rx);
        let spawned = std::thread::Builder::new().name("dualscope-speed".into()).spawn(move || {
            let send = |r: Report| {
                let ok = tx.send(r).is_ok();
                wake();
                ok
            };
            if let Err(e) = run(&dataset, config, seed, checkpoint.as_deref(), precision, len, &stop, &send) {
                send(Report::Failed(e));
            }
        });
        if let Err(e) = spawned {
            self.rx = None;
            self.error = Some(format!("cannot start the speed thread: {e}"));
        }
    }

    /// Asks the thread to stop after its current step.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            s.store(true, Ordering::Relaxed);
        }
        self.rx = None;
    }

    /// Takes the samples that have arrived.
    pub fn poll(&mut self) {
        let Some(rx) = &self.rx else { return };
        let mut failed = false;
        for r in rx.try_iter() {
            match r {
                Report::Sample(s) => self.samples.push(s),
                Report::Kernels(k) => {
                    if self.kernels.len() == KERNEL_STEPS {
                        self.kernels.pop_front();
                    }
                    self.kernels.push_back(k);
                }
                Report::NoGpu(why) => self.gpu_problem = Some(why),
                Report::Failed(e) => {
                    self.error = Some(e);
                    failed = true;
                }
            }
        }
        if failed {
            self.stop();
        }
    }
}

impl Drop for SpeedRun {
    fn drop(&mut self) {
        self.stop();
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    dataset: &Dataset,
    config: ConfigName,
    seed: u64,
    checkpoint: Option<&std::path::Path>,
    precision: Precision,
    len: usize,
    stop: &AtomicBool,
    send: &dyn Fn(Report) -> bool,
) -> Result<(), String> {
    let cfg = config.config();
    let opts = StepOptions::default();
    let init = super::worker::params(config, seed, checkpoint)?;
    let (mut p_cpu, mut s_cpu, mut scale_cpu) = (init.clone(), OptimState::<f32>::new(&cfg), LossScale::fixed());
    let ctx = crate::vk::Context::new(&crate::vk::ContextOptions { device: None, validation: Some(false) })
        .map(Arc::new)
        .map_err(|e| e.to_string());
    let mut gpu = match ctx {
        Ok(ctx) if precision.is_mixed() => {
            crate::vk::engine::Engine::with_precision(&ctx, &cfg, &init, &opts, precision, GemmChoice::Auto)
                .map_err(|e| e.to_string())
        }
        Ok(ctx) => crate::vk::engine::Engine::new(
            &ctx,
            &cfg,
            &init,
            &opts,
            &LossScale::fixed(),
            crate::vk::ops::GemmPath::TiledF32,
        )
        .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    if let Err(why) = &gpu {
        send(Report::NoGpu(why.clone()));
    }
    let mut step = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let batch = dataset.random_windows(seed ^ step, cfg.batch, len).map_err(|e| e.to_string())?;
        let t = Instant::now();
        let rep =
            cpu::train_step(&cfg, &mut p_cpu, &mut s_cpu, &mut scale_cpu, &batch, &opts).map_err(|e| e.to_string())?;
        let cpu = Sample {
            engine: Engine::Cpu,
            step,
            wall_ms: t.elapsed().as_secs_f64() * 1e3,
            device_ms: None,
            loss: rep.loss,
        };
        if !send(Report::Sample(cpu)) {
            return Ok(());
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Ok(engine) = &mut gpu {
            let t = Instant::now();
            match engine.step(&batch) {
                Ok((rep, timings)) => {
                    let s = Sample {
                        engine: Engine::Vulkan,
                        step,
                        wall_ms: t.elapsed().as_secs_f64() * 1e3,
                        device_ms: timings.total_ms(),
                        loss: rep.loss,
                    };
                    if !send(Report::Sample(s)) || !send(Report::Kernels(timings.per_kernel_ms())) {
                        return Ok(());
                    }
                }
                Err(e) => {
                    send(Report::NoGpu(format!("the GPU step failed: {e}")));
                    gpu = Err(e.to_string());
                }
            }
        }
        step += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_engine() {
        let s = |engine, wall_ms, device_ms| Sample { engine, step: 0, wall_ms, device_ms, loss: 0.0 };
        let samples = [
            s(Engine::Cpu, 10.0, None),
            s(Engine::Vulkan, 2.0, Some(1.0)),
            s(Engine::Cpu, 30.0, None),
            s(Engine::Vulkan, 4.0, None),
            s(Engine::Cpu, 20.0, None),
        ];
        assert_eq!(medians(&samples, 10), (Some(20.0), Some(4.0), Some(1.0)));
        assert_eq!(medians(&samples, 1), (Some(20.0), Some(4.0), None));
        assert_eq!(medians(&[], 5), (None, None, None));
    }
}

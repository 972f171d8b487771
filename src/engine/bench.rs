//! The benchmark's work: timing full training steps on either engine (wall
//! time, device time, per stage and per kernel), the Vulkan step recorded
//! once and replayed, and the recurrences' floor from a grid barrier timed
//! alone (in a `lab` build also the recurrences' timing probes,
//! `bench_probes`). `dualscope bench` parses its arguments and prints these.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::EngineError;
use super::stats::{medians_by_name, percentiles};
use crate::cpu;
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::{GemmChoice, Precision};
use crate::step::{LossScale, OptimState, StepOptions};
use crate::vk::engine::{BWD_WAVE_LAG, Engine, FWD_WAVE_LAG, Plan, Recurrence};
use crate::vk::{Context, Sequence, Timing, VkError, kernel_of};

/// Where a benchmark is: a phase of `len` steps starts, one step is done,
/// the phase ends (the CLI draws progress bars).
pub trait Progress {
    fn start(&mut self, what: &str, len: u64);
    fn inc(&mut self);
    fn finish(&mut self);
}

/// No progress shown.
impl Progress for () {
    fn start(&mut self, _: &str, _: u64) {}
    fn inc(&mut self) {}
    fn finish(&mut self) {}
}

/// Steps of a benchmark: `warmup` untimed, then `steps` timed.
#[derive(Clone, Copy, Debug)]
pub struct BenchSteps {
    pub warmup: usize,
    pub steps: usize,
}

/// One engine's timing of a step.
#[derive(Clone, Debug)]
pub struct Timed {
    /// Wall milliseconds per step.
    pub wall: Vec<f64>,
    /// Device milliseconds per step (GPU timestamps), when the device has them.
    pub device: Vec<f64>,
    pub first_loss: f64,
    /// Milliseconds per step by phase (CPU: mean) or by stage (GPU: median
    /// over the steps).
    pub breakdown: Vec<(String, f64)>,
    /// GPU: median milliseconds per kernel, largest first.
    pub kernels: Vec<(String, f64)>,
    /// GPU: how the recurrences ran, and their floor.
    pub recurrence: Option<RecurrenceReport>,
    /// GPU: wall and device milliseconds of the step recorded once and
    /// replayed (`Sequence::replay`, the CUDA-graph way), step after step.
    pub replay: Option<(Vec<f64>, Vec<f64>)>,
    /// GPU: wall and device milliseconds (the sum of the dispatches) of the
    /// step with a timestamp pair around every dispatch, the run the
    /// breakdowns come from.
    pub instrumented: Option<(Vec<f64>, Vec<f64>)>,
    /// GPU, when asked for ([`controller_path`]): wall and device
    /// milliseconds of `train`'s default step (compute, the controller's
    /// judgement, apply), step after step.
    pub controller: Option<(Vec<f64>, Vec<f64>)>,
    /// What was timed: the step's precision and the kernel of its products.
    pub precision: &'static str,
    pub gemm_path: &'static str,
}

/// The CPU reference's step, `n.warmup + n.steps` times from fresh state.
pub fn cpu(
    n: BenchSteps,
    cfg: &Config,
    params: &Params<f32>,
    batch: &Batch,
    pb: &mut dyn Progress,
) -> Result<Timed, EngineError> {
    let mut params = params.clone();
    let mut state = OptimState::new(cfg);
    let mut scale = LossScale::fixed();
    let opts = StepOptions::default();
    pb.start("benchmark cpu", (n.warmup + n.steps) as u64);
    let mut wall = Vec::with_capacity(n.steps);
    let mut first_loss = None;
    for i in 0..n.warmup + n.steps {
        if i == n.warmup {
            cpu::profile::enable(true);
        }
        let t0 = Instant::now();
        let r = cpu::train_step(cfg, &mut params, &mut state, &mut scale, batch, &opts)?;
        first_loss.get_or_insert(r.loss);
        if i >= n.warmup {
            wall.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        pb.inc();
    }
    pb.finish();
    let breakdown = cpu::profile::take().into_iter().map(|(n_, ms)| (n_.to_string(), ms / n.steps as f64)).collect();
    cpu::profile::enable(false);
    Ok(Timed {
        wall,
        device: Vec::new(),
        first_loss: first_loss.unwrap_or(f64::NAN),
        breakdown,
        kernels: Vec::new(),
        recurrence: None,
        replay: None,
        instrumented: None,
        controller: None,
        precision: "f32",
        gemm_path: "cpu",
    })
}

/// Appends `ms` to the series `name` of `list` (in first-seen order).
fn add(list: &mut Vec<(String, Vec<f64>)>, name: String, ms: f64) {
    match list.iter_mut().find(|(n, _)| *n == name) {
        Some(x) => x.1.push(ms),
        None => list.push((name, vec![ms])),
    }
}

/// The Vulkan step on `ctx` in `precision` (products on the kernel `choice`
/// picks): per dispatch (the breakdowns), then as `train` runs it (timed as
/// a whole), then recorded once and replayed; with the recurrences' floor.
#[allow(clippy::too_many_arguments)]
pub fn vulkan(
    n: BenchSteps,
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    batch: &Batch,
    precision: Precision,
    choice: GemmChoice,
    map: Option<&crate::step::PrecisionMap>,
    pb: &mut dyn Progress,
) -> Result<Timed, EngineError> {
    // Under a precision map, each stage in its own precision (from its loss scale).
    let mut e = match map {
        Some(m) => Engine::with_precision_map(ctx, cfg, params, &StepOptions::default(), m, choice)?,
        None => Engine::with_precision(ctx, cfg, params, &StepOptions::default(), precision, choice)?,
    };
    e.set_batch(batch)?;
    // Instrumented: every dispatch between timestamps, for the breakdowns.
    pb.start("benchmark gpu (per kernel)", (n.warmup + n.steps) as u64);
    let (mut timed_wall, mut timed_device) = (Vec::new(), Vec::new());
    // Per stage and per kernel, each step's milliseconds: their medians are
    // reported (a mean would carry the slow steps of a GPU still raising
    // its clocks).
    let mut stages: Vec<(String, Vec<f64>)> = Vec::new();
    let mut kernels: Vec<(String, Vec<f64>)> = Vec::new();
    // The kernels (as `per_kernel_ms` names them) whose dispatches walk a
    // recurrence's steps.
    let mut recurrences = BTreeSet::new();
    let mut first_loss = None;
    // Warm-up: `warmup` steps and at least a second, so that a GPU that
    // idled has raised its clocks before anything is kept.
    let warm_until = Instant::now() + Duration::from_secs(1);
    for i in 0.. {
        if i >= n.warmup && Instant::now() >= warm_until {
            break;
        }
        e.run(Plan::Step)?;
        first_loss.get_or_insert_with(|| e.report().map(|r| r.loss).unwrap_or(f64::NAN));
        if i < n.warmup {
            pb.inc();
        }
    }
    for _ in 0..n.steps {
        let t0 = Instant::now();
        let (timings, per_stage) = e.run(Plan::Step)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        timed_wall.push(ms);
        timed_device.extend(timings.total_ms());
        for (s, ms) in per_stage {
            add(&mut stages, format!("{s:?}"), ms.unwrap_or(0.0));
        }
        for (k, ms) in timings.per_kernel_ms() {
            add(&mut kernels, k, ms);
        }
        recurrences.extend(timings.dispatches.iter().filter(|d| d.recurrence).map(|d| kernel_of(&d.label)));
        pb.inc();
    }
    pb.finish();
    let (stages, mut kernels) = (medians_by_name(stages), medians_by_name(kernels));
    // The step as `train` runs it: recorded every step, timed as a whole.
    e.set_timing(Timing::Span);
    pb.start("benchmark gpu", (n.warmup + n.steps) as u64);
    let (mut wall, mut device) = (Vec::new(), Vec::new());
    for i in 0..n.warmup + n.steps {
        let t0 = Instant::now();
        let (timings, _) = e.run(Plan::Step)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= n.warmup {
            wall.push(ms);
            device.extend(timings.total_ms());
        }
        pb.inc();
    }
    pb.finish();
    kernels.sort_by(|x, y| y.1.total_cmp(&x.1));
    let recurrence_ms = kernels.iter().filter(|(k, _)| recurrences.contains(k)).map(|(_, ms)| ms).sum();
    let recurrence = Some(recurrence_floor(&e, cfg, batch.t, recurrence_ms)?);
    let replay = Some(replayed(n, ctx, &e)?);
    if ctx.validation_errors() > 0 {
        return Err(EngineError::Validation(ctx.validation_errors()));
    }
    Ok(Timed {
        wall,
        device,
        first_loss: first_loss.unwrap_or(f64::NAN),
        breakdown: stages,
        kernels,
        recurrence,
        replay,
        instrumented: Some((timed_wall, timed_device)),
        controller: None,
        precision: precision.name(),
        gemm_path: e.gemm_path().name(),
    })
}

/// `train`'s default step with the controller on, `warmup + steps` times on
/// the same batch: [`super::Engine::compute`] (on Vulkan the split step:
/// forward, backward and the per-tensor norms in one submit), `assess` (the
/// controller's judgement of the norms: `true` skips), then
/// [`super::Engine::apply`] unless skipped. Wall milliseconds per step and
/// device milliseconds (both submits) where timestamps exist.
#[allow(clippy::too_many_arguments)]
pub fn controller_path(
    n: BenchSteps,
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    batch: &Batch,
    precision: Precision,
    choice: GemmChoice,
    map: Option<&crate::step::PrecisionMap>,
    assess: &mut dyn FnMut(&super::Norms) -> bool,
    pb: &mut dyn Progress,
) -> Result<(Vec<f64>, Vec<f64>), EngineError> {
    let scale = match map {
        Some(m) => crate::step::LossScale::for_map(m),
        None => crate::step::LossScale::for_precision(precision),
    };
    let state = super::TrainState::fresh(cfg, params.clone(), scale);
    let vk = super::VulkanOptions { precision, gemm: choice, timing: Timing::Span };
    let mut v = super::VulkanEngine::new(ctx, cfg, &state, &StepOptions::default(), &vk)?;
    if let Some(m) = map {
        v.set_precision_map(Some(m.clone()), choice)?;
    }
    let mut g = super::Engine::Vulkan(Box::new(v));
    pb.start("benchmark gpu (controller's path)", (n.warmup + n.steps) as u64);
    let (mut wall, mut device) = (Vec::new(), Vec::new());
    for i in 0..n.warmup + n.steps {
        let t0 = Instant::now();
        let step = g.guarded_step(batch, None, &mut *assess, |skip| *skip, |_, _, _| Ok(()))?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= n.warmup {
            wall.push(ms);
            device.extend(step.device_ms);
        }
        pb.inc();
    }
    pb.finish();
    Ok((wall, device))
}

/// The same step recorded once, then replayed `warmup + steps` times: wall
/// milliseconds (submit to fence) and device milliseconds per replay.
fn replayed(n: BenchSteps, ctx: &Context, e: &Engine) -> Result<(Vec<f64>, Vec<f64>), VkError> {
    let mut seq = Sequence::with_timing(ctx, Timing::Span)?;
    e.record_step(&mut seq)?;
    seq.end()?;
    let (mut wall, mut device) = (Vec::new(), Vec::new());
    for i in 0..n.warmup + n.steps {
        let t0 = Instant::now();
        let timings = seq.replay()?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= n.warmup {
            wall.push(ms);
            device.extend(timings.total_ms());
        }
    }
    e.report()?;
    Ok((wall, device))
}

/// The wavefronts' operand loads in each direction (`None`: no wavefront).
#[derive(Clone, Debug, Serialize)]
pub struct WaveLoads {
    pub forward: Option<&'static str>,
    pub backward: Option<&'static str>,
}

/// How the recurrences ran and, for the grid recurrence, their floor.
#[derive(Clone, Debug, Serialize)]
pub struct RecurrenceReport {
    /// `Recurrence::name`.
    pub mode: &'static str,
    /// The recurrent products: `f32`, `f16 coopmat` (the mixed step's grid
    /// kernels), or `f16 coopmat, one workgroup` / `f16 fma, one workgroup`
    /// (the small layers' `gru_*_wg_*`).
    pub product: &'static str,
    pub wave_loads: WaveLoads,
    /// The per-layer grid kernels' operand loads (`None`: none run).
    pub grid_loads: Option<&'static str>,
    /// Device milliseconds per step of the recurrence kernels.
    pub recurrence_ms: f64,
    /// Why the default recurrence was given up, if it was.
    pub fallback: Option<String>,
    /// Microseconds of one grid barrier alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub barrier_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub barriers_per_step: Option<usize>,
    /// `barrier_us × barriers_per_step`, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_ms: Option<f64>,
    /// `DUALSCOPE_GRID_PROBE` (a `lab` build): the recurrences' timing probes.
    #[cfg(feature = "lab")]
    #[serde(flatten)]
    pub probes: super::bench_probes::RecurrenceProbes,
}

/// The recurrences' device time per step against their floor: the dependent
/// steps (per direction layers × (T - 1) grid barriers, or T for a two-layer
/// wavefront) times the latency of one barrier alone, measured with the
/// arithmetic switched off (`Engine::grid_barrier_ms`, median of 5). Only
/// for the grid recurrence. `measured`: the recurrence kernels' device
/// milliseconds per step.
fn recurrence_floor(e: &Engine, cfg: &Config, t: usize, measured: f64) -> Result<RecurrenceReport, VkError> {
    let mode = e.recurrence();
    // How a recurrence kernel that runs reads its operands (None: it does not run).
    let kind = |runs: bool, noncoherent: bool| runs.then_some(if noncoherent { "noncoherent" } else { "coherent" });
    // The wavefronts' operand loads (see Engine::wave_noncoherent), and
    // whether their products are FMAs (Engine::wave_scalar).
    let loads = |wave: bool, forward: bool| {
        kind(wave, e.wave_noncoherent(forward)).map(|k| if e.wave_scalar(forward) { "noncoherent, fma" } else { k })
    };
    let mut v = RecurrenceReport {
        mode: mode.name(),
        product: match (e.recurrence_wg(), e.recurrence_on_coopmat()) {
            (Some("cm"), _) => "f16 coopmat, one workgroup",
            (Some(_), _) => "f16 fma, one workgroup",
            (None, true) => "f16 coopmat",
            (None, false) => "f32",
        },
        wave_loads: WaveLoads { forward: loads(e.forward_wave(), true), backward: loads(e.backward_wave(), false) },
        // The per-layer grid kernels' loads, where a direction runs them.
        grid_loads: kind(
            mode == Recurrence::Grid && !(e.forward_wave() && e.backward_wave()) && e.recurrence_wg().is_none(),
            e.grid_noncoherent(e.recurrence_on_coopmat()),
        ),
        recurrence_ms: measured,
        fallback: e.recurrence_fallback().map(str::to_string),
        barrier_us: None,
        barriers_per_step: None,
        floor_ms: None,
        #[cfg(feature = "lab")]
        probes: Default::default(),
    };
    // The one-workgroup recurrences have no grid barrier to take a floor from.
    if mode != Recurrence::Grid || t < 2 || e.recurrence_wg().is_some() {
        #[cfg(feature = "lab")]
        v.probes.add_wg(e, t);
        return Ok(v);
    }
    let mut barriers_ms = Vec::new();
    for _ in 0..5 {
        if let Some(ms) = e.grid_barrier_ms(t)? {
            barriers_ms.push(ms);
        }
    }
    if barriers_ms.is_empty() {
        return Ok(v);
    }
    let barrier_us = percentiles(&mut barriers_ms).0 * 1e3 / (t - 1) as f64;
    // One barrier between two steps of a layer, or between two intervals of
    // a wavefront: T + FWD_WAVE_LAG intervals forward, T + BWD_WAVE_LAG backward.
    let per_layer = cfg.layers * (t - 1);
    let barriers = [(e.forward_wave(), FWD_WAVE_LAG), (e.backward_wave(), BWD_WAVE_LAG)]
        .iter()
        .map(|&(w, lag)| if w { t + lag - 1 } else { per_layer })
        .sum::<usize>();
    v.barrier_us = Some(barrier_us);
    v.barriers_per_step = Some(barriers);
    v.floor_ms = Some(barrier_us * barriers as f64 / 1e3);
    #[cfg(feature = "lab")]
    v.probes.add_grid(e, t);
    Ok(v)
}

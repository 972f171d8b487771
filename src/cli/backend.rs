//! The engine behind `grads`, `step` and `train`: the CPU reference or the
//! Vulkan engine, behind one interface so that the commands share everything
//! else (inputs, checks, outputs).

use std::borrow::Cow;
use std::sync::Arc;

use super::common::CliError;
use super::controller::Norms;
use super::{EngineArg, PrecisionArg};
use crate::cpu::{self, LossScale, OptimState, StepOptions, StepReport};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::tensor::Real;
use crate::vk::engine::{Engine, FlatBuf, Stage};
use crate::vk::ops::{GemmChoice, GemmPath, Precision};
use crate::vk::{Context, ContextOptions, VkError};

/// Opens the Vulkan device (`device`, else `DUALSCOPE_VK_DEVICE`, else the
/// best one); any failure to do so is an engine error (exit 2).
pub fn open_context(device: Option<usize>) -> Result<Context, CliError> {
    Context::new(&ContextOptions { device, validation: None }).map_err(|e| CliError::Engine(e.to_string()))
}

/// An error of the Vulkan engine once the device is open: what the device or
/// this build cannot do is an engine error (exit 2), anything else (an
/// allocation that fails, a lost device) a failed run (exit 1).
fn vk_error(e: VkError) -> CliError {
    match e {
        VkError::NoLoader(_) | VkError::NoDevice(_) | VkError::BadDeviceIndex { .. } | VkError::Unsupported(_) => {
            CliError::Engine(format!("--engine gpu: {e}"))
        }
        e => CliError::Failed(format!("--engine gpu: {e}")),
    }
}

/// The Vulkan engine computes in float32 only.
pub fn check_precision(engine: EngineArg, precision: PrecisionArg) -> Result<(), CliError> {
    match (engine, precision) {
        (EngineArg::Gpu, PrecisionArg::F64) => Err(CliError::Usage(
            "--engine gpu computes in float32 only: use --precision f32, or --engine cpu for float64".into(),
        )),
        _ => Ok(()),
    }
}

/// An open Vulkan device and the engine on it.
pub struct Gpu {
    ctx: Arc<Context>,
    engine: Engine,
    /// The recurrence's fallback was reported (once per run).
    told_fallback: bool,
}

impl Gpu {
    /// Opens the device and uploads `params`, with fresh optimizer state and a
    /// fixed loss scale of 1 (what the CPU commands start from).
    fn new(cfg: &Config, params: &Params<f32>, opts: &StepOptions) -> Result<Gpu, CliError> {
        Self::with_scale(cfg, params, opts, &LossScale::fixed(), Precision::F32, GemmChoice::Auto)
    }

    /// The engine for a step in `precision` (f32, or the mixed step's f16 or
    /// bf16 products on the kernel `choice` picks), starting from `scale`.
    fn with_scale(
        cfg: &Config,
        params: &Params<f32>,
        opts: &StepOptions,
        scale: &LossScale,
        precision: Precision,
        choice: GemmChoice,
    ) -> Result<Gpu, CliError> {
        let ctx = Arc::new(open_context(None)?);
        let path: GemmPath = crate::vk::ops::path_for(&ctx, precision, choice).map_err(vk_error)?;
        let mut engine = Engine::new(&ctx, cfg, params, opts, scale, path).map_err(vk_error)?;
        // Nothing here shows per-kernel times: each step is timed as a whole.
        engine.set_timing(crate::vk::Timing::Span);
        Ok(Gpu { ctx, engine, told_fallback: false })
    }

    /// A run with validation errors has no trustworthy result: it fails
    /// before anything is written.
    fn check_validation(&self) -> Result<(), CliError> {
        match self.ctx.validation_errors() {
            0 => Ok(()),
            n => Err(CliError::Failed(format!(
                "--engine gpu: the Vulkan validation layer reported {n} error(s) (see above); nothing was written"
            ))),
        }
    }
}

/// What `grads` reports and writes, from either engine.
pub struct GradsOut {
    pub loss: f64,
    pub grad_norm: f64,
    pub n_targets: usize,
    pub capped: usize,
    /// Float32 whatever the arithmetic, as the file holds them.
    pub grads: Params<f32>,
}

/// Loss and gradients of one batch (loss scale 1).
pub fn grads(
    engine: EngineArg,
    precision: PrecisionArg,
    cfg: &Config,
    params: &Params<f32>,
    batch: &Batch,
    token_cap: Option<f64>,
) -> Result<GradsOut, CliError> {
    check_precision(engine, precision)?;
    Ok(match (engine, precision) {
        (EngineArg::Cpu, PrecisionArg::F32) => cpu::grads(cfg, params, batch, token_cap)?.into(),
        (EngineArg::Cpu, PrecisionArg::F64) => cpu::grads(cfg, &params.cast::<f64>(), batch, token_cap)?.into(),
        (EngineArg::Gpu, _) => {
            let mut gpu = Gpu::new(cfg, params, &StepOptions { token_cap, ..Default::default() })?;
            let r = gpu.engine.grads(batch).map_err(vk_error)?;
            gpu.check_validation()?;
            GradsOut { loss: r.loss, grad_norm: r.grad_norm, n_targets: r.n_targets, capped: r.capped, grads: r.grads }
        }
    })
}

impl<T: Real> From<cpu::GradsResult<T>> for GradsOut {
    fn from(r: cpu::GradsResult<T>) -> Self {
        let grads = r.grads.cast::<f32>();
        GradsOut { loss: r.loss, grad_norm: r.grad_norm, n_targets: r.n_targets, capped: r.capped, grads }
    }
}

/// Training steps on either engine, float32: the parameters, the AdamW state
/// and the loss scale live on the engine between steps.
pub enum Stepper {
    Cpu(Box<CpuRun>),
    Gpu(Box<Gpu>),
}

/// Everything a training run needs to continue where it was: the weights,
/// the AdamW moments and step counter, and the loss scale.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainState {
    pub params: Params<f32>,
    pub optim: OptimState<f32>,
    pub scale: LossScale,
}

impl TrainState {
    /// Step 0: zero moments.
    pub fn fresh(cfg: &Config, params: Params<f32>, scale: LossScale) -> Self {
        TrainState { params, optim: OptimState::new(cfg), scale }
    }
}

/// One step's gradients, computed and not yet applied (see
/// [`Stepper::compute`]).
pub struct Pending {
    pub loss: f64,
    pub n_targets: usize,
    pub capped: usize,
    /// Unscaled, before clipping; computed in float64 on the host.
    pub norms: Norms,
    /// The loss scale the gradients were computed with.
    pub scale: f64,
    /// CPU: `∂(S·loss)/∂θ` as backward left it; GPU: the unscaled gradients
    /// read back (still in the device's gradient buffer unless `poisoned`).
    grads: Params<f32>,
    poisoned: bool,
}

/// Per-tensor and global norms of `grads / scale`, in float64, canonical order.
fn norms_of(cfg: &Config, grads: &Params<f32>, scale: f64) -> Norms {
    let mut total = 0.0;
    let tensors = grads
        .named(cfg)
        .into_iter()
        .map(|(name, t)| {
            let ss: f64 = t.data.iter().map(|&x| (x as f64) * (x as f64)).sum();
            total += ss;
            (name, ss.sqrt() / scale)
        })
        .collect();
    Norms { global: total.sqrt() / scale, tensors }
}

/// The testing aids behind `train --inject-nan-at` and `--inject-spike-at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poison {
    /// One gradient value NaN.
    Nan,
    /// Every gradient value × 1e4 (a finite outlier).
    Spike,
}

fn poison(grads: &mut Params<f32>, kind: Poison) {
    match kind {
        Poison::Nan => grads.head_bias.data[0] = f32::NAN,
        Poison::Spike => grads.tensors_mut().into_iter().for_each(|t| t.data.iter_mut().for_each(|x| *x *= 1e4)),
    }
}

/// The CPU reference's training state.
pub struct CpuRun {
    cfg: Config,
    params: Params<f32>,
    state: OptimState<f32>,
    scale: LossScale,
    opts: StepOptions,
}

impl Stepper {
    /// Starts from `params` with fresh optimizer state (step 0, zero moments)
    /// and a fixed loss scale of 1. Opens the Vulkan device for `--engine gpu`.
    pub fn new(engine: EngineArg, cfg: &Config, params: Params<f32>, opts: &StepOptions) -> Result<Self, CliError> {
        Ok(match engine {
            EngineArg::Cpu => Stepper::Cpu(Box::new(CpuRun {
                cfg: cfg.clone(),
                state: OptimState::new(cfg),
                params,
                scale: LossScale::fixed(),
                opts: *opts,
            })),
            EngineArg::Gpu => Stepper::Gpu(Box::new(Gpu::new(cfg, &params, opts)?)),
        })
    }

    /// Starts from `state` (weights, moments, step counter, loss scale), the
    /// GPU step in `precision` on the kernel `choice` picks (the CPU reference
    /// computes in f32 only: any other precision is a usage error there).
    /// Opens the Vulkan device for `--engine gpu`.
    pub fn resume(
        engine: EngineArg,
        cfg: &Config,
        state: TrainState,
        opts: &StepOptions,
        precision: Precision,
        choice: GemmChoice,
    ) -> Result<Self, CliError> {
        if engine == EngineArg::Cpu && precision != Precision::F32 {
            return Err(CliError::Usage(format!(
                "--precision {}: the mixed-precision step runs on --engine gpu; the CPU reference computes in f32",
                precision.name()
            )));
        }
        Ok(match engine {
            EngineArg::Cpu => Stepper::Cpu(Box::new(CpuRun {
                cfg: cfg.clone(),
                params: state.params,
                state: state.optim,
                scale: state.scale,
                opts: *opts,
            })),
            EngineArg::Gpu => {
                let gpu = Gpu::with_scale(cfg, &state.params, opts, &state.scale, precision, choice)?;
                gpu.engine.set_optim_state(&state.optim, &state.scale).map_err(vk_error)?;
                gpu.check_validation()?;
                Stepper::Gpu(Box::new(gpu))
            }
        })
    }

    /// The first half of a step: loss, gradients and their norms on `batch`,
    /// nothing applied yet. `poison_it` spoils the gradients first (the
    /// `--inject-nan-at` / `--inject-spike-at` testing aids).
    pub fn compute(&mut self, batch: &Batch, poison_it: Option<Poison>) -> Result<Pending, CliError> {
        match self {
            Stepper::Cpu(c) => {
                let f = cpu::forward(&c.cfg, &c.params, batch)?;
                let g = cpu::backward(&c.cfg, &c.params, batch, &f, c.scale.scale, c.opts.token_cap);
                let mut grads = g.grads;
                if let Some(kind) = poison_it {
                    poison(&mut grads, kind);
                }
                Ok(Pending {
                    loss: f.loss,
                    n_targets: f.n_targets,
                    capped: g.capped,
                    norms: norms_of(&c.cfg, &grads, c.scale.scale),
                    scale: c.scale.scale,
                    grads,
                    poisoned: poison_it.is_some(),
                })
            }
            Stepper::Gpu(gpu) => {
                let (scale, _, _) = gpu.engine.loss_scale_and_step().map_err(vk_error)?;
                let r = gpu.engine.grads(batch).map_err(vk_error)?;
                gpu.check_validation()?;
                let mut grads = r.grads;
                if let Some(kind) = poison_it {
                    poison(&mut grads, kind);
                }
                let norms = norms_of(gpu.engine.config(), &grads, 1.0);
                Ok(Pending {
                    loss: r.loss,
                    n_targets: r.n_targets,
                    capped: r.capped,
                    norms,
                    scale: scale.scale,
                    grads,
                    poisoned: poison_it.is_some(),
                })
            }
        }
    }

    /// The second half: the optimizer (unscale, norm, guard, clip, AdamW, loss
    /// scale) on the gradients of `p`, as [`Stepper::step`] would have done.
    pub fn apply(&mut self, p: Pending) -> Result<StepReport, CliError> {
        let Pending { loss, n_targets, capped, mut grads, poisoned, scale, .. } = p;
        let optim = match self {
            Stepper::Cpu(c) => cpu::apply_step(&c.cfg, &mut c.params, &mut grads, &mut c.state, &mut c.scale, &c.opts),
            Stepper::Gpu(gpu) => {
                // The device's gradient buffer holds the unscaled gradients of
                // `compute`; the optimizer stage unscales again, so they go
                // back scaled (S is a power of two: exact).
                if poisoned || scale != 1.0 {
                    if scale != 1.0 {
                        let s = scale as f32;
                        grads.tensors_mut().into_iter().for_each(|t| t.data.iter_mut().for_each(|x| *x *= s));
                    }
                    let flat = gpu.engine.layout().flatten(&grads);
                    gpu.engine.write_flat(FlatBuf::Grads, &flat).map_err(vk_error)?;
                }
                gpu.engine.run_stages(&[Stage::Optim]).map_err(vk_error)?;
                gpu.check_validation()?;
                gpu.engine.report().map_err(vk_error)?.optim
            }
        };
        Ok(StepReport { loss, n_targets, capped_tokens: capped, optim })
    }

    /// The loss scale now.
    /// What computes the step's matrix products: the CPU reference, or the
    /// GPU kernel (`GemmPath::name`), with the step's precision.
    pub fn precision_and_path(&self) -> (&'static str, &'static str) {
        match self {
            Stepper::Cpu(_) => ("f32", "cpu"),
            Stepper::Gpu(g) => (g.engine.precision().name(), g.engine.gemm_path().name()),
        }
    }

    pub fn loss_scale(&self) -> Result<LossScale, CliError> {
        match self {
            Stepper::Cpu(c) => Ok(c.scale.clone()),
            Stepper::Gpu(gpu) => Ok(gpu.engine.loss_scale_and_step().map_err(vk_error)?.0),
        }
    }

    /// The AdamW step counter now.
    pub fn optim_step(&self) -> Result<u64, CliError> {
        match self {
            Stepper::Cpu(c) => Ok(c.state.step),
            Stepper::Gpu(gpu) => Ok(gpu.engine.loss_scale_and_step().map_err(vk_error)?.1),
        }
    }

    /// Changes the learning rate, keeping everything else.
    pub fn set_lr(&mut self, lr: f64) -> Result<(), CliError> {
        match self {
            Stepper::Cpu(c) => c.opts.lr = lr,
            Stepper::Gpu(gpu) => {
                if gpu.engine.options().lr != lr {
                    let opts = StepOptions { lr, ..*gpu.engine.options() };
                    gpu.engine.set_options(&opts).map_err(vk_error)?;
                    gpu.check_validation()?;
                }
            }
        }
        Ok(())
    }

    /// The whole training state (read back from the device for the GPU).
    pub fn snapshot(&self) -> Result<TrainState, CliError> {
        match self {
            Stepper::Cpu(c) => {
                Ok(TrainState { params: c.params.clone(), optim: c.state.clone(), scale: c.scale.clone() })
            }
            Stepper::Gpu(gpu) => {
                let e = &gpu.engine;
                let params = e.read_params(FlatBuf::Params).map_err(vk_error)?;
                let optim = e.optim_state().map_err(vk_error)?;
                let scale = e.loss_scale_and_step().map_err(vk_error)?.0;
                gpu.check_validation()?;
                Ok(TrainState { params, optim, scale })
            }
        }
    }

    /// Puts `s` back (a rollback).
    pub fn restore(&mut self, s: &TrainState) -> Result<(), CliError> {
        match self {
            Stepper::Cpu(c) => {
                c.params = s.params.clone();
                c.state = s.optim.clone();
                c.scale = s.scale.clone();
            }
            Stepper::Gpu(gpu) => {
                gpu.engine.set_params(&s.params).map_err(vk_error)?;
                gpu.engine.set_optim_state(&s.optim, &s.scale).map_err(vk_error)?;
                gpu.check_validation()?;
            }
        }
        Ok(())
    }

    /// One training step on `batch`.
    pub fn step(&mut self, batch: &Batch) -> Result<StepReport, CliError> {
        match self {
            Stepper::Cpu(c) => Ok(cpu::train_step(&c.cfg, &mut c.params, &mut c.state, &mut c.scale, batch, &c.opts)?),
            Stepper::Gpu(gpu) => {
                let (report, _timings) = gpu.engine.step_replayed(batch).map_err(vk_error)?;
                gpu.check_validation()?;
                if let Some(why) = gpu.engine.recurrence_fallback().filter(|_| !gpu.told_fallback) {
                    eprintln!("note: {why}");
                    gpu.told_fallback = true;
                }
                Ok(report)
            }
        }
    }

    /// The current parameters (read back from the device for the GPU).
    pub fn params(&self) -> Result<Cow<'_, Params<f32>>, CliError> {
        match self {
            Stepper::Cpu(c) => Ok(Cow::Borrowed(&c.params)),
            Stepper::Gpu(gpu) => {
                let p = gpu.engine.read_params(FlatBuf::Params).map_err(vk_error)?;
                gpu.check_validation()?;
                Ok(Cow::Owned(p))
            }
        }
    }
}

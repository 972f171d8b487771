//! The engine behind `grads`, `step` and `train`: the CPU reference or the
//! Vulkan engine, behind one interface so that the commands share everything
//! else (inputs, checks, outputs).

use std::borrow::Cow;
use std::sync::Arc;

use super::common::CliError;
use super::{EngineArg, PrecisionArg};
use crate::cpu::{self, LossScale, OptimState, StepOptions, StepReport};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::tensor::Real;
use crate::vk::engine::{Engine, FlatBuf};
use crate::vk::ops::GemmPath;
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
}

impl Gpu {
    /// Opens the device and uploads `params`, with fresh optimizer state and a
    /// fixed loss scale of 1 (what the CPU commands start from).
    fn new(cfg: &Config, params: &Params<f32>, opts: &StepOptions) -> Result<Gpu, CliError> {
        let ctx = Arc::new(open_context(None)?);
        let engine = Engine::new(&ctx, cfg, params, opts, &LossScale::fixed(), GemmPath::TiledF32).map_err(vk_error)?;
        Ok(Gpu { ctx, engine })
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

    /// One training step on `batch`.
    pub fn step(&mut self, batch: &Batch) -> Result<StepReport, CliError> {
        match self {
            Stepper::Cpu(c) => Ok(cpu::train_step(&c.cfg, &mut c.params, &mut c.state, &mut c.scale, batch, &c.opts)?),
            Stepper::Gpu(gpu) => {
                let (report, _timings) = gpu.engine.step(batch).map_err(vk_error)?;
                gpu.check_validation()?;
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

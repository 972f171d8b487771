//! One engine type over the CPU reference and the Vulkan engine, so that the
//! command line, the GUI and the training loop drive either the same way
//! (every operation is one `match`, as candle's `Storage`).
//!
//! An [`Engine`] holds a whole training state: the weights, the AdamW
//! moments and step counter, and the loss scale. It takes a full step
//! ([`Engine::step`], the Vulkan step recorded once and replayed), or the
//! training controller's two-phase step: [`Engine::compute`] (loss,
//! gradients and their norms, nothing applied) then [`Engine::apply`].

pub mod bench;
#[cfg(feature = "lab")]
mod bench_probes;
mod cpu_engine;
mod error;
pub mod gpu;
mod guarded;
pub mod inputs;
pub mod reference;
pub mod stats;
mod vulkan;

use std::borrow::Cow;
use std::sync::Arc;

/// Every `DUALSCOPE_*` switch, read once per process (docs/switches.md).
pub use crate::vk::switches::{Switches, switches};
use cpu_engine::CpuEngine;
pub use error::EngineError;
pub use guarded::Guarded;
use vulkan::VulkanEngine;
pub use vulkan::open_context;

use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::{Carry, LossScale, OptimState, StepOptions, StepReport};
use crate::step::{GemmChoice, Precision};
use crate::vk::{Context, Timing};

/// Which engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// The CPU reference (float32 here).
    Cpu,
    Vulkan,
}

/// How the Vulkan engine runs a step: its precision, the kernel choice of
/// the mixed step's products, and how a step is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VulkanOptions {
    pub precision: Precision,
    pub gemm: GemmChoice,
    /// `Span` (each step as a whole: what `train` runs) or `PerDispatch`
    /// (per-kernel device times, at some cost).
    pub timing: Timing,
}

impl Default for VulkanOptions {
    fn default() -> Self {
        VulkanOptions { precision: Precision::F32, gemm: GemmChoice::Auto, timing: Timing::Span }
    }
}

/// How the Vulkan engine submits a step (the CPU ignores it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submit {
    /// Replay the step recorded for an earlier batch of the same shape (what
    /// `train` runs).
    Replay,
    /// Record the step anew (what the GUI's speed run times).
    Record,
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

/// One step's gradient norms (unscaled, before clipping), per tensor in
/// canonical order, and the global one.
#[derive(Clone, Debug, PartialEq)]
pub struct Norms {
    pub global: f64,
    pub tensors: Vec<(String, f64)>,
}

/// The testing aids behind `train --inject` (and `--inject-nan-at`,
/// `--inject-spike-at`): what is done to one step's gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poison {
    /// One gradient value NaN.
    Nan,
    /// Every gradient value × 1e4 (a finite outlier).
    Spike,
    /// A silent data corruption: the top exponent bit of the largest-magnitude
    /// value of `gru.weight_hh_l0`'s gradient flipped (a gradient below 2 in
    /// magnitude, as they are, becomes 2^128 times larger: huge, finite).
    BitFlip,
}

/// The tensor a [`Poison::BitFlip`] hits.
pub const BIT_FLIP_TENSOR: &str = "gru.weight_hh_l0";

/// Spoils `grads` as `kind` says. `scale` is the loss scale `grads` carry
/// (the CPU holds `S·g`): the bit is flipped in the unscaled value `g`, so
/// that both engines plant the same corruption (with S > 1 the CPU's scaled
/// value may then overflow to infinity).
fn poison(grads: &mut Params<f32>, kind: Poison, scale: f64) {
    match kind {
        Poison::Nan => grads.head_bias.data[0] = f32::NAN,
        Poison::Spike => grads.tensors_mut().into_iter().for_each(|t| t.data.iter_mut().for_each(|x| *x *= 1e4)),
        Poison::BitFlip => {
            let data = &mut grads.gru[0].w_hh.data;
            let Some(i) = (0..data.len()).max_by(|&a, &b| data[a].abs().total_cmp(&data[b].abs())) else {
                return;
            };
            let s = scale as f32;
            let flipped = f32::from_bits((data[i] / s).to_bits() ^ (1 << 30));
            data[i] = flipped * s;
        }
    }
}

/// Per-tensor and global norms of `grads / scale`, in float64, canonical
/// order (the controller's, and replay's for each of its runs).
pub fn norms_of<T: crate::tensor::Real>(cfg: &Config, grads: &Params<T>, scale: f64) -> Norms {
    let mut total = 0.0;
    let tensors = grads
        .named(cfg)
        .into_iter()
        .map(|(name, t)| {
            let ss: f64 = t.data.iter().map(|x| x.f64() * x.f64()).sum();
            total += ss;
            (name, ss.sqrt() / scale)
        })
        .collect();
    Norms { global: total.sqrt() / scale, tensors }
}

/// Per-tensor and global norms from each tensor's sum of squares `sumsq` of
/// gradients that carry the loss scale `scale` (float64, canonical order: the
/// global sum adds the tensors' as [`norms_of`] does).
pub fn norms_from_sumsq(names: impl Iterator<Item = String>, sumsq: &[f64], scale: f64) -> Norms {
    let mut total = 0.0;
    let tensors = names
        .zip(sumsq)
        .map(|(name, &ss)| {
            total += ss;
            (name, ss.sqrt() / scale)
        })
        .collect();
    Norms { global: total.sqrt() / scale, tensors }
}

/// One step's gradients, computed and not yet applied (see [`Engine::compute`]).
pub struct Pending {
    pub loss: f64,
    pub n_targets: usize,
    pub capped: usize,
    /// Unscaled, before clipping: on the host in float64 (the CPU, and
    /// Vulkan's host-norms path), or from the device's per-tensor sums of
    /// squares (float-float, see `vk::engine::DeviceNorms`).
    pub norms: Norms,
    /// The loss scale the gradients were computed with.
    pub scale: f64,
    /// CPU: `∂(S·loss)/∂θ` as backward left it; Vulkan on the host-norms
    /// path: the unscaled gradients read back (still in the device's gradient
    /// buffer unless `poisoned`); `None`: Vulkan's split step, the gradients
    /// only on the device (scaled, as backward left them).
    grads: Option<Params<f32>>,
    poisoned: bool,
    /// Vulkan: the device milliseconds of the submit that computed them
    /// (with timestamps; `None` on the CPU).
    pub device_ms: Option<f64>,
}

impl Pending {
    /// Whether the gradients stayed on the device (Vulkan's split step:
    /// nothing but the norms was read back).
    pub fn on_device(&self) -> bool {
        self.grads.is_none()
    }
}

/// Loss and gradients of one batch, from either engine.
pub struct GradsOut {
    pub loss: f64,
    /// Unscaled.
    pub grad_norm: f64,
    pub n_targets: usize,
    pub capped: usize,
    /// Float32 whatever the arithmetic, unscaled.
    pub grads: Params<f32>,
}

impl<T: crate::tensor::Real> From<crate::cpu::GradsResult<T>> for GradsOut {
    fn from(r: crate::cpu::GradsResult<T>) -> Self {
        let grads = r.grads.cast::<f32>();
        GradsOut { loss: r.loss, grad_norm: r.grad_norm, n_targets: r.n_targets, capped: r.capped, grads }
    }
}

/// A step's device times (Vulkan with timestamps only; empty on the CPU).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepTimes {
    /// The whole step's device milliseconds.
    pub device_ms: Option<f64>,
    /// Device milliseconds per kernel, largest first (per-dispatch timing only).
    pub kernels: Vec<(String, f64)>,
}

/// Training steps on either engine, float32 master weights: the parameters,
/// the AdamW state and the loss scale live on the engine between steps.
pub enum Engine {
    Cpu(Box<CpuEngine>),
    Vulkan(Box<VulkanEngine>),
}

impl Engine {
    /// The CPU reference holding `state`.
    pub fn cpu(cfg: &Config, state: TrainState, opts: &StepOptions) -> Engine {
        Engine::Cpu(Box::new(CpuEngine::new(cfg, state, opts)))
    }

    /// The Vulkan engine on `ctx` holding `state`, its step as `vk` says.
    pub fn vulkan(
        ctx: &Arc<Context>,
        cfg: &Config,
        state: &TrainState,
        opts: &StepOptions,
        vk: &VulkanOptions,
    ) -> Result<Engine, EngineError> {
        Ok(Engine::Vulkan(Box::new(VulkanEngine::new(ctx, cfg, state, opts, vk)?)))
    }

    /// The engine `kind` holding `state`; Vulkan on the default device (see
    /// [`open_context`]). The CPU reference computes in f32 only: any other
    /// `vk.precision` is a usage error there.
    pub fn open(
        kind: EngineKind,
        cfg: &Config,
        state: TrainState,
        opts: &StepOptions,
        vk: &VulkanOptions,
    ) -> Result<Engine, EngineError> {
        Engine::open_on(kind, None, cfg, state, opts, vk)
    }

    /// [`Engine::open`] on the context `gpu` where one is given (the GUI's
    /// shared one), else on a context opened for it.
    pub fn open_on(
        kind: EngineKind,
        gpu: Option<&gpu::SharedGpu>,
        cfg: &Config,
        state: TrainState,
        opts: &StepOptions,
        vk: &VulkanOptions,
    ) -> Result<Engine, EngineError> {
        match kind {
            EngineKind::Cpu if vk.precision != Precision::F32 => Err(EngineError::Usage(format!(
                "--precision {}: the mixed-precision step runs on --engine gpu; the CPU reference computes in f32",
                vk.precision.name()
            ))),
            EngineKind::Cpu => Ok(Engine::cpu(cfg, state, opts)),
            EngineKind::Vulkan => match gpu {
                Some(g) => Engine::vulkan(&g.0, cfg, &state, opts, vk),
                None => Engine::vulkan(&Arc::new(open_context(None)?), cfg, &state, opts, vk),
            },
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self {
            Engine::Cpu(_) => EngineKind::Cpu,
            Engine::Vulkan(_) => EngineKind::Vulkan,
        }
    }

    pub fn config(&self) -> &Config {
        match self {
            Engine::Cpu(c) => c.config(),
            Engine::Vulkan(g) => g.engine().config(),
        }
    }

    /// The Vulkan engine itself, for what only it has (slots of named
    /// intermediates, probes); `None` for the CPU.
    pub fn as_vulkan(&self) -> Option<&crate::vk::engine::Engine> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Vulkan(g) => Some(g.engine()),
        }
    }

    /// Loss and unscaled gradients of `batch`, nothing applied (the CPU at
    /// loss scale 1, Vulkan at its current scale).
    pub fn grads(&mut self, batch: &Batch) -> Result<GradsOut, EngineError> {
        match self {
            Engine::Cpu(c) => c.grads(batch),
            Engine::Vulkan(g) => g.grads(batch),
        }
    }

    /// One training step on `batch` (on Vulkan replayed: see [`Submit`]).
    pub fn step(&mut self, batch: &Batch) -> Result<StepReport, EngineError> {
        self.step_timed(batch, Submit::Replay).map(|r| r.0)
    }

    /// One training step on `batch`, with its device times.
    pub fn step_timed(&mut self, batch: &Batch, submit: Submit) -> Result<(StepReport, StepTimes), EngineError> {
        match self {
            Engine::Cpu(c) => Ok((c.step(batch)?, StepTimes::default())),
            Engine::Vulkan(g) => g.step(batch, submit),
        }
    }

    /// The first half of a step: loss, gradients and their norms on `batch`,
    /// nothing applied yet. `poison_it` spoils the gradients first (the
    /// `train --inject` testing aids).
    pub fn compute(&mut self, batch: &Batch, poison_it: Option<Poison>) -> Result<Pending, EngineError> {
        match self {
            Engine::Cpu(c) => c.compute(batch, poison_it),
            Engine::Vulkan(g) => g.compute(batch, poison_it),
        }
    }

    /// The second half: the optimizer (unscale, norm, guard, clip, AdamW, loss
    /// scale) on the gradients of `p`, as [`Engine::step`] would have done.
    pub fn apply(&mut self, p: Pending) -> Result<StepReport, EngineError> {
        match self {
            Engine::Cpu(c) => c.apply(p),
            Engine::Vulkan(g) => g.apply(p),
        }
    }

    /// The device milliseconds of the last [`Engine::apply`] (Vulkan with
    /// timestamps; `None` on the CPU).
    pub fn last_apply_ms(&self) -> Option<f64> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Vulkan(g) => g.last_apply_ms(),
        }
    }

    /// What computes the step's matrix products: the CPU reference, or the
    /// GPU kernel (`GemmPath::name`), with the step's precision.
    pub fn precision_and_path(&self) -> (&'static str, &'static str) {
        match self {
            Engine::Cpu(_) => ("f32", "cpu"),
            Engine::Vulkan(g) => (g.engine().precision().name(), g.engine().gemm_path().name()),
        }
    }

    /// The loss scale now.
    pub fn loss_scale(&self) -> Result<LossScale, EngineError> {
        match self {
            Engine::Cpu(c) => Ok(c.scale().clone()),
            Engine::Vulkan(g) => Ok(g.engine().loss_scale_and_step()?.0),
        }
    }

    /// The AdamW step counter now.
    pub fn optim_step(&self) -> Result<u64, EngineError> {
        match self {
            Engine::Cpu(c) => Ok(c.optim_step()),
            Engine::Vulkan(g) => Ok(g.engine().loss_scale_and_step()?.1),
        }
    }

    /// Replaces the loss scale (the whole GradScaler state), keeping the
    /// weights, the moments and the step counter (`train --inject
    /// f16_overflow@N` raises it for one step and puts it back).
    pub fn set_loss_scale(&mut self, scale: &LossScale) -> Result<(), EngineError> {
        match self {
            Engine::Cpu(c) => {
                c.set_scale(scale);
                Ok(())
            }
            Engine::Vulkan(g) => g.set_loss_scale(scale),
        }
    }

    /// Plants a fault of the Vulkan engine's catalogue in every step from now
    /// on (`None`: the correct engine again); the next step is recorded anew.
    /// The CPU reference has no planted faults: a usage error there.
    pub fn set_fault(&mut self, fault: Option<crate::step::Fault>) -> Result<(), EngineError> {
        match (self, fault) {
            (Engine::Cpu(_), None) => Ok(()),
            (Engine::Cpu(_), Some(f)) => Err(EngineError::Usage(format!(
                "fault {f}: engine faults are planted in the GPU engine; use --engine gpu"
            ))),
            (Engine::Vulkan(g), f) => {
                g.set_fault(f);
                Ok(())
            }
        }
    }

    /// Runs each stage in the precision of `text` (`STAGE=PREC,…`, see
    /// docs/precision.md) applied over the engine's own map; before the first
    /// batch. Returns the map. The CPU reference computes in f32 only: a map
    /// with any stage below f32 is a usage error there.
    pub fn apply_precision_map(
        &mut self,
        text: &str,
        choice: GemmChoice,
    ) -> Result<crate::step::PrecisionMap, EngineError> {
        let base = match self {
            Engine::Cpu(_) => crate::step::PrecisionMap::uniform(Precision::F32, self.config().layers),
            Engine::Vulkan(g) => g.engine().precision_map(),
        };
        let map = base.with(text).map_err(|e| EngineError::Usage(format!("--precision-map: {e}")))?;
        match self {
            Engine::Cpu(_) if map.is_mixed() => Err(EngineError::Usage(
                "--precision-map: stages below f32 run on --engine gpu; the CPU reference computes in f32".into(),
            )),
            Engine::Cpu(_) => Ok(map),
            Engine::Vulkan(g) => {
                g.set_precision_map(Some(map.clone()), choice)?;
                Ok(map)
            }
        }
    }

    /// The precision map a Vulkan engine was given (`apply_precision_map`);
    /// None on the CPU or without one.
    pub fn precision_map(&self) -> Option<crate::step::PrecisionMap> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Vulkan(g) => g.engine().precision_map_set().cloned(),
        }
    }

    /// The planted fault now (always `None` on the CPU).
    pub fn fault(&self) -> Option<crate::step::Fault> {
        self.as_vulkan().and_then(|e| e.fault())
    }

    /// Changes the learning rate, keeping everything else.
    pub fn set_lr(&mut self, lr: f64) -> Result<(), EngineError> {
        match self {
            Engine::Cpu(c) => {
                c.set_lr(lr);
                Ok(())
            }
            Engine::Vulkan(g) => g.set_lr(lr),
        }
    }

    /// The whole training state (read back from the device for Vulkan).
    pub fn snapshot(&self) -> Result<TrainState, EngineError> {
        match self {
            Engine::Cpu(c) => Ok(c.snapshot()),
            Engine::Vulkan(g) => g.snapshot(),
        }
    }

    /// Puts `s` back (a rollback).
    pub fn restore(&mut self, s: &TrainState) -> Result<(), EngineError> {
        match self {
            Engine::Cpu(c) => {
                c.restore(s);
                Ok(())
            }
            Engine::Vulkan(g) => g.restore(s),
        }
    }

    /// The current parameters (read back from the device for Vulkan).
    pub fn params(&self) -> Result<Cow<'_, Params<f32>>, EngineError> {
        match self {
            Engine::Cpu(c) => Ok(Cow::Borrowed(c.params())),
            Engine::Vulkan(g) => g.params().map(Cow::Owned),
        }
    }

    /// The state each row of the next batches starts from (`docs/carry-state.md`):
    /// `Some` turns carrying on, and every step, `compute` or `grads` from
    /// now on leaves the state it ends with in [`Engine::final_state`];
    /// `None` (the default) is docs/model.md's start from zero. The state stays
    /// what was set until it is set again.
    pub fn set_carry(&mut self, carry: Option<Carry<f32>>) -> Result<(), EngineError> {
        if let Some(c) = &carry {
            c.check(self.config(), c.rows).map_err(crate::cpu::CpuError::Carry)?;
        }
        match self {
            Engine::Cpu(c) => {
                c.set_carry(carry);
                Ok(())
            }
            Engine::Vulkan(g) => g.set_carry(carry),
        }
    }

    /// The state the last batch ended with (while carrying; else `None`).
    pub fn final_state(&self) -> Option<&Carry<f32>> {
        match self {
            Engine::Cpu(c) => c.final_state(),
            Engine::Vulkan(g) => g.final_state(),
        }
    }

    /// A note for the user, once per engine: why the Vulkan recurrence fell
    /// back from its default (known after the first [`Engine::step`]).
    pub fn take_note(&mut self) -> Option<String> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Vulkan(g) => g.take_note(),
        }
    }
}

#[cfg(test)]
mod tests;

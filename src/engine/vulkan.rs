//! The Vulkan engine behind [`Engine::Vulkan`](super::Engine::Vulkan): the
//! device's context, the engine on it, and the checks every result passes
//! (validation errors fail a run before anything is written).

use std::sync::Arc;

use super::{
    EngineError, GradsOut, Pending, Poison, StepTimes, Submit, TrainState, VulkanOptions, norms_from_sumsq, norms_of,
    poison,
};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::{StepOptions, StepReport};
use crate::vk::engine::{Engine, FlatBuf, Plan, Replay, Stage};
use crate::vk::{Context, ContextOptions};

/// Opens the Vulkan device (`device`, else `DUALSCOPE_VK_DEVICE`, else the
/// best one); any failure is [`EngineError::NoVulkan`].
pub fn open_context(device: Option<usize>) -> Result<Context, EngineError> {
    Context::new(&ContextOptions { device, validation: None }).map_err(EngineError::NoVulkan)
}

/// An open Vulkan device and the engine on it.
pub struct VulkanEngine {
    ctx: Arc<Context>,
    engine: Engine,
    /// The recurrence's fallback was reported (once per engine).
    told_fallback: bool,
    /// The state the last batch left, while carrying one.
    last: Option<crate::step::Carry<f32>>,
    /// The device milliseconds of the last `apply`.
    last_apply_ms: Option<f64>,
}

impl VulkanEngine {
    /// Uploads `state` to an engine on `ctx` whose step runs as `vk` says.
    pub(super) fn new(
        ctx: &Arc<Context>,
        cfg: &Config,
        state: &TrainState,
        opts: &StepOptions,
        vk: &VulkanOptions,
    ) -> Result<Self, EngineError> {
        let path = crate::vk::gemm::path_for(ctx, vk.precision, vk.gemm)?;
        let mut engine = Engine::new(ctx, cfg, &state.params, opts, &state.scale, path)?;
        engine.set_timing(vk.timing);
        engine.set_optim_state(&state.optim, &state.scale)?;
        let g = VulkanEngine { ctx: ctx.clone(), engine, told_fallback: false, last: None, last_apply_ms: None };
        g.check_validation()?;
        Ok(g)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// A run with validation errors has no trustworthy result.
    fn check_validation(&self) -> Result<(), EngineError> {
        match self.ctx.validation_errors() {
            0 => Ok(()),
            n => Err(EngineError::Validation(n)),
        }
    }

    pub(super) fn grads(&mut self, batch: &Batch) -> Result<GradsOut, EngineError> {
        let r = self.engine.grads(batch)?;
        self.last = self.engine.final_state()?;
        self.check_validation()?;
        Ok(GradsOut { loss: r.loss, grad_norm: r.grad_norm, n_targets: r.n_targets, capped: r.capped, grads: r.grads })
    }

    pub(super) fn step(&mut self, batch: &Batch, submit: Submit) -> Result<(StepReport, StepTimes), EngineError> {
        let (report, timings) = match submit {
            Submit::Replay => self.engine.train_step(batch, Replay::Yes)?,
            Submit::Record => self.engine.train_step(batch, Replay::No)?,
        };
        self.last = self.engine.final_state()?;
        self.check_validation()?;
        Ok((report, StepTimes { device_ms: timings.total_ms(), kernels: timings.per_kernel_ms() }))
    }

    pub(super) fn take_note(&mut self) -> Option<String> {
        let why = self.engine.recurrence_fallback().filter(|_| !self.told_fallback)?;
        self.told_fallback = true;
        Some(why.to_string())
    }

    pub(super) fn compute(&mut self, batch: &Batch, poison_it: Option<Poison>) -> Result<Pending, EngineError> {
        if poison_it.is_none() && self.engine.split_available() {
            return self.compute_split(batch);
        }
        let (scale, _, _) = self.engine.loss_scale_and_step()?;
        let r = self.engine.grads(batch)?;
        self.last = self.engine.final_state()?;
        self.check_validation()?;
        let mut grads = r.grads;
        if let Some(kind) = poison_it {
            poison(&mut grads, kind, 1.0);
        }
        let norms = norms_of(self.engine.config(), &grads, 1.0);
        Ok(Pending {
            loss: r.loss,
            n_targets: r.n_targets,
            capped: r.capped,
            norms,
            scale: scale.scale,
            grads: Some(grads),
            poisoned: poison_it.is_some(),
            device_ms: None,
        })
    }

    /// [`VulkanEngine::compute`] without gradient read-back: forward, backward
    /// and the per-tensor norms in one submit; the norms from the device's
    /// sums of squares, unscaled here.
    fn compute_split(&mut self, batch: &Batch) -> Result<Pending, EngineError> {
        let (c, timings) = self.engine.compute_split(batch)?;
        self.last = self.engine.final_state()?;
        self.check_validation()?;
        let names = self.engine.layout().entries.iter().map(|e| e.name.clone());
        Ok(Pending {
            loss: c.loss,
            n_targets: c.n_targets,
            capped: c.capped,
            norms: norms_from_sumsq(names, &c.norms.sumsq, c.scale),
            scale: c.scale,
            grads: None,
            poisoned: false,
            device_ms: timings.total_ms(),
        })
    }

    pub(super) fn apply(&mut self, p: Pending) -> Result<StepReport, EngineError> {
        let Pending { loss, n_targets, capped, grads, poisoned, scale, .. } = p;
        let Some(mut grads) = grads else {
            // The split step: the gradients compute left are on the device.
            let (report, timings) = self.engine.apply_split()?;
            self.check_validation()?;
            self.last_apply_ms = timings.total_ms();
            return Ok(StepReport { loss, n_targets, capped_tokens: capped, optim: report.optim });
        };
        // The device's gradient buffer holds the unscaled gradients of
        // `compute`; the optimizer stage unscales again, so they go back
        // scaled (S is a power of two: exact).
        if poisoned || scale != 1.0 {
            if scale != 1.0 {
                let s = scale as f32;
                grads.tensors_mut().into_iter().for_each(|t| t.data.iter_mut().for_each(|x| *x *= s));
            }
            let flat = self.engine.layout().flatten(&grads);
            self.engine.write_flat(FlatBuf::Grads, &flat)?;
        }
        let (timings, _) = self.engine.run(Plan::Stages(&[Stage::Optim]))?;
        self.check_validation()?;
        self.last_apply_ms = timings.total_ms();
        let optim = self.engine.report()?.optim;
        Ok(StepReport { loss, n_targets, capped_tokens: capped, optim })
    }

    /// The device milliseconds of the last `apply` (with timestamps).
    pub(super) fn last_apply_ms(&self) -> Option<f64> {
        self.last_apply_ms
    }

    pub(super) fn set_lr(&mut self, lr: f64) -> Result<(), EngineError> {
        if self.engine.options().lr != lr {
            let opts = StepOptions { lr, ..*self.engine.options() };
            self.engine.set_options(&opts)?;
            self.check_validation()?;
        }
        Ok(())
    }

    /// Writes `scale` into the state words, keeping the step counter and the
    /// skipped-step count (the recorded step reads them there: no re-record).
    pub(super) fn set_loss_scale(&mut self, scale: &crate::step::LossScale) -> Result<(), EngineError> {
        let (_, step, skipped) = self.engine.loss_scale_and_step()?;
        self.engine.write_state(scale, step, skipped)?;
        self.check_validation()
    }

    /// The state the next batches start from (written with each batch).
    pub(super) fn set_carry(&mut self, carry: Option<crate::step::Carry<f32>>) -> Result<(), EngineError> {
        self.engine.set_carry(carry);
        self.last = None;
        Ok(())
    }

    pub(super) fn final_state(&self) -> Option<&crate::step::Carry<f32>> {
        self.last.as_ref()
    }

    /// Each stage's precision (see `vk::engine::Engine::set_precision_map`).
    pub(super) fn set_precision_map(
        &mut self,
        map: Option<crate::step::PrecisionMap>,
        choice: crate::step::GemmChoice,
    ) -> Result<(), EngineError> {
        Ok(self.engine.set_precision_map(map, choice)?)
    }

    pub(super) fn set_fault(&mut self, fault: Option<crate::step::Fault>) {
        self.engine.set_fault(fault);
    }

    pub(super) fn snapshot(&self) -> Result<TrainState, EngineError> {
        let e = &self.engine;
        let params = e.read_params(FlatBuf::Params)?;
        let optim = e.optim_state()?;
        let scale = e.loss_scale_and_step()?.0;
        self.check_validation()?;
        Ok(TrainState { params, optim, scale })
    }

    pub(super) fn restore(&mut self, s: &TrainState) -> Result<(), EngineError> {
        self.engine.set_params(&s.params)?;
        self.engine.set_optim_state(&s.optim, &s.scale)?;
        self.check_validation()
    }

    pub(super) fn params(&self) -> Result<Params<f32>, EngineError> {
        let p = self.engine.read_params(FlatBuf::Params)?;
        self.check_validation()?;
        Ok(p)
    }
}

//! The CPU reference behind [`Engine::Cpu`](super::Engine::Cpu): its
//! training state and the step, the two-phase step and the gradients on it.

use super::{EngineError, GradsOut, Pending, Poison, TrainState, norms_of, poison};
use crate::cpu;
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::{Carry, LossScale, OptimState, StepOptions, StepReport};

/// The CPU reference's training state.
pub struct CpuEngine {
    cfg: Config,
    params: Params<f32>,
    state: OptimState<f32>,
    scale: LossScale,
    opts: StepOptions,
    /// The state the next batch starts from, and the one the last batch
    /// left (both `None` unless the caller carries state).
    carry: Option<Carry<f32>>,
    last: Option<Carry<f32>>,
}

impl CpuEngine {
    pub(super) fn new(cfg: &Config, s: TrainState, opts: &StepOptions) -> Self {
        CpuEngine {
            cfg: cfg.clone(),
            params: s.params,
            state: s.optim,
            scale: s.scale,
            opts: *opts,
            carry: None,
            last: None,
        }
    }

    pub(super) fn set_carry(&mut self, carry: Option<Carry<f32>>) {
        self.carry = carry;
        self.last = None;
    }

    pub(super) fn final_state(&self) -> Option<&Carry<f32>> {
        self.last.as_ref()
    }

    /// Keeps the state a batch left when the caller carries state.
    fn keep(&mut self, next: Carry<f32>) {
        if self.carry.is_some() {
            self.last = Some(next);
        }
    }

    pub(super) fn config(&self) -> &Config {
        &self.cfg
    }

    pub(super) fn params(&self) -> &Params<f32> {
        &self.params
    }

    pub(super) fn scale(&self) -> &LossScale {
        &self.scale
    }

    pub(super) fn optim_step(&self) -> u64 {
        self.state.step
    }

    pub(super) fn set_scale(&mut self, scale: &LossScale) {
        self.scale = scale.clone();
    }

    pub(super) fn set_lr(&mut self, lr: f64) {
        self.opts.lr = lr;
    }

    /// Loss and gradients at loss scale 1.
    pub(super) fn grads(&mut self, batch: &Batch) -> Result<GradsOut, EngineError> {
        let (r, next) = cpu::grads_with(&self.cfg, &self.params, batch, self.opts.token_cap, self.carry.as_ref())?;
        self.keep(next);
        Ok(r.into())
    }

    pub(super) fn step(&mut self, batch: &Batch) -> Result<StepReport, EngineError> {
        let c = &mut *self;
        let carry = c.carry.as_ref();
        let (r, next) = cpu::train_step_with(&c.cfg, &mut c.params, &mut c.state, &mut c.scale, batch, &c.opts, carry)?;
        self.keep(next);
        Ok(r)
    }

    pub(super) fn compute(&mut self, batch: &Batch, poison_it: Option<Poison>) -> Result<Pending, EngineError> {
        let f = cpu::forward_with(&self.cfg, &self.params, batch, self.carry.as_ref())?;
        let g = cpu::backward(&self.cfg, &self.params, batch, &f, self.scale.scale, self.opts.token_cap);
        self.keep(f.final_state(&self.cfg));
        let mut grads = g.grads;
        if let Some(kind) = poison_it {
            poison(&mut grads, kind, self.scale.scale);
        }
        Ok(Pending {
            loss: f.loss,
            n_targets: f.n_targets,
            capped: g.capped,
            norms: norms_of(&self.cfg, &grads, self.scale.scale),
            scale: self.scale.scale,
            grads: Some(grads),
            poisoned: poison_it.is_some(),
            device_ms: None,
        })
    }

    pub(super) fn apply(&mut self, p: Pending) -> Result<StepReport, EngineError> {
        let Pending { loss, n_targets, capped, grads, .. } = p;
        // Only a GPU engine's split step leaves its gradients on the device.
        let Some(mut grads) = grads else {
            return Err(EngineError::Usage("apply: these gradients live on a GPU engine, not this CPU one".into()));
        };
        let c = self;
        let optim = cpu::apply_step(&c.cfg, &mut c.params, &mut grads, &mut c.state, &mut c.scale, &c.opts);
        Ok(StepReport { loss, n_targets, capped_tokens: capped, optim })
    }

    pub(super) fn snapshot(&self) -> TrainState {
        TrainState { params: self.params.clone(), optim: self.state.clone(), scale: self.scale.clone() }
    }

    pub(super) fn restore(&mut self, s: &TrainState) {
        self.params = s.params.clone();
        self.state = s.optim.clone();
        self.scale = s.scale.clone();
    }
}

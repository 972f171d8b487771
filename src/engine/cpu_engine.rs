//! The CPU reference behind [`Engine::Cpu`](super::Engine::Cpu): its
//! training state and the step, the two-phase step and the gradients on it.

use super::{EngineError, GradsOut, Pending, Poison, TrainState, norms_of, poison};
use crate::cpu::{self, LossScale, OptimState, StepOptions, StepReport};
use crate::dataset::Batch;
use crate::model::{Config, Params};

/// The CPU reference's training state.
pub struct CpuEngine {
    cfg: Config,
    params: Params<f32>,
    state: OptimState<f32>,
    scale: LossScale,
    opts: StepOptions,
}

impl CpuEngine {
    pub(super) fn new(cfg: &Config, s: TrainState, opts: &StepOptions) -> Self {
        CpuEngine { cfg: cfg.clone(), params: s.params, state: s.optim, scale: s.scale, opts: *opts }
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
    pub(super) fn grads(&self, batch: &Batch) -> Result<GradsOut, EngineError> {
        Ok(cpu::grads(&self.cfg, &self.params, batch, self.opts.token_cap)?.into())
    }

    pub(super) fn step(&mut self, batch: &Batch) -> Result<StepReport, EngineError> {
        let c = self;
        Ok(cpu::train_step(&c.cfg, &mut c.params, &mut c.state, &mut c.scale, batch, &c.opts)?)
    }

    pub(super) fn compute(&self, batch: &Batch, poison_it: Option<Poison>) -> Result<Pending, EngineError> {
        let f = cpu::forward(&self.cfg, &self.params, batch)?;
        let g = cpu::backward(&self.cfg, &self.params, batch, &f, self.scale.scale, self.opts.token_cap);
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
            grads,
            poisoned: poison_it.is_some(),
        })
    }

    pub(super) fn apply(&mut self, p: Pending) -> StepReport {
        let Pending { loss, n_targets, capped, mut grads, .. } = p;
        let c = self;
        let optim = cpu::apply_step(&c.cfg, &mut c.params, &mut grads, &mut c.state, &mut c.scale, &c.opts);
        StepReport { loss, n_targets, capped_tokens: capped, optim }
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

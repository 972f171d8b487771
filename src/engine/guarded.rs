//! One guarded training step, as `train`, the Speedup view and `bench
//! --controller` run it: the gradients and their norms first, a judge of the
//! norms (the training controller), then the optimizer unless the judge skips;
//! and what the front ends read of the GPU engine's tensors.

use super::{Engine, EngineError, Norms, Poison};
use crate::dataset::Batch;
use crate::step::{OptimOutcome, StepReport};

/// What a guarded step did.
#[derive(Clone, Debug)]
pub struct Guarded<V> {
    /// The step's report; for a step the judge skipped, the loss and norms
    /// with nothing applied (`skipped` stays `None`: the engine's guard did
    /// not act) and the loss scale unchanged.
    pub report: StepReport,
    pub norms: Norms,
    /// The judge's verdict on the norms.
    pub verdict: V,
    /// Device milliseconds of both submits (Vulkan with timestamps).
    pub device_ms: Option<f64>,
}

impl Engine {
    /// Computes `batch`'s gradients (spoilt by `poison_it` if set), asks
    /// `judge` about their norms, calls `before_apply` (for example to keep the
    /// state before a step that may be captured), then applies the optimizer
    /// unless `skips` says the verdict skips the step.
    pub fn guarded_step<V>(
        &mut self,
        batch: &Batch,
        poison_it: Option<Poison>,
        judge: impl FnOnce(&Norms) -> V,
        skips: impl Fn(&V) -> bool,
        before_apply: impl FnOnce(&mut Engine, &Norms, &V) -> Result<(), EngineError>,
    ) -> Result<Guarded<V>, EngineError> {
        let pending = self.compute(batch, poison_it)?;
        let norms = pending.norms.clone();
        let verdict = judge(&norms);
        before_apply(self, &norms, &verdict)?;
        let compute_ms = pending.device_ms;
        let (report, apply_ms) = if skips(&verdict) {
            let optim = OptimOutcome {
                grad_norm: norms.global,
                clipped: false,
                post_clip_norm: norms.global,
                skipped: None,
                scale: pending.scale,
                next_scale: pending.scale,
            };
            let report =
                StepReport { loss: pending.loss, n_targets: pending.n_targets, capped_tokens: pending.capped, optim };
            (report, Some(0.0))
        } else {
            (self.apply(pending)?, self.last_apply_ms())
        };
        Ok(Guarded { report, norms, verdict, device_ms: compute_ms.zip(apply_ms).map(|(a, b)| a + b) })
    }
}

impl Engine {
    /// Whether the GPU engine holds a tensor named `name` (a parameter, a
    /// gradient or an activation of the last step); `false` on the CPU.
    pub fn holds_on_device(&self, name: &str) -> bool {
        self.as_vulkan().is_some_and(|e| e.slot(name).is_some())
    }

    /// The GPU's values of the named tensors after the last step, in order
    /// (what the Sequence view and the carried-state check compare).
    pub fn read_device(&self, names: &[&str]) -> Result<Vec<Vec<f32>>, EngineError> {
        match self.as_vulkan() {
            Some(e) => Ok(e.read_named(names)?),
            None => Err(EngineError::Usage("the CPU engine holds no device tensors; use the GPU engine".into())),
        }
    }
}

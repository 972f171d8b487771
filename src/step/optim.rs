//! What a training step is asked to do and what it did: AdamW's options, its
//! moments, the loss scale, the guard's reasons and the step's report
//! (docs/model.md, "Training step"). Both engines take and give these.

use serde::{Deserialize, Serialize};

use crate::model::{Config, Params};
use crate::tensor::Real;

use super::{Precision, PrecisionMap};

/// AdamW hyper-parameters and the clip threshold; defaults from docs/model.md.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepOptions {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub clip: f64,
    /// The per-token guard's cap τ on the `W_ctx` gradient (None: off).
    pub token_cap: Option<f64>,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions { lr: 3e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.01, clip: 1.0, token_cap: None }
    }
}

/// AdamW moments and the step counter `k`.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimState<T> {
    pub m: Params<T>,
    pub v: Params<T>,
    pub step: u64,
}

impl<T: Real> OptimState<T> {
    pub fn new(cfg: &Config) -> Self {
        OptimState { m: Params::zeros(cfg), v: Params::zeros(cfg), step: 0 }
    }
}

/// The loss scale S with `torch.amp.GradScaler` semantics. `fixed()` is the
/// float32 mode (S = 1, never changes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScale {
    pub dynamic: bool,
    pub scale: f64,
    pub growth_tracker: u32,
    pub growth_interval: u32,
    pub growth_factor: f64,
    pub backoff_factor: f64,
}

impl LossScale {
    pub fn fixed() -> Self {
        LossScale {
            dynamic: false,
            scale: 1.0,
            growth_tracker: 0,
            growth_interval: 2000,
            growth_factor: 2.0,
            backoff_factor: 0.5,
        }
    }

    pub fn dynamic() -> Self {
        LossScale { dynamic: true, scale: 65536.0, ..Self::fixed() }
    }

    /// The loss scale a step in `precision` starts from: GradScaler's dynamic
    /// scale for the f16 step, none (S = 1) for f32 and bf16.
    pub fn for_precision(precision: Precision) -> Self {
        match precision {
            Precision::F16 => LossScale::dynamic(),
            Precision::F32 | Precision::Bf16 => LossScale::fixed(),
        }
    }

    /// The loss scale a step under `map` starts from: GradScaler's dynamic
    /// scale where a backward stage has f16 inputs
    /// ([`PrecisionMap::needs_loss_scale`]), else none (S = 1).
    pub fn for_map(map: &PrecisionMap) -> Self {
        if map.needs_loss_scale() { LossScale::dynamic() } else { LossScale::fixed() }
    }

    /// GradScaler's update: back off on a skipped step, grow after
    /// `growth_interval` good steps in a row.
    pub fn update(&mut self, skipped: bool) {
        if !self.dynamic {
            return;
        }
        if skipped {
            self.scale *= self.backoff_factor;
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.growth_interval {
                self.scale *= self.growth_factor;
                self.growth_tracker = 0;
            }
        }
    }
}

/// Why the guard skipped a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SkipReason {
    NonFiniteNorm,
    ZeroNorm,
    NonFinitePostClip,
    ZeroPostClip,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkipReason::NonFiniteNorm => "gradient norm is not finite",
            SkipReason::ZeroNorm => "gradient norm is zero",
            SkipReason::NonFinitePostClip => "post-clip gradient norm is not finite",
            SkipReason::ZeroPostClip => "post-clip gradient norm is zero",
        })
    }
}

/// What the optimizer part of a step did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimOutcome {
    /// Norm of the unscaled gradient before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
    /// Norm after clipping (equal to `grad_norm` when not clipped).
    pub post_clip_norm: f64,
    pub skipped: Option<SkipReason>,
    /// The loss scale this step's gradients carried, and the one for the next step.
    pub scale: f64,
    pub next_scale: f64,
}

/// What one training step did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub loss: f64,
    pub n_targets: usize,
    pub capped_tokens: usize,
    #[serde(flatten)]
    pub optim: OptimOutcome,
}

//! The training step after backward: unscale → float64 global norm → guard →
//! clip → post-clip check → AdamW (torch semantics) → dynamic loss scale
//! (GradScaler semantics). MODEL.md, "Training step".

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::{Config, Params, decays, param_specs};
use crate::tensor::Real;

/// AdamW hyper-parameters and the clip threshold; defaults from MODEL.md.
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
        LossScale { dynamic: false, scale: 1.0, growth_tracker: 0, growth_interval: 2000, growth_factor: 2.0, backoff_factor: 0.5 }
    }

    pub fn dynamic() -> Self {
        LossScale { dynamic: true, scale: 65536.0, ..Self::fixed() }
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

fn guard(norm: f64, non_finite: SkipReason, zero: SkipReason) -> Option<SkipReason> {
    if !norm.is_finite() {
        Some(non_finite)
    } else if norm == 0.0 {
        Some(zero)
    } else {
        None
    }
}

fn scale_all<T: Real>(g: &mut Params<T>, factor: T) {
    for t in g.tensors_mut() {
        t.data.par_iter_mut().for_each(|x| *x *= factor);
    }
}

/// Applies one optimizer step. `grads` holds `∂(S·loss)/∂θ` on entry and the
/// unscaled (and clipped) gradient on return. A skipped step changes no
/// parameter, no moment and not the step counter.
pub fn apply_step<T: Real>(
    cfg: &Config,
    params: &mut Params<T>,
    grads: &mut Params<T>,
    state: &mut OptimState<T>,
    scale: &mut LossScale,
    opts: &StepOptions,
) -> OptimOutcome {
    let s = scale.scale;
    // 2. Unscale before any norm is taken. S is a power of two, so this is exact.
    if s != 1.0 {
        scale_all(grads, T::of(1.0 / s));
    }
    // 3. Global norm in float64, canonical order.
    let grad_norm = grads.norm_f64();
    let mut out = OptimOutcome { grad_norm, clipped: false, post_clip_norm: grad_norm, skipped: None, scale: s, next_scale: s };
    // 4. Guard.
    out.skipped = guard(grad_norm, SkipReason::NonFiniteNorm, SkipReason::ZeroNorm);
    if out.skipped.is_none() && grad_norm > opts.clip {
        // 5. Clip, then check again.
        scale_all(grads, T::of(opts.clip / (grad_norm + 1e-6)));
        out.clipped = true;
        out.post_clip_norm = grads.norm_f64();
        out.skipped = guard(out.post_clip_norm, SkipReason::NonFinitePostClip, SkipReason::ZeroPostClip);
    }
    if out.skipped.is_none() {
        adamw(cfg, params, grads, state, opts);
    }
    scale.update(out.skipped.is_some());
    out.next_scale = scale.scale;
    out
}

/// `torch.optim.AdamW` (single-tensor path), with decay on 2-D weights other
/// than the embedding. Scalars are formed in float64 as Python does, then used
/// in the parameter's precision, in torch's order of operations.
fn adamw<T: Real>(cfg: &Config, params: &mut Params<T>, grads: &Params<T>, state: &mut OptimState<T>, o: &StepOptions) {
    state.step += 1;
    let k = state.step as i32;
    let bc1 = 1.0 - o.beta1.powi(k);
    let bc2 = 1.0 - o.beta2.powi(k);
    let step_size = T::of(o.lr / bc1);
    let bc2_sqrt = T::of(bc2.sqrt());
    let decay = T::of(1.0 - o.lr * o.weight_decay);
    let (w1, b2, w2, eps) = (T::of(1.0 - o.beta1), T::of(o.beta2), T::of(1.0 - o.beta2), T::of(o.eps));
    let specs = param_specs(cfg);
    let (ps, gs, ms, vs) = (params.tensors_mut(), grads.tensors(), state.m.tensors_mut(), state.v.tensors_mut());
    for ((((p, g), m), v), (name, shape)) in ps.into_iter().zip(gs).zip(ms).zip(vs).zip(&specs) {
        let wd = decays(name, shape);
        p.data
            .par_iter_mut()
            .zip(&g.data)
            .zip(m.data.par_iter_mut())
            .zip(v.data.par_iter_mut())
            .for_each(|(((p, &g), m), v)| {
                if wd {
                    *p *= decay;
                }
                *m += w1 * (g - *m); // lerp(m, g, 1 - β1)
                *v = *v * b2 + w2 * g * g;
                let denom = v.sqrt() / bc2_sqrt + eps;
                *p -= step_size * (*m / denom);
            });
    }
}

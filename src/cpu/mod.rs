//! The CPU reference engine: docs/model.md computed exactly, in f32 or f64,
//! multi-threaded (rayon) with vectorised GEMMs (the `gemm` crate).

pub(crate) mod attention;
mod backward;
mod carry;
pub(crate) mod forward;
mod math;
mod optim;
pub mod profile;
mod recurrence;
pub mod rounding;
mod trace;

pub use backward::{Backward, GruBwd, backward, backward_rounded};
pub use forward::{Forward, GruFwd, forward, forward_rounded, forward_with};
pub use optim::apply_step;
pub use rounding::{Round, Rounding};
pub use trace::Trace;

use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::Carry;
use crate::step::CarryError;
use crate::step::LossScale;
use crate::step::OptimState;
use crate::step::StepOptions;
use crate::step::StepReport;
use crate::tensor::Real;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuError {
    #[error("the batch has no target position (every row is shorter than 2 tokens)")]
    NoTargets,
    #[error(
        "the batch is too large: {need_mib} MiB of activations, over the {limit_mib} MiB limit (use shorter or fewer rows)"
    )]
    TooLarge { need_mib: u64, limit_mib: u64 },
    #[error("{0}")]
    Carry(CarryError),
}

/// Bytes the forward and backward intermediates of one step take (an estimate
/// within a few percent), so callers can refuse a batch that cannot fit.
pub fn activation_bytes(cfg: &Config, rows: usize, t: usize, elem: usize) -> u64 {
    let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
    let fwd = d + cfg.layers * (6 * h + 4 * h) + 4 * a + cfg.heads * cfg.window + v + 1;
    let bwd = v + 2 * h + 4 * a + 1 + cfg.layers * (h + 6 * h + h) + d;
    (rows as u64).saturating_mul(t as u64).saturating_mul((fwd + bwd) as u64).saturating_mul(elem as u64)
}

/// Loss and gradients of one batch (no optimizer step).
#[derive(Clone, Debug)]
pub struct GradsResult<T> {
    pub loss: f64,
    pub n_targets: usize,
    /// Unscaled gradient norm (float64 accumulation).
    pub grad_norm: f64,
    pub grads: Params<T>,
    pub capped: usize,
}

/// Forward and backward with S = 1.
pub fn grads<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    token_cap: Option<f64>,
) -> Result<GradsResult<T>, CpuError> {
    grads_with(cfg, p, batch, token_cap, None).map(|r| r.0)
}

/// [`grads`] from a carried state, with the state after the batch.
pub fn grads_with<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    token_cap: Option<f64>,
    carry: Option<&Carry<T>>,
) -> Result<(GradsResult<T>, Carry<T>), CpuError> {
    let f = forward_with(cfg, p, batch, carry)?;
    let g = backward(cfg, p, batch, &f, 1.0, token_cap);
    let next = Carry::after(cfg, &f, carry);
    let r = GradsResult {
        loss: f.loss,
        n_targets: f.n_targets,
        grad_norm: g.grads.norm_f64(),
        capped: g.capped,
        grads: g.grads,
    };
    Ok((r, next))
}

/// A forward pass, its backward pass, and the trace of both.
pub type Traced<T> = (Forward<T>, Backward<T>, Trace<T>);

/// Forward and backward with every intermediate recorded.
pub fn traced<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    loss_scale: f64,
    token_cap: Option<f64>,
) -> Result<Traced<T>, CpuError> {
    traced_with(cfg, p, batch, loss_scale, token_cap, None)
}

/// [`traced`] from a carried state.
pub fn traced_with<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    loss_scale: f64,
    token_cap: Option<f64>,
    carry: Option<&Carry<T>>,
) -> Result<Traced<T>, CpuError> {
    let f = forward_with(cfg, p, batch, carry)?;
    let g = backward(cfg, p, batch, &f, loss_scale, token_cap);
    let mut tr = Trace::new();
    tr.record_forward(cfg, &f);
    tr.record_backward(cfg, &f, &g);
    Ok((f, g, tr))
}

/// [`traced`] with each product's operands rounded as `rd` says (the
/// backward's at the loss scale `loss_scale`); `Rounding::exact()`: exactly
/// [`traced`]. The trace's gradients are those of `loss_scale · loss`.
pub fn traced_rounded<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    loss_scale: f64,
    rd: &Rounding,
) -> Result<Traced<T>, CpuError> {
    let f = forward_rounded(cfg, p, batch, None, rd)?;
    let g = backward_rounded(cfg, p, batch, &f, loss_scale, None, rd);
    let mut tr = Trace::new();
    tr.record_forward(cfg, &f);
    tr.record_backward(cfg, &f, &g);
    Ok((f, g, tr))
}

/// A whole training step: forward, backward of S·loss, then the optimizer.
pub fn train_step<T: Real>(
    cfg: &Config,
    params: &mut Params<T>,
    state: &mut OptimState<T>,
    scale: &mut LossScale,
    batch: &Batch,
    opts: &StepOptions,
) -> Result<StepReport, CpuError> {
    train_step_with(cfg, params, state, scale, batch, opts, None).map(|r| r.0)
}

/// [`train_step`] from a carried state, with the state after the batch (the
/// forward ran, so the state moves on even when the guard skips the update).
pub fn train_step_with<T: Real>(
    cfg: &Config,
    params: &mut Params<T>,
    state: &mut OptimState<T>,
    scale: &mut LossScale,
    batch: &Batch,
    opts: &StepOptions,
    carry: Option<&Carry<T>>,
) -> Result<(StepReport, Carry<T>), CpuError> {
    let f = forward_with(cfg, params, batch, carry)?;
    let mut g = backward(cfg, params, batch, &f, scale.scale, opts.token_cap);
    let next = Carry::after(cfg, &f, carry);
    let optim = apply_step(cfg, params, &mut g.grads, state, scale, opts);
    Ok((StepReport { loss: f.loss, n_targets: f.n_targets, capped_tokens: g.capped, optim }, next))
}

#[cfg(test)]
mod gradcheck;
#[cfg(test)]
mod gradcheck_carry;

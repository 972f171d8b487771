//! The runs of a replay and what is measured on them: the CPU references,
//! the GPU engine with the capture's state (and a planted fault), each run's
//! norms, its contract against the f64 CPU, whether two GPU runs gave the
//! same bits, and the first stage of the mixed step that overflowed.

// `!(err <= tol)` is deliberate: a NaN error must fail the check.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::TriageError;
use crate::capture::{Capture, Recorded};
use crate::cpu;
use crate::engine::EngineError;
use crate::engine::gpu::Context;
use crate::engine::gpu::GemmPath;
use crate::ladder::{self, Mode, Rung, compare, norm_tolerance};
use crate::model::{Config, Params};
use crate::step::Fault;
use crate::step::LossScale;
use crate::step::Precision;
use crate::step::{GemmChoice, PrecisionMap};
use crate::tensor::Real;
use crate::vk::engine::{Engine as VkEngine, GpuGrads};
use crate::vk::gemm::{self};

/// f16's largest finite value: a product input past it becomes infinite.
pub const F16_MAX: f64 = 65504.0;

/// One run of the step as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// `gpu f16 #1`, `gpu f32 #2`, `cpu f32`, `cpu f64`.
    pub name: String,
    /// `gpu` or `cpu`.
    pub engine: String,
    /// `f16`, `bf16`, `f32` or `f64`.
    pub precision: String,
    /// The loss scale the backward pass ran at (the gradients are unscaled).
    pub loss_scale: f64,
    pub loss: f64,
    /// Global gradient norm, unscaled, in f64.
    pub grad_norm: f64,
    /// Per-tensor gradient norms, unscaled, canonical order.
    pub tensor_norms: Vec<(String, f64)>,
    /// Non-finite gradient values.
    pub non_finite: usize,
    /// Against the f64 CPU reference (absent for the reference itself).
    pub vs_f64: Option<Contract>,
}

/// One gradient tensor against the f64 reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorCheck {
    /// The parameter's name (its gradient).
    pub tensor: String,
    pub rel_l2: f64,
    pub tolerance: f64,
    /// Values non-finite here but finite in f64.
    pub new_non_finite: usize,
}

impl TensorCheck {
    fn fails(&self) -> bool {
        self.new_non_finite > 0 || !(self.rel_l2 <= self.tolerance)
    }
}

/// A run against the f64 reference under a contract (f32 or mixed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub loss_rel_err: f64,
    pub loss_tolerance: f64,
    /// The tensor with the largest error relative to its tolerance.
    pub worst: Option<TensorCheck>,
    /// The tensors that leave the contract, worst first.
    pub failing: Vec<TensorCheck>,
    pub pass: bool,
}

impl Contract {
    pub fn loss_fails(&self) -> bool {
        !(self.loss_rel_err <= self.loss_tolerance)
    }

    /// `loss rel err 3.1e-7 (≤ 1e-5), worst tensor ctx.q.weight 2.0e-6 (≤ 1e-4)`.
    pub fn line(&self) -> String {
        let mut s = format!("loss rel err {:.2e} (gate {:.1e})", self.loss_rel_err, self.loss_tolerance);
        if let Some(w) = &self.worst {
            s += &format!(", worst tensor {} rel L2 {:.2e} (tolerance {:.1e})", w.tensor, w.rel_l2, w.tolerance);
            if w.new_non_finite > 0 {
                s += &format!(", {} values non-finite where f64 is finite", w.new_non_finite);
            }
        }
        s
    }
}

/// The f64 CPU reference of the step: loss, gradients, the logits' rms
/// (the mixed loss gate's scale).
pub(super) struct Reference {
    pub loss: f64,
    pub grads: Params<f64>,
    pub rms_logits: f64,
    pub result: RunResult,
}

/// Forward and backward in f64 on the capture's weights (`cpu::grads`, with
/// the logits kept for the mixed loss gate).
pub(super) fn reference(c: &Capture) -> Result<Reference, TriageError> {
    let cfg = &c.config;
    let p = c.state.params.cast::<f64>();
    // A carried step starts from its captured state (cast to f64, as the
    // ladder's reference reads the engines' f32 state).
    let carry = c.carry.as_ref().map(crate::step::cast_carry::<f64>);
    let f = cpu::forward_with(cfg, &p, &c.batch, carry.as_ref())?;
    let g = cpu::backward(cfg, &p, &c.batch, &f, 1.0, c.meta.optim.token_cap);
    let rms_logits = (f.logits.iter().map(|x| x * x).sum::<f64>() / f.logits.len().max(1) as f64).sqrt();
    let result = summarize(cfg, "cpu f64", "cpu", "f64", 1.0, f.loss, &g.grads);
    Ok(Reference { loss: f.loss, grads: g.grads, rms_logits, result })
}

/// A run's norms and non-finite count (no contract yet).
pub(super) fn summarize<T: Real>(
    cfg: &Config,
    name: &str,
    engine: &str,
    precision: &str,
    scale: f64,
    loss: f64,
    grads: &Params<T>,
) -> RunResult {
    let norms = crate::engine::norms_of(cfg, grads, 1.0);
    let non_finite = grads.tensors().iter().map(|t| t.data.iter().filter(|x| !x.f64().is_finite()).count()).sum();
    RunResult {
        name: name.into(),
        engine: engine.into(),
        precision: precision.into(),
        loss_scale: scale,
        loss,
        grad_norm: norms.global,
        tensor_norms: norms.tensors,
        non_finite,
        vs_f64: None,
    }
}

/// The rung whose outputs hold the gradient of parameter `name`.
fn grad_rung(cfg: &Config, name: &str) -> Rung {
    let g = format!("grad.{name}");
    Rung::MODEL.iter().copied().find(|r| r.outputs(cfg).contains(&g)).unwrap_or(Rung::EmbedBwd)
}

/// A gradient tensor's tolerance against f64 under a precision map (only
/// the stages it runs below f32 count), or without one in `precision`: its
/// backward rung's f32 tolerance, or the mixed bound of its product depth
/// through the whole step (chained: the replay runs the step end to end).
pub fn grad_tolerance(cfg: &Config, map: Option<&PrecisionMap>, precision: Precision, name: &str) -> f64 {
    let g = format!("grad.{name}");
    grad_rung(cfg, name).tolerance_for(map, precision, Mode::Chained, cfg, &g)
}

/// `grads` and `loss` against the reference under `map`'s contract (None:
/// `precision`'s step): every gradient tensor's rel L2 and the loss (the
/// ladder's end-to-end gate).
pub(super) fn contract(
    cfg: &Config,
    map: Option<&PrecisionMap>,
    precision: Precision,
    loss: f64,
    grads: &Params<f32>,
    r: &Reference,
) -> Contract {
    let want = r.grads.named(cfg);
    let mut checks: Vec<TensorCheck> = grads
        .named(cfg)
        .into_iter()
        .zip(want)
        .map(|((name, g), (_, w))| {
            let c = compare(&g.data, &w.data);
            TensorCheck {
                tolerance: grad_tolerance(cfg, map, precision, &name),
                tensor: name,
                rel_l2: c.rel_l2,
                new_non_finite: c.new_non_finite,
            }
        })
        .collect();
    let badness = |t: &TensorCheck| if t.new_non_finite > 0 { f64::INFINITY } else { t.rel_l2 / t.tolerance };
    checks.sort_by(|a, b| badness(b).total_cmp(&badness(a)));
    // Non-finite on both sides is agreement, as `compare` counts it.
    let loss_rel_err = if !loss.is_finite() && !r.loss.is_finite() {
        0.0
    } else {
        (loss - r.loss).abs() / r.loss.abs().max(f64::MIN_POSITIVE)
    };
    let loss_tolerance = crate::ladder::loss_tolerance_for(map, precision, cfg, r.rms_logits, r.loss);
    let failing: Vec<TensorCheck> = checks.iter().filter(|t| t.fails()).cloned().collect();
    let pass = failing.is_empty() && loss_rel_err <= loss_tolerance;
    Contract { loss_rel_err, loss_tolerance, worst: checks.into_iter().next(), failing, pass }
}

/// The kernel a GPU run of `precision` uses: the one the step ran on where
/// this device has it (`captured`, a `GemmPath::name`), else the automatic
/// choice, with a note saying so.
fn pick_path(
    ctx: &Context,
    precision: Precision,
    captured: Option<&str>,
) -> Result<(GemmPath, Option<String>), TriageError> {
    let vk = |e| TriageError::Engine(EngineError::from(e));
    if let Some(name) = captured {
        for choice in [GemmChoice::Auto, GemmChoice::Tiled, GemmChoice::CoopMat, GemmChoice::CoopMat64] {
            if let Ok(p) = gemm::path_for(ctx, precision, choice)
                && p.name() == name
            {
                return Ok((p, None));
            }
        }
    }
    let p = gemm::path_for(ctx, precision, GemmChoice::Auto).map_err(vk)?;
    let note =
        captured.map(|name| format!("the step ran its products on {name}; this device replays them on {}", p.name()));
    Ok((p, note))
}

/// A Vulkan engine holding the capture's weights at loss scale `scale`,
/// its products in `precision`, with `fault` planted; and a note when the
/// kernel is not the captured one.
pub(super) fn gpu_engine(
    ctx: &Arc<Context>,
    c: &Capture,
    precision: Precision,
    scale: &LossScale,
    fault: Option<Fault>,
) -> Result<(VkEngine, Option<String>), TriageError> {
    let vk = |e| TriageError::Engine(EngineError::from(e));
    let captured = (precision == c.meta.precision).then_some(c.meta.gemm_path.as_str());
    let (path, note) = pick_path(ctx, precision, captured)?;
    let mut e = VkEngine::new(ctx, &c.config, &c.state.params, &c.meta.optim, scale, path).map_err(vk)?;
    e.set_fault(fault);
    e.set_carry(c.carry.clone());
    Ok((e, note))
}

/// One forward and backward pass on the GPU from the capture's state: the
/// loss scale is written again first, so that every run starts alike.
pub(super) fn gpu_grads(e: &mut VkEngine, c: &Capture, scale: &LossScale) -> Result<GpuGrads, TriageError> {
    let vk = |e| TriageError::Engine(EngineError::from(e));
    e.write_state(scale, c.state.optim.step, 0).map_err(vk)?;
    e.grads(&c.batch).map_err(vk)
}

/// Whether two runs gave the same bits (loss and every gradient value);
/// `Some(how they differ)` when not.
pub(super) fn bit_diff(cfg: &Config, a: &GpuGrads, b: &GpuGrads) -> Option<String> {
    let mut differing = 0usize;
    let mut first: Option<String> = None;
    let mut max_abs = 0.0f64;
    for ((name, x), (_, y)) in a.grads.named(cfg).into_iter().zip(b.grads.named(cfg)) {
        let n = x.data.iter().zip(&y.data).filter(|(p, q)| p.to_bits() != q.to_bits()).count();
        for (p, q) in x.data.iter().zip(&y.data) {
            let d = (*p as f64 - *q as f64).abs();
            if d.is_finite() {
                max_abs = max_abs.max(d);
            }
        }
        if n > 0 && first.is_none() {
            first = Some(name);
        }
        differing += n;
    }
    let loss_same = a.loss.to_bits() == b.loss.to_bits();
    if loss_same && differing == 0 {
        return None;
    }
    let mut s = format!("loss {:.9} and {:.9}", a.loss, b.loss);
    if differing > 0 {
        s += &format!(
            "; {differing} gradient values differ (first in {}, largest |Δ| {max_abs:.3e})",
            first.unwrap_or_default()
        );
    }
    Some(s)
}

/// The first stage of the mixed step whose GPU tensor is non-finite or past
/// f16's range, from the engine's named intermediates after a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageFinding {
    /// The stage, as its rung's id (`loss`, `head_bwd`, …).
    pub stage: String,
    pub label: String,
    /// The tensor (a trace name, or `grad.` + a parameter).
    pub tensor: String,
    pub non_finite: usize,
    /// Finite values past ±65504 (f16 only).
    pub past_f16: usize,
    /// The largest finite |value|, as the engine holds it (scaled where the
    /// tensor carries the loss scale).
    pub max_abs: f64,
    /// The loss scale of the run.
    pub loss_scale: f64,
    /// Whether the tensor is multiplied by the loss scale.
    pub carries_scale: bool,
    /// The largest power-of-two loss scale that keeps this tensor within f16's
    /// range (a scaled tensor with finite values only).
    pub largest_safe_scale: Option<f64>,
}

impl StageFinding {
    pub fn line(&self) -> String {
        let what = match (self.non_finite, self.past_f16) {
            (0, n) => format!("{n} values past f16's {F16_MAX} (largest |x| {:.3e})", self.max_abs),
            (n, _) => format!("{n} non-finite values (largest finite |x| {:.3e})", self.max_abs),
        };
        let mut s = format!(
            "first stage out of range: {} ({}), tensor {}: {what} at loss scale {}",
            self.stage,
            self.label,
            self.tensor,
            show_scale(self.loss_scale)
        );
        if let Some(safe) = self.largest_safe_scale {
            s += &format!("; a scale of at most {} keeps it in range", show_scale(safe));
        }
        s
    }
}

/// `2^40` for a power of two, else the number.
pub fn show_scale(s: f64) -> String {
    let e = s.log2();
    if s > 0.0 && e.fract() == 0.0 && e.abs() < 1100.0 { format!("2^{e}") } else { format!("{s}") }
}

/// Whether the GPU holds `name` multiplied by the loss scale (the backward
/// pass's tensors before the optimizer unscales them).
fn carries_scale(name: &str) -> bool {
    name == "loss.dlogits" || name.contains(".d_")
}

/// Walks the step's stages in order (forward, then backward) over the
/// engine's tensors after its last run; the first tensor that is non-finite
/// or (in f16) past f16's range names the stage. `grads` are the run's
/// unscaled gradients (checked for non-finite values at their rung).
pub(super) fn find_stage(
    e: &VkEngine,
    precision: Precision,
    grads: &Params<f32>,
    scale: f64,
) -> Result<Option<StageFinding>, TriageError> {
    let cfg = e.config().clone();
    let stages: Vec<(Rung, Vec<String>)> =
        Rung::MODEL.iter().filter(|r| **r != Rung::Optim).map(|&r| (r, r.outputs(&cfg))).collect();
    let on_device: Vec<&str> = stages
        .iter()
        .flat_map(|(_, o)| o.iter())
        .map(String::as_str)
        .filter(|n| !n.starts_with("grad.") && e.slot(n).is_some())
        .collect();
    let read = e.read_named(&on_device).map_err(|e| TriageError::Engine(EngineError::from(e)))?;
    let named_grads = grads.named(&cfg);
    let values = |n: &str| -> Option<&[f32]> {
        match n.strip_prefix("grad.") {
            Some(p) => named_grads.iter().find(|(k, _)| k == p).map(|(_, t)| t.data.as_slice()),
            None => on_device.iter().position(|k| *k == n).map(|i| read[i].as_slice()),
        }
    };
    let f16 = precision == Precision::F16;
    for (rung, outputs) in &stages {
        for n in outputs {
            let Some(v) = values(n) else { continue };
            let non_finite = v.iter().filter(|x| !x.is_finite()).count();
            let max_abs = v.iter().filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs() as f64));
            let past_f16 = if f16 { v.iter().filter(|x| x.is_finite() && x.abs() as f64 > F16_MAX).count() } else { 0 };
            if non_finite == 0 && past_f16 == 0 {
                continue;
            }
            let carries = carries_scale(n);
            let safe = (carries && f16 && non_finite == 0 && max_abs > 0.0)
                .then(|| 2f64.powf((scale * F16_MAX / max_abs).log2().floor()));
            return Ok(Some(StageFinding {
                stage: rung.id().into(),
                label: rung.label().into(),
                tensor: n.clone(),
                non_finite,
                past_f16,
                max_abs,
                loss_scale: scale,
                carries_scale: carries,
                largest_safe_scale: safe,
            }));
        }
    }
    Ok(None)
}

/// `recorded: loss …, grad norm …; replayed (gpu f16 #1): …`.
pub(super) fn recorded_line(rec: &Recorded, r: &RunResult) -> String {
    let skipped = rec.skipped.as_ref().map(|s| format!(" (skipped: {s})")).unwrap_or_default();
    format!(
        "recorded: loss {:.6}, grad norm {:.4e}{skipped}; replayed ({}): loss {:.6}, grad norm {:.4e}",
        rec.loss, rec.grad_norm, r.name, r.loss, r.grad_norm
    )
}

/// Rule 4's fact: the record non-finite where the replay is finite (or the
/// other way round), or its loss or global norm off the replay's by more
/// than twice the contract (each is within the contract of the reference,
/// so two correct runs differ by at most twice it).
// `!(err <= tol)` is deliberate: a NaN error must fail the check.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
pub(super) fn recorded_check(
    rec: &Recorded,
    r: &RunResult,
    cfg: &crate::model::Config,
    precision: Precision,
    reference: &Reference,
) -> Option<String> {
    let rec_finite = rec.loss.is_finite() && rec.grad_norm.is_finite();
    let now_finite = r.loss.is_finite() && r.grad_norm.is_finite();
    match (rec_finite, now_finite) {
        (false, true) => {
            return Some(format!(
                "recorded loss {} and grad norm {}, replayed finite ({:.6}, {:.4e})",
                rec.loss, rec.grad_norm, r.loss, r.grad_norm
            ));
        }
        (true, false) => {
            return Some(format!("recorded finite, replayed loss {} and grad norm {}", r.loss, r.grad_norm));
        }
        (false, false) => return None,
        (true, true) => {}
    }
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(f64::MIN_POSITIVE);
    let loss_tol = 2.0 * ladder::loss_tolerance(precision, cfg, reference.rms_logits, reference.loss);
    let norm_tol = 2.0 * norm_tolerance(precision, cfg);
    let (dl, dn) = (rel(rec.loss, r.loss), rel(rec.grad_norm, r.grad_norm));
    let mut parts = Vec::new();
    if !(dl <= loss_tol) {
        parts.push(format!("loss recorded {:.6}, replayed {:.6} (rel {dl:.2e} > {loss_tol:.1e})", rec.loss, r.loss));
    }
    if !(dn <= norm_tol) {
        parts.push(format!(
            "grad norm recorded {:.4e}, replayed {:.4e} (rel {dn:.2e} > {norm_tol:.1e})",
            rec.grad_norm, r.grad_norm
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

//! Rungs 2–11 and the end-to-end gate: each stage of the training step on the
//! Vulkan engine against the CPU reference in f32 (the contract) and in f64
//! (which side is off).
//!
//! Isolated mode uploads the CPU's f32 values of a stage's inputs before the
//! GPU runs that stage alone, so each rung is judged by itself. Chained mode
//! runs the whole step on the GPU from its own outputs, as in training, and
//! compares every stage's outputs afterwards, so errors propagate.

use std::sync::Arc;

use serde::Serialize;

use super::compare::compare;
use super::{CaseResult, LadderError, Precision, RungResult, Status};
use crate::cpu::{self, LossScale, OptimState, StepOptions, Trace};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::vk::Context;
use crate::vk::engine::{Engine, Fault, FlatBuf, Stage};
use crate::vk::ops::{self, GemmChoice};

/// How the GPU side gets a stage's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// From the CPU's f32 values: every rung judged alone.
    #[default]
    Isolated,
    /// From the GPU's own earlier stages: errors propagate as in training.
    Chained,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Isolated => "isolated",
            Mode::Chained => "chained",
        }
    }
}

/// A GPU error this many times the f32 CPU engine's (both against f64), though
/// within the contract, is a warning: the kernel loses accuracy.
const WARN_RATIO: f64 = 16.0;
/// ... unless it is below this, where both sides are at rounding level.
const WARN_FLOOR: f64 = 1e-6;

/// The relative L2 tolerance of a tensor of `rung` against the f32 CPU engine.
///
/// Both engines compute in f32 with different summation orders, so they differ
/// by rounding: for a sum of `k` terms, about sqrt(k)·2^-24 relative, a few
/// 1e-7 for the model's widths (measured: 1e-7 to 4e-7 on lavapipe and the
/// H200). The forward rungs allow 1e-5, about 25× that; the GRU recurrence
/// 2e-5, since its rounding differences carry from step to step; `embed_fwd`
/// is a copy and must be exact. The backward rungs allow 1e-4, the contract of
/// `grads --engine gpu` (gradients sum over every position, and their inputs
/// already carry the forward's differences in chained mode). A wrong index,
/// gate order, window edge or missing term gives errors of order 1e-2 to 1.
pub fn tolerance(rung: &str, tensor: &str) -> f64 {
    match rung {
        "embed_fwd" => 0.0,
        "gru_fwd" => 2e-5,
        "attn_fwd" | "head_fwd" | "loss" => 1e-5,
        "optim" if tensor.starts_with("param.") || tensor == "grad_norm" => 1e-5,
        _ => 1e-4,
    }
}

/// The relative L2 tolerance of a tensor of `rung` against the f32 CPU engine
/// in `precision` and `mode`: [`tolerance`] for f32; for the mixed-precision
/// step, [`mixed_tolerance`].
pub fn tolerance_in(precision: Precision, mode: Mode, cfg: &Config, rung: &str, tensor: &str) -> f64 {
    if precision.is_mixed() { mixed_tolerance(precision, mode, cfg, rung, tensor) } else { tolerance(rung, tensor) }
}

/// How many matrix products lie on the longest path to `tensor` of `rung`:
/// from the rung's CPU inputs in isolated mode, from the batch in chained
/// mode. In the mixed step each adds its inputs' rounding (0 means the tensor
/// is computed in f32 only, as in the f32 step).
pub fn product_depth(cfg: &Config, mode: Mode, rung: &str, tensor: &str) -> usize {
    let layers = cfg.layers;
    let chained = mode == Mode::Chained;
    // The layer index in `gru.l{l}.…` or `…_l{l}`.
    let layer = |t: &str| -> usize {
        let digits = |s: &str| s.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok();
        t.strip_prefix("gru.l").and_then(digits).or_else(|| t.rsplit("_l").next().and_then(digits)).unwrap_or(0)
    };
    // The backward of layer l starts below the top at depth `base + (L-1-l)`
    // (d_h, d_gi, d_gh, the biases' gradients), one more for its products.
    let gru_bwd = |t: &str, base: usize| -> usize {
        let below = layers - 1 - layer(t).min(layers - 1);
        let product = t.ends_with(".d_in") || t.contains(".weight_");
        base + below + product as usize
    };
    let param_grad = |name: &str| -> usize {
        match name {
            "embed.weight" => 2 * layers + 4,
            n if n.starts_with("gru.") => gru_bwd(n, layers + 4),
            n if n.starts_with("ctx.") => layers + 4,
            "head.bias" => layers + 2,
            _ => layers + 3,
        }
    };
    match rung {
        "embed_fwd" => 0,
        "gru_fwd" => layer(tensor) + 1,
        "attn_fwd" if chained => layers + 1,
        "attn_fwd" => 1,
        "head_fwd" if chained => layers + 2,
        "head_fwd" => 1,
        "loss" if chained => layers + 2,
        "head_bwd" => {
            let product = !matches!(tensor, "grad.head.bias" | "ctx.token_norm");
            if chained { layers + 2 + product as usize } else { product as usize }
        }
        "attn_bwd" => {
            let product = !matches!(tensor, "ctx.d_q" | "ctx.d_k" | "ctx.d_v");
            if chained { layers + 3 + product as usize } else { product as usize }
        }
        "gru_bwd" => gru_bwd(tensor, if chained { layers + 4 } else { 0 }),
        "embed_bwd" if chained => 2 * layers + 4,
        "optim" if chained => {
            let name = ["param.", "adam.m.", "adam.v."].iter().find_map(|p| tensor.strip_prefix(p));
            name.map_or(2 * layers + 4, param_grad)
        }
        _ => 0,
    }
}

/// The bound of one product's error in the mixed step, in units of the
/// inputs' unit roundoff: the gemm rung's (f16: 2e-3 ≈ 4·2^-11).
pub const MIXED_PRODUCT_BOUND: f64 = 4.0;

/// The relative L2 tolerance of the mixed-precision step's tensors against the
/// f32 CPU engine (docs/gpu-step.md, "The mixed-precision contract"): with `u`
/// the unit roundoff of the products' inputs (2^-11 for f16, 2^-8 for
/// bfloat16) and `d` the [`product_depth`], `4·u·sqrt(d)` on top of the f32
/// tolerance, and the f32 tolerance alone where `d = 0`.
///
/// One product of rounded inputs is off by about 0.8·u (rms, relative; each
/// input carries ≤ u, ≈ 0.58·u rms): what the gemm rung measures, whatever
/// the length of the product, since the errors of its terms add like the
/// terms themselves; its f32 accumulation adds ~sqrt(k)·2^-24, negligible.
/// The stages between products (gates, softmax, recurrences, sums over
/// positions) are stable, so the errors of successive products add in
/// quadrature: sqrt(d)·0.8·u. The bound is 5× that. A wrong index, gate order
/// or missing term gives errors of order 1e-2 to 1.
pub fn mixed_tolerance(precision: Precision, mode: Mode, cfg: &Config, rung: &str, tensor: &str) -> f64 {
    match product_depth(cfg, mode, rung, tensor) {
        0 => tolerance(rung, tensor),
        d => MIXED_PRODUCT_BOUND * precision.unit_roundoff() * (d as f64).sqrt() + tolerance(rung, tensor),
    }
}

/// The trace tensors a rung compares.
pub fn outputs(rung: &str, cfg: &Config) -> Vec<String> {
    let layers = |fields: &[&str]| -> Vec<String> {
        (0..cfg.layers).flat_map(|l| fields.iter().map(move |f| format!("gru.l{l}.{f}"))).collect()
    };
    let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match rung {
        "embed_fwd" => v(&["embed.out"]),
        "gru_fwd" => layers(&["gi", "gh", "r", "z", "n", "h"]),
        "attn_fwd" => v(&["ctx.q", "ctx.k", "ctx.v", "ctx.attn", "ctx.c"]),
        "head_fwd" => v(&["head.logits"]),
        "loss" => v(&["loss.value", "loss.token", "loss.dlogits"]),
        "head_bwd" => v(&[
            "grad.head.tok.weight",
            "grad.head.ctx.weight",
            "grad.head.bias",
            "head.d_s",
            "head.d_c",
            "ctx.token_norm",
        ]),
        "attn_bwd" => v(&[
            "ctx.d_q",
            "ctx.d_k",
            "ctx.d_v",
            "grad.ctx.q.weight",
            "grad.ctx.k.weight",
            "grad.ctx.v.weight",
            "ctx.d_s",
        ]),
        "gru_bwd" => {
            let mut out = layers(&["d_h", "d_gi", "d_gh", "d_in"]);
            for l in 0..cfg.layers {
                for p in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                    out.push(format!("grad.gru.{p}_l{l}"));
                }
            }
            out
        }
        "embed_bwd" => v(&["grad.embed.weight"]),
        "optim" => {
            let mut out = vec!["grad_norm".to_string()];
            for (name, _) in crate::model::param_specs(cfg) {
                for prefix in ["param.", "adam.m.", "adam.v."] {
                    out.push(format!("{prefix}{name}"));
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The tensors a stage reads that an earlier stage wrote (uploaded from the
/// CPU in isolated mode).
fn inputs(rung: &str, cfg: &Config) -> Vec<String> {
    let top = format!("gru.l{}.h", cfg.layers - 1);
    let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match rung {
        "gru_fwd" => v(&["embed.out"]),
        "attn_fwd" => vec![top],
        "head_fwd" => vec![top, "ctx.c".into()],
        "loss" => v(&["head.logits"]),
        "head_bwd" => vec![top, "ctx.c".into(), "loss.dlogits".into()],
        "attn_bwd" => vec![top, "ctx.q".into(), "ctx.k".into(), "ctx.v".into(), "ctx.attn".into(), "head.d_c".into()],
        "gru_bwd" => {
            let mut out = v(&["embed.out", "head.d_s", "ctx.d_s"]);
            for l in 0..cfg.layers {
                for f in ["gh", "r", "z", "n", "h"] {
                    out.push(format!("gru.l{l}.{f}"));
                }
            }
            out
        }
        "embed_bwd" => v(&["embed.d_out"]),
        _ => Vec::new(),
    }
}

fn stage(rung: &str) -> Option<Stage> {
    Some(match rung {
        "embed_fwd" => Stage::EmbedFwd,
        "gru_fwd" => Stage::GruFwd,
        "attn_fwd" => Stage::AttnFwd,
        "head_fwd" => Stage::HeadFwd,
        "loss" => Stage::Loss,
        "head_bwd" => Stage::HeadBwd,
        "attn_bwd" => Stage::AttnBwd,
        "gru_bwd" => Stage::GruBwd,
        "embed_bwd" => Stage::EmbedBwd,
        "optim" => Stage::Optim,
        _ => return None,
    })
}

/// The CPU profile phases of a rung (`cpu::profile` span names).
fn cpu_phases(rung: &str) -> &'static [&'static str] {
    match rung {
        "embed_fwd" => &["embed_fwd"],
        "gru_fwd" => &["gru_fwd_input_gemm", "gru_fwd_recurrence"],
        "attn_fwd" => &["qkv_fwd", "attn_fwd"],
        "head_fwd" => &["head_fwd"],
        "loss" => &["loss_fwd", "loss_bwd"],
        "head_bwd" => &["head_bwd"],
        "attn_bwd" => &["attn_bwd", "qkv_bwd"],
        "gru_bwd" => &["gru_bwd_recurrence", "gru_bwd_weight_gemm"],
        "embed_bwd" => &["embed_bwd"],
        "optim" => &["optimizer"],
        _ => &[],
    }
}

/// The ladder's default batch: the config's B random windows of T+1 tokens
/// from `ds`, with every other row cut to two thirds of its length, so that
/// padding and masks are always exercised (with B ≥ 2).
pub fn default_batch(ds: &crate::dataset::Dataset, cfg: &Config, seed: u64) -> Result<Batch, LadderError> {
    let err = |e: &dyn std::fmt::Display| LadderError::Input(e.to_string());
    let full = ds.random_windows(seed, cfg.batch, cfg.seq_len + 1).map_err(|e| err(&e))?;
    let rows: Vec<Vec<u8>> = (0..full.rows)
        .map(|b| {
            let r = full.row(b);
            let keep = if b % 2 == 1 { (r.len() * 2 / 3).max(2) } else { r.len() };
            r[..keep.min(r.len())].to_vec()
        })
        .collect();
    Batch::from_rows(&rows).map_err(|e| err(&e))
}

/// What the ladder runs on.
#[derive(Clone, Debug)]
pub struct Setup {
    pub cfg: Config,
    pub params: Params<f32>,
    pub batch: Batch,
    pub opts: StepOptions,
    pub mode: Mode,
    pub precision: Precision,
}

/// The end-to-end step: the loss is the hard gate; the gradient-norm
/// difference is a diagnostic that names the tensors contributing most.
#[derive(Clone, Debug, Serialize)]
pub struct EndToEnd {
    pub status: Status,
    pub loss_cpu: f64,
    pub loss_gpu: f64,
    pub loss_rel_err: f64,
    pub loss_tolerance: f64,
    pub grad_norm_cpu: f64,
    pub grad_norm_gpu: f64,
    pub grad_norm_rel_diff: f64,
    pub grad_norm_tolerance: f64,
    /// ‖g_gpu − g_cpu‖ / ‖g_cpu‖ over all parameters.
    pub grads_rel_l2: f64,
    /// Tensors by their share of ‖g_gpu − g_cpu‖², largest first (top 5).
    pub top_contributors: Vec<Contributor>,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Contributor {
    pub tensor: String,
    /// Fraction of the squared difference of all gradients.
    pub share: f64,
    pub rel_l2: f64,
}

/// The loss gate (relative), MODEL.md's contract for an f32 engine.
pub const LOSS_TOLERANCE: f64 = 1e-5;
/// The gradient-norm diagnostic (relative).
pub const NORM_TOLERANCE: f64 = 1e-4;

/// The loss gate of the end-to-end step (relative): [`LOSS_TOLERANCE`] in
/// f32. In the mixed step, a position's loss moves by `⟨p − e_y, δ⟩` when its
/// logits move by `δ` (`p` the softmax, `e_y` the target), so by at most
/// `‖δ‖·sqrt(2)`; the logits' relative bound is that of their product depth
/// (L + 2), so the gate is `sqrt(2) · 4·u·sqrt(L+2) · rms(logits) / loss`
/// (no averaging over positions assumed), and never below the f32 gate.
pub fn loss_tolerance(precision: Precision, cfg: &Config, rms_logits: f64, loss: f64) -> f64 {
    match precision {
        Precision::F32 => LOSS_TOLERANCE,
        p => {
            let logits = mixed_tolerance(p, Mode::Chained, cfg, "head_fwd", "head.logits");
            (2f64.sqrt() * logits * rms_logits / loss.abs().max(f64::MIN_POSITIVE)).max(LOSS_TOLERANCE)
        }
    }
}

/// The gradient-norm diagnostic (relative): [`NORM_TOLERANCE`] in f32; in the
/// mixed step the bound of the deepest gradient (the embedding's), since
/// |‖g'‖ − ‖g‖| ≤ ‖g' − g‖.
pub fn norm_tolerance(precision: Precision, cfg: &Config) -> f64 {
    match precision {
        Precision::F32 => NORM_TOLERANCE,
        p => mixed_tolerance(p, Mode::Chained, cfg, "embed_bwd", "grad.embed.weight").max(NORM_TOLERANCE),
    }
}

/// One compared tensor with every side's values, for the inspector.
#[derive(Clone, Debug)]
pub struct RungTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub cpu: Vec<f32>,
    pub gpu: Vec<f32>,
    pub f64: Vec<f64>,
}

/// The GPU's tensors from one whole step, its device time, and each stage's.
#[derive(Clone)]
struct Chained {
    values: Vec<(String, Vec<f32>)>,
    total_ms: Option<f64>,
    stage_ms: Vec<(Stage, Option<f64>)>,
}

/// The loss scale of the `optim` rung's step: a power of two, so that the
/// scaled gradients are exact and a missing or misplaced unscale shows.
pub const OPTIM_SCALE: f64 = 1024.0;

/// The loss scale of the mixed-precision (f16) ladder's backward passes and
/// of its `optim` step: GradScaler's initial scale, what a mixed step starts
/// with (a power of two: scaling and unscaling are exact).
pub const MIXED_SCALE: f64 = 65536.0;

/// The loss scale the GPU's backward passes run at: 1 in f32 (and bfloat16,
/// whose range is f32's), [`MIXED_SCALE`] in f16. The ladder divides the
/// GPU's scaled tensors by it (exactly) before comparing.
pub fn backward_scale(precision: Precision) -> f64 {
    match precision {
        Precision::F16 => MIXED_SCALE,
        Precision::F32 | Precision::Bf16 => 1.0,
    }
}

/// The loss scale of the `optim` rung's step (and of the chained whole step):
/// [`OPTIM_SCALE`], or [`MIXED_SCALE`] in f16, where it is also the scale of
/// the step's f16 products.
pub fn step_scale(precision: Precision) -> f64 {
    match precision {
        Precision::F16 => MIXED_SCALE,
        Precision::F32 | Precision::Bf16 => OPTIM_SCALE,
    }
}

/// The state's loss scale for the `optim` step: fixed in f32 and bfloat16;
/// dynamic in f16 (GradScaler, from [`MIXED_SCALE`]), so that the rung also
/// checks the scale's update after a good step.
fn optim_scale(precision: Precision) -> LossScale {
    let dynamic = precision == Precision::F16;
    LossScale { scale: step_scale(precision), dynamic, ..LossScale::fixed() }
}

fn scaled<T: crate::tensor::Real>(g: &Params<T>, s: f64) -> Params<T> {
    let mut g = g.clone();
    for t in g.tensors_mut() {
        t.data.iter_mut().for_each(|x| *x *= T::of(s));
    }
    g
}

/// Whether the GPU holds `name` multiplied by the loss scale when the stage
/// that writes it has run: the gradients of the backward pass before the
/// optimizer unscales them (`ctx.token_norm` is computed unscaled).
fn carries_scale(name: &str) -> bool {
    name == "loss.dlogits" || name.starts_with("grad.") || name.contains(".d_")
}

/// The scores of the attention stress case reach this (exp overflows at ~88.7
/// in f32 unless the maximum is subtracted).
const STRESS_SCORE: f64 = 100.0;

/// Largest |score| of the CPU's attention, over every query and its window.
fn max_score(cfg: &Config, q: &[f32], k: &[f32], t: usize, b: usize) -> f64 {
    let (a, nh, w, dh) = (cfg.attn_dim, cfg.heads, cfg.window, cfg.head_dim());
    let scale = 1.0 / (dh as f64).sqrt();
    let mut m = 0.0f64;
    for ti in 0..t {
        for bi in 0..b {
            for hd in 0..nh {
                let qo = (ti * b + bi) * a + hd * dh;
                for j in (ti + 1).saturating_sub(w)..=ti {
                    let ko = (j * b + bi) * a + hd * dh;
                    let s: f64 = (0..dh).map(|i| q[qo + i] as f64 * k[ko + i] as f64).sum();
                    m = m.max((s * scale).abs());
                }
            }
        }
    }
    m
}

/// A prepared ladder: the CPU traces (f32 and f64), the optimizer's starting
/// state, and the engine.
pub struct ModelLadder {
    pub setup: Setup,
    engine: Engine,
    cpu32: Trace<f32>,
    cpu64: Trace<f64>,
    cpu_ms: Vec<(&'static str, f64)>,
    /// The optimizer state both sides start the `optim` rung from (after one
    /// CPU step, so that the moments are not zero), and what the CPU made of it.
    prior: OptimState<f32>,
    after: (Params<f32>, OptimState<f32>, f64),
    after64: (Params<f64>, OptimState<f64>, f64),
    /// The CPU's loss scale after that step (GradScaler's update in f16).
    after_scale: LossScale,
    /// Chained mode: the GPU's tensors from one whole step, read once.
    chained: Option<Chained>,
    /// The tensors of the rungs run so far, by rung.
    kept: Vec<(String, Vec<RungTensor>)>,
}

impl ModelLadder {
    /// The ladder of `setup`, its products on the kernel `GemmChoice::Auto`
    /// picks for the precision.
    pub fn new(ctx: &Arc<Context>, setup: Setup) -> Result<ModelLadder, LadderError> {
        Self::with_choice(ctx, setup, GemmChoice::Auto)
    }

    /// The ladder of `setup`, its products on the kernel `choice` picks for
    /// the precision (f32: the f32 step; f16, bf16: the mixed-precision step).
    pub fn with_choice(ctx: &Arc<Context>, setup: Setup, choice: GemmChoice) -> Result<ModelLadder, LadderError> {
        let path = ops::path_for(ctx, setup.precision, choice)?;
        let step = step_scale(setup.precision);
        let cfg = &setup.cfg;
        let cpu_err = |e: cpu::CpuError| LadderError::Input(e.to_string());
        cpu::profile::enable(true);
        let (_, bwd32, cpu32) =
            cpu::traced(cfg, &setup.params, &setup.batch, 1.0, setup.opts.token_cap).map_err(cpu_err)?;
        // The optimizer: one CPU step from zero moments gives the prior state.
        let g32 = bwd32.grads;
        let mut prior = OptimState::<f32>::new(cfg);
        {
            let (mut p, mut g) = (setup.params.clone(), g32.clone());
            cpu::apply_step(cfg, &mut p, &mut g, &mut prior, &mut LossScale::fixed(), &setup.opts);
        }
        // The rung's step carries a loss scale, so that unscaling is exercised.
        let (mut p1, mut g1, mut s1) = (setup.params.clone(), scaled(&g32, step), prior.clone());
        let mut after_scale = optim_scale(setup.precision);
        let out = cpu::apply_step(cfg, &mut p1, &mut g1, &mut s1, &mut after_scale, &setup.opts);
        let cpu_ms = cpu::profile::take();
        cpu::profile::enable(false);
        let after = (p1, s1, out.grad_norm);

        let p64: Params<f64> = setup.params.cast();
        let (_, bwd64, cpu64) = cpu::traced(cfg, &p64, &setup.batch, 1.0, setup.opts.token_cap).map_err(cpu_err)?;
        let g64 = bwd64.grads;
        let mut s64 = OptimState::<f64> { m: prior.m.cast(), v: prior.v.cast(), step: prior.step };
        let (mut q64, mut gg64) = (p64, scaled(&g64, step));
        let out64 = cpu::apply_step(cfg, &mut q64, &mut gg64, &mut s64, &mut optim_scale(setup.precision), &setup.opts);
        let after64 = (q64, s64, out64.grad_norm);

        let engine = Engine::new(ctx, cfg, &setup.params, &setup.opts, &LossScale::fixed(), path)?;
        let mut l = ModelLadder {
            setup,
            engine,
            cpu32,
            cpu64,
            cpu_ms,
            prior,
            after,
            after64,
            after_scale,
            chained: None,
            kept: Vec::new(),
        };
        l.engine.set_batch(&l.setup.batch)?;
        Ok(l)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, to change how it runs (its recurrence) before the rungs.
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The CPU f32 trace the ladder compares against.
    pub fn cpu_trace(&self) -> &Trace<f32> {
        &self.cpu32
    }

    /// Sets the moments and the step counter both sides start the `optim`
    /// rung from; returns the GPU's parameters as they are, for [`Self::restore`]
    /// after the step changed them.
    fn reset_optimizer(&self) -> Result<Vec<f32>, LadderError> {
        self.engine.set_optim_state(&self.prior, &optim_scale(self.setup.precision))?;
        Ok(self.engine.read_flat(FlatBuf::Params)?)
    }

    fn restore(&self, params: &[f32]) -> Result<(), LadderError> {
        Ok(self.engine.write_flat(FlatBuf::Params, params)?)
    }

    /// The CPU's values of a compared tensor: (f32, f64).
    fn cpu_values(&self, name: &str) -> (Vec<f32>, Vec<f64>) {
        let specs = |prefix: &str| name.strip_prefix(prefix);
        let pick32 = |p: &Params<f32>, n: &str| -> Vec<f32> {
            p.named(&self.setup.cfg).into_iter().find(|(k, _)| k == n).map(|(_, t)| t.data.clone()).unwrap_or_default()
        };
        let pick64 = |p: &Params<f64>, n: &str| -> Vec<f64> {
            p.named(&self.setup.cfg).into_iter().find(|(k, _)| k == n).map(|(_, t)| t.data.clone()).unwrap_or_default()
        };
        if name == "grad_norm" {
            return (vec![self.after.2 as f32], vec![self.after64.2]);
        }
        if let Some(n) = specs("param.") {
            return (pick32(&self.after.0, n), pick64(&self.after64.0, n));
        }
        if let Some(n) = specs("adam.m.") {
            return (pick32(&self.after.1.m, n), pick64(&self.after64.1.m, n));
        }
        if let Some(n) = specs("adam.v.") {
            return (pick32(&self.after.1.v, n), pick64(&self.after64.1.v, n));
        }
        let t32 = self.cpu32.get(name).map(|t| t.data.clone()).unwrap_or_default();
        let t64 = self.cpu64.get(name).map(|t| t.data.clone()).unwrap_or_default();
        (t32, t64)
    }

    /// The tensors the last run of `rung` compared (empty before it ran).
    pub fn tensors(&self, rung: &str) -> &[RungTensor] {
        self.kept.iter().find(|(r, _)| r == rung).map_or(&[], |(_, t)| t.as_slice())
    }

    /// Takes the kept tensors of `rung` out (the GUI moves them to its thread).
    pub fn take_tensors(&mut self, rung: &str) -> Vec<RungTensor> {
        match self.kept.iter().position(|(r, _)| r == rung) {
            Some(i) => self.kept.remove(i).1,
            None => Vec::new(),
        }
    }

    /// The shape of a compared tensor: the trace's, the parameter's, or flat.
    fn shape_of(&self, name: &str, len: usize) -> Vec<usize> {
        if let Some(t) = self.cpu32.get(name) {
            return t.shape.clone();
        }
        let param = ["param.", "adam.m.", "adam.v."].iter().find_map(|p| name.strip_prefix(p));
        param
            .and_then(|n| crate::model::param_specs(&self.setup.cfg).into_iter().find(|(k, _)| k == n))
            .map_or(vec![len], |(_, s)| s)
    }

    /// Reads GPU tensors by name (`loss.value` and `grad_norm` from the state);
    /// those that `scaled` says hold the loss scale `s` are divided by it.
    fn gpu_values(
        &self,
        names: &[String],
        s: f64,
        scaled: impl Fn(&str) -> bool,
    ) -> Result<Vec<Vec<f32>>, LadderError> {
        let tensors: Vec<&str> =
            names.iter().map(|s| s.as_str()).filter(|n| *n != "loss.value" && *n != "grad_norm").collect();
        let mut read = self.engine.read_named(&tensors)?.into_iter();
        let report = self.engine.report()?;
        let inv = (1.0 / s) as f32;
        Ok(names
            .iter()
            .map(|n| match n.as_str() {
                "loss.value" => vec![report.loss as f32],
                "grad_norm" => vec![report.optim.grad_norm as f32],
                _ => {
                    let mut v = read.next().expect("one per tensor");
                    if s != 1.0 && scaled(n) {
                        v.iter_mut().for_each(|x| *x *= inv);
                    }
                    v
                }
            })
            .collect())
    }

    /// Runs the whole step on the GPU once (chained mode and the end-to-end
    /// gate) and keeps every compared tensor.
    fn chained(&mut self) -> Result<&Chained, LadderError> {
        if self.chained.is_none() {
            let cfg = &self.setup.cfg;
            let names: Vec<String> = super::ALL_RUNGS.iter().flat_map(|r| outputs(r, cfg)).collect();
            let is_optim = |n: &String| {
                n == "grad_norm" || n.starts_with("param.") || n.starts_with("adam.m.") || n.starts_with("adam.v.")
            };
            let (step_names, grad_names): (Vec<String>, Vec<String>) = names.into_iter().partition(is_optim);
            let before = self.engine.read_flat(FlatBuf::Params)?;
            // Forward and backward at the backward scale (1 in f32), read
            // before the optimizer rewrites the gradients; the parameters'
            // gradients come back unscaled, the activations' still scaled.
            let s = backward_scale(self.setup.precision);
            self.engine.write_state(&LossScale { scale: s, ..LossScale::fixed() }, self.prior.step, 0)?;
            let (_, mut stage_ms) = self.engine.run_staged(false)?;
            let unscaled_later = |n: &str| carries_scale(n) && !n.starts_with("grad.");
            let read = self.gpu_values(&grad_names, s, unscaled_later)?;
            let mut values: Vec<(String, Vec<f32>)> = grad_names.iter().cloned().zip(read).collect();
            // The whole step, at the optim rung's loss scale, from the prior moments.
            self.reset_optimizer()?;
            let (timings, step_ms) = self.engine.run_staged(true)?;
            values.extend(step_names.iter().cloned().zip(self.gpu_values(&step_names, 1.0, |_| false)?));
            stage_ms.extend(step_ms.into_iter().filter(|(s, _)| *s == Stage::Optim));
            self.restore(&before)?;
            self.chained = Some(Chained { values, total_ms: timings.total_ms(), stage_ms });
        }
        Ok(self.chained.as_ref().expect("set above"))
    }

    /// Plants a bug of the fault catalogue in the GPU engine (None: none).
    pub fn set_fault(&mut self, fault: Option<Fault>) {
        self.engine.set_fault(fault);
        self.chained = None;
    }

    /// Runs one of rungs 2–11.
    pub fn run_rung(&mut self, rung: &str) -> Result<RungResult, LadderError> {
        let st = stage(rung).ok_or_else(|| LadderError::Unknown(rung.to_string()))?;
        let cfg = self.setup.cfg.clone();
        let names = outputs(rung, &cfg);
        let (gpu, gpu_ms): (Vec<Vec<f32>>, Option<f64>) = match self.setup.mode {
            Mode::Chained => {
                let ch = self.chained()?;
                let got = names
                    .iter()
                    .map(|n| ch.values.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default())
                    .collect();
                (got, ch.stage_ms.iter().find(|(s, _)| *s == st).and_then(|(_, ms)| *ms))
            }
            Mode::Isolated => {
                // The backward's inputs carry the loss scale, as the GPU's own would.
                let s = backward_scale(self.setup.precision);
                if self.setup.precision.is_mixed() {
                    self.engine.write_state(&LossScale { scale: s, ..LossScale::fixed() }, self.prior.step, 0)?;
                }
                for input in inputs(rung, &cfg) {
                    let data = &self.cpu32.get(&input).expect("traced").data;
                    if s != 1.0 && carries_scale(&input) {
                        let up: Vec<f32> = data.iter().map(|&x| x * s as f32).collect();
                        self.engine.write_named(&input, &up)?;
                    } else {
                        self.engine.write_named(&input, data)?;
                    }
                }
                let before = if st == Stage::Optim {
                    let step = step_scale(self.setup.precision) as f32;
                    for (name, _) in crate::model::param_specs(&cfg) {
                        let g = format!("grad.{name}");
                        let data: Vec<f32> =
                            self.cpu32.get(&g).expect("traced").data.iter().map(|&x| x * step).collect();
                        self.engine.write_named(&g, &data)?;
                    }
                    Some(self.reset_optimizer()?)
                } else {
                    None
                };
                let t = self.engine.run_stages(&[st])?;
                let ms = t.dispatches.iter().filter(|d| d.0 != "state begin").filter_map(|d| d.1).sum::<f64>() / 1e6;
                let s = if st == Stage::Optim { 1.0 } else { s };
                let got = self.gpu_values(&names, s, carries_scale)?;
                if let Some(p) = before {
                    self.restore(&p)?;
                }
                (got, t.total_ms().map(|_| ms))
            }
        };
        let (precision, mode) = (self.setup.precision, self.setup.mode);
        let tol_case = |n: &str| tolerance_in(precision, mode, &cfg, rung, n);
        let mut cases = Vec::new();
        let mut kept = Vec::new();
        for (name, got) in names.iter().zip(gpu) {
            let (want32, want64) = self.cpu_values(name);
            cases.push(case(name, &got, &want32, &want64, tol_case(name), precision.is_mixed()));
            let shape = self.shape_of(name, got.len());
            kept.push(RungTensor { name: name.clone(), shape, cpu: want32, gpu: got, f64: want64 });
        }
        self.kept.retain(|(r, _)| r != rung);
        self.kept.push((rung.to_string(), kept));
        let mut kept = Vec::new();
        let cpu_ms = self.cpu_ms.iter().filter(|(n, _)| cpu_phases(rung).contains(n)).map(|(_, ms)| ms).sum();
        if rung == "attn_fwd" && self.setup.mode == Mode::Isolated {
            let (c, k) = self.attention_stress()?;
            cases.extend(c);
            kept.extend(k);
            self.kept.last_mut().expect("pushed above").1.extend(kept.clone());
        }
        let mut r = RungResult::from_cases(rung, self.setup.precision, cases);
        r.gemm_path = Some(self.engine.gemm_path_now().name());
        r.gpu_ms = gpu_ms;
        r.cpu_ms = cpu_ms;
        if rung == "optim" && self.setup.mode == Mode::Isolated {
            let rep = self.engine.report()?;
            if rep.optim.clipped != (self.after.2 > self.setup.opts.clip) || rep.optim.skipped.is_some() {
                r.status = Status::Fail;
                r.cases[0].notes.push(format!(
                    "the GPU decided clipped={} skipped={:?}; the CPU clipped={} and took the step",
                    rep.optim.clipped,
                    rep.optim.skipped,
                    self.after.2 > self.setup.opts.clip
                ));
            }
            // The mixed step's dynamic scale: GradScaler's update after a good step.
            if self.setup.precision == Precision::F16 {
                let (gpu, _, _) = self.engine.loss_scale_and_step()?;
                let want = &self.after_scale;
                if (gpu.scale, gpu.growth_tracker) != (want.scale, want.growth_tracker) {
                    r.status = Status::Fail;
                    r.cases[0].notes.push(format!(
                        "the GPU's loss scale is {} (growth tracker {}); GradScaler's is {} ({})",
                        gpu.scale, gpu.growth_tracker, want.scale, want.growth_tracker
                    ));
                }
            }
        }
        Ok(r)
    }

    /// The attention stress case: `s` scaled by a power of two f so that the
    /// largest score is at least `STRESS_SCORE` (f² times the normal ones; q,
    /// k, v scale exactly by f on both sides), so that exp would overflow
    /// without the maximum subtracted. Its tolerance grows with the scores:
    /// a score carries an absolute rounding error of about 2^-24·|score|, which
    /// the softmax turns into that relative error of the weights; the bound is
    /// 8× that at the largest score, and at least the rung's 1e-5.
    fn attention_stress(&mut self) -> Result<(Vec<CaseResult>, Vec<RungTensor>), LadderError> {
        let cfg = self.setup.cfg.clone();
        let (t, b) = (self.setup.batch.t, self.setup.batch.rows);
        let get = |n: &str| self.cpu32.get(n).expect("traced").data.clone();
        let (q, k, v) = (get("ctx.q"), get("ctx.k"), get("ctx.v"));
        let m = max_score(&cfg, &q, &k, t, b).max(1e-30);
        let f = 2f64.powi(((STRESS_SCORE / m).sqrt().log2().ceil() as i32).max(0)) as f32;
        let top = format!("gru.l{}.h", cfg.layers - 1);
        let s: Vec<f32> = get(&top).iter().map(|&x| x * f).collect();
        self.engine.write_named(&top, &s)?;
        self.engine.run_stages(&[Stage::AttnFwd])?;
        let got = self.engine.read_named(&["ctx.attn", "ctx.c"])?;
        let sc = |x: &[f32]| x.iter().map(|&y| y * f).collect::<Vec<f32>>();
        let (w32, c32) = crate::cpu::attention::attention(&cfg, &sc(&q), &sc(&k), &sc(&v), t, b);
        let w64q: Vec<f64> = sc(&q).iter().map(|&x| x as f64).collect();
        let w64k: Vec<f64> = sc(&k).iter().map(|&x| x as f64).collect();
        let w64v: Vec<f64> = sc(&v).iter().map(|&x| x as f64).collect();
        let (w64, c64) = crate::cpu::attention::attention(&cfg, &w64q, &w64k, &w64v, t, b);
        let top_score = m * (f as f64).powi(2);
        // The scores' rounding: f32's, or in the mixed step that of the f16
        // (bf16) inputs of q and k; the same bound with that unit roundoff.
        let p = self.setup.precision;
        let u = if p.is_mixed() { p.unit_roundoff() } else { 2f64.powi(-24) };
        let floor = tolerance_in(p, Mode::Isolated, &cfg, "attn_fwd", "ctx.attn");
        let tol = (8.0 * u * top_score).max(floor);
        let mut cases = Vec::new();
        let mut kept = Vec::new();
        for ((name, got), (want32, want64)) in ["ctx.attn", "ctx.c"].iter().zip(got).zip([(w32, w64), (c32, c64)]) {
            let label = format!("{name} (stress: scores ×{}, max {top_score:.0})", f * f);
            let mut c = case(&label, &got, &want32, &want64, tol, p.is_mixed());
            c.params = format!("{} values, s ×{f}", got.len());
            cases.push(c);
            let shape = self.cpu32.get(name).expect("traced").shape.clone();
            kept.push(RungTensor { name: label, shape, cpu: want32, gpu: got, f64: want64 });
        }
        Ok((cases, kept))
    }

    /// The end-to-end step: the GPU's whole step (chained) against the CPU.
    pub fn end_to_end(&mut self) -> Result<EndToEnd, LadderError> {
        let cfg = self.setup.cfg.clone();
        let loss_cpu = self.cpu32.get("loss.value").map_or(f64::NAN, |t| t.data[0] as f64);
        let cpu_ms = self.cpu_ms.iter().map(|(_, ms)| ms).sum();
        let ch = self.chained()?.clone();
        let (all, gpu_ms) = (ch.values, ch.total_ms);
        let get = |n: &str| all.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default();
        let loss_gpu = get("loss.value").first().map_or(f64::NAN, |&x| x as f64);
        let (mut diff_total, mut norm_cpu2, mut norm_gpu2) = (0.0f64, 0.0f64, 0.0f64);
        let mut per: Vec<(String, f64, f64)> = Vec::new();
        for (name, _) in crate::model::param_specs(&cfg) {
            let g = get(&format!("grad.{name}"));
            let c = &self.cpu32.get(&format!("grad.{name}")).expect("traced").data;
            let (mut d2, mut c2) = (0.0f64, 0.0f64);
            for (&x, &y) in g.iter().zip(c) {
                d2 += (x as f64 - y as f64).powi(2);
                c2 += (y as f64).powi(2);
                norm_gpu2 += (x as f64).powi(2);
            }
            norm_cpu2 += c2;
            diff_total += d2;
            per.push((name, d2, if c2 > 0.0 { (d2 / c2).sqrt() } else { d2.sqrt() }));
        }
        per.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top_contributors = per
            .iter()
            .take(5)
            .map(|(n, d2, rel)| Contributor {
                tensor: n.clone(),
                share: if diff_total > 0.0 { d2 / diff_total } else { 0.0 },
                rel_l2: *rel,
            })
            .collect::<Vec<_>>();
        let (ncpu, ngpu) = (norm_cpu2.sqrt(), norm_gpu2.sqrt());
        let loss_rel_err = (loss_gpu - loss_cpu).abs() / loss_cpu.abs().max(f64::MIN_POSITIVE);
        let norm_diff = (ngpu - ncpu).abs() / ncpu.max(f64::MIN_POSITIVE);
        let mut notes = Vec::new();
        let logits = &self.cpu32.get("head.logits").expect("traced").data;
        let rms_logits = (logits.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / logits.len().max(1) as f64).sqrt();
        let p = self.setup.precision;
        let (loss_tol, norm_tol) = (loss_tolerance(p, &cfg, rms_logits, loss_cpu), norm_tolerance(p, &cfg));
        let status = if !(loss_rel_err <= loss_tol) {
            notes.push(format!("loss differs by {loss_rel_err:.3e} relative (gate {loss_tol:.1e})"));
            Status::Fail
        } else if !(norm_diff <= norm_tol) {
            let names: Vec<String> =
                top_contributors.iter().take(3).map(|c| format!("{} ({:.0}%)", c.tensor, 100.0 * c.share)).collect();
            notes.push(format!(
                "gradient norms differ by {norm_diff:.3e} relative (diagnostic {norm_tol:.1e}); most of the difference is in {}",
                names.join(", ")
            ));
            Status::Warn
        } else {
            Status::Pass
        };
        Ok(EndToEnd {
            status,
            loss_cpu,
            loss_gpu,
            loss_rel_err,
            loss_tolerance: loss_tol,
            grad_norm_cpu: ncpu,
            grad_norm_gpu: ngpu,
            grad_norm_rel_diff: norm_diff,
            grad_norm_tolerance: norm_tol,
            grads_rel_l2: if norm_cpu2 > 0.0 { (diff_total / norm_cpu2).sqrt() } else { diff_total.sqrt() },
            top_contributors,
            gpu_ms,
            cpu_ms,
            notes,
        })
    }
}

/// One tensor's comparison: the contract against the f32 CPU engine, the
/// f64 column for both sides.
///
/// The warning: in f32, the GPU is off from f64 by more than [`WARN_RATIO`]
/// times the f32 CPU engine; in the mixed step (where the GPU is expected to be
/// ~2^13 times further off than f32 arithmetic), the GPU is off from f64 by
/// more than its tolerance although it is within it of the f32 CPU (the f32
/// CPU itself is far from exact there: an ill-conditioned tensor).
fn case(name: &str, got: &[f32], want32: &[f32], want64: &[f64], tol: f64, mixed: bool) -> CaseResult {
    let wide: Vec<f64> = want32.iter().map(|&x| x as f64).collect();
    let mut notes = Vec::new();
    if got.len() != want32.len() {
        notes.push(format!("the GPU gave {} values, the CPU {}", got.len(), want32.len()));
    }
    let c = compare(got, &wide);
    let gpu64 = if want64.len() == got.len() { compare(got, want64).rel_l2 } else { f64::NAN };
    let cpu64 = if want64.len() == want32.len() { compare(want32, want64).rel_l2 } else { f64::NAN };
    let mut status = Status::Pass;
    if !notes.is_empty() {
        status = Status::Fail;
    }
    if c.new_non_finite > 0 {
        notes.push(format!("{} values are non-finite on the GPU only", c.new_non_finite));
        status = Status::Fail;
    }
    if !(c.rel_l2 <= tol) {
        notes.push(format!("rel L2 {:.3e} against the f32 CPU is over the tolerance {tol:.1e}", c.rel_l2));
        status = Status::Fail;
    }
    if status == Status::Pass && mixed && gpu64 > tol {
        notes.push(format!(
            "against f64 the GPU is off by {gpu64:.2e}, over the tolerance {tol:.1e} (the f32 CPU: {cpu64:.2e})"
        ));
        status = Status::Warn;
    } else if status == Status::Pass && !mixed && gpu64 > WARN_FLOOR && gpu64 > WARN_RATIO * cpu64 {
        notes.push(format!(
            "against f64 the GPU is off by {gpu64:.2e}, {:.0}× the f32 CPU's {cpu64:.2e}",
            gpu64 / cpu64.max(f64::MIN_POSITIVE)
        ));
        status = Status::Warn;
    }
    CaseResult {
        name: name.to_string(),
        params: format!("{} values", got.len()),
        status,
        rel_l2: c.rel_l2,
        rel_l2_cpu_f32: cpu64,
        rel_l2_gpu_f64: Some(gpu64),
        max_abs_err: c.max_abs_err,
        max_abs_index: c.max_abs_index,
        non_finite_cpu: c.non_finite_want,
        non_finite_gpu: c.non_finite_got,
        sentinel_ok: true,
        tolerance: tol,
        gpu_ms: None,
        cpu_ms: 0.0,
        notes,
    }
}

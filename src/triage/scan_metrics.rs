//! One batch of windows through an engine's forward and backward (loss
//! scale 1, or the f16 step's scale divided out), and each window's
//! [`Metrics`] from what the pass stored.
//!
//! - **loss**: the mean of the window's token losses.
//! - **max |logit|** over the window's predicted positions.
//! - **f16 headroom**: `log2(65504 / m)`, `m` the largest |x| over the
//!   predicted positions of every GRU layer's pre-activations (`W_ih u + b`,
//!   `W_hh h + b`) and hidden states, `q`, `k`, `v`, the attention scores
//!   `q·k/√dh` (recomputed from `q` and `k` over each query's window), the
//!   context vectors `c`, and the logits: the tensors the mixed step would
//!   hold or produce in f16. The gates (in (0, 1)) cannot overflow and are left out.
//! - **max ‖∂loss/∂e_t‖**: the batch's backward gives `∂L/∂e_t` of the batch
//!   mean `L = Σ_all ℓ / N`; rows do not interact (the GRU and the attention
//!   run within a row), so the gradient of row `b`'s `Σ_b ℓ / T` (its loss
//!   summed and divided by the full window's T targets, as if padded to a
//!   full window) is that times `N / T`. For a full window that is its own
//!   mean, what [`crate::capture::dominant_positions`] gives on the window
//!   alone; a short window (a document's last) is not inflated by its few
//!   targets, so windows of any length rank on one scale.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::TriageError;
use super::top::Metrics;
use crate::cpu::forward;
use crate::dataset::Batch;
use crate::engine::reference::backward;
use crate::engine::{Engine, EngineKind, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::step::{GemmChoice, Precision};
use crate::step::{LossScale, StepOptions};

/// f16's largest finite value.
const F16_MAX: f64 = 65504.0;

/// What one pass stored, time-major (`[T, B, ·]`) as both engines keep it.
struct Acts<'a> {
    batch: &'a Batch,
    token_loss: &'a [f32],
    logits: &'a [f32],
    d_emb: &'a [f32],
    /// The tensors the headroom covers, each with its row width.
    stored: Vec<(&'a [f32], usize)>,
    q: &'a [f32],
    k: &'a [f32],
    /// `1 / S`: the gradients are of `S · loss`.
    unscale: f64,
    /// A full window's targets, `T`: the per-token gradient's divisor.
    t_full: f64,
}

/// The largest |x|, NaN counted as infinite.
fn max_abs(xs: &[f32]) -> f64 {
    xs.iter().fold(0.0f64, |m, &x| if x.is_nan() { f64::INFINITY } else { m.max(x.abs() as f64) })
}

/// A non-finite figure as the riskiest finite one (see [`Metrics`]).
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { f64::MAX }
}

fn metrics(cfg: &Config, a: &Acts<'_>) -> Vec<Metrics> {
    let (bb, v, d, w, dh) = (a.batch.rows, cfg.vocab, cfg.d_embed, cfg.window, cfg.head_dim());
    let n_all = a.batch.num_targets() as f64;
    let t_full = a.t_full;
    let scale = 1.0 / (dh as f64).sqrt();
    // One task per row: on the GPU path this host reduction over the
    // read-back tensors is what bounds the scan's rate, so it uses every core.
    (0..bb)
        .into_par_iter()
        .map(|b| {
            let len = a.batch.lens[b];
            let n_b = (len - 1) as f64;
            let (mut loss, mut stored, mut max_logit, mut logit_pos) = (0.0, 0.0f64, -1.0, 0);
            for t in 0..len - 1 {
                let row = t * bb + b;
                loss += a.token_loss[row] as f64;
                let l = max_abs(&a.logits[row * v..(row + 1) * v]);
                if l > max_logit {
                    (max_logit, logit_pos) = (l, t);
                }
                for &(x, width) in &a.stored {
                    stored = stored.max(max_abs(&x[row * width..(row + 1) * width]));
                }
                // Scores of query t against keys t+1−W ..= t, per head.
                for hd in 0..cfg.heads {
                    let qv = &a.q[row * cfg.attn_dim + hd * dh..][..dh];
                    for j in (t + 1).saturating_sub(w)..=t {
                        let kv = &a.k[(j * bb + b) * cfg.attn_dim + hd * dh..][..dh];
                        let s: f64 = qv.iter().zip(kv).map(|(&x, &y)| x as f64 * y as f64).sum();
                        stored = stored.max(if s.is_nan() { f64::INFINITY } else { (s * scale).abs() });
                    }
                }
            }
            let m = stored.max(max_logit);
            let headroom = if m == 0.0 {
                f64::MAX
            } else if m.is_finite() {
                (F16_MAX / m).log2()
            } else {
                -f64::MAX
            };
            let (mut max_grad, mut grad_pos) = (-1.0, 0);
            for t in 0..len.min(a.batch.t) {
                let at = (t * bb + b) * d;
                let ss: f64 = a.d_emb[at..at + d].iter().map(|&x| x as f64 * x as f64).sum();
                let g = if ss.is_nan() { f64::INFINITY } else { ss.sqrt() * a.unscale * n_all / t_full };
                if g > max_grad {
                    (max_grad, grad_pos) = (g, t);
                }
            }
            Metrics {
                loss: finite(loss / n_b),
                max_logit: finite(max_logit),
                headroom,
                max_grad: finite(max_grad),
                grad_pos,
                logit_pos,
            }
        })
        .collect()
}

/// The engine a scan runs on, holding the weights.
pub enum Runner {
    Cpu { cfg: Config, params: Box<Params<f32>> },
    Gpu { engine: Engine },
}

/// The device tensors a GPU pass reads back, in the order [`Runner::run`] uses them.
fn gpu_names(cfg: &Config) -> Vec<String> {
    let mut names: Vec<String> =
        ["loss.token", "head.logits", "embed.d_out", "ctx.q", "ctx.k", "ctx.v", "ctx.c"].map(String::from).to_vec();
    for l in 0..cfg.layers {
        names.extend(["gi", "gh", "h"].map(|f| format!("gru.l{l}.{f}")));
    }
    names
}

impl Runner {
    /// The CPU reference (f32), or the Vulkan engine's step in `precision`
    /// (with f16 the dynamic loss scale's 2^16, divided out of the gradients).
    pub fn open(
        kind: EngineKind,
        cfg: &Config,
        params: Params<f32>,
        precision: Precision,
    ) -> Result<Runner, TriageError> {
        match kind {
            EngineKind::Cpu if precision != Precision::F32 => Err(TriageError::Usage(format!(
                "--precision {}: the mixed-precision step runs on --engine gpu; the CPU reference computes in f32",
                precision.name()
            ))),
            EngineKind::Cpu => Ok(Runner::Cpu { cfg: cfg.clone(), params: Box::new(params) }),
            EngineKind::Vulkan => {
                let scale = crate::step::LossScale::for_precision(precision);
                let state = TrainState::fresh(cfg, params, scale);
                let gemm = if precision.is_mixed() {
                    GemmChoice::from_env().map_err(|e| TriageError::Usage(e.to_string()))?
                } else {
                    GemmChoice::Auto
                };
                let vk = VulkanOptions { precision, gemm, ..VulkanOptions::default() };
                let engine = Engine::open(kind, cfg, state, &StepOptions::default(), &vk)?;
                Ok(Runner::Gpu { engine })
            }
        }
    }

    /// `cpu` or the GPU's products kernel.
    pub fn gemm_path(&self) -> String {
        match self {
            Runner::Cpu { .. } => "cpu".into(),
            Runner::Gpu { engine } => engine.precision_and_path().1.into(),
        }
    }

    /// The loss scale the passes run at (1 on the CPU).
    pub fn loss_scale(&self) -> Result<LossScale, TriageError> {
        match self {
            Runner::Cpu { .. } => Ok(LossScale::fixed()),
            Runner::Gpu { engine } => Ok(engine.loss_scale()?),
        }
    }

    /// Each row's metrics (`t` is a full window's number of targets), and the
    /// time the engine's forward and backward took.
    pub fn run(&mut self, batch: &Batch, t: usize) -> Result<(Vec<Metrics>, Duration), TriageError> {
        match self {
            Runner::Cpu { cfg, params } => {
                let t0 = Instant::now();
                let f = forward(cfg, params, batch)?;
                let g = backward(cfg, params, batch, &f, 1.0, None);
                let spent = t0.elapsed();
                let mut stored: Vec<(&[f32], usize)> = Vec::new();
                for l in &f.gru {
                    stored.extend([(&l.gi[..], 3 * cfg.hidden), (&l.gh[..], 3 * cfg.hidden), (&l.h[..], cfg.hidden)]);
                }
                stored.extend([(&f.v[..], cfg.attn_dim), (&f.c[..], cfg.attn_dim), (&f.q[..], cfg.attn_dim)]);
                stored.push((&f.k[..], cfg.attn_dim));
                let acts = Acts {
                    batch,
                    token_loss: &f.token_loss,
                    logits: &f.logits,
                    d_emb: &g.d_emb,
                    stored,
                    q: &f.q,
                    k: &f.k,
                    unscale: 1.0,
                    t_full: t as f64,
                };
                Ok((metrics(cfg, &acts), spent))
            }
            Runner::Gpu { engine } => {
                let scale = engine.loss_scale()?.scale;
                let t0 = Instant::now();
                engine.grads(batch)?;
                let spent = t0.elapsed();
                let cfg = engine.config().clone();
                let names = gpu_names(&cfg);
                let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
                let vk = engine.as_vulkan().expect("a GPU runner holds the Vulkan engine");
                let read = vk.read_named(&refs).map_err(|e| TriageError::Engine(e.into()))?;
                let (a, h3, h) = (cfg.attn_dim, 3 * cfg.hidden, cfg.hidden);
                let mut stored: Vec<(&[f32], usize)> = vec![(&read[5], a), (&read[6], a), (&read[3], a), (&read[4], a)];
                for l in 0..cfg.layers {
                    let at = 7 + 3 * l;
                    stored.extend([(&read[at][..], h3), (&read[at + 1][..], h3), (&read[at + 2][..], h)]);
                }
                let acts = Acts {
                    batch,
                    token_loss: &read[0],
                    logits: &read[1],
                    d_emb: &read[2],
                    stored,
                    q: &read[3],
                    k: &read[4],
                    unscale: 1.0 / scale,
                    t_full: t as f64,
                };
                Ok((metrics(&cfg, &acts), spent))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::dominant_positions;
    use crate::dataset::RowOrigin;

    /// A window's figures in a batch equal those of the window alone: its
    /// loss, and its largest `‖∂loss/∂e_t‖` as `dominant_positions` gives it.
    #[test]
    fn per_window_figures_do_not_depend_on_the_batch() {
        let cfg = Config::tiny();
        let params = Params::<f32>::init(&cfg, 3);
        let text = crate::dataset::corpus(2, 400);
        let rows: Vec<&[u8]> = vec![&text[0..9], &text[40..44], &text[100..109]];
        let batch = Batch::from_rows(&rows).unwrap();
        let mut r = Runner::open(EngineKind::Cpu, &cfg, params.clone(), Precision::F32).unwrap();
        let (m, _) = r.run(&batch, 8).unwrap();
        for (b, row) in rows.iter().enumerate() {
            let alone = Batch::from_rows(&[row]).unwrap();
            let f = forward(&cfg, &params, &alone).unwrap();
            assert!((m[b].loss - f.loss).abs() < 1e-6 * f.loss, "row {b}: {} vs {}", m[b].loss, f.loss);
            let o = [RowOrigin { document: 0, offset: 0, len: row.len() }];
            let (top, _) = dominant_positions(&cfg, &params, &alone, &o, 1).unwrap();
            // Of the row's loss summed over T = 8 targets: its own mean times n / 8.
            let want = top[0].norm * (row.len() - 1) as f64 / 8.0;
            let rel = (m[b].max_grad - want).abs() / want;
            assert!(rel < 1e-5, "row {b}: {} vs {want}", m[b].max_grad);
            assert_eq!(m[b].grad_pos, top[0].pos);
            assert!(m[b].headroom > 0.0 && m[b].headroom < 20.0, "{}", m[b].headroom);
            assert!(m[b].max_logit > 0.0 && m[b].max_logit.log2() <= 16.0 - m[b].headroom + 1e-9);
        }
    }
}

//! The CPU/GPU norm audit: for one sequence, per token and per parameter
//! tensor, the norm of that token's contribution to the tensor's gradient on
//! each engine, and a classification of every divergence with its evidence.
//!
//! Every weight gradient of the model is a sum over positions of outer
//! products δ_t x_tᵀ, so position t's contribution has norm ‖δ_t‖·‖x_t‖ (a
//! bias: ‖δ_t‖). Comparing those per token, and the direction of δ_t by its
//! cosine, tells a per-token scale difference (same direction, other size at
//! some tokens), a missing or extra unscale (one constant power-of-two ratio
//! everywhere), summation-order noise (ratios within the f32 envelope) and a
//! real error (directions differ) apart.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::LadderError;
use crate::cpu;
use crate::dataset::Batch;
use crate::engine::gpu::Context;
use crate::engine::gpu::GemmPath;
use crate::model::{Config, Params};
use crate::step::Fault;
use crate::step::{LossScale, StepOptions};
use crate::vk::engine::Engine;

/// Per-token ratios within this of 1 (and cosines within it of 1) are
/// summation-order noise: f32 engines summing in different orders differ by
/// a few 1e-7 relative per contribution; 1e-4 leaves room for long sums.
pub const ENVELOPE: f64 = 1e-4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every ratio and cosine within the envelope.
    Noise,
    /// The same constant power-of-two ratio at every token: the loss scale
    /// applied or removed on one side only.
    MissingUnscale,
    /// Same directions, different sizes at some tokens.
    PerTokenScale,
    /// Directions differ: a wrong value, not a scale.
    RealError,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorAudit {
    pub tensor: String,
    pub verdict: Verdict,
    /// Why, in words.
    pub evidence: String,
    /// Per token: CPU and GPU contribution norms, and the cosine of δ_t.
    pub cpu_norm: Vec<f64>,
    pub gpu_norm: Vec<f64>,
    pub cosine: Vec<f64>,
    pub worst_position: Option<usize>,
    pub tokens_off: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    pub len: usize,
    pub loss_scale: f64,
    pub fault: Option<String>,
    pub loss_cpu: f64,
    pub loss_gpu: f64,
    pub grad_norm_cpu: f64,
    pub grad_norm_gpu: f64,
    pub tensors: Vec<TensorAudit>,
}

/// (tensor, δ name, input name or None for a bias, input shifted by one step).
fn factors(cfg: &Config) -> Vec<(String, String, Option<String>, bool)> {
    let top = format!("gru.l{}.h", cfg.layers - 1);
    let mut v = vec![
        ("embed.weight".to_string(), "embed.d_out".to_string(), None, false),
        ("head.tok.weight".into(), "loss.dlogits".into(), Some(top.clone()), false),
        ("head.ctx.weight".into(), "loss.dlogits".into(), Some("ctx.c".into()), false),
        ("head.bias".into(), "loss.dlogits".into(), None, false),
        ("ctx.q.weight".into(), "ctx.d_q".into(), Some(top.clone()), false),
        ("ctx.k.weight".into(), "ctx.d_k".into(), Some(top.clone()), false),
        ("ctx.v.weight".into(), "ctx.d_v".into(), Some(top), false),
    ];
    for l in 0..cfg.layers {
        let input = if l == 0 { "embed.out".to_string() } else { format!("gru.l{}.h", l - 1) };
        v.push((format!("gru.weight_ih_l{l}"), format!("gru.l{l}.d_gi"), Some(input), false));
        v.push((format!("gru.weight_hh_l{l}"), format!("gru.l{l}.d_gh"), Some(format!("gru.l{l}.h")), true));
        v.push((format!("gru.bias_ih_l{l}"), format!("gru.l{l}.d_gi"), None, false));
        v.push((format!("gru.bias_hh_l{l}"), format!("gru.l{l}.d_gh"), None, false));
    }
    v
}

fn norm(x: &[f32]) -> f64 {
    x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (na, nb) = (norm(a), norm(b));
    if na == 0.0 && nb == 0.0 {
        return 1.0;
    }
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    dot / (na * nb).max(f64::MIN_POSITIVE)
}

/// Runs one row (B = 1) through both engines; the GPU runs its backward at
/// `loss_scale` and its contributions are divided by the scale it reports.
pub fn audit(
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    loss_scale: f64,
    fault: Option<Fault>,
) -> Result<AuditReport, LadderError> {
    audit_with(ctx, cfg, params, row, loss_scale, fault, &mut |_| {})
}

/// The stages of an audit, in order, as [`audit_with`] reports them.
pub const AUDIT_STAGES: [&str; 4] = ["CPU trace", "GPU gradients", "per-token norms", "CPU gradient norm"];

/// [`audit`], calling `stage` with each of [`AUDIT_STAGES`] as it starts.
#[allow(clippy::too_many_arguments)]
pub fn audit_with(
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    loss_scale: f64,
    fault: Option<Fault>,
    stage: &mut dyn FnMut(&str),
) -> Result<AuditReport, LadderError> {
    let batch = Batch::from_rows(&[row]).map_err(|e| LadderError::Input(e.to_string()))?;
    stage(AUDIT_STAGES[0]);
    let t = batch.t;
    let (_, _, cpu_tr) = cpu::traced(cfg, params, &batch, 1.0, None).map_err(|e| LadderError::Input(e.to_string()))?;
    let scale = LossScale { scale: loss_scale, ..LossScale::fixed() };
    stage(AUDIT_STAGES[1]);
    let mut e = Engine::new(ctx, cfg, params, &StepOptions::default(), &scale, GemmPath::TiledF32)?;
    e.set_fault(fault);
    let g = e.grads(&batch)?;
    let reported = e.report()?.optim.scale;
    let fs = factors(cfg);
    let mut names: Vec<String> = Vec::new();
    for (_, d, x, _) in &fs {
        names.push(d.clone());
        names.extend(x.iter().cloned());
    }
    names.sort();
    names.dedup();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let gpu: Vec<Vec<f32>> = e.read_named(&refs)?;
    let gpu_of = |n: &str| &gpu[names.iter().position(|k| k == n).expect("read above")];
    let cpu_of = |n: &str| &cpu_tr.get(n).expect("traced").data;
    stage(AUDIT_STAGES[2]);
    let mut tensors = Vec::new();
    for (tensor, d, x, shifted) in fs {
        let (dc, dg) = (cpu_of(&d), gpu_of(&d));
        let wd = dc.len() / t;
        let mut a = TensorAudit {
            tensor,
            verdict: Verdict::Noise,
            evidence: String::new(),
            cpu_norm: Vec::with_capacity(t),
            gpu_norm: Vec::with_capacity(t),
            cosine: Vec::with_capacity(t),
            worst_position: None,
            tokens_off: 0,
        };
        for pos in 0..t {
            let sl = pos * wd..(pos + 1) * wd;
            let (mut nc, mut ng) = (norm(&dc[sl.clone()]), norm(&dg[sl.clone()]) / reported);
            if let Some(x) = &x {
                let (xc, xg) = (cpu_of(x), gpu_of(x));
                let wx = xc.len() / t;
                let src = if shifted { pos.checked_sub(1) } else { Some(pos) };
                let (fc, fg) = match src {
                    Some(p) => (norm(&xc[p * wx..(p + 1) * wx]), norm(&xg[p * wx..(p + 1) * wx])),
                    None => (0.0, 0.0),
                };
                nc *= fc;
                ng *= fg;
            }
            a.cpu_norm.push(nc);
            a.gpu_norm.push(ng);
            a.cosine.push(cosine(&dc[sl.clone()], &dg[sl]));
        }
        classify(&mut a);
        tensors.push(a);
    }
    stage(AUDIT_STAGES[3]);
    Ok(AuditReport {
        len: t,
        loss_scale,
        fault: fault.map(|f| f.name().to_string()),
        loss_cpu: cpu_tr.get("loss.value").map_or(f64::NAN, |v| v.data[0] as f64),
        loss_gpu: g.loss,
        grad_norm_cpu: cpu::grads(cfg, params, &batch, None).map_err(|e| LadderError::Input(e.to_string()))?.grad_norm,
        grad_norm_gpu: g.grad_norm,
        tensors,
    })
}

fn classify(a: &mut TensorAudit) {
    let live: Vec<usize> = (0..a.cpu_norm.len()).filter(|&i| a.cpu_norm[i] > 1e-30 || a.gpu_norm[i] > 1e-30).collect();
    let ratio = |i: usize| a.gpu_norm[i] / a.cpu_norm[i].max(1e-300);
    // Tokens far below the typical contribution carry larger relative rounding
    // (their δ is a difference of larger terms): they are judged against 1% of
    // the rms contribution rather than against themselves.
    let rms = (live.iter().map(|&i| a.cpu_norm[i].powi(2)).sum::<f64>() / live.len().max(1) as f64).sqrt();
    let floor = 0.01 * rms;
    let off_dir: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| !((1.0 - a.cosine[i]) * a.cpu_norm[i].max(a.gpu_norm[i]) <= ENVELOPE * a.cpu_norm[i].max(floor)))
        .collect();
    let off_size: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| !((a.gpu_norm[i] - a.cpu_norm[i]).abs() <= ENVELOPE * a.cpu_norm[i].max(floor)))
        .collect();
    let worst = live.iter().copied().max_by(|&i, &j| {
        let e = |k: usize| (ratio(k) - 1.0).abs().max(1.0 - a.cosine[k]);
        e(i).total_cmp(&e(j))
    });
    a.worst_position = worst;
    if !off_dir.is_empty() {
        let min_cos = off_dir.iter().map(|&i| a.cosine[i]).fold(f64::INFINITY, f64::min);
        a.verdict = Verdict::RealError;
        a.tokens_off = off_dir.len();
        a.evidence = format!(
            "the direction of δ_t differs at {} of {} tokens (lowest cosine {min_cos:.4}, first at position {})",
            off_dir.len(),
            live.len(),
            off_dir[0]
        );
        return;
    }
    if off_size.is_empty() {
        let max_dev = live.iter().map(|&i| (ratio(i) - 1.0).abs()).fold(0.0, f64::max);
        a.verdict = Verdict::Noise;
        a.evidence = format!("every per-token ratio within {max_dev:.1e} of 1 (envelope {ENVELOPE:.0e})");
        return;
    }
    a.tokens_off = off_size.len();
    let r0 = ratio(off_size[0]);
    let constant = off_size.len() == live.len() && live.iter().all(|&i| (ratio(i) / r0 - 1.0).abs() <= ENVELOPE);
    let log2 = r0.log2();
    if constant && (log2 - log2.round()).abs() < 1e-3 && log2.round() != 0.0 {
        a.verdict = Verdict::MissingUnscale;
        a.evidence = format!(
            "the same ratio {r0} = 2^{} at every token, directions equal: a loss scale applied on one side only",
            log2.round()
        );
    } else {
        a.verdict = Verdict::PerTokenScale;
        a.evidence = format!(
            "directions equal, sizes differ at {} of {} tokens (ratio {r0:.4} at position {})",
            off_size.len(),
            live.len(),
            off_size[0]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit_of(cpu: Vec<f64>, gpu: Vec<f64>, cosine: Vec<f64>) -> TensorAudit {
        let mut a = TensorAudit {
            tensor: "x".into(),
            verdict: Verdict::Noise,
            evidence: String::new(),
            cpu_norm: cpu,
            gpu_norm: gpu,
            cosine,
            worst_position: None,
            tokens_off: 0,
        };
        classify(&mut a);
        a
    }

    #[test]
    fn the_classes_are_told_apart() {
        let cpu = vec![1.0, 2.0, 0.5, 3.0];
        let ones = vec![1.0; 4];
        assert_eq!(
            audit_of(cpu.clone(), cpu.iter().map(|x| x * (1.0 + 3e-7)).collect(), ones.clone()).verdict,
            Verdict::Noise
        );
        let a = audit_of(cpu.clone(), cpu.iter().map(|x| x * 1024.0).collect(), ones.clone());
        assert_eq!(a.verdict, Verdict::MissingUnscale, "{}", a.evidence);
        let mut capped = cpu.clone();
        capped[2] *= 0.25;
        let a = audit_of(cpu.clone(), capped, ones.clone());
        assert_eq!((a.verdict, a.tokens_off, a.worst_position), (Verdict::PerTokenScale, 1, Some(2)));
        let a = audit_of(cpu.clone(), cpu.clone(), vec![1.0, 1.0, 1.0, 0.3]);
        assert_eq!((a.verdict, a.worst_position), (Verdict::RealError, Some(3)));
        // A constant ratio that is not a power of two is a scale difference, not an unscale.
        assert_eq!(audit_of(cpu.clone(), cpu.iter().map(|x| x * 3.0).collect(), ones).verdict, Verdict::PerTokenScale);
    }
}

//! The end-to-end gate: the GPU's whole step (chained) against the CPU's,
//! the loss as the hard gate and the gradient norm as a diagnostic.

use serde::{Deserialize, Serialize};

use super::{LadderError, ModelLadder, Status, loss_tolerance_for, norm_tolerance_for};

/// The end-to-end step: the loss is the hard gate; the gradient-norm
/// difference is a diagnostic that names the tensors contributing most.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contributor {
    pub tensor: String,
    /// Fraction of the squared difference of all gradients.
    pub share: f64,
    pub rel_l2: f64,
}

impl ModelLadder {
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
        let (p, map) = (self.setup.precision, self.stage_map());
        let loss_tol = loss_tolerance_for(Some(&map), p, &cfg, rms_logits, loss_cpu);
        let norm_tol = norm_tolerance_for(Some(&map), p, &cfg);
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

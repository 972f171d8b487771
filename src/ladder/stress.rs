//! The attention stress case of the `attn_fwd` rung: scores large enough
//! that exp overflows unless the softmax subtracts the maximum.

use super::case::case;
use super::{CaseResult, LadderError, Mode, ModelLadder, Rung, RungTensor};
use crate::model::Config;
use crate::vk::engine::{Plan, Stage};

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

impl ModelLadder {
    /// The attention stress case: `s` scaled by a power of two f so that the
    /// largest score is at least `STRESS_SCORE` (f² times the normal ones; q,
    /// k, v scale exactly by f on both sides), so that exp would overflow
    /// without the maximum subtracted. Its tolerance grows with the scores:
    /// a score carries an absolute rounding error of about 2^-24·|score|, which
    /// the softmax turns into that relative error of the weights; the bound is
    /// 8× that at the largest score, and at least the rung's 1e-5.
    pub(super) fn attention_stress(&mut self) -> Result<(Vec<CaseResult>, Vec<RungTensor>), LadderError> {
        let cfg = self.setup.cfg.clone();
        let (t, b) = (self.setup.batch.t, self.setup.batch.rows);
        let get = |n: &str| self.cpu32.get(n).expect("traced").data.clone();
        let (q, k, v) = (get("ctx.q"), get("ctx.k"), get("ctx.v"));
        let m = max_score(&cfg, &q, &k, t, b).max(1e-30);
        let f = 2f64.powi(((STRESS_SCORE / m).sqrt().log2().ceil() as i32).max(0)) as f32;
        let top = format!("gru.l{}.h", cfg.layers - 1);
        let s: Vec<f32> = get(&top).iter().map(|&x| x * f).collect();
        self.engine.write_named(&top, &s)?;
        self.engine.run(Plan::Stages(&[Stage::AttnFwd]))?;
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
        let p = self.precision_of(crate::step::MapStage::fwd(crate::step::StageKind::Attn, 0));
        let u = if p.is_mixed() { p.unit_roundoff() } else { 2f64.powi(-24) };
        let floor = Rung::AttnFwd.map_tolerance(&self.stage_map(), Mode::Isolated, &cfg, "ctx.attn");
        let tol = (8.0 * u * top_score).max(floor);
        let mut cases = Vec::new();
        let mut kept = Vec::new();
        for ((name, got), (want32, want64)) in ["ctx.attn", "ctx.c"].iter().zip(got).zip([(w32, w64), (c32, c64)]) {
            let label = format!("{name} (stress: scores ×{}, max {top_score:.0})", f * f);
            // Per element measured, not judged: the scores are extreme on purpose.
            let mut c = case(&label, &got, &want32, &want64, tol, p.is_mixed(), false);
            c.params = format!("{} values, s ×{f}", got.len());
            cases.push(c);
            let shape = self.cpu32.get(name).expect("traced").shape.clone();
            kept.push(RungTensor { name: label, shape, cpu: want32, gpu: got, f64: want64 });
        }
        Ok((cases, kept))
    }
}

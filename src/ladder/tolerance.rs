//! The numerical contract of rungs 2–11 beyond each rung's f32 tolerance
//! ([`Rung::tolerance`]): the mixed-precision bounds and the end-to-end gate.

use super::{Mode, Precision, Rung};
use crate::model::Config;

/// The bound of one product's error in the mixed step, in units of the
/// inputs' unit roundoff: the gemm rung's (f16: 2e-3 ≈ 4·2^-11).
pub const MIXED_PRODUCT_BOUND: f64 = 4.0;

impl Rung {
    /// The relative L2 tolerance of a tensor of the rung against the f32 CPU
    /// engine in `precision` and `mode`: [`Rung::tolerance`] for f32; for the
    /// mixed-precision step, [`Rung::mixed_tolerance`].
    pub fn tolerance_in(self, precision: Precision, mode: Mode, cfg: &Config, tensor: &str) -> f64 {
        if precision.is_mixed() { self.mixed_tolerance(precision, mode, cfg, tensor) } else { self.tolerance(tensor) }
    }

    /// The relative L2 tolerance of the mixed-precision step's tensors against the
    /// f32 CPU engine (docs/gpu-step.md, "The mixed-precision contract"): with `u`
    /// the unit roundoff of the products' inputs (2^-11 for f16, 2^-8 for
    /// bfloat16) and `d` the [`Rung::product_depth`], `4·u·sqrt(d)` on top of the f32
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
    pub fn mixed_tolerance(self, precision: Precision, mode: Mode, cfg: &Config, tensor: &str) -> f64 {
        match self.product_depth(cfg, mode, tensor) {
            0 => self.tolerance(tensor),
            d => MIXED_PRODUCT_BOUND * precision.unit_roundoff() * (d as f64).sqrt() + self.tolerance(tensor),
        }
    }
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
            let logits = Rung::HeadFwd.mixed_tolerance(p, Mode::Chained, cfg, "head.logits");
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
        p => Rung::EmbedBwd.mixed_tolerance(p, Mode::Chained, cfg, "grad.embed.weight").max(NORM_TOLERANCE),
    }
}

//! The numerical contract of rungs 2–11 beyond each rung's f32 tolerance
//! ([`Rung::tolerance`]): the mixed-precision bounds and the end-to-end gate.

use super::{MapStage, Mode, Precision, PrecisionMap, Rung, StageKind};
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

impl Rung {
    /// The relative L2 tolerance of a tensor of the rung under a precision
    /// map (docs/precision.md): as [`Rung::mixed_tolerance`], with the
    /// products on the path ([`Rung::product_stages`]) counted only where
    /// their stage is in f16 or bf16, each with its own unit roundoff:
    /// `4·sqrt(Σ u_i²)` on top of the f32 tolerance, the f32 tolerance alone
    /// where no stage on the path is below f32. An all-f32 map gives the f32
    /// tolerances; a uniform map the precision's (`4·u·sqrt(d)`), with the
    /// recurrences' products counted too where they are below f32.
    pub fn map_tolerance(self, map: &PrecisionMap, mode: Mode, cfg: &Config, tensor: &str) -> f64 {
        let sum: f64 = self.product_stages(cfg, mode, tensor).into_iter().map(|s| map.unit_roundoff(s).powi(2)).sum();
        if sum == 0.0 { self.tolerance(tensor) } else { MIXED_PRODUCT_BOUND * sum.sqrt() + self.tolerance(tensor) }
    }

    /// The tolerance under `map` if one is given, else in `precision` ([`Rung::tolerance_in`]).
    pub fn tolerance_for(
        self,
        map: Option<&PrecisionMap>,
        precision: Precision,
        mode: Mode,
        cfg: &Config,
        tensor: &str,
    ) -> f64 {
        match map {
            Some(m) => self.map_tolerance(m, mode, cfg, tensor),
            None => self.tolerance_in(precision, mode, cfg, tensor),
        }
    }

    /// The precision-map stages whose products (or, for the embedding, the
    /// gathered rows) lie on the longest path to `tensor` of the rung, with
    /// repeats, in the order [`Rung::product_depth`] counts them; besides its
    /// products it lists the embedding and each recurrence on the path,
    /// which that count leaves out (f32 in today's step but on cooperative
    /// matrices). `rung_stages_match_the_depths` keeps both in step.
    pub fn product_stages(self, cfg: &Config, mode: Mode, tensor: &str) -> Vec<MapStage> {
        use StageKind::*;
        let (f, b) = (MapStage::fwd, MapStage::bwd);
        let layers = cfg.layers;
        let chained = mode == Mode::Chained;
        let layer = |t: &str| -> usize {
            let digits = |s: &str| s.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok();
            t.strip_prefix("gru.l").and_then(digits).or_else(|| t.rsplit("_l").next().and_then(digits)).unwrap_or(0)
        };
        let gru_fwd = |upto: usize| (0..upto).flat_map(|l| [f(GruInput, l), f(GruRec, l)]).collect::<Vec<_>>();
        let forward = || {
            let mut v = vec![f(Embed, 0)];
            v.extend(gru_fwd(layers));
            v.extend([f(Attn, 0), f(Head, 0)]);
            v
        };
        let above_gru = || {
            let mut v = forward();
            v.extend([b(Head, 0), b(Attn, 0)]);
            v
        };
        // Layer l's backward: the layers above it (their recurrence and input
        // gradient), its own recurrence, and its products for `.d_in` and the weights.
        let gru_bwd = |t: &str, mut v: Vec<MapStage>| {
            let l = layer(t).min(layers - 1);
            for above in (l + 1..layers).rev() {
                v.extend([b(GruRec, above), b(GruInput, above)]);
            }
            v.push(b(GruRec, l));
            if t.ends_with(".d_in") || t.contains(".weight_") {
                v.push(b(GruInput, l));
            }
            v
        };
        let all_bwd = || {
            let mut v = above_gru();
            for l in (0..layers).rev() {
                v.extend([b(GruRec, l), b(GruInput, l)]);
            }
            v.push(b(Embed, 0));
            v
        };
        let before = |v: Vec<MapStage>| if chained { v } else { Vec::new() };
        let with = |mut v: Vec<MapStage>, own: Option<MapStage>| {
            v.extend(own);
            v
        };
        match self {
            Rung::Gemm => Vec::new(),
            Rung::EmbedFwd => vec![f(Embed, 0)],
            Rung::GruFwd => {
                let mut v = before(vec![f(Embed, 0)]);
                v.extend(gru_fwd(layer(tensor) + 1));
                v
            }
            Rung::AttnFwd => {
                let mut v = before([vec![f(Embed, 0)], gru_fwd(layers)].concat());
                v.push(f(Attn, 0));
                v
            }
            Rung::HeadFwd | Rung::Loss => {
                let own = (self == Rung::HeadFwd).then_some(f(Head, 0));
                let mut v = before(forward());
                if !chained {
                    v.extend(own);
                }
                v
            }
            Rung::HeadBwd => {
                let own = !matches!(tensor, "grad.head.bias" | "ctx.token_norm");
                with(before(forward()), own.then_some(b(Head, 0)))
            }
            Rung::AttnBwd => {
                let own = !matches!(tensor, "ctx.d_q" | "ctx.d_k" | "ctx.d_v");
                with(before(with(forward(), Some(b(Head, 0)))), own.then_some(b(Attn, 0)))
            }
            Rung::GruBwd => gru_bwd(tensor, before(above_gru())),
            Rung::EmbedBwd => {
                if chained {
                    all_bwd()
                } else {
                    vec![b(Embed, 0)]
                }
            }
            Rung::Optim if !chained => Vec::new(),
            Rung::Optim => {
                let name = ["param.", "adam.m.", "adam.v."].iter().find_map(|p| tensor.strip_prefix(p));
                match name {
                    Some(n) if n.starts_with("gru.") => gru_bwd(n, above_gru()),
                    Some(n) if n.starts_with("ctx.") => above_gru(),
                    Some("head.bias") => forward(),
                    Some("embed.weight") | None => all_bwd(),
                    Some(_) => with(forward(), Some(b(Head, 0))),
                }
            }
        }
    }
}

/// The loss gate under `map` if one is given ([`loss_tolerance`] with the
/// logits' bound of [`Rung::map_tolerance`]), else in `precision`.
pub fn loss_tolerance_for(
    map: Option<&PrecisionMap>,
    precision: Precision,
    cfg: &Config,
    rms_logits: f64,
    loss: f64,
) -> f64 {
    let Some(m) = map else { return loss_tolerance(precision, cfg, rms_logits, loss) };
    let logits = Rung::HeadFwd.map_tolerance(m, Mode::Chained, cfg, "head.logits");
    if logits == Rung::HeadFwd.tolerance("head.logits") {
        return LOSS_TOLERANCE;
    }
    (2f64.sqrt() * logits * rms_logits / loss.abs().max(f64::MIN_POSITIVE)).max(LOSS_TOLERANCE)
}

/// The gradient-norm diagnostic under `map` if one is given (the bound of the
/// embedding's gradient, at least [`NORM_TOLERANCE`]), else in `precision`.
pub fn norm_tolerance_for(map: Option<&PrecisionMap>, precision: Precision, cfg: &Config) -> f64 {
    match map {
        Some(m) => Rung::EmbedBwd.map_tolerance(m, Mode::Chained, cfg, "grad.embed.weight").max(NORM_TOLERANCE),
        None => norm_tolerance(precision, cfg),
    }
}

/// The loss gate (relative), docs/model.md's contract for an f32 engine.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The stages a rung's tensor lists, less the embedding and the
    /// recurrences, are as many as [`Rung::product_depth`] counts, for every
    /// tensor, in both modes, at one, two and three layers.
    #[test]
    fn rung_stages_match_the_depths() {
        for layers in 1..4 {
            let cfg = Config { layers, ..Config::small() };
            for mode in [Mode::Isolated, Mode::Chained] {
                for r in Rung::ALL {
                    for t in r.outputs(&cfg).iter().map(String::as_str).chain(["grad_norm"]) {
                        let products = r
                            .product_stages(&cfg, mode, t)
                            .into_iter()
                            .filter(|s| !matches!(s.kind, StageKind::Embed | StageKind::GruRec))
                            .count();
                        assert_eq!(products, r.product_depth(&cfg, mode, t), "{r} {t} {mode:?} L={layers}");
                    }
                }
            }
        }
    }

    /// An all-f32 map gets the f32 tolerances; the mixed default (without
    /// cooperative-matrix recurrences, as here) today's mixed ones, for
    /// every tensor, loss and norm gate.
    #[test]
    fn maps_give_the_f32_and_mixed_contracts() {
        let cfg = Config::small();
        let f32_map = PrecisionMap::uniform(Precision::F32, cfg.layers);
        for p in [Precision::F16, Precision::Bf16] {
            let default = PrecisionMap::default_for(p, cfg.layers, false);
            for mode in [Mode::Isolated, Mode::Chained] {
                for r in Rung::ALL {
                    for t in r.outputs(&cfg) {
                        assert_eq!(r.map_tolerance(&f32_map, mode, &cfg, &t), r.tolerance(&t), "{r} {t}");
                        let want = r.mixed_tolerance(p, mode, &cfg, &t);
                        let got = r.map_tolerance(&default, mode, &cfg, &t);
                        assert!((got - want).abs() <= 1e-15 * want, "{r} {t} {mode:?}: {got} vs {want}");
                    }
                }
            }
            let (l, l_map) = (loss_tolerance(p, &cfg, 2.0, 3.0), loss_tolerance_for(Some(&default), p, &cfg, 2.0, 3.0));
            assert!((l - l_map).abs() <= 1e-15 * l);
            assert_eq!(norm_tolerance_for(Some(&default), p, &cfg), norm_tolerance(p, &cfg));
        }
        assert_eq!(loss_tolerance_for(Some(&f32_map), Precision::F16, &cfg, 2.0, 3.0), LOSS_TOLERANCE);
        assert_eq!(norm_tolerance_for(Some(&f32_map), Precision::F16, &cfg), NORM_TOLERANCE);
        // One stage in f16: only the tensors downstream of it widen.
        let head = f32_map.with("head=f16").unwrap();
        assert!(Rung::HeadFwd.map_tolerance(&head, Mode::Isolated, &cfg, "head.logits") > 1e-3);
        assert_eq!(Rung::AttnFwd.map_tolerance(&head, Mode::Chained, &cfg, "ctx.c"), Rung::AttnFwd.tolerance("ctx.c"));
    }
}

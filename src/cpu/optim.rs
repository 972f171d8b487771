//! The training step after backward: unscale → float64 global norm → guard →
//! clip → post-clip check → AdamW (torch semantics) → dynamic loss scale
//! (GradScaler semantics). docs/model.md, "Training step".

use rayon::prelude::*;

use crate::model::{Config, Params, decays, param_specs};
use crate::step::{LossScale, OptimOutcome, OptimState, SkipReason, StepOptions};
use crate::tensor::Real;

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
    let _sp = super::profile::span("optimizer");
    let s = scale.scale;
    // 2. Unscale before any norm is taken. S is a power of two, so this is exact.
    if s != 1.0 {
        scale_all(grads, T::of(1.0 / s));
    }
    // 3. Global norm in float64, canonical order.
    let grad_norm = grads.norm_f64();
    let mut out =
        OptimOutcome { grad_norm, clipped: false, post_clip_norm: grad_norm, skipped: None, scale: s, next_scale: s };
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
        p.data.par_iter_mut().zip(&g.data).zip(m.data.par_iter_mut()).zip(v.data.par_iter_mut()).for_each(
            |(((p, &g), m), v)| {
                if wd {
                    *p *= decay;
                }
                *m += w1 * (g - *m); // lerp(m, g, 1 - β1)
                *v = *v * b2 + w2 * g * g;
                let denom = v.sqrt() / bc2_sqrt + eps;
                *p -= step_size * (*m / denom);
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn setup(seed: u64) -> (Config, Params<f64>, Params<f64>) {
        let cfg = Config::tiny();
        let p = Params::<f64>::init(&cfg, seed);
        let mut g = Params::<f64>::zeros(&cfg);
        let mut rng = Rng::new(seed + 1);
        for t in g.tensors_mut() {
            t.data.iter_mut().for_each(|x| *x = rng.normal() * 1e-3);
        }
        (cfg, p, g)
    }

    #[test]
    fn nan_gradient_leaves_everything_untouched() {
        let (cfg, p0, mut g) = setup(1);
        let mut p = p0.clone();
        let mut st = OptimState::new(&cfg);
        let mut sc = LossScale::fixed();
        // One good step first, so the moments are not all zero.
        let mut g_ok = g.clone();
        apply_step(&cfg, &mut p, &mut g_ok, &mut st, &mut sc, &StepOptions::default());
        let (p1, st1) = (p.clone(), st.clone());
        g.gru[1].w_hh.data[3] = f64::NAN;
        let out = apply_step(&cfg, &mut p, &mut g, &mut st, &mut sc, &StepOptions::default());
        assert_eq!(out.skipped, Some(SkipReason::NonFiniteNorm));
        assert_eq!(p, p1);
        assert_eq!(st, st1);
        assert_eq!(st.step, 1);
        let mut g_inf = Params::zeros(&cfg);
        g_inf.head_bias.data[0] = f64::INFINITY;
        let out = apply_step(&cfg, &mut p, &mut g_inf, &mut st, &mut sc, &StepOptions::default());
        assert_eq!(out.skipped, Some(SkipReason::NonFiniteNorm));
        assert_eq!((p, st), (p1, st1));
    }

    #[test]
    fn zero_gradient_is_skipped() {
        let (cfg, p0, _) = setup(2);
        let mut p = p0.clone();
        let mut st = OptimState::new(&cfg);
        let mut g = Params::zeros(&cfg);
        let out = apply_step(&cfg, &mut p, &mut g, &mut st, &mut LossScale::fixed(), &StepOptions::default());
        assert_eq!(out.skipped, Some(SkipReason::ZeroNorm));
        assert_eq!(p, p0);
        assert_eq!(st.step, 0);
    }

    #[test]
    fn clip_brings_the_norm_to_the_threshold() {
        let (cfg, mut p, mut g) = setup(3);
        for t in g.tensors_mut() {
            t.data.iter_mut().for_each(|x| *x *= 1e4);
        }
        let before = g.norm_f64();
        assert!(before > 1.0);
        let opts = StepOptions { clip: 0.5, ..Default::default() };
        let out = apply_step(&cfg, &mut p, &mut g, &mut OptimState::new(&cfg), &mut LossScale::fixed(), &opts);
        assert!(out.clipped);
        assert_eq!(out.grad_norm, before);
        assert!((out.post_clip_norm - 0.5 * before / (before + 1e-6)).abs() < 1e-12);
        assert!((g.norm_f64() - out.post_clip_norm).abs() < 1e-12);
    }

    #[test]
    fn below_the_threshold_nothing_is_clipped() {
        let (cfg, mut p, mut g) = setup(4);
        let before = g.clone();
        let out = apply_step(
            &cfg,
            &mut p,
            &mut g,
            &mut OptimState::new(&cfg),
            &mut LossScale::fixed(),
            &StepOptions::default(),
        );
        assert!(!out.clipped);
        assert_eq!(g, before);
    }

    /// AdamW against the formula of docs/model.md, written out independently.
    #[test]
    fn adamw_two_steps_match_the_formula() {
        let (cfg, p0, g) = setup(5);
        let o = StepOptions::default();
        let mut p = p0.clone();
        let mut st = OptimState::new(&cfg);
        let mut sc = LossScale::fixed();
        apply_step(&cfg, &mut p, &mut g.clone(), &mut st, &mut sc, &o);
        apply_step(&cfg, &mut p, &mut g.clone(), &mut st, &mut sc, &o);
        for (((name, shape), t0), (t2, gt)) in
            param_specs(&cfg).iter().zip(p0.tensors()).zip(p.tensors().into_iter().zip(g.tensors()))
        {
            let wd = if shape.len() == 2 && name != "embed.weight" { o.weight_decay } else { 0.0 };
            for i in 0..t0.len() {
                let (mut x, mut m, mut v) = (t0.data[i], 0.0, 0.0);
                for k in 1..=2 {
                    let gi = gt.data[i];
                    x *= 1.0 - o.lr * wd;
                    m = o.beta1 * m + (1.0 - o.beta1) * gi;
                    v = o.beta2 * v + (1.0 - o.beta2) * gi * gi;
                    let mh = m / (1.0 - o.beta1.powi(k));
                    let vh = v / (1.0 - o.beta2.powi(k));
                    x -= o.lr * mh / (vh.sqrt() + o.eps);
                }
                assert!((x - t2.data[i]).abs() < 1e-12, "{name}[{i}]: {x} vs {}", t2.data[i]);
            }
        }
        assert_eq!(st.step, 2);
    }

    #[test]
    fn unscale_happens_before_the_norm() {
        let (cfg, p0, g) = setup(6);
        let s = 1024.0;
        let mut scaled = g.clone();
        for t in scaled.tensors_mut() {
            t.data.iter_mut().for_each(|x| *x *= s);
        }
        let mut sc = LossScale { scale: s, ..LossScale::dynamic() };
        let (mut pa, mut pb) = (p0.clone(), p0.clone());
        let a = apply_step(&cfg, &mut pa, &mut scaled, &mut OptimState::new(&cfg), &mut sc, &StepOptions::default());
        let b = apply_step(
            &cfg,
            &mut pb,
            &mut g.clone(),
            &mut OptimState::new(&cfg),
            &mut LossScale::fixed(),
            &StepOptions::default(),
        );
        assert_eq!(a.grad_norm, b.grad_norm);
        assert_eq!(pa, pb);
    }

    #[test]
    fn grad_scaler_semantics() {
        let mut s = LossScale::dynamic();
        assert_eq!(s.scale, 65536.0);
        s.update(true);
        assert_eq!((s.scale, s.growth_tracker), (32768.0, 0));
        for _ in 0..1999 {
            s.update(false);
        }
        assert_eq!(s.scale, 32768.0);
        s.update(false);
        assert_eq!((s.scale, s.growth_tracker), (65536.0, 0));
        let mut f = LossScale::fixed();
        f.update(true);
        assert_eq!(f.scale, 1.0);
    }

    #[test]
    fn skip_backs_off_a_dynamic_scale() {
        let (cfg, mut p, _) = setup(7);
        let mut g = Params::zeros(&cfg);
        g.q.data[0] = f64::NAN;
        let mut sc = LossScale::dynamic();
        let out = apply_step(&cfg, &mut p, &mut g, &mut OptimState::new(&cfg), &mut sc, &StepOptions::default());
        assert!(out.skipped.is_some());
        assert_eq!((out.scale, out.next_scale), (65536.0, 32768.0));
    }
}

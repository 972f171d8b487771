//! The mixed-precision step (f16 products with f32 accumulation, everything
//! else f32, a dynamic loss scale) on the Vulkan device: its ladder contract,
//! GradScaler's skip and back-off on an f16 overflow, and training that
//! tracks the f32 CPU reference.

mod common;

use common::{assert_clean, assert_passes, ladder_setup, odd, random_batch, run_every_rung};
use dualscope::cpu;
use dualscope::ladder::{self, Mode, ModelLadder, Rung, Status};
use dualscope::model::{Config, Params};
use dualscope::step::GemmChoice;
use dualscope::step::Precision;
use dualscope::step::{LossScale, OptimState, StepOptions};
use dualscope::vk::engine::{Engine, FlatBuf, Replay, WgChoice};
use dualscope::vk::gemm::{GemmPath, coopmat_f16_unavailable};

/// The kernel `auto` picks for f16 here.
fn f16_path(ctx: &dualscope::vk::Context) -> GemmPath {
    if coopmat_f16_unavailable(ctx).is_none() { GemmPath::CoopMatF16Big } else { GemmPath::TiledF16 }
}

/// Rungs 2–11 and the end-to-end gate of the mixed step pass on the odd-width
/// and the tiny configs, isolated and chained, on the device's f16 kernel;
/// tensors that a product feeds show f16's rounding (far above f32's), those
/// computed without one in isolated mode keep the f32 contract.
#[test]
fn mixed_rungs_pass_in_both_modes() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let path = f16_path(&ctx);
    for mode in [Mode::Isolated, Mode::Chained] {
        for (cfg, lens) in [(odd(), vec![12, 6, 3]), (Config::tiny(), vec![9, 9])] {
            let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, mode, &lens, 5, Precision::F16)).unwrap();
            assert_eq!(l.engine().gemm_path(), path);
            for &id in &Rung::ALL[1..] {
                let r = l.run(id).unwrap();
                assert_passes(&r, &format!("{mode:?} {id}"));
                assert_eq!(r.precision, Precision::F16);
                assert_eq!(r.gemm_path.as_deref(), Some(path.name()));
                let stress = if id == Rung::AttnFwd && mode == Mode::Isolated { 2 } else { 0 };
                assert_eq!(r.cases.len(), id.outputs(&cfg).len() + stress);
                for c in &r.cases {
                    assert!(c.rel_l2_gpu_f64.is_some_and(|x| x.is_finite()), "{id} {}", c.name);
                    assert_eq!(c.non_finite_gpu, 0, "{id} {}", c.name);
                    if c.name.contains("stress") {
                        continue;
                    }
                    let depth = id.product_depth(&cfg, mode, &c.name);
                    let f32_tol = id.tolerance(&c.name);
                    if depth == 0 {
                        assert_eq!(c.tolerance, f32_tol, "{mode:?} {id} {}", c.name);
                    } else {
                        assert!(c.tolerance > 10.0 * f32_tol.max(1e-5), "{mode:?} {id} {}", c.name);
                    }
                    eprintln!(
                        "{mode:?} {id} {} (depth {depth}): rel L2 {:.2e} of {:.1e}",
                        c.name, c.rel_l2, c.tolerance
                    );
                }
            }
            // The products ran in f16: the logits show its rounding.
            let logits = &l.rung_tensors(Rung::HeadFwd)[0];
            let r = dualscope::ladder::compare(&logits.gpu, &logits.f64);
            assert!(r.rel_l2 > 2e-5, "logits rel L2 {:.2e}: not f16 products?", r.rel_l2);
            let e = l.end_to_end().unwrap();
            assert_eq!(e.status, Status::Pass, "{e:?}");
            assert!(e.loss_tolerance > ladder::LOSS_TOLERANCE && e.loss_rel_err <= e.loss_tolerance, "{e:?}");
            assert!(e.grad_norm_rel_diff <= e.grad_norm_tolerance, "{e:?}");
        }
    }
    assert_clean(&ctx, test);
}

/// The mixed step's recurrences on cooperative matrices (`gru_*_grid_cm`, and
/// the two-layer wavefronts `gru_*_wave_cm`) pass the mixed ladder, rungs 2–11
/// and the end-to-end gate, chained, with the grid barrier and with one
/// dispatch per step, on shapes that do not divide their 16×16 tiles: a
/// partial row block (B = 5, 20), K-tiles that do not divide over the 8
/// subgroups (H = 144: 9 forward, 27 backward), three layers (no wavefront;
/// B = 6 and 21, one and two row blocks on the per-layer kernels),
/// and H = 200, where H % 16 != 0 leaves them to the f32 grid kernels. The
/// wavefronts read their operands without `coherent` where rows are whole
/// 128-byte lines (H % 64 == 0): H = 128 with B = 20 (a partial row block),
/// H = 192 with B = 32.
/// Where the device has no cooperative matrices (lavapipe, or validation on
/// with a layer that predates them) the engine must not pick them.
#[test]
fn the_coopmat_recurrences_pass_the_mixed_ladder() {
    use dualscope::vk::engine::Recurrence;
    let (test, ctx) = common::vulkan!(validation_from_env);
    let coopmat = coopmat_f16_unavailable(&ctx).is_none();
    let cfg = |hidden: usize, layers: usize, batch: usize, seq_len: usize| Config {
        vocab: 256,
        d_embed: 24,
        hidden,
        layers,
        attn_dim: 16,
        heads: 2,
        window: 6,
        batch,
        seq_len,
    };
    // (config, row lengths, cooperative-matrix recurrences, wavefronts,
    // wavefront operands read without `coherent`: forward, backward)
    let cases = [
        (cfg(144, 2, 5, 40), vec![41, 41, 30, 41, 7], true, true, (false, false)),
        (cfg(128, 2, 20, 33), vec![34; 20], true, true, (true, true)),
        (cfg(192, 2, 32, 21), vec![22; 32], true, true, (true, true)),
        (cfg(64, 3, 6, 17), vec![18, 18, 18, 9, 18, 18], true, false, (false, false)),
        // Two row blocks on the per-layer kernels, whose barrier waits for
        // the row block's workgroups only.
        (cfg(128, 3, 21, 13), (0..21).map(|i| 14 - (i % 5)).collect(), true, false, (false, false)),
        (cfg(200, 2, 4, 9), vec![10, 10, 6, 10], false, false, (false, false)),
    ];
    let grid_here = Recurrence::default_for(&ctx, 144).unwrap() == Recurrence::Grid;
    for (cfg, lens, cm, wave, (nc_fwd, nc_bwd)) in cases {
        let modes: &[Recurrence] =
            if grid_here { &[Recurrence::Grid, Recurrence::Steps] } else { &[Recurrence::Steps] };
        for &mode in modes {
            let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, Mode::Chained, &lens, 9, Precision::F16)).unwrap();
            l.engine_mut().set_recurrence(mode).unwrap();
            // The grid kernels, not the one-workgroup ones that H = 64, B = 6
            // would take (the_one_workgroup_coopmat_recurrences_pass_the_mixed_ladder).
            l.engine_mut().set_wg(WgChoice::Off);
            let e = l.engine();
            let label = format!("H={} L={} B={} {mode:?}", cfg.hidden, cfg.layers, cfg.batch);
            assert_eq!(e.recurrence_on_coopmat(), coopmat && cm, "{label}");
            assert_eq!(e.forward_wave(), coopmat && wave, "{label}");
            assert_eq!(e.backward_wave(), coopmat && wave, "{label}");
            assert_eq!(
                (e.wave_noncoherent(true), e.wave_noncoherent(false)),
                (coopmat && nc_fwd, coopmat && nc_bwd),
                "{label}"
            );
            if !coopmat {
                // The choice is what can be checked here; the kernels need
                // cooperative matrices (run this test on such a device).
                continue;
            }
            run_every_rung(&mut l, &label);
        }
    }
    if !coopmat {
        eprintln!("{test}: no cooperative matrices here; only the kernel choice was checked");
    }
    assert_clean(&ctx, test);
}

/// The small layers' recurrences in one workgroup on cooperative matrices
/// (`gru_*_wg_cm`), the default where they fit, pass the mixed ladder (rungs
/// 2–11 and the end-to-end gate, chained) on shapes that do not divide their
/// tiles (B = 5 and 16, H = 48 and 80: 3 and 5 K-tiles forward, 9 and 15
/// backward over two halves) and at `small`'s width, and give the gradients
/// of the grid kernels and wavefronts they replace (the same f16 operands,
/// sums in another order). Skipped, after checking that the engine does not
/// pick them, where the device has no cooperative matrices.
#[test]
fn the_one_workgroup_coopmat_recurrences_pass_the_mixed_ladder() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let coopmat = coopmat_f16_unavailable(&ctx).is_none();
    let cfg = |hidden: usize, batch: usize, seq_len: usize| Config {
        vocab: 256,
        d_embed: 24,
        hidden,
        layers: 2,
        attn_dim: 16,
        heads: 2,
        window: 6,
        batch,
        seq_len,
    };
    let cases = [
        (cfg(48, 5, 37), vec![38, 38, 20, 38, 5]),
        (cfg(80, 16, 23), (0..16).map(|i| 24 - (i % 5)).collect::<Vec<_>>()),
        (cfg(128, 8, 41), vec![42; 8]),
    ];
    for (cfg, lens) in cases {
        let label = format!("H={} B={}", cfg.hidden, cfg.batch);
        let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, Mode::Chained, &lens, 9, Precision::F16)).unwrap();
        // Off by default (slower on the H200); asked for here.
        l.engine_mut().set_wg(WgChoice::Auto);
        l.run(Rung::GruFwd).unwrap();
        assert_eq!(l.engine().recurrence_wg(), coopmat.then_some("cm"), "{label}");
        if !coopmat {
            continue;
        }
        assert!(!l.engine().forward_wave() && !l.engine().backward_wave(), "{label}");
        run_every_rung(&mut l, &label);
        // Against the kernels it replaces, on one batch.
        let params = Params::init(&cfg, 4);
        let batch = random_batch(6, &lens);
        let opts = StepOptions::default();
        let run = |wg: WgChoice| {
            let mut e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto).unwrap();
            e.set_wg(wg);
            let g = e.grads(&batch).unwrap();
            (g, e.recurrence_wg())
        };
        let ((new, kind_new), (old, kind_old)) = (run(WgChoice::Auto), run(WgChoice::Off));
        assert_eq!((kind_new, kind_old), (Some("cm"), None), "{label}");
        // Both take f16 × f16 products in different orders: they may differ
        // by the f16 rounding of one product (the H200 showed 1.4e-4 at
        // H = 128 B = 8), never by more.
        let bound = Precision::F16.unit_roundoff();
        for (x, y) in new.grads.tensors().iter().zip(old.grads.tensors()) {
            let r = common::rel_l2(&x.data, &y.data);
            assert!(r < bound, "{label}: a gradient differs from the grid kernels' by rel L2 {r:.2e}");
        }
    }
    if !coopmat {
        eprintln!("{test}: no cooperative matrices here; only the kernel choice was checked");
    }
    assert_clean(&ctx, test);
}

/// The bfloat16 products (no loss scale: bf16 has f32's range) pass their
/// contract too, with bf16's unit roundoff.
#[test]
fn bf16_rungs_pass() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let cfg = odd();
    for mode in [Mode::Isolated, Mode::Chained] {
        let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, mode, &[12, 6, 3], 8, Precision::Bf16)).unwrap();
        assert_eq!(l.engine().gemm_path(), GemmPath::TiledBf16In);
        for &id in &Rung::ALL[1..] {
            let r = l.run(id).unwrap();
            assert_passes(&r, &format!("{mode:?} {id}"));
        }
        assert_eq!(l.end_to_end().unwrap().status, Status::Pass);
    }
    assert_clean(&ctx, test);
}

/// A planted bug still fails the mixed ladder: the GRU weight a wrong value
/// (errors of order 1e-2, above every mixed tolerance) fails at `gru_fwd`.
#[test]
fn a_corrupted_weight_fails_the_mixed_ladder_at_its_rung() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let s = ladder_setup(&odd(), Mode::Chained, &[12, 6, 3], 9, Precision::F16);
    let mut w = s.params.gru[1].w_hh.data.clone();
    w[5] += 0.5;
    let mut l = ModelLadder::new(&ctx, s).unwrap();
    l.engine().write_named("param.gru.weight_hh_l1", &w).unwrap();
    assert_eq!(l.run(Rung::EmbedFwd).unwrap().status, Status::Pass);
    let r = l.run(Rung::GruFwd).unwrap();
    assert_eq!(r.status, Status::Fail);
    assert!(r.cases.iter().filter(|c| c.name.starts_with("gru.l0.")).all(|c| c.status == Status::Pass));
    assert_clean(&ctx, test);
}

/// GradScaler on the mixed step: at a loss scale of 2^30 the scaled
/// gradients pass f16's 65504 as the products convert them, so the gradients
/// come out non-finite, the step is skipped (parameters, moments and step
/// counter untouched) and the scale halves, step after step, until the
/// gradients fit; the same scale in the f32 step overflows nothing. Two good
/// steps in a row then double the scale (growth interval 2 here).
#[test]
fn an_f16_overflow_skips_the_step_and_backs_the_scale_off() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let cfg = odd();
    let p0 = Params::<f32>::init(&cfg, 21);
    let opts = StepOptions::default();
    let b = random_batch(5, &[9, 6]);
    let big = LossScale { scale: 2f64.powi(30), growth_interval: 2, ..LossScale::dynamic() };

    // f32: 2^30 fits.
    let mut e32 = Engine::new(&ctx, &cfg, &p0, &opts, &big, GemmPath::TiledF32).unwrap();
    let (r, _) = e32.train_step(&b, Replay::No).unwrap();
    assert_eq!(r.optim.skipped, None, "the f32 step at 2^30");

    let mut e = Engine::with_precision(&ctx, &cfg, &p0, &opts, Precision::F16, GemmChoice::Auto).unwrap();
    assert_eq!(e.precision(), Precision::F16);
    let (s0, _, _) = e.loss_scale_and_step().unwrap();
    assert!(s0.dynamic && s0.scale == 65536.0, "the mixed step starts from GradScaler's 2^16: {s0:?}");
    e.write_state(&big, 0, 0).unwrap();
    let before = (e.read_flat(FlatBuf::Params).unwrap(), e.read_flat(FlatBuf::M).unwrap());
    let mut scale = big.scale;
    let mut skipped = 0;
    loop {
        let (r, _) = e.train_step(&b, Replay::No).unwrap();
        assert_eq!(r.optim.scale, scale);
        if r.optim.skipped.is_none() {
            break;
        }
        assert_eq!(r.optim.skipped, Some(dualscope::step::SkipReason::NonFiniteNorm));
        assert!(!r.optim.grad_norm.is_finite());
        assert!(r.loss.is_finite(), "the forward is unscaled and finite");
        assert_eq!(r.optim.next_scale, scale / 2.0, "backed off");
        skipped += 1;
        scale /= 2.0;
        let after = (e.read_flat(FlatBuf::Params).unwrap(), e.read_flat(FlatBuf::M).unwrap());
        let same = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same(&before.0, &after.0) && same(&before.1, &after.1), "a skipped step changed the state");
        assert!(skipped < 30, "never stopped overflowing");
    }
    // It took scales of 2^30 down to well above 1 to fit: f16 overflowed.
    assert!(skipped >= 1 && scale >= 1024.0, "{skipped} skipped steps, then a step at {scale}");
    let (s, step, total) = e.loss_scale_and_step().unwrap();
    assert_eq!((s.scale, s.growth_tracker, step, total), (scale, 1, 1, skipped));
    let (r, _) = e.train_step(&b, Replay::No).unwrap();
    assert_eq!((r.optim.skipped, r.optim.next_scale), (None, 2.0 * scale), "grown after 2 good steps");
    eprintln!("{skipped} steps skipped from 2^30; the first good step at 2^{}", scale.log2());
    assert_clean(&ctx, test);
}

/// A few training steps of the mixed step (dynamic scale from 2^16) against
/// the f32 CPU reference's steps from the same start (the same dynamic
/// scale, which f32 never needs to back off): the losses agree within the
/// end-to-end gate of the mixed contract at every step, and no step is
/// skipped on either side.
#[test]
fn mixed_training_tracks_the_f32_cpu_loss() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    for (cfg, lens) in [(odd(), vec![12, 8, 12]), (Config::tiny(), vec![8, 8])] {
        let p0 = Params::<f32>::init(&cfg, 33);
        let opts = StepOptions::default();
        let mut e = Engine::with_precision(&ctx, &cfg, &p0, &opts, Precision::F16, GemmChoice::Auto).unwrap();
        let (mut p, mut st, mut sc) = (p0.clone(), OptimState::<f32>::new(&cfg), LossScale::dynamic());
        for step in 0..6 {
            let b = random_batch(100 + step, &lens);
            // The gate the ladder's end-to-end step applies to this batch and these parameters.
            let (_, _, trace) = cpu::traced(&cfg, &p, &b, 1.0, None).unwrap();
            let z = &trace.get("head.logits").unwrap().data;
            let rms = (z.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / z.len() as f64).sqrt();
            let cpu_r = cpu::train_step(&cfg, &mut p, &mut st, &mut sc, &b, &opts).unwrap();
            let (gpu_r, _) = e.train_step(&b, Replay::No).unwrap();
            assert_eq!((gpu_r.optim.skipped, cpu_r.optim.skipped), (None, None), "step {step}");
            assert_eq!(gpu_r.optim.scale, cpu_r.optim.scale);
            let gate = ladder::loss_tolerance(Precision::F16, &cfg, rms, cpu_r.loss);
            let rel = (gpu_r.loss - cpu_r.loss).abs() / cpu_r.loss;
            eprintln!("step {step}: loss gpu {:.7} cpu {:.7} (rel {rel:.2e}, gate {gate:.1e})", gpu_r.loss, cpu_r.loss);
            assert!(rel <= gate, "step {step}: loss {} vs {} (rel {rel:e}, gate {gate:e})", gpu_r.loss, cpu_r.loss);
        }
    }
    assert_clean(&ctx, test);
}

/// A timing probe's result: a finite positive time where its kernel `runs`
/// and the device has timestamps, `None` where it does not run.
#[cfg(feature = "lab")]
fn check_probe_time(ctx: &dualscope::vk::Context, runs: bool, ms: Option<f64>, what: &str) {
    match (runs, ctx.report().timestamps) {
        (true, true) => {
            let ms = ms.expect("a time where the kernel runs and the device has timestamps");
            assert!(ms > 0.0 && ms.is_finite(), "{what}: {ms}");
        }
        (false, _) => assert_eq!(ms, None, "{what}: nothing to time here"),
        (true, false) => {}
    }
}

/// The per-layer cooperative-matrix grid kernels' timing probe of the `lab`
/// feature (`Engine::probe_grid_cm`, `DUALSCOPE_GRID_PROBE` in `bench`) times layer
/// 0's kernel in both directions, whole and with its parts switched off, and
/// leaves the parameters as they were (the step after it gives the same
/// gradients). Three layers (no wavefront), H = 128 (operands read without
/// `coherent`, the probe's variant), two row blocks. Where the step does not
/// run those kernels (no cooperative matrices, the per-row recurrence) it has
/// nothing to time.
#[cfg(feature = "lab")]
#[test]
fn the_grid_cm_probe_times_both_directions_and_spoils_no_parameter() {
    use dualscope::vk::engine::Recurrence;
    use dualscope::vk::engine::probe_bits::*;
    let (test, ctx) = common::vulkan!();
    let cfg = Config {
        vocab: 256,
        d_embed: 24,
        hidden: 128,
        layers: 3,
        attn_dim: 16,
        heads: 2,
        window: 6,
        batch: 21,
        seq_len: 13,
    };
    let params = Params::init(&cfg, 5);
    let batch = random_batch(11, &(0..21).map(|i| 14 - (i % 5)).collect::<Vec<_>>());
    let opts = StepOptions::default();
    let mut e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto).unwrap();
    e.set_wg(WgChoice::Off);
    let before = e.grads(&batch).unwrap();
    let runs = e.recurrence() == Recurrence::Grid && e.recurrence_on_coopmat() && e.grid_noncoherent(true);
    assert!(!e.forward_wave() && !e.backward_wave(), "three layers take no wavefront");
    for backward in [false, true] {
        let parts = [NO_OPERAND_LOADS | NO_PRODUCTS, NO_STORES | NO_STEP_INPUTS];
        for flag in [0, BARRIERS_ONLY, NO_OPERAND_LOADS, NO_PRODUCTS, NO_STORES, NO_STEP_INPUTS, parts[0], parts[1]] {
            let ms = e.probe_grid_cm(backward, flag).unwrap();
            check_probe_time(&ctx, runs, ms, &format!("backward {backward} flag {flag}"));
        }
    }
    common::assert_same_grads(&before, &e.grads(&batch).unwrap());
    if !runs {
        eprintln!("{test}: the step does not run gru_*_grid_cm_nc here; only the None was checked");
    }
    assert_clean(&ctx, test);
}

/// The wavefronts' probes of the `lab` feature, their products' parts
/// included (the backward's on its probe variant), give a time for every
/// part where the wavefronts run on cooperative matrices with noncoherent
/// operands, None elsewhere (lavapipe), and leave the step's results as they were.
#[cfg(feature = "lab")]
#[test]
fn the_wavefront_probes_time_every_part_and_spoil_no_parameter() {
    use dualscope::vk::engine::probe_bits::*;
    use dualscope::vk::engine::{Recurrence, WaveVariant};
    let (test, ctx) = common::vulkan!();
    let cfg = Config {
        vocab: 256,
        d_embed: 24,
        hidden: 128,
        layers: 2,
        attn_dim: 16,
        heads: 2,
        window: 6,
        batch: 21,
        seq_len: 13,
    };
    let params = Params::init(&cfg, 6);
    let batch = random_batch(12, &(0..21).map(|i| 14 - (i % 5)).collect::<Vec<_>>());
    let opts = StepOptions::default();
    let mut e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto).unwrap();
    e.set_wg(WgChoice::Off);
    let before = e.grads(&batch).unwrap();
    let grid = e.recurrence() == Recurrence::Grid;
    let fwd_runs = grid && e.forward_wave() && e.wave_noncoherent(true);
    let bwd_runs = grid && e.backward_wave() && e.wave_noncoherent(false);
    let zeros = NO_OPERAND_LOADS;
    let parts = [
        0,
        NO_OPERAND_LOADS,
        NO_PRODUCTS,
        NO_STORES,
        NO_STEP_INPUTS,
        zeros | NO_STAGING,
        zeros | NO_STAGING | NO_FRAG_LOADS,
        zeros | NO_MMA,
        zeros | NO_FRAG_STORES,
        zeros | NO_STAGING | NO_FRAG_LOADS | NO_MMA,
        DIRECT_OPERAND_LOADS,
        NO_PRODUCTS | OPERAND_LOADS_ONLY,
    ];
    for flag in parts {
        let bwd = e.probe_bwd_wave(WaveVariant::Probe, flag).unwrap();
        let times = [(fwd_runs, e.probe_fwd_wave(flag).unwrap()), (bwd_runs, bwd)];
        for (dir, (runs, ms)) in ["forward", "backward"].iter().zip(times) {
            check_probe_time(&ctx, runs, ms, &format!("{dir} flag {flag}"));
        }
    }
    common::assert_same_grads(&before, &e.grads(&batch).unwrap());
    if !(fwd_runs && bwd_runs) {
        eprintln!("{test}: the wavefronts do not run here with noncoherent operands; only the None was checked");
    }
    assert_clean(&ctx, test);
}

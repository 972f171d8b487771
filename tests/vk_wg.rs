//! The small layers' GRU recurrences in one workgroup (`gru_*_wg_cm` on
//! cooperative matrices, `gru_*_wg_fma` with the product as f32 FMAs over the
//! same f16-rounded operands): where the engine picks them, the mixed ladder
//! with the FMA variant forced (what runs here, on lavapipe), and the FMA
//! variant against the per-row kernels' f16 variant, which rounds the same
//! operands. The cooperative-matrix variant's ladder is in tests/vk_mixed.rs
//! (it needs a device with cooperative matrices).

mod common;

use common::{assert_clean, ladder_setup, random_batch};
use dualscope::ladder::{Mode, ModelLadder, Rung, Status};
use dualscope::model::{Config, Params};
use dualscope::step::GemmChoice;
use dualscope::step::StepOptions;
use dualscope::step::{Precision, PrecisionMap};
use dualscope::vk::engine::{Engine, WgChoice};

fn cfg(hidden: usize, batch: usize, seq_len: usize) -> Config {
    Config { vocab: 256, d_embed: 24, hidden, layers: 2, attn_dim: 16, heads: 2, window: 6, batch, seq_len }
}

/// The mixed ladder (rungs 2–11 and the end-to-end gate, chained and
/// isolated) passes with the one-workgroup FMA recurrences forced, on shapes
/// that do not divide their tiles: a partial row block (B = 5) and a full
/// one (B = 16), 3 and 5 K-tiles forward (H = 48, 80), sequence lengths of
/// no particular multiple, ragged rows. The engine reports the kernel and
/// runs no wavefront with it; where the shape does not fit (B = 17,
/// H = 144, H = 40) or the variant is switched off, it does not pick it.
#[test]
fn the_one_workgroup_fma_recurrences_pass_the_mixed_ladder() {
    let (test, ctx) = common::vulkan!(validation_from_env);
    let cases = [
        (cfg(48, 5, 13), vec![14, 14, 9, 14, 3]),
        (cfg(80, 16, 11), (0..16).map(|i| 12 - (i % 4)).collect::<Vec<_>>()),
    ];
    for (cfg, lens) in cases {
        for mode in [Mode::Chained, Mode::Isolated] {
            let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, mode, &lens, 7, Precision::F16)).unwrap();
            l.engine_mut().set_wg(WgChoice::Fma);
            let label = format!("H={} B={} {mode:?}", cfg.hidden, cfg.batch);
            for &id in &Rung::ALL[1..] {
                let r = l.run(id).unwrap();
                let bad: Vec<_> = r.cases.iter().filter(|c| c.status != Status::Pass).collect();
                assert_eq!(r.status, Status::Pass, "{label} {id}: {bad:#?}");
                for c in r.cases.iter().filter(|c| c.name.starts_with("gru.")) {
                    eprintln!("{label} {id} {}: rel L2 {:.2e} of {:.1e}", c.name, c.rel_l2, c.tolerance);
                }
            }
            let e = l.engine();
            assert_eq!(e.recurrence_wg(), Some("fma"), "{label}");
            assert!(!e.forward_wave() && !e.backward_wave(), "{label}");
            let map = e.precision_map();
            assert!(map.iter().filter(|(s, _)| s.to_string().contains(".rec")).all(|(_, p)| p == Precision::F16));
            if mode == Mode::Chained {
                let e2e = l.end_to_end().unwrap();
                assert_eq!(e2e.status, Status::Pass, "{label}: {e2e:?}");
            }
        }
    }
    // Shapes it does not take, and the switch.
    for (cfg, lens, wg) in [
        (cfg(48, 17, 5), vec![6; 17], WgChoice::Fma),
        (cfg(144, 4, 5), vec![6; 4], WgChoice::Fma),
        (cfg(40, 4, 5), vec![6; 4], WgChoice::Fma),
        (cfg(48, 4, 5), vec![6; 4], WgChoice::Off),
    ] {
        let mut l = ModelLadder::new(&ctx, ladder_setup(&cfg, Mode::Chained, &lens, 7, Precision::F16)).unwrap();
        l.engine_mut().set_wg(wg);
        l.run(Rung::GruFwd).unwrap();
        assert_eq!(l.engine().recurrence_wg(), None, "H={} B={} {wg:?}", cfg.hidden, cfg.batch);
    }
    assert_clean(&ctx, test);
}

/// The FMA variant computes what the per-row kernels' f16 variant computes
/// (`gru_*_seq_f16`: the same operands rounded to f16 — the values here are
/// in f16's normal range, where its mantissa rounding is f16's — and f32
/// sums): every gradient agrees to f32's summation noise, where the same step
/// with f32 recurrences differs at f16's level (the test can fail). A map
/// with `gru.rec=f32` runs the f32 kernels even with the FMA variant forced.
#[test]
fn the_fma_variant_matches_the_per_row_f16_kernels() {
    let (test, ctx) = common::vulkan!();
    let opts = StepOptions::default();
    for (cfg, lens) in [(cfg(48, 5, 13), vec![14, 14, 9, 14, 3]), (cfg(80, 16, 9), vec![10; 16])] {
        let params = Params::init(&cfg, 5);
        let batch = random_batch(11, &lens);
        let f32_rec = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto)
            .unwrap()
            .precision_map()
            .with("gru.rec=f32,gru.rec.bwd=f32")
            .unwrap();
        let map: PrecisionMap = f32_rec.clone().with("gru.rec=f16").unwrap().with("gru.rec.bwd=f16").unwrap();
        let run = |map: &PrecisionMap, wg: WgChoice| {
            let mut e = Engine::with_precision_map(&ctx, &cfg, &params, &opts, map, GemmChoice::Auto).unwrap();
            e.set_wg(wg);
            let g = e.grads(&batch).unwrap();
            (g, e.recurrence_wg())
        };
        let (wg, kind) = run(&map, WgChoice::Fma);
        assert_eq!(kind, Some("fma"));
        let (seq, kind) = run(&map, WgChoice::Off);
        assert_eq!(kind, None);
        // A map with the recurrences in f32 keeps the f32 kernels, forced or not.
        let (plain, kind) = run(&f32_rec, WgChoice::Fma);
        assert_eq!(kind, None);
        let rel = |a: &[f32], b: &[f32]| {
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for (x, y) in a.iter().zip(b) {
                num += (*x as f64 - *y as f64).powi(2);
                den += (*y as f64).powi(2);
            }
            (num / den.max(1e-300)).sqrt()
        };
        let mut worst_f32 = 0.0f64;
        for (((name, x), y), z) in wg.grads.named(&cfg).into_iter().zip(seq.grads.tensors()).zip(plain.grads.tensors())
        {
            let (d_seq, d_f32) = (rel(&x.data, &y.data), rel(&x.data, &z.data));
            eprintln!("H={} {name}: rel L2 {d_seq:.2e} to seq f16, {d_f32:.2e} to f32 recurrences", cfg.hidden);
            assert!(d_seq < 2e-5, "H={} {name}: rel L2 {d_seq:.2e} to the per-row f16 kernels", cfg.hidden);
            worst_f32 = worst_f32.max(d_f32);
        }
        assert!(worst_f32 > 1e-4, "H={}: the f16 rounding did not show ({worst_f32:.2e})", cfg.hidden);
        assert!((wg.loss - seq.loss).abs() <= 1e-5 * seq.loss.abs(), "{} {}", wg.loss, seq.loss);
    }
    assert_clean(&ctx, test);
}

/// The one-workgroup timing probe of the `lab` feature (`Engine::probe_wg`,
/// `DUALSCOPE_GRID_PROBE` in `bench`) times layer 0's kernels in both directions, whole and with
/// every part switched off, and leaves the parameters as they were (the
/// step after it gives the same gradients); without the one-workgroup
/// kernels it has nothing to time.
#[cfg(feature = "lab")]
#[test]
fn the_one_workgroup_probe_times_both_directions_and_spoils_no_parameter() {
    use dualscope::vk::engine::probe_bits::*;
    let (test, ctx) = common::vulkan!();
    let cfg = cfg(48, 5, 13);
    let params = Params::init(&cfg, 5);
    let batch = random_batch(11, &[14, 14, 9, 14, 3]);
    let opts = StepOptions::default();
    let mut e = Engine::with_precision(&ctx, &cfg, &params, &opts, Precision::F16, GemmChoice::Auto).unwrap();
    e.set_wg(WgChoice::Fma);
    let before = e.grads(&batch).unwrap();
    assert_eq!(e.recurrence_wg(), Some("fma"));
    for backward in [false, true] {
        let all = WG_NO_PRODUCT | WG_NO_STORES | WG_NO_INPUTS | WG_NO_BARRIERS;
        for flag in [0, WG_NO_PRODUCT, WG_NO_STORES, WG_NO_INPUTS, WG_NO_BARRIERS, all] {
            let ms = e.probe_wg(backward, flag).unwrap();
            if ctx.report().timestamps {
                let ms = ms.expect("a time where the device has timestamps");
                assert!(ms > 0.0 && ms.is_finite(), "backward {backward} flag {flag}: {ms}");
            }
        }
    }
    common::assert_same_grads(&before, &e.grads(&batch).unwrap());
    e.set_wg(WgChoice::Off);
    e.grads(&batch).unwrap();
    assert_eq!(e.probe_wg(false, 0).unwrap(), None);
    assert_clean(&ctx, test);
}

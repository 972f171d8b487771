//! f16 headroom (docs/headroom.md): the figures on tensors worked out by hand,
//! their edge cases, the ladder's figures on every compared tensor (library and
//! `ladder --json`), and the warning a too-high loss scale raises.

mod common;

use common::{dualscope, ladder_setup, ok_json};
use dualscope::ladder::headroom::{ExpHistogram, F16_MAX, MARGIN_BITS, MIN_SUBNORMAL, TensorHeadroom, measure};
use dualscope::ladder::{CaseResult, MIXED_SCALE, Mode, ModelLadder, Rung, Status};
use dualscope::model::Config;
use dualscope::step::Precision;

/// The histogram with the given (exponent, count) bins and nothing else.
fn bins(pairs: &[(i32, u64)]) -> Vec<u64> {
    let mut v = vec![0; ExpHistogram::BINS];
    for &(e, n) in pairs {
        v[(e - dualscope::ladder::headroom::EXP_MIN) as usize] = n;
    }
    v
}

/// [65504, 1, 2^-15, 0, -3]: at scale 1 the maximum is f16's exactly (0 bits
/// left) and 2^-15 is the one subnormal of four non-zero values; at scale 2
/// the maximum is twice f16's (−1 bit, the overflow bin) and 2^-14 is normal.
#[test]
fn figures_of_a_known_tensor() {
    let x = [65504.0f32, 1.0, 2f32.powi(-15), 0.0, -3.0];
    let h = measure(&x, 1.0);
    assert_eq!(h.count, 5);
    assert_eq!(h.max_abs, 65504.0);
    assert_eq!(h.max_over_f16_max, 1.0);
    assert_eq!(h.headroom_bits, Some(0.0));
    assert_eq!((h.subnormal_share, h.subnormal), (0.25, 1));
    assert_eq!(h.zero_share, 0.2);
    assert_eq!(h.nonfinite, 0);
    assert_eq!(h.histogram.counts, bins(&[(15, 1), (0, 1), (-15, 1), (1, 1)]));
    assert_eq!((h.histogram.zero, h.histogram.underflow, h.histogram.overflow, h.histogram.nonfinite), (1, 0, 0, 0));

    let h = measure(&x, 2.0);
    assert_eq!(h.max_abs, 131008.0);
    assert_eq!(h.max_over_f16_max, 2.0);
    assert_eq!(h.headroom_bits, Some(-1.0));
    assert_eq!(h.subnormal_share, 0.0, "2^-15 · 2 = 2^-14 is f16's smallest normal");
    assert_eq!(h.histogram.counts, bins(&[(1, 1), (-14, 1), (2, 1)]));
    assert_eq!((h.histogram.overflow, h.histogram.zero, h.histogram.total()), (1, 1, 5));
}

/// Below 2^-24 a value underflows (its own bin, still subnormal); NaN and
/// ±inf are counted apart and left out of the maximum; an empty or all-zero
/// tensor has no headroom limit and no shares.
#[test]
fn edge_cases() {
    let h = measure(&[2f32.powi(-25), 2f32.powi(-24), 1e-30, 0.5], 1.0);
    assert_eq!((h.histogram.underflow, h.histogram.count(-24), h.histogram.count(-1)), (2, 1, 1));
    assert_eq!(h.subnormal_share, 0.75);
    assert_eq!(h.headroom_bits, Some((F16_MAX / 0.5).log2()));

    let h = measure(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 4.0, 0.0], 1.0);
    assert_eq!((h.nonfinite, h.histogram.nonfinite, h.histogram.zero), (3, 3, 1));
    assert_eq!(h.max_abs, 4.0);
    assert_eq!(h.headroom_bits, Some(14.0 - (65536.0f64 / 65504.0).log2()));
    assert_eq!(h.zero_share, 0.2);
    assert_eq!(h.histogram.total(), 5);

    for empty in [&[][..], &[0.0, -0.0, 0.0][..], &[f32::NAN][..]] {
        let h = measure(empty, MIXED_SCALE);
        assert_eq!(h.count, empty.len());
        assert_eq!((h.max_abs, h.max_over_f16_max, h.subnormal_share), (0.0, 0.0, 0.0));
        assert_eq!(h.headroom_bits, None, "{empty:?}");
        assert_eq!(h.zero_share, if empty.len() == 3 { 1.0 } else { 0.0 });
        assert_eq!(h.histogram.total() as usize, empty.len());
        assert!(TensorHeadroom::of(empty, empty, MIXED_SCALE).warnings("t").is_empty());
    }
    // A scale that takes f32's largest value past f32's range stays finite in f64.
    let h = measure(&[f32::MAX], 2.0);
    assert_eq!((h.nonfinite, h.histogram.overflow), (0, 1));
    assert!(h.headroom_bits.unwrap() < -100.0);
}

/// The warnings name the tensor and the figure; a tensor well inside both
/// margins has none.
#[test]
fn warnings_name_the_tensor_and_the_figure() {
    let fine = TensorHeadroom::of(&[1.0, -2.0, 0.0], &[1.0, -2.0, 0.0], 1024.0);
    assert!(fine.warnings("a").is_empty());
    // 40000 is 0.71 bits under 65504: within one doubling.
    let close = TensorHeadroom::of(&[1.0, 40000.0], &[1.0, 40000.5], 1.0);
    let w = close.warnings("grad.x");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("grad.x") && w[0].contains("0.71") && w[0].contains("margin of 1"), "{}", w[0]);
    assert!(close.gpu.headroom_bits.unwrap() < MARGIN_BITS);
    // 20 of 1000 non-zero values below 2^-14 on the GPU side only.
    let mut gpu = vec![1.0f32; 1000];
    gpu[..20].iter_mut().enumerate().for_each(|(i, x)| *x = -1e-6 * i as f32 - 1e-7);
    let tiny = TensorHeadroom::of(&[1.0; 1000], &gpu, 1.0);
    assert_eq!((tiny.gpu.subnormal, tiny.gpu.subnormal_share), (20, 0.02));
    let w = tiny.warnings("ctx.attn");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("ctx.attn") && w[0].contains("2.00% (GPU, 20)") && w[0].contains("0.00% (CPU, 0)"),
        "{}",
        w[0]
    );
    // Over the share but fewer than MIN_SUBNORMAL values (one of 84): no warning.
    let mut q = vec![0.25f32; 84];
    q[7] = 3e-5;
    let one = TensorHeadroom::of(&q, &q, 1.0);
    assert!(one.cpu.subnormal_share > 0.01 && one.cpu.subnormal < MIN_SUBNORMAL);
    assert!(one.warnings("ctx.q").is_empty());
}

/// A case written before the figures existed still reads (no `headroom`).
#[test]
fn old_reports_read_without_headroom() {
    let old = serde_json::json!({
        "name": "t", "params": "1 values", "status": "pass", "rel_l2": 0.0, "rel_l2_cpu_f32": 0.0,
        "rel_l2_gpu_f64": 0.0, "max_abs_err": 0.0, "max_abs_index": 0, "non_finite_cpu": 0,
        "non_finite_gpu": 0, "sentinel_ok": true, "tolerance": 1e-5, "gpu_ms": null, "cpu_ms": 0.0, "notes": []
    });
    let c: CaseResult = serde_json::from_value(old).unwrap();
    assert_eq!(c.headroom, None);
    // 31.984375 = 65504 / 2^11: every figure is exact, so RON's float text (which
    // may be an ulp off for other values) reads back equal.
    let with = CaseResult { headroom: Some(TensorHeadroom::of(&[31.984375, 0.0], &[31.984375, 1e-6], 2.0)), ..c };
    let back: CaseResult = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
    assert_eq!(back, with);
    let ron_back: CaseResult = ron::from_str(&ron::to_string(&with).unwrap()).unwrap();
    assert_eq!(ron_back, with);
}

/// Whether the backward holds `name` multiplied by the loss scale (the
/// ladder's own rule, `setup::carries_scale`).
fn scaled(name: &str) -> bool {
    name == "loss.dlogits" || name.starts_with("grad.") || name.contains(".d_")
}

/// The tiny f16 ladder: every case of rungs 2–11 carries both sides' figures,
/// forward tensors at scale 1 and backward ones at the loss scale 2^16, and
/// none is under a margin at that default. With the loss scale set so that
/// the largest backward tensor is half a doubling from 65504, that tensor's
/// case warns (the rung is a warning, not a failure) and names the figure.
#[test]
fn the_f16_ladder_measures_every_tensor_and_warns_at_a_high_scale() {
    let (_test, ctx) = common::vulkan!(validation_from_env);
    let cfg = Config::tiny();
    let setup = || ladder_setup(&cfg, Mode::Isolated, &[9, 6], 5, Precision::F16);
    let mut l = ModelLadder::new(&ctx, setup()).unwrap();
    let mut largest = (0.0f64, String::new());
    for &id in &Rung::ALL[1..] {
        let r = l.run(id).unwrap();
        assert_eq!(r.status, Status::Pass, "{id}: {:#?}", r.cases);
        for c in &r.cases {
            let h = c.headroom.as_ref().unwrap_or_else(|| panic!("{id} {} has no headroom", c.name));
            let n = l.rung_tensors(id).iter().find(|t| t.name == c.name).unwrap().cpu.len();
            assert_eq!((h.cpu.count, h.gpu.count), (n, n), "{}", c.name);
            assert_eq!(h.cpu.histogram.total() as usize, n);
            let want = if scaled(&c.name) { MIXED_SCALE } else { 1.0 };
            assert_eq!(h.scale, want, "{id} {}", c.name);
            assert!(!c.notes.iter().any(|n| n.contains("headroom")), "{}: {:?}", c.name, c.notes);
            if scaled(&c.name) && id != Rung::Optim && h.cpu.max_abs / h.scale > largest.0 {
                largest = (h.cpu.max_abs / h.scale, c.name.clone());
            }
        }
    }
    let (m, name) = largest;
    assert!(m > 0.0);
    let high = F16_MAX / m / 2f64.sqrt();
    eprintln!("largest backward tensor {name}: max |x| {m:.3e}; loss scale {high:.4e}");
    let mut l = ModelLadder::new(&ctx, setup()).unwrap();
    l.set_loss_scale(Some(high)).unwrap();
    assert!(l.set_loss_scale(Some(f64::INFINITY)).is_err() && l.set_loss_scale(Some(0.0)).is_err());
    let mut warned = Vec::new();
    for &id in &Rung::ALL[1..] {
        let r = l.run(id).unwrap();
        assert_ne!(r.status, Status::Fail, "{id}: {:#?}", r.cases);
        for c in r.cases.iter().filter(|c| c.notes.iter().any(|n| n.starts_with("f16 headroom:"))) {
            assert_eq!(c.status, Status::Warn, "{}", c.name);
            assert_eq!(r.status, Status::Warn);
            warned.push((c.name.clone(), c.notes.clone()));
        }
    }
    let (_, notes) = warned.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name} not warned: {warned:?}"));
    assert!(notes.iter().any(|n| n.contains(&name) && n.contains("bits of headroom")), "{notes:?}");
    common::assert_clean(&ctx, "the_f16_ladder_measures_every_tensor_and_warns_at_a_high_scale");
}

/// `ladder --json --precision f16` carries the figures of every case of rungs
/// 2–11 (none for `gemm`'s products) and warns about none at the default
/// scale; `--loss-scale` must be a power of two.
#[test]
fn ladder_json_carries_the_headroom() {
    common::skip_without_vulkan!();
    let args = ["ladder", "--config", "tiny", "--precision", "f16", "--json"];
    let v = ok_json(&dualscope(&args, &[]));
    assert_eq!(v["status"], "pass");
    for r in v["rungs"].as_array().unwrap() {
        for c in r["cases"].as_array().unwrap() {
            let h = &c["headroom"];
            if r["id"] == "gemm" {
                assert!(h.is_null());
                continue;
            }
            let notes = c["notes"].as_array().unwrap();
            assert!(
                !notes.iter().any(|n| n.as_str().unwrap().starts_with("f16 headroom:")),
                "{}: {notes:?}",
                c["name"]
            );
            for side in ["cpu", "gpu"] {
                assert!(h[side]["max_over_f16_max"].as_f64().is_some(), "{} {}: {h}", r["id"], c["name"]);
                assert!(h[side]["subnormal_share"].as_f64().is_some());
                assert_eq!(h[side]["histogram"]["counts"].as_array().unwrap().len(), ExpHistogram::BINS);
            }
        }
    }
    let out = dualscope(&["ladder", "--config", "tiny", "--loss-scale", "3"], &[]);
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked") && err.contains("--loss-scale") && err.contains("power of two"), "{err}");
}

/// At `--loss-scale 2^17` the head's bias gradient (1.9 bits of headroom at
/// 2^16 on this batch) is under the margin: the human output has its short
/// line, the rung is a warning, and the run still passes with exit 0.
#[test]
fn a_high_loss_scale_warns_without_failing_the_run() {
    common::skip_without_vulkan!();
    let args = ["ladder", "--config", "tiny", "--precision", "f16", "--rungs", "head_bwd", "--loss-scale", "131072"];
    let out = dualscope(&args, &[]);
    let text = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", common::text(&out.stderr));
    let line = text.lines().find(|l| l.trim_start().starts_with("warn head_bwd")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("grad.head.bias") && line.contains("bits") && line.contains("scale 131072"), "{line}");
    assert!(text.contains("f16 headroom: lowest 0.9"), "{text}");
    assert!(text.contains("status pass"), "{text}");
    assert!(!text.contains("        f16 headroom:"), "the long note is not repeated in the table: {text}");
    // In f32 the backward runs at that scale too (and is unscaled before the
    // comparison): the same figures, no warning, every rung passes.
    let args =
        ["ladder", "--config", "tiny", "--precision", "f32", "--rungs", "loss,head_bwd", "--loss-scale", "131072"];
    let v = ok_json(&dualscope(&[&args[..], &["--json"]].concat(), &[]));
    assert_eq!((v["status"].as_str(), v["loss_scale"].as_f64()), (Some("pass"), Some(131072.0)));
    for r in v["rungs"].as_array().unwrap() {
        assert_eq!(r["status"], "pass", "{r}");
        let bias = r["cases"].as_array().unwrap().iter().find(|c| c["name"] == "grad.head.bias");
        if let Some(c) = bias {
            let bits = c["headroom"]["gpu"]["headroom_bits"].as_f64().unwrap();
            assert!((0.85..0.95).contains(&bits), "{bits}");
            assert_eq!(c["headroom"]["scale"].as_f64(), Some(131072.0));
        }
    }
}

/// The inspector's headroom plot, drawn by the wgpu renderer and kept as a
/// snapshot (`tests/snapshots/headroom_plot.png`, also docs/images/): a
/// gradient-like tensor at scale 2^16 whose magnitudes spread over 2^-34 …
/// 2^-1.5 (12 % subnormal after scaling, 1.5 bits of headroom), the GPU side
/// a little off and with one NaN, both sides' bars and figures.
#[test]
fn the_headroom_plot_snapshot() {
    let mut rng = dualscope::rng::Rng::new(3);
    let cpu: Vec<f32> = (0..4000)
        .map(|i| if i % 10 == 0 { 0.0 } else { (rng.normal().signum() * 2f64.powf(rng.range(-34.0, -1.5))) as f32 })
        .collect();
    let mut gpu: Vec<f32> = cpu.iter().map(|&x| x * (1.0 + 1e-3 * rng.normal() as f32)).collect();
    gpu[5] = f32::NAN;
    let h = TensorHeadroom::of(&cpu, &gpu, MIXED_SCALE);
    assert!((0.10..0.15).contains(&h.cpu.subnormal_share), "{}", h.cpu.subnormal_share);
    let mut harness = egui_kittest::Harness::builder()
        .with_size(egui::vec2(900.0, 300.0))
        .wgpu()
        .build_ui(move |ui| dualscope::ui::panels::headroom::headroom_plot(ui, Some(&h)));
    harness.run_steps(2);
    harness.snapshot("headroom_plot");
}

/// Which compared tensors may warn under a map (`headroom::passes_f16`):
/// none under an all-f32 map; under the cooperative-matrix default (the
/// H200's step, every product and recurrence in f16) every tensor of rungs
/// 2–10, as before maps; under lavapipe's default (recurrences in f32) all
/// but the recurrences' own gates; under `head.bwd=f16` alone only the
/// tensors the head's backward products read or write.
#[test]
fn warnings_follow_the_precision_map() {
    use dualscope::ladder::headroom::passes_f16;
    use dualscope::step::{MapStage, PrecisionMap, StageKind};
    let cfg = Config::tiny();
    let names: Vec<String> = Rung::ALL[1..10].iter().flat_map(|r| r.outputs(&cfg)).collect();
    let f32_map = PrecisionMap::uniform(Precision::F32, cfg.layers);
    assert!(names.iter().all(|n| !passes_f16(&f32_map, &cfg, n)));
    let cm = PrecisionMap::default_for(Precision::F16, cfg.layers, true);
    let missing: Vec<&String> = names.iter().filter(|n| !passes_f16(&cm, &cfg, n)).collect();
    assert!(missing.is_empty(), "{missing:?}");
    let seq = PrecisionMap::default_for(Precision::F16, cfg.layers, false);
    let quiet: Vec<&str> = names.iter().filter(|n| !passes_f16(&seq, &cfg, n)).map(|s| s.as_str()).collect();
    let gates: Vec<String> = (0..2).flat_map(|l| ["gh", "r", "z", "n"].map(|f| format!("gru.l{l}.{f}"))).collect();
    assert_eq!(quiet, gates.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let mut head = f32_map.clone();
    head.set(MapStage::bwd(StageKind::Head, 0), Precision::F16);
    let mut warned: Vec<&str> = names.iter().filter(|n| passes_f16(&head, &cfg, n)).map(|s| s.as_str()).collect();
    warned.sort();
    let mut want = vec![
        "ctx.c",
        "ctx.token_norm",
        "grad.head.bias",
        "grad.head.ctx.weight",
        "grad.head.tok.weight",
        "gru.l1.d_h",
        "gru.l1.h",
        "head.d_c",
        "head.d_s",
        "loss.dlogits",
    ];
    want.sort();
    assert_eq!(warned, want);
    // The optimizer's state never warns; a name this does not know warns as
    // before maps (whenever a stage is in f16).
    assert!(!passes_f16(&cm, &cfg, "adam.m.head.bias") && !passes_f16(&cm, &cfg, "grad_norm"));
    assert!(passes_f16(&head, &cfg, "something.new") && !passes_f16(&f32_map, &cfg, "something.new"));
}

/// On the GPU at a loss scale that puts `grad.head.bias` under the margin:
/// the default f16 map warns on it; an all-f32 map with `--precision f16`
/// warns on nothing (its figures still there); `head.bwd=f16` alone warns on
/// it and only on tensors of that stage.
#[test]
fn the_ladder_warns_only_through_f16_stages() {
    use dualscope::ladder::headroom::passes_f16;
    use dualscope::step::GemmChoice;
    use dualscope::step::{MapStage, PrecisionMap, StageKind};
    let (_test, ctx) = common::vulkan!(validation_from_env);
    let cfg = Config::tiny();
    let setup = || ladder_setup(&cfg, Mode::Isolated, &[9, 6], 5, Precision::F16);
    let rungs = [Rung::Loss, Rung::HeadBwd, Rung::AttnBwd, Rung::GruBwd];
    let mut l = ModelLadder::new(&ctx, setup()).unwrap();
    let r = l.run(Rung::HeadBwd).unwrap();
    let bias = r.cases.iter().find(|c| c.name == "grad.head.bias").unwrap().headroom.clone().unwrap();
    let high = F16_MAX / (bias.cpu.max_abs / bias.scale) / 2f64.sqrt();
    let warned = |map: Option<PrecisionMap>| -> Vec<String> {
        let mut l = ModelLadder::with_map(&ctx, setup(), GemmChoice::Auto, map).unwrap();
        l.set_loss_scale(Some(high)).unwrap();
        let mut out = Vec::new();
        for &id in &rungs {
            let r = l.run(id).unwrap();
            assert_ne!(r.status, Status::Fail, "{id}: {:#?}", r.cases);
            for c in &r.cases {
                assert!(c.headroom.is_some(), "{}", c.name);
                if c.notes.iter().any(|n| n.starts_with("f16 headroom:")) {
                    assert_eq!(c.status, Status::Warn);
                    out.push(c.name.clone());
                }
            }
        }
        out
    };
    let default = warned(None);
    assert!(default.contains(&"grad.head.bias".to_string()), "{default:?}");
    let none = warned(Some(PrecisionMap::uniform(Precision::F32, cfg.layers)));
    assert!(none.is_empty(), "an all-f32 map warned: {none:?}");
    let mut head = PrecisionMap::uniform(Precision::F32, cfg.layers);
    head.set(MapStage::bwd(StageKind::Head, 0), Precision::F16);
    let only = warned(Some(head.clone()));
    assert!(only.contains(&"grad.head.bias".to_string()), "{only:?}");
    assert!(only.iter().all(|n| passes_f16(&head, &cfg, n)), "{only:?}");
    common::assert_clean(&ctx, "the_ladder_warns_only_through_f16_stages");
}

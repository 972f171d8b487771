//! Precision bisect finds a planted f16-only fault's stage and nothing else
//! (docs/precision.md), and the empty set on the clean engine.

mod common;

use std::sync::atomic::AtomicBool;

use common::{assert_clean, ladder_setup, odd};
use dualscope::ladder::{self, Mode, Outcome, PrecisionBisectSpec};
use dualscope::step::Fault;
use dualscope::step::GemmChoice;
use dualscope::step::{MapStage, Precision};

fn spec(fault: Option<Fault>) -> PrecisionBisectSpec {
    PrecisionBisectSpec {
        setup: ladder_setup(&odd(), Mode::Isolated, &[9, 5], 7, Precision::F16),
        gemm_choice: GemmChoice::Auto,
        fault,
        loss_scale: None,
    }
}

/// With `f16_stage_skip_slice=X` planted, the bisect keeps exactly {X} in f32,
/// for two stages X (a forward and a backward one); each probe's map keeps
/// its listed stages in f32, and a probe fails exactly when X is in f16.
#[test]
fn bisect_finds_the_planted_stage() {
    let (test, ctx) = common::vulkan!();
    for name in ["head.bwd", "gru.l0.input"] {
        let stage = MapStage::parse(name).unwrap();
        let fault = Fault::parse(&format!("f16_stage_skip_slice={name}")).unwrap();
        let r = ladder::precision_bisect(&ctx, &spec(Some(fault)), &AtomicBool::new(false), |p| {
            eprintln!("{name}: {} f32={:?} pass={} {:?} {:?}", p.phase, p.f32_stages, p.pass, p.rung, p.tensor)
        })
        .unwrap();
        assert_eq!(r.outcome, Outcome::Found, "{name}: {r:#?}");
        assert_eq!(r.keep_f32, vec![name.to_string()], "{name}");
        let map = r.map.as_ref().unwrap();
        assert_eq!(map.get(stage), Precision::F32);
        assert_eq!(map.low_stages().len(), r.candidates.len() - 1, "{name}: every other candidate in f16");
        assert_eq!(r.probes[0].phase, "all f16");
        for p in &r.probes {
            let x_f16 = p.map.get(stage) != Precision::F32;
            assert_eq!(p.pass, !x_f16, "{name}: probe {} keeping {:?} in f32", p.phase, p.f32_stages);
            for s in &p.f32_stages {
                assert_eq!(p.map.get(MapStage::parse(s).unwrap()), Precision::F32);
            }
        }
        // The first failure names X's rung.
        assert_eq!(r.probes[0].rung.as_deref(), Some(fault.expected_rung()), "{name}");
    }
    assert_clean(&ctx, test);
}

/// The clean engine passes with every candidate in f16: nothing must stay
/// in f32, found with one probe; `embed.bwd` (no f16 kernel) is no candidate.
#[test]
fn bisect_of_a_clean_engine_keeps_nothing() {
    let (test, ctx) = common::vulkan!();
    let r = ladder::precision_bisect(&ctx, &spec(None), &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(r.outcome, Outcome::AllF16Passes, "{r:#?}");
    assert!(r.keep_f32.is_empty());
    assert_eq!(r.probes.len(), 1);
    assert!(r.candidates.iter().all(|c| c != "embed.bwd") && r.candidates.len() == 13, "{:?}", r.candidates);
    assert_eq!(r.no_f16_kernel.len(), 1);
    assert_eq!(r.map.unwrap().low_stages().len(), 13);
    assert_clean(&ctx, test);
}

/// A fault the f32 step shows too is no precision problem: every map fails,
/// the all-f32 one included.
#[test]
fn bisect_of_a_non_precision_bug_says_so() {
    let (test, ctx) = common::vulkan!();
    let r = ladder::precision_bisect(&ctx, &spec(Some(Fault::MaskDropped)), &AtomicBool::new(false), |_| {}).unwrap();
    assert_eq!(r.outcome, Outcome::NotPrecision, "{r:#?}");
    assert_eq!(r.probes.len(), 2);
    assert!(r.probes.iter().all(|p| !p.pass && p.rung.as_deref() == Some("loss")));
    assert!(r.map.is_none());
    assert_clean(&ctx, test);
}

/// `--capture DIR`: the probes run at the loss scale the capture's step ran
/// (here 1, a CPU f32 run's fixed scale, not the 2^16 the ladder takes for
/// an f16 backward), and the report says so, for every probe too.
#[test]
fn bisect_of_a_capture_runs_at_its_loss_scale() {
    common::skip_without_vulkan!();
    let dir = common::Dir::new();
    let data = dir.file("corpus.txt", &dualscope::dataset::corpus(11, 6000));
    let out = dir.path("run");
    let args = common::train_tiny(&data, &["--steps", "2", "--capture-at", "1", "--out", common::s(&out)]);
    let o = common::run(&args);
    assert!(o.status.success(), "{}", common::text(&o.stderr));
    let cap = out.join("captures").join("step_000001");
    let want = dualscope::capture::load(&cap).unwrap().meta.loss_scale.scale;
    assert_eq!(want, 1.0);
    let o = common::run(&["precision-bisect", "--capture", common::s(&cap), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", common::text(&o.stdout), common::text(&o.stderr));
    });
    assert_eq!(v["loss_scale"].as_f64(), Some(want), "{v}");
    assert_eq!(v["report"]["loss_scale"].as_f64(), Some(want));
    let probes = v["report"]["probes"].as_array().unwrap();
    assert!(!probes.is_empty());
    assert!(probes.iter().all(|p| p["loss_scale"].as_f64() == Some(want)), "{probes:?}");
    let o = common::run(&["precision-bisect", "--capture", common::s(&cap)]);
    let t = common::text(&o.stdout);
    assert!(t.contains("loss scale: 1 (the capture's"), "{t}");
}

//! `dualscope growth` on lavapipe at the tiny config, one row of a few
//! hundred positions: a clean run stays inside a narrow envelope in f32 and
//! in f16, a token changed for the GPU at P is found at P exactly by every
//! forward series (and before P by the backward ones), and the command's
//! JSON and exit codes (skipped without Vulkan, except the usage errors).

mod common;

use std::sync::Arc;

use common::{Dir, fails, run, s, text};
use dualscope::dataset::Dataset;
use dualscope::model::{Config, Params};
use dualscope::step::{GemmChoice, Precision};
use dualscope::triage::growth::{Direction, GrowthPlan, GrowthReport};
use dualscope::vk::Context;

const T: usize = 300;
const P: usize = 150;

fn plan(precision: Precision, plant: Option<usize>) -> GrowthPlan {
    let cfg = Config::tiny();
    let ds = Dataset::from_bytes("corpus.txt", dualscope::dataset::corpus(11, 6000)).unwrap();
    GrowthPlan {
        params: Params::init(&cfg, 1),
        config: cfg,
        row: ds.window(40, T + 1).unwrap(),
        source: "corpus.txt".into(),
        offset: 40,
        precision,
        gemm: GemmChoice::Auto,
        plant_token_at: plant,
    }
}

fn growth(ctx: &Arc<Context>, p: &GrowthPlan) -> GrowthReport {
    dualscope::triage::growth::run(ctx, p, &mut |_| {}).unwrap()
}

/// A clean run: no position of any series outside, every envelope of a
/// forward (backward) series below `max_envelope.0` (`.1`) and its median
/// below `median_envelope.0` (`.1`), so that an error of that size would
/// show, and the GPU really differs from the CPU somewhere (not a run
/// compared with itself).
fn assert_clean(r: &GrowthReport, max_envelope: (f64, f64), median_envelope: (f64, f64)) {
    assert_eq!(r.first_outside, None, "{}", r.summary_line());
    assert_eq!(r.len, T);
    assert_eq!(r.series.len(), 6);
    for sr in &r.series {
        let mut sorted = sr.envelope.clone();
        sorted.sort_by(f64::total_cmp);
        let widest = sorted.last().copied().unwrap_or(0.0);
        eprintln!("{}: worst {:.3}, envelope median {:.2e} max {widest:.2e}", sr.name, sr.worst_ratio, sorted[T / 2]);
    }
    for sr in &r.series {
        let (max, med) = match sr.direction {
            Direction::Forward => (max_envelope.0, median_envelope.0),
            Direction::Backward => (max_envelope.1, median_envelope.1),
        };
        assert_eq!((sr.difference.len(), sr.reference.len(), sr.envelope.len()), (T, T, T), "{}", sr.name);
        assert_eq!((sr.first_outside, sr.n_outside), (None, 0), "{}", sr.name);
        assert!(sr.worst_ratio < 1.0, "{}: {}", sr.name, sr.worst_ratio);
        let widest = sr.envelope.iter().copied().fold(0.0, f64::max);
        assert!(widest < max, "{}: envelope up to {widest:e}", sr.name);
        let mut sorted = sr.envelope.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[T / 2];
        assert!(median < med, "{}: median envelope {median:e}", sr.name);
        assert!(sr.difference.iter().any(|&d| d > 0.0), "{}: the GPU equals the CPU bit for bit", sr.name);
        assert!(sr.reference.iter().any(|&d| d > 0.0), "{}: f32 equals f64", sr.name);
    }
}

#[test]
fn a_clean_f32_run_stays_inside_a_narrow_envelope() {
    let (_, ctx) = common::vulkan!();
    let r = growth(&ctx, &plan(Precision::F32, None));
    // K × a few ulps: 16 × a few 1e-6 at the tiny shapes (the largest,
    // ~1e-4, where a position's gradient is small).
    assert_clean(&r, (2e-5, 2e-4), (1e-5, 3e-5));
    assert_eq!((r.envelope.k, r.envelope.operands), (16.0, Precision::F32));
    assert!(r.series.iter().all(|s| s.reference_rounded.is_empty()));
    assert!((r.loss_gpu - r.loss_cpu64).abs() < 1e-5);
    assert!(r.summary_line().ends_with("none in 300 positions"), "{}", r.summary_line());
}

#[test]
fn a_clean_f16_run_stays_inside_its_envelope() {
    let (_, ctx) = common::vulkan!();
    let r = growth(&ctx, &plan(Precision::F16, None));
    // K × the reference with every product's operands rounded to f16 as the
    // GPU's kernels round them (2^-11 = 4.9e-4 per operand): medians of
    // 0.5–1.1% for the states, 1–1.8% for the gradients (1.5 times the
    // weights-only reference's, which left the activations' rounding out);
    // far below the O(1) a wrong token makes.
    assert_clean(&r, (2e-2, 6e-2), (1.5e-2, 3e-2));
    assert_eq!((r.envelope.k, r.envelope.operands, r.loss_scale), (16.0, Precision::F16, 65536.0));
    assert!(r.series.iter().all(|s| s.reference_rounded.len() == T));
    // Lavapipe has no cooperative matrices: the products round their
    // operands, the per-row recurrences run in f32 (nothing of theirs rounded).
    assert!(r.rounded_stages.contains(&"gru.l0.input=f16".to_string()), "{:?}", r.rounded_stages);
    assert!(!r.rounded_stages.iter().any(|s| s.contains(".rec")), "{:?}", r.rounded_stages);

    // The first reference (weights rounded, activations not), measured on the
    // same row: the operand-rounded one is the GPU's rounding, so the worst
    // clean ratio is no larger with it than with the weights-only one.
    let p = plan(Precision::F16, None);
    let weights = dualscope::triage::growth::rounded_weights(&p.params, Precision::F16);
    let batch = dualscope::dataset::Batch::from_rows(&[&p.row]).unwrap();
    let (_, _, tr) = dualscope::cpu::traced(&p.config, &weights, &batch, 1.0, None).unwrap();
    let (_, _, tr64) = dualscope::cpu::traced(&p.config, &p.params.cast::<f64>(), &batch, 1.0, None).unwrap();
    let (mut worst_new, mut worst_old) = (0.0f64, 0.0f64);
    for sr in &r.series {
        let (w, exact) = (&tr.get(&sr.name).unwrap().data, &tr64.get(&sr.name).unwrap().data);
        let old_ref = dualscope::triage::growth::per_position(w, exact, exact, sr.width);
        let old_env = r.envelope.along(&sr.reference, Some(&old_ref));
        let old = (0..T).map(|t| sr.difference[t] / old_env[t]).fold(0.0, f64::max);
        eprintln!(
            "{}: worst {:.3} with the operand-rounded reference, {old:.3} with the weights-only one",
            sr.name, sr.worst_ratio
        );
        worst_new = worst_new.max(sr.worst_ratio);
        worst_old = worst_old.max(old);
    }
    assert!(
        worst_new <= worst_old,
        "worst clean ratio {worst_new:.3} over the weights-only reference's {worst_old:.3}"
    );
}

/// The same planted token in the mixed step: found at P by every forward series.
#[test]
fn a_token_changed_at_p_leaves_the_f16_envelope_at_p() {
    let (_, ctx) = common::vulkan!();
    let r = growth(&ctx, &plan(Precision::F16, Some(P)));
    let o = r.first_outside.clone().expect("the planted token is found");
    assert_eq!((o.position, o.direction), (P, Direction::Forward), "{}", r.summary_line());
    for sr in r.series.iter().filter(|s| s.direction == Direction::Forward) {
        assert_eq!(sr.first_outside, Some(P), "{}", sr.name);
    }
}

/// The GPU's token at P changed: every forward series is exact up to P
/// (causality: nothing before P reads x_P) and outside from P on. The
/// backward series are anti-causal: x_P is also the target of position
/// P − 1, so their gradients change at P − 1 and, through the recurrence
/// backwards, before it; they are outside at P − 1 and first outside at or
/// before it.
#[test]
fn a_token_changed_at_p_leaves_the_envelope_at_p() {
    let (_, ctx) = common::vulkan!();
    let r = growth(&ctx, &plan(Precision::F32, Some(P)));
    let o = r.first_outside.clone().expect("the planted token is found");
    assert_eq!((o.position, o.direction), (P, Direction::Forward), "{}", r.summary_line());
    assert_eq!(r.planted_at, Some(P));
    for sr in &r.series {
        match sr.direction {
            Direction::Forward => {
                assert_eq!(sr.first_outside, Some(P), "{}", sr.name);
                assert!(sr.difference[..P].iter().all(|&d| d < sr.envelope[0].max(1e-4)), "{}", sr.name);
                assert!(sr.difference[P] > 1e-3, "{}: {}", sr.name, sr.difference[P]);
            }
            Direction::Backward => {
                let first = sr.first_outside.expect("a backward series sees the target change");
                assert!(first < P, "{}: first outside {first}", sr.name);
                assert!(sr.difference[P - 1] > sr.envelope[P - 1], "{}", sr.name);
            }
        }
    }
    assert!(r.summary_line().starts_with(&format!("first position outside the rounding envelope: {P} (")));
}

/// The CLI: the report in JSON (every field the GUI reads), the file
/// `--out`, and the exit codes 0 (clean) and 1 (planted).
#[test]
fn the_command_prints_json_writes_the_report_and_exits_by_what_it_found() {
    common::skip_without_vulkan!();
    let dir = Dir::new();
    let data = dir.file("corpus.txt", &dualscope::dataset::corpus(11, 6000));
    let out = dir.path("growth.json");
    let args = ["growth", "--data", s(&data), "--config", "tiny", "--len", "200", "--json", "--out", s(&out)];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in ["format_version", "source", "len", "precision", "envelope", "series", "first_outside", "loss_gpu"] {
        assert!(v.get(key).is_some(), "no {key}");
    }
    assert_eq!(v["len"], 200);
    assert!(v["first_outside"].is_null());
    let s0 = &v["series"][0];
    assert_eq!(s0["name"], "gru.l0.h");
    assert_eq!(s0["direction"], "forward");
    assert_eq!(s0["difference"].as_array().unwrap().len(), 200);
    let back: GrowthReport = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(back.series.len(), 6);

    let mut planted = args.to_vec();
    planted.truncate(7);
    planted.extend(["--plant-token-at", "120"]);
    let o = run(&planted);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert!(t.contains("first position outside the rounding envelope: 120 (gru.l0.h"), "{t}");
    assert!(t.contains("ctx.c") && t.contains("embed.d_out"), "{t}");
}

/// Bad input: one line naming the flag, exit 2, before any device is opened.
#[test]
fn bad_input_names_the_flag() {
    let dir = Dir::new();
    let data = dir.file("corpus.txt", &dualscope::dataset::corpus(11, 3000));
    let d = s(&data);
    for (args, says) in [
        (vec!["--len", "0"], "--len must be at least 1"),
        (vec!["--len", "100", "--offset", "2999"], "--offset 2999"),
        (vec!["--len", "5000"], "--len 5000 --offset 0"),
        (vec!["--len", "4000000000000"], "--len 4000000000000"),
        (vec!["--len", "50", "--plant-token-at", "50"], "--plant-token-at 50"),
    ] {
        let mut a = vec!["growth", "--data", d, "--config", "tiny"];
        a.extend(args);
        let err = fails(&run(&a), 2);
        assert!(err.contains(says), "{a:?}: {err}");
    }
    let err = fails(&run(&["growth", "--capture", s(&dir.path("nope")), "--row", "0"]), 1);
    assert!(err.contains("nope"), "{err}");
}

/// `--capture DIR --row R`: the capture's model and row (`--len` shortens
/// it); a row past the capture's is refused naming `--row`.
#[test]
fn a_captures_row_runs_with_its_model() {
    common::skip_without_vulkan!();
    let dir = Dir::new();
    let data = dir.file("corpus.txt", &dualscope::dataset::corpus(11, 6000));
    let out = dir.path("run");
    let o = run(&common::train_tiny(&data, &["--steps", "2", "--capture-at", "1", "--out", s(&out)]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let cap = out.join("captures").join("step_000001");
    let o = run(&["growth", "--capture", s(&cap), "--row", "1", "--len", "5", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r: GrowthReport = serde_json::from_slice(&o.stdout).unwrap();
    let c = dualscope::capture::load(&cap).unwrap();
    assert_eq!((r.len, r.config.clone()), (5, c.config));
    assert!(r.source.contains("row 1"), "{}", r.source);
    let err = fails(&run(&["growth", "--capture", s(&cap), "--row", "9"]), 2);
    assert!(err.contains("--row 9"), "{err}");
}

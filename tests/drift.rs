//! `dualscope drift` on lavapipe at tiny shapes: a clean run stays inside a
//! narrow rounding envelope, a planted persistent fault leaves it at the
//! step it starts (with a capture that loads), and the command's exit codes
//! and JSON (skipped without Vulkan, except the usage errors).

mod common;

use std::sync::Arc;

use common::{Dir, fails, run, s, text};
use dualscope::capture;
use dualscope::dataset::Dataset;
use dualscope::model::{Config, Params};
use dualscope::step::Fault;
use dualscope::step::StepOptions;
use dualscope::step::{GemmChoice, Precision};
use dualscope::triage::drift::{DriftPlan, DriftReport, Planted, REPORT_FILE, batch_seed};
use dualscope::vk::Context;

/// 6 KB of the synthetic corpus, as a byte dataset.
fn corpus() -> Dataset {
    Dataset::from_bytes("corpus.txt", dualscope::dataset::corpus(11, 6000)).unwrap()
}

fn plan(steps: u64) -> DriftPlan {
    let cfg = Config::tiny();
    DriftPlan {
        start: Params::init(&cfg, 0),
        rows: 3,
        t: 12,
        config: cfg,
        steps,
        seed: 0,
        precision: Precision::F32,
        gemm: GemmChoice::Auto,
        optim: StepOptions::default(),
        planted: None,
        stop_at_first: false,
        out: None,
    }
}

fn drift(ctx: &Arc<Context>, p: &DriftPlan) -> DriftReport {
    dualscope::triage::drift::run(ctx, p, &corpus(), &mut ()).unwrap()
}

/// Twelve clean steps: no tensor leaves its envelope, the envelope is narrow
/// (K·reference far below the 1e-3 a planted bug reaches at tiny), and the
/// GPU really differs from the CPU (the comparison is not of a run with
/// itself).
#[test]
fn a_clean_run_stays_inside_a_narrow_envelope() {
    let (_, ctx) = common::vulkan!();
    let r = drift(&ctx, &plan(12));
    assert_eq!(r.steps.len(), 12);
    assert_eq!(r.first_outside, None, "{}", r.summary_line());
    let n = r.tensors.len();
    assert_eq!(n, dualscope::model::param_specs(&r.config).len());
    let mut gpu_differs = false;
    for s in &r.steps {
        assert!(!s.outside && s.gpu_skipped.is_none(), "step {}", s.step);
        assert_eq!((s.divergence.len(), s.reference.len(), s.envelope.len()), (n, n, n));
        for i in 0..n {
            let name = &r.tensors[i].name;
            assert!(s.envelope[i] < 1e-4, "step {} {name}: envelope {:e}", s.step, s.envelope[i]);
            assert!(s.divergence[i] <= s.envelope[i], "step {} {name}", s.step);
            assert_eq!(s.envelope[i], r.envelope.bound(s.reference[i], s.step));
        }
        // The f64 run is another run: its reference is never exactly zero for all tensors.
        assert!(s.reference.iter().any(|&x| x > 0.0), "step {}", s.step);
        gpu_differs |= s.divergence.iter().any(|&x| x > 0.0);
        assert!((s.loss_gpu - s.loss_cpu32).abs() < 1e-4 && (s.loss_cpu32 - s.loss_cpu64).abs() < 1e-4);
    }
    assert!(gpu_differs, "the GPU run equals the CPU run bit for bit: is it the GPU?");
    assert!(r.summary_line().ends_with("none in 12 steps"), "{}", r.summary_line());
}

/// `persistent=reset_before_matmul@6`: steps 1–5 stay inside and step 6 is
/// the first outside. Divergence is measured on the weights after each
/// step's update, and step 6's update already used the faulty gradients, so
/// the fault shows at 6 itself. The capture holds the GPU's state before
/// step 6 and step 6's batch (with origins that cut it again), and loads.
#[test]
fn a_planted_persistent_fault_is_found_at_its_first_step() {
    let (_, ctx) = common::vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let p = DriftPlan {
        planted: Some(Planted { fault: Fault::ResetBeforeMatmul, step: 6 }),
        out: Some(dir.path().join("out")),
        ..plan(9)
    };
    let r = drift(&ctx, &p);
    let o = r.first_outside.clone().expect("the fault leaves the envelope");
    assert_eq!(o.step, 6, "{}", r.summary_line());
    assert!(r.steps[..5].iter().all(|s| !s.outside));
    assert!(r.steps[5..].iter().all(|s| s.outside), "a persistent fault stays outside");
    assert!(o.divergence > o.envelope && o.tensors.contains(&o.tensor));
    assert!(r.summary_line().starts_with("first step outside the rounding envelope: 6 ("), "{}", r.summary_line());
    // The capture.
    let path = r.capture.clone().expect("a capture with --out");
    assert_eq!(path, dir.path().join("out/captures/step_000006"));
    let c = capture::load(&path).unwrap();
    assert_eq!(c.meta.step, 6);
    assert_eq!(c.meta.triggers, ["drift"]);
    assert_eq!(c.meta.engine, "gpu");
    assert_eq!(c.meta.planted.as_deref(), Some("persistent=reset_before_matmul"));
    assert!(c.meta.reasons[0].contains(&o.tensor), "{:?}", c.meta.reasons);
    assert_eq!((c.meta.optim_step, c.state.optim.step), (5, 5), "the state before step 6");
    assert_eq!(c.batch.rows, 3);
    let ds = corpus();
    let want = ds.random_windows(batch_seed(0, 6), 3, 13).unwrap();
    assert_eq!(c.batch.lens, want.lens);
    assert_eq!(
        (0..3).map(|i| c.batch.row(i).to_vec()).collect::<Vec<_>>(),
        (0..3).map(|i| want.row(i).to_vec()).collect::<Vec<_>>()
    );
    assert_eq!(c.meta.batch.origins.len(), 3);
    c.verify_dataset(&ds, "corpus.txt").unwrap();
    // drift.json is the report.
    let back: DriftReport =
        serde_json::from_slice(&std::fs::read(dir.path().join("out").join(REPORT_FILE)).unwrap()).unwrap();
    assert_eq!((back.steps.len(), back.first_outside.map(|o| o.step)), (9, Some(6)));
    assert_eq!(back.planted_step, Some(6));
}

/// The planted fault's step moves the first step outside with it, and
/// `stop_at_first` ends the run there.
#[test]
fn stop_at_first_ends_at_the_planted_step() {
    let (_, ctx) = common::vulkan!();
    let p = DriftPlan {
        planted: Some(Planted { fault: Fault::ResetBeforeMatmul, step: 3 }),
        stop_at_first: true,
        ..plan(8)
    };
    let r = drift(&ctx, &p);
    assert_eq!(r.first_outside.as_ref().map(|o| o.step), Some(3));
    assert_eq!(r.steps.len(), 3);
    assert_eq!(r.capture, None, "no capture without --out");
}

fn data(d: &Dir) -> String {
    s(&d.file("text.txt", &dualscope::dataset::corpus(5, 6000))).to_string()
}

/// Twenty documents as JSON lines (rows cut inside documents).
fn jsonl(d: &Dir) -> String {
    let p = common::docs_jsonl(d.0.path(), 20, |i| format!("doc {i}: {}", "the cat sat on the mat ".repeat(i % 4 + 1)));
    s(&p).to_string()
}

/// Exit 0 and the JSON's fields on a clean run; exit 1, the first step and
/// the capture (its rows cut again from their documents) with a planted
/// fault; on JSON lines.
#[test]
fn cli_exit_codes_and_json() {
    common::skip_without_vulkan!();
    let d = Dir::new();
    let data = jsonl(&d);
    let base = ["drift", "--data", &data, "--config", "tiny", "--batch", "2", "--seq-len", "10"];
    let o = run(&[&base[..], &["--steps", "4", "--json"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["steps"].as_array().unwrap().len(), 4);
    assert_eq!(j["first_outside"], serde_json::Value::Null);
    assert_eq!(j["precision"], "f32");
    assert_eq!(j["envelope"]["k"], 16.0);
    assert_eq!((j["rows"].as_u64(), j["t"].as_u64()), (Some(2), Some(10)));
    let step = &j["steps"][3];
    for f in ["loss_gpu", "loss_cpu32", "loss_cpu64"] {
        assert!(step[f].as_f64().unwrap() > 0.0, "{f}");
    }
    let n = j["tensors"].as_array().unwrap().len();
    for f in ["divergence", "reference", "envelope"] {
        assert_eq!(step[f].as_array().unwrap().len(), n, "{f}");
    }
    // A planted fault: exit 1, the step in the JSON and the capture on disk.
    let out = d.path("out");
    let o =
        run(&[&base[..], &["--steps", "5", "--inject", "persistent@2", "--stop-at-first", "--json", "--out", s(&out)]]
            .concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["first_outside"]["step"], 2);
    assert_eq!(j["steps"].as_array().unwrap().len(), 2);
    assert_eq!(j["planted"], "persistent=reset_before_matmul");
    assert!(out.join("drift.json").is_file());
    let c = capture::load(&out.join("captures/step_000002")).unwrap();
    assert_eq!((c.meta.step, c.meta.batch.origins.len()), (2, 2));
    c.verify_dataset(&Dataset::open(std::path::Path::new(&data)).unwrap(), &data).unwrap();
    // From a checkpoint's weights (its config wins).
    let ck = d.ckpt("tiny");
    let o = run(&[
        "drift",
        "--data",
        &data,
        "--checkpoint",
        s(&ck),
        "--batch",
        "2",
        "--seq-len",
        "10",
        "--steps",
        "2",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["config"]["hidden"], Config::tiny().hidden);
    assert_eq!(j["steps"].as_array().unwrap().len(), 2);
    // The human form ends with the summary line.
    let o = run(&[&base[..], &["--steps", "3", "--inject", "persistent=reset_before_matmul@3"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.trim_end().lines().last().unwrap().starts_with("first step outside the rounding envelope: 3 ("),
        "{stdout}"
    );
}

/// Bad input: one line naming the flag, exit 2, before any device is opened
/// (these run without Vulkan too).
#[test]
fn cli_bad_input_names_the_flag() {
    let d = Dir::new();
    let data = data(&d);
    let file = d.file("a_file", b"x");
    let base = ["drift", "--data", &data, "--config", "tiny"];
    for (extra, says) in [
        (&["--steps", "0"][..], "--steps"),
        (&["--steps", "18446744073709551615"], "--steps 18446744073709551615"),
        (&["--steps", "3", "--inject", "nan@2"], "--inject nan@2"),
        (&["--steps", "3", "--inject", "persistent=bogus@2"], "--inject persistent=bogus@2"),
        (&["--steps", "3", "--inject", "persistent@9"], "past the last step"),
        (&["--steps", "3", "--batch", "0"], "--batch"),
        (&["--steps", "3", "--lr", "-1"], "--lr"),
        (&["--steps", "3", "--out", s(&file)], "--out"),
        (&["--steps", "3", "--checkpoint", s(&file)], "--checkpoint"),
    ] {
        let o = run(&[&base[..], extra].concat());
        let err = fails(&o, 2);
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    let o = run(&["drift", "--data", s(&d.path("missing.txt")), "--steps", "2", "--config", "tiny"]);
    assert!(fails(&o, 1).contains("missing.txt"));
}

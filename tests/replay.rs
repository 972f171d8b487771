//! `replay`: a capture of each situation, built by hand with `capture::write`
//! and run again on lavapipe and the CPU, gets its verdict: a planted
//! persistent engine fault → engine (the ladder names the failing rung), an
//! f16 overflow → precision (the stage named), a recorded NaN norm on fine
//! weights → transient, a row of one rare byte among text → data (its row
//! on top), an ordinary step → clean. The CLI's exit codes, JSON and bad
//! input.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use common::{fails, s, text};
use dualscope::capture::{
    self, BATCH_FILE, BatchMeta, CAPTURE_FORMAT, Capture, CaptureMeta, DatasetRef, NormLevel, Recorded,
};
use dualscope::dataset::{Batch, Dataset, RowOrigin};
use dualscope::engine::{Engine, TrainState};
use dualscope::model::{Config, Params};
use dualscope::step::Precision;
use dualscope::step::{LossScale, StepOptions};
use dualscope::triage::replay::{ReplayOptions, ReplayReport, Verdict, replay};
use dualscope::vk::Context;
use dualscope::vk::gemm::GemmPath;

/// Positions per row of the test batches.
const T: usize = 16;

fn corpus() -> Vec<u8> {
    dualscope::dataset::corpus(11, 60_000)
}

/// Rows of `T + 1` bytes cut from `ds` at `offsets` (document 0).
fn rows_at(ds: &Dataset, offsets: &[usize]) -> (Vec<Vec<u8>>, Vec<RowOrigin>) {
    let origins: Vec<RowOrigin> = offsets.iter().map(|&o| RowOrigin { document: 0, offset: o, len: T + 1 }).collect();
    (origins.iter().map(|o| ds.row_at(o).unwrap()).collect(), origins)
}

/// A capture of `batch` at `state`, as a training run on the GPU would keep
/// it (no record, no levels, nothing planted).
fn capture_of(ds: &Dataset, state: TrainState, rows: &[Vec<u8>], origins: Vec<RowOrigin>, p: Precision) -> Capture {
    let cfg = Config::tiny();
    let batch = Batch::from_rows(rows).unwrap();
    let path = match p {
        Precision::F32 => GemmPath::TiledF32,
        Precision::F16 => GemmPath::TiledF16,
        Precision::Bf16 => GemmPath::TiledBf16In,
    };
    let meta = CaptureMeta {
        format_version: CAPTURE_FORMAT,
        step: 187,
        triggers: vec!["requested".into()],
        reasons: vec!["--capture-at 187".into()],
        engine: "gpu".into(),
        precision: p,
        gemm_path: path.name().into(),
        optim: StepOptions::default(),
        seed: 1,
        loss_scale: state.scale.clone(),
        optim_step: state.optim.step,
        dataset: DatasetRef {
            name: ds.name().into(),
            path: ds.path().map(|p| p.display().to_string()),
            content_hash: ds.content_hash(),
            len_bytes: ds.len_bytes() as u64,
        },
        batch: BatchMeta { rows: 0, t: 0, lens: vec![], origins, tokens_hash: String::new() },
        recorded: None,
        norm_levels: vec![],
        planted: None,
        lead_up: vec![],
        written_by: "tests/replay.rs".into(),
        precision_map: None,
        carry: false,
        carry_windows: None,
        carry_prefix_len: None,
    };
    Capture { meta, config: cfg, state, batch, lead_up: vec![], carry: None }
}

/// Written and read back, as `replay` would find it on disk.
fn round_trip(c: &Capture, dir: &Path) -> (Capture, PathBuf) {
    let path = capture::write(c, dir).unwrap();
    (capture::load(&path).unwrap(), path)
}

/// Weights trained for a while on the corpus (CPU), so that text is
/// predictable and a rare byte is not: what a run's step 187 sees.
fn trained() -> &'static TrainState {
    static STATE: OnceLock<TrainState> = OnceLock::new();
    STATE.get_or_init(|| {
        let cfg = Config::tiny();
        let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
        let opts = StepOptions { lr: 1e-2, ..StepOptions::default() };
        let state = TrainState::fresh(&cfg, Params::init(&cfg, 3), LossScale::fixed());
        let mut e = Engine::cpu(&cfg, state, &opts);
        for step in 0..300 {
            e.step(&ds.random_windows(1000 + step, 8, T + 1).unwrap()).unwrap();
        }
        e.snapshot().unwrap()
    })
}

/// The controller's levels as a run of clean steps would leave them: the
/// mean and deviation of `ln(norm)` over 32 clean batches of 4 random
/// windows, globally and per tensor (with 8 the deviations come out too
/// small: an ordinary batch then sits 4 deviations up in some tensor).
fn clean_levels(ds: &Dataset, state: &TrainState) -> Vec<NormLevel> {
    let cfg = Config::tiny();
    let p = state.params.cast::<f64>();
    let mut logs: Vec<(String, Vec<f64>)> = Vec::new();
    for seed in 0..32 {
        let b = ds.random_windows(500 + seed, 4, T + 1).unwrap();
        let g = dualscope::cpu::grads(&cfg, &p, &b, None).unwrap();
        let mut named = vec![("global".to_string(), g.grad_norm)];
        for (n, t) in g.grads.named(&cfg) {
            named.push((n, t.data.iter().map(|x| x * x).sum::<f64>().sqrt()));
        }
        for (i, (n, v)) in named.into_iter().enumerate() {
            if logs.len() <= i {
                logs.push((n, Vec::new()));
            }
            logs[i].1.push(v.ln());
        }
    }
    logs.into_iter()
        .map(|(name, v)| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
            NormLevel { name, n: v.len() as u64, ln_mean: mean, ln_std: var.sqrt() }
        })
        .collect()
}

fn run(c: &Capture, ctx: &Arc<Context>, ladder: bool) -> ReplayReport {
    run_with(c, ctx, ladder, None)
}

fn run_with(c: &Capture, ctx: &Arc<Context>, ladder: bool, map: Option<&str>) -> ReplayReport {
    let opts = ReplayOptions {
        top_k: 5,
        ladder,
        context: Some(ctx.clone()),
        device: None,
        precision_map: map.map(str::to_string),
    };
    let mut heard = Vec::new();
    let r = replay(c, &opts, &mut |m| heard.push(m.to_string())).unwrap();
    assert!(heard.iter().any(|m| m.contains("GPU")), "progress: {heard:?}");
    r
}

fn evidence(r: &ReplayReport) -> String {
    format!("{}\n{}", r.verdict_line(), r.evidence.join("\n"))
}

/// An ordinary step of trained weights on text reproduces everywhere and
/// is not large: clean, with six runs' worth of evidence (f32: one GPU pair).
#[test]
fn an_ordinary_step_is_clean() {
    let (test, ctx) = common::vulkan!();
    let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    let state = trained().clone();
    let (rows, origins) = rows_at(&ds, &[100, 7000, 21000, 40000]);
    let mut c = capture_of(&ds, state.clone(), &rows, origins, Precision::F32);
    c.meta.norm_levels = clean_levels(&ds, &state);
    let d = tempfile::tempdir().unwrap();
    let (c, _) = round_trip(&c, d.path());
    let r = run(&c, &ctx, true);
    let ev = evidence(&r);
    assert_eq!(r.verdict, Verdict::Clean, "{ev}");
    assert_eq!(r.rule, 6);
    let names: Vec<&str> = r.runs.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["gpu f32 #1", "gpu f32 #2", "cpu f32", "cpu f64"]);
    assert!(r.runs[..3].iter().all(|x| x.vs_f64.as_ref().unwrap().pass), "{ev}");
    assert!(r.z_scores.iter().all(|z| z.z.unwrap() < 3.5), "{:?}", r.z_scores);
    assert!(r.ladder.is_none() && r.stage.is_none());
    assert_eq!(r.dominant.len(), 5);
    assert!(ev.contains("no file recorded"), "{ev}");
    common::assert_clean(&ctx, test);
}

/// A row of one byte the model never saw (0xFF × 17) among text rows: both
/// engines agree, the gradient is above the controller's level, and the top
/// position lies in that row.
#[test]
fn a_rare_byte_row_is_data() {
    let (test, ctx) = common::vulkan!();
    let clean = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    // The same text with one window of 0xFF bytes at byte 30000.
    let mut bytes = corpus();
    bytes[30000..30000 + T + 1].fill(0xFF);
    let ds = Dataset::from_bytes("corpus-ff.txt", bytes).unwrap();
    let state = trained().clone();
    let (rows, origins) = rows_at(&ds, &[100, 30000, 7000, 21000]);
    assert_eq!(rows[1], vec![0xFF; T + 1]);
    let mut c = capture_of(&ds, state.clone(), &rows, origins, Precision::F32);
    c.meta.norm_levels = clean_levels(&clean, &state);
    let d = tempfile::tempdir().unwrap();
    let (c, _) = round_trip(&c, d.path());
    let r = run(&c, &ctx, true);
    let ev = evidence(&r);
    assert_eq!(r.verdict, Verdict::Data, "{ev}");
    assert_eq!(r.rule, 5);
    assert_eq!(r.dominant[0].row, 1, "{ev}");
    assert!(r.dominant[0].context.contains("[\\xff]"), "{}", r.dominant[0].context);
    assert_eq!(r.dominant[0].offset, Some(30000 + r.dominant[0].pos));
    let top_share = r.row_shares[1];
    assert!(r.row_shares.iter().all(|&s| s <= top_share), "{:?}", r.row_shares);
    assert!(r.z_scores[0].z.unwrap() > 3.5, "{:?}", r.z_scores);
    assert!(ev.contains("gradient share by row") && ev.contains("row 1"), "{ev}");
    common::assert_clean(&ctx, test);
}

/// A capture planted with the persistent fault `reset_before_matmul`: the
/// fault is planted again in the replay's engine, the f32 GPU leaves the
/// contract, and the ladder on the capture's batch names `gru_fwd`.
#[test]
fn a_planted_persistent_fault_is_the_engine() {
    let (test, ctx) = common::vulkan!();
    let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    let cfg = Config::tiny();
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 5), LossScale::fixed());
    let (rows, origins) = rows_at(&ds, &[50, 9000, 33000]);
    let mut c = capture_of(&ds, state, &rows, origins, Precision::F32);
    c.meta.planted = Some("persistent=reset_before_matmul".into());
    let d = tempfile::tempdir().unwrap();
    let (c, _) = round_trip(&c, d.path());
    let r = run(&c, &ctx, true);
    let ev = evidence(&r);
    assert_eq!(r.verdict, Verdict::Engine, "{ev}");
    assert_eq!(r.fault.as_deref(), Some("reset_before_matmul"));
    let l = r.ladder.as_ref().expect("the ladder ran");
    assert_eq!(l.first_failing.as_deref(), Some("gru_fwd"), "{ev}");
    assert!(l.tensor.as_ref().is_some_and(|t| t.starts_with("gru.l")), "{:?}", l.tensor);
    assert!(ev.contains("first failing rung gru_fwd"), "{ev}");
    // Without the planted fault the same capture is clean: the verdict is the fault's.
    let mut fine = c.clone();
    fine.meta.planted = Some("nan".into());
    let r = run(&fine, &ctx, false);
    assert_eq!(r.verdict, Verdict::Clean, "{}", evidence(&r));
    assert!(evidence(&r).contains("not planted again"));
    common::assert_clean(&ctx, test);
}

/// The mixed step at a loss scale of 2^40: the scaled gradients pass f16's
/// range, the f16 gradients are non-finite while the f32 step passes, and
/// the first stage out of range is named with the scale that did it.
#[test]
fn an_f16_overflow_is_precision() {
    let (test, ctx) = common::vulkan!();
    let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    let cfg = Config::tiny();
    let big = LossScale { scale: 2f64.powi(40), ..LossScale::dynamic() };
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 5), big);
    let (rows, origins) = rows_at(&ds, &[50, 9000, 33000]);
    let mut c = capture_of(&ds, state, &rows, origins, Precision::F16);
    c.meta.planted = Some("f16_overflow".into());
    let d = tempfile::tempdir().unwrap();
    let (c, _) = round_trip(&c, d.path());
    let r = run(&c, &ctx, true);
    let ev = evidence(&r);
    assert_eq!(r.verdict, Verdict::Precision, "{ev}");
    let names: Vec<&str> = r.runs.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["gpu f16 #1", "gpu f16 #2", "gpu f32 #1", "gpu f32 #2", "cpu f32", "cpu f64"]);
    assert!(r.runs[2].vs_f64.as_ref().unwrap().pass, "{ev}");
    let st = r.stage.as_ref().expect("a stage is named");
    assert_eq!(st.loss_scale, 2f64.powi(40));
    assert!(st.past_f16 > 0 || st.non_finite > 0, "{st:?}");
    assert!(st.largest_safe_scale.is_some_and(|s| s < 2f64.powi(40)), "{st:?}");
    assert!(ev.contains("2^40") && ev.contains(&st.stage), "{ev}");
    assert_eq!(r.precision_map, None);

    // The same step with the backward in f32 (`replay --precision-map bwd=f32`):
    // at 2^40 the f32 gradients keep their range, so the mapped step holds
    // its contract and the verdict is no longer precision.
    let m = run_with(&c, &ctx, true, Some("bwd=f32"));
    let ev = evidence(&m);
    assert_ne!(m.verdict, Verdict::Precision, "{ev}");
    assert!(m.runs[0].vs_f64.as_ref().unwrap().pass, "{ev}");
    let shown = m.precision_map.as_deref().expect("the map is reported");
    assert!(shown.contains("head.bwd=f32") && shown.contains("head=f16"), "{shown}");
    assert!(ev.contains("precision map:"), "{ev}");
    // A bad map is a usage error naming the token.
    let opts =
        ReplayOptions { precision_map: Some("nope=f16".into()), context: Some(ctx.clone()), ..Default::default() };
    let err = replay(&c, &opts, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("--precision-map") && err.contains("nope"), "{err}");
    common::assert_clean(&ctx, test);
}

/// A step recorded with a NaN gradient norm whose weights and batch are
/// fine: every replay is finite and agrees, so it was the run (transient).
#[test]
fn a_recorded_nan_on_fine_weights_is_transient() {
    let (test, ctx) = common::vulkan!();
    let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    let cfg = Config::tiny();
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 5), LossScale::fixed());
    let (rows, origins) = rows_at(&ds, &[50, 9000, 33000]);
    let mut c = capture_of(&ds, state, &rows, origins, Precision::F32);
    c.meta.triggers = vec!["skip".into()];
    c.meta.recorded = Some(Recorded {
        loss: 5.5,
        grad_norm: f64::NAN,
        tensor_norms: vec![],
        skipped: Some("non-finite gradient norm".into()),
        scale_after: 1.0,
    });
    c.meta.planted = Some("nan".into());
    let d = tempfile::tempdir().unwrap();
    let (c, _) = round_trip(&c, d.path());
    assert!(c.meta.recorded.as_ref().unwrap().grad_norm.is_nan(), "the NaN survives capture.json");
    let r = run(&c, &ctx, true);
    let ev = evidence(&r);
    assert_eq!((r.verdict, r.rule), (Verdict::Transient, 4), "{ev}");
    assert!(r.reason.contains("recorded") && r.reason.contains("NaN"), "{}", r.reason);
    common::assert_clean(&ctx, test);
}

/// The binary: a clean capture exits 0 with the report on stdout (and in
/// `--out`), a planted engine fault exits 1, a changed dataset exits 1
/// naming the file and field, a vanished one is said in the evidence.
#[test]
fn the_cli_gives_the_verdict_as_its_exit_code() {
    common::skip_without_vulkan!();
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("corpus.txt");
    std::fs::write(&data, corpus()).unwrap();
    let ds = Dataset::open(&data).unwrap();
    let cfg = Config::tiny();
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 5), LossScale::fixed());
    let (rows, origins) = rows_at(&ds, &[50, 9000, 33000]);
    let c = capture_of(&ds, state, &rows, origins, Precision::F32);
    let dir = capture::write(&c, &d.path().join("captures")).unwrap();
    let report = d.path().join("report.json");
    let o = common::dualscope(&["replay", s(&dir), "--json", "--out", s(&report)], &[]);
    let v = common::ok_json(&o);
    assert_eq!(v["verdict"], "clean", "{v}");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    for key in ["evidence", "dominant", "row_shares", "z_scores", "reason", "precision", "loss_scale", "dataset"] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert!(v["dataset"].as_str().unwrap().contains("matches"), "{v}");
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written, v);

    // Human output: the verdict first.
    let o = common::dualscope(&["replay", s(&dir), "--top", "3"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("verdict: clean — "), "{out}");
    assert!(out.contains("dominant positions"), "{out}");

    // A planted engine fault: exit 1, the ladder left out on request.
    let mut bad = c.clone();
    bad.meta.step = 188;
    bad.meta.planted = Some("persistent=reset_before_matmul".into());
    let bad_dir = capture::write(&bad, &d.path().join("captures")).unwrap();
    let o = common::dualscope(&["replay", s(&bad_dir), "--json", "--no-ladder"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["verdict"].as_str(), v["fault"].as_str()), (Some("engine"), Some("reset_before_matmul")));
    assert!(v["ladder"].is_null());

    // The dataset changed under the capture: exit 1, file and field named.
    let mut changed = corpus();
    changed[9005] ^= 1;
    std::fs::write(&data, &changed).unwrap();
    let e = fails(&common::dualscope(&["replay", s(&dir)], &[]), 1);
    assert!(e.contains("corpus.txt") && e.contains("dataset.content_hash"), "{e}");
    // Gone: said, and the replay goes on.
    std::fs::remove_file(&data).unwrap();
    let v = common::ok_json(&common::dualscope(&["replay", s(&dir), "--json"], &[]));
    assert!(v["dataset"].as_str().unwrap().contains("is gone"), "{v}");
}

/// A broken capture, a file instead of a folder, another format version, or
/// an `--out` onto the capture's own file: one line, exit 1 (2 for the
/// output), the file named, nothing replaced; no Vulkan is exit 2. No device
/// needed.
#[test]
fn bad_captures_are_refused_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let ds = Dataset::from_bytes("corpus.txt", corpus()).unwrap();
    let cfg = Config::tiny();
    let state = TrainState::fresh(&cfg, Params::init(&cfg, 5), LossScale::fixed());
    let (rows, origins) = rows_at(&ds, &[50, 9000]);
    let dir = capture::write(&capture_of(&ds, state, &rows, origins, Precision::F32), d.path()).unwrap();
    let meta = dir.join(capture::META_FILE);
    let before = std::fs::read(&meta).unwrap();
    let e = fails(&common::run(&["replay", s(&dir), "--out", s(&meta)]), 2);
    assert!(e.contains("--out") && e.contains("overwrite an input"), "{e}");
    assert_eq!(std::fs::read(&meta).unwrap(), before);
    // A sound capture where there is no Vulkan: one error line (the loader
    // adds its own complaint), exit 2.
    let none = [("VK_DRIVER_FILES", "/nonexistent/icd.json"), ("VK_ICD_FILENAMES", "/nonexistent/icd.json")];
    let o = common::dualscope(&["replay", s(&dir)], &none);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert!(lines.len() == 1 && lines[0].contains("no Vulkan"), "{err}");

    let e = fails(&common::run(&["replay", s(&meta.with_file_name("nothing"))]), 1);
    assert!(e.contains("not a capture folder"), "{e}");
    let e = fails(&common::run(&["replay", s(&dir.join(BATCH_FILE))]), 1);
    assert!(e.contains(BATCH_FILE) && e.contains("not a folder"), "{e}");

    let mut v: serde_json::Value = serde_json::from_slice(&before).unwrap();
    v["format_version"] = 9.into();
    std::fs::write(&meta, serde_json::to_vec(&v).unwrap()).unwrap();
    let e = fails(&common::run(&["replay", s(&dir)]), 1);
    assert!(e.contains("format_version 9") && e.contains(capture::META_FILE), "{e}");
    std::fs::write(&meta, &before).unwrap();

    std::fs::remove_file(dir.join(BATCH_FILE)).unwrap();
    let e = fails(&common::run(&["replay", s(&dir), "--json"]), 1);
    assert!(e.contains(BATCH_FILE) && e.contains("missing"), "{e}");
}

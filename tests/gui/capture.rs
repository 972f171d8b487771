//! Captures in the GUI: opened from the launch option, dropped, from a
//! session or from the training curves; a carried one; a bad one changes
//! nothing; a planted fault's ladder and the replay's verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dualscope::capture::{self as cap, BatchMeta, CaptureMeta, Recorded};
use dualscope::session::state::{ConfigName, State, View};
use dualscope::step::Fault as EngineFault;
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::{App, LaunchOptions, session};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{Dropped, harness, init_env, mask_session, message, tiny, wait_for_ladder, wait_for_trace, wait_until};

/// Text with one run of a rare byte in it (an outlier for the gradient).
fn capture_text() -> Vec<u8> {
    let mut t = dualscope::dataset::corpus(11, 3000);
    t[1210..1226].fill(0xfe);
    t
}

/// Writes a capture of step `step` into `dir/step_NNNNNN` (tiny config, rows
/// cut from [`capture_text`] at known offsets) and returns its folder.
fn write_capture(dir: &Path, step: u64, planted: Option<&str>, row_len: usize) -> PathBuf {
    use dualscope::dataset::{Batch, Dataset, RowOrigin};
    let ds = Dataset::from_bytes("walk.txt", capture_text()).unwrap();
    let cfg = dualscope::model::Config::tiny();
    let origins: Vec<RowOrigin> =
        [40usize, 1200, 2300].iter().map(|&o| RowOrigin { document: 0, offset: o, len: row_len }).collect();
    let rows: Vec<Vec<u8>> = origins.iter().map(|o| ds.row_at(o).unwrap()).collect();
    let batch = Batch::from_rows(&rows).unwrap();
    let scale = dualscope::step::LossScale::fixed();
    let state = dualscope::engine::TrainState::fresh(&cfg, dualscope::model::Params::init(&cfg, 4), scale.clone());
    let meta = CaptureMeta {
        format_version: cap::CAPTURE_FORMAT,
        step,
        triggers: vec!["skip".into()],
        reasons: vec![format!("outlier: gradient norm of ctx.q.weight 9.1 deviations above its level at step {step}")],
        engine: "gpu".into(),
        precision: dualscope::step::Precision::F32,
        gemm_path: "tiled".into(),
        optim: dualscope::step::StepOptions::default(),
        seed: 1,
        loss_scale: scale,
        optim_step: step,
        dataset: cap::DatasetRef {
            name: ds.name().into(),
            path: None,
            content_hash: ds.content_hash(),
            len_bytes: ds.len_bytes() as u64,
        },
        batch: BatchMeta { rows: 0, t: 0, lens: vec![], origins, tokens_hash: String::new() },
        recorded: Some(Recorded {
            loss: 5.4,
            grad_norm: 31.0,
            tensor_norms: vec![],
            skipped: Some("outlier".into()),
            scale_after: 1.0,
        }),
        norm_levels: vec![],
        planted: planted.map(str::to_string),
        lead_up: vec![],
        written_by: "tests/gui/capture.rs".into(),
        precision_map: None,
        carry: false,
        carry_windows: None,
        carry_prefix_len: None,
    };
    let c = cap::Capture { meta, config: cfg, state, batch, lead_up: vec![], carry: None };
    cap::write(&c, dir).unwrap()
}

fn wait_for_capture(h: &mut Harness<'static, App>) {
    wait_until(h, "opening the capture", |a| !a.capture_busy() && !a.is_busy() && a.computed().is_some());
}

/// What the GUI shows once a capture is open: its panel (step, reason), its
/// rows as the dataset, its precision, and the stepper on the row and
/// position that `dominant_positions` ranks first.
fn assert_capture_shown(h: &Harness<'static, App>, dir: &Path, step: u64) {
    let c = cap::load(dir).unwrap();
    let open = h.state().capture().expect("the capture is open");
    assert_eq!(open.path, dir);
    assert_eq!(open.capture.meta.step, step);
    assert_eq!(h.state().state.capture.as_deref(), Some(dir));
    h.get_by_label(&format!("Capture: step {step} (skip)"));
    h.get_by_label(&c.meta.reasons[0]);
    assert_eq!(h.state().state.precision, c.meta.precision);
    assert_eq!(h.state().state.config, ConfigName::Tiny);
    // The dominant positions, computed here independently.
    let (top, _) = cap::dominant_positions(&c.config, &c.state.params, &c.batch, &c.meta.batch.origins, 3).unwrap();
    assert_eq!(open.top().map(|t| (t.row, t.pos)), Some((top[0].row, top[0].pos)));
    assert_eq!(h.state().capture_row(), Some(top[0].row));
    assert_eq!(h.state().state.cursor, top[0].pos);
    // The stepper shows that row of the batch, with the capture's weights.
    let computed = h.state().computed().unwrap();
    assert_eq!(computed.tokens, c.batch.row(top[0].row));
    let row = dualscope::dataset::Batch::from_rows(&[c.batch.row(top[0].row)]).unwrap();
    let f = dualscope::cpu::forward(&c.config, &c.state.params, &row).unwrap();
    assert!((computed.loss - f.loss).abs() < 1e-5, "trace loss {} vs the capture's weights {}", computed.loss, f.loss);
}

#[test]
fn capture_opens_from_the_launch_option() {
    let dir = tempfile::tempdir().unwrap();
    let c = write_capture(dir.path(), 187, None, 17);
    init_env();
    let app = App::new(LaunchOptions { capture: Some(c.clone()), state: Some(tiny(40)), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &c, 187);
    assert_eq!(h.state().dataset().name(), "capture step_000187 rows");
    // The rows with their origins: document 0, the offsets they were cut at.
    for off in ["40", "1200", "2300"] {
        assert!(h.query_all_by_label(off).count() >= 1, "offset {off} is listed");
    }
    // A click on another row shows it; a click on a dominant position goes there.
    let other = (h.state().capture_row().unwrap() + 1) % 3;
    h.get_by_label(&format!("row {other}")).click();
    h.run_steps(2);
    wait_for_trace(&mut h);
    assert_eq!(h.state().capture_row(), Some(other));
    assert_eq!(h.state().state.cursor, 0);
    let top = h.state().capture().unwrap().top().cloned().unwrap();
    h.get_by_label(&format!("{}:{}", top.row, top.pos)).click();
    h.run_steps(2);
    wait_for_trace(&mut h);
    assert_eq!((h.state().capture_row(), h.state().state.cursor), (Some(top.row), top.pos));
}

/// A capture of a carried step (`train --carry-state`) opens: its panel says
/// the state was carried and that the stepper traces the row from zero, and
/// its dominant positions are those from the carried state.
#[test]
fn a_carried_capture_opens_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_capture(dir.path(), 190, None, 17);
    let mut c = cap::load(&path).unwrap();
    let mut k = dualscope::step::Carry::<f32>::zeros(&c.config, c.batch.rows);
    k.prefix_len = c.config.window - 1;
    let n = k.prefix_len * c.batch.rows * c.config.hidden;
    k.prefix = (0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.1).collect();
    k.h0.iter_mut().for_each(|l| l.iter_mut().enumerate().for_each(|(i, x)| *x = ((i % 7) as f32 - 3.0) * 0.2));
    c.carry = Some(k.clone());
    c.meta.carry_windows = Some(4);
    let path = cap::write(&c, dir.path()).unwrap();
    init_env();
    let app = App::new(LaunchOptions { capture: Some(path.clone()), state: Some(tiny(40)), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_capture(&mut h);
    h.get_by_label("carried state");
    h.get_by_label("traces the row from a zero state, not the carried one");
    let open = h.state().capture().expect("the capture is open");
    assert_eq!(open.capture.carry.as_ref(), Some(&k));
    let b = &c.batch;
    let (top, _) =
        cap::dominant_positions_with(&c.config, &c.state.params, b, &c.meta.batch.origins, 3, Some(&k)).unwrap();
    assert_eq!(open.top().map(|t| (t.row, t.pos)), Some((top[0].row, top[0].pos)));
}

#[test]
fn capture_opens_when_dropped_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_capture(dir.path(), 5, None, 12);
    let b = write_capture(dir.path(), 9, None, 12);
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    // A dropped capture folder.
    h.input_mut().dropped_files.push(Arc::new(Dropped(a.clone())));
    h.run_steps(1);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &a, 5);
    // A dropped capture.json.
    h.input_mut().dropped_files.push(Arc::new(Dropped(b.join("capture.json"))));
    h.run_steps(1);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &b, 9);

    // A capture with a broken capture.json: its one-line error, nothing else changes.
    let bad = dir.path().join("step_000011");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("capture.json"), b"{\"format_version\": 1, \"step\": ").unwrap();
    let before = h.state().state.clone();
    h.input_mut().dropped_files.push(Arc::new(Dropped(bad.clone())));
    h.run_steps(1);
    wait_until(&mut h, "reading the bad capture", |a| !a.capture_busy());
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    let m = message(&h);
    assert!(m.contains("cannot open the capture") && m.contains("capture.json"), "{m}");
    assert!(!m.contains('\n'), "{m}");
    h.get_by_label_contains("cannot open the capture");
    assert_eq!(h.state().state, before);
    assert_capture_shown(&h, &b, 9);
}

/// The GUI walk: a capture with a planted persistent engine fault opens with
/// that fault as the ladder's; the ladder runs on the capture's whole batch
/// and names the rung the fault is caught by; a session saved now reopens
/// the capture, the stepper where it was, and the ladder's results.
#[test]
fn planted_capture_ladder_and_session() {
    let dir = tempfile::tempdir().unwrap();
    let c = write_capture(dir.path(), 42, Some("persistent=reset_before_matmul"), 17);
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::OpenCapture(c.clone()));
    h.run_steps(1);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &c, 42);
    assert_eq!(h.state().state.ladder_fault.map(|f| f.to_string()).as_deref(), Some("reset_before_matmul"));
    h.get_by_label("persistent=reset_before_matmul");
    h.get_by_label("GPU vs CPU, f32, on the batch of capture step_000042 (3 rows x 16 positions)");
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    h.get_by_label("Run ladder").click();
    h.run_steps(2);
    wait_for_ladder(&mut h);
    let fault = EngineFault::ResetBeforeMatmul;
    let expected = fault.expected_rung();
    assert_eq!(h.state().ladder().planted(), Some(fault));
    assert_eq!(h.state().ladder().first_failed(), Some(expected));
    let input = h.state().ladder().input.clone().unwrap();
    assert_eq!(input.capture.as_deref(), Some("capture step_000042 (3 rows x 16 positions)"));
    h.get_by_label(&format!("first failed: {expected}, as expected"));
    // The rung checked the capture's whole batch: its tensors have B = 3.
    let tensors = h.state().ladder().tensors.get(expected).expect("the failing rung's tensors");
    assert!(tensors.iter().any(|t| t.shape.contains(&3)), "{:?}", tensors.iter().map(|t| &t.shape).collect::<Vec<_>>());

    // Save, change everything, reopen.
    let saved_at = (h.state().capture_row(), h.state().state.cursor);
    let path = dir.path().join("walk.ron");
    h.state_mut().queue(Command::SaveSession(path.clone()));
    h.run_steps(2);
    assert!(message(&h).contains("Saved"), "{}", message(&h));
    assert_eq!(session::load(&path).unwrap().capture.as_deref(), Some(c.as_path()));
    drop(h);
    init_env();
    let app = App::new(LaunchOptions { session: Some(path.clone()), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_capture(&mut h);
    wait_until(&mut h, "the side file", |a| !a.is_busy());
    assert_capture_shown(&h, &c, 42);
    assert_eq!((h.state().capture_row(), h.state().state.cursor), saved_at);
    assert_eq!(h.state().ladder().first_failed(), Some(expected));
    assert_eq!(h.state().ladder().input.as_ref(), Some(&input));
    h.get_by_label(&format!("first failed: {expected}, as expected"));
    // Closing it: the session no longer names it.
    h.get_by_label("Close capture").click();
    h.run_steps(2);
    assert!(h.state().capture().is_none());
    assert_eq!(h.state().state.capture, None);
}

/// The Training curves view marks the steps that have a capture and opens
/// one from the "open capture" button next to its action's reason.
#[test]
fn training_curves_open_a_capture() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for step in 1..=8u64 {
        let actions =
            if step == 5 { r#"[{"step":5,"action":"skip","reason":"outlier in ctx.q.weight"}]"# } else { "[]" };
        let skipped = if step == 5 { "\"outlier\"" } else { "null" };
        lines += &format!(
            r#"{{"step":{step},"loss":{},"grad_norm":2.0,"skipped":{skipped},"clipped":false,"capped_tokens":0,"lr":0.001,"scale":1.0,"optim_step":{step},"actions":{actions},"ms":3.0}}"#,
            5.5 - 0.1 * step as f64
        );
        lines.push('\n');
    }
    std::fs::write(dir.path().join("log.jsonl"), lines).unwrap();
    let captures = dir.path().join("captures");
    let five = write_capture(&captures, 5, None, 12);
    let seven = write_capture(&captures, 7, None, 12);

    let mut h = harness(State { view: View::Training, ..tiny(20) }, (1400.0, 1000.0));
    wait_for_trace(&mut h);
    h.state_mut().train_log_path = dir.path().display().to_string();
    h.run_steps(1);
    h.get_by_label("Load log").click();
    wait_until(&mut h, "reading the log", |a| !a.train_log().is_busy());
    let listed: Vec<u64> = h.state().train_log().captures.keys().copied().collect();
    assert_eq!(listed, [5, 7]);
    h.get_by_label("controller actions (1), 2 captures");
    h.get_by_label("step 7"); // a capture without an action
    // The curves mark steps 5 and 7 (open diamonds, beside the skip's dot).
    let rects: Vec<egui::Rect> = h.get_all_by_role(Role::TextInput).map(|n| n.rect()).collect();
    for r in rects {
        h.mask(r);
    }
    let rects: Vec<egui::Rect> = ["controller actions,", "Read 8"]
        .iter()
        .map(|t| h.get_by_label_contains(t).rect())
        .map(|r| egui::Rect::from_min_size(r.min, egui::vec2(900.0, r.height())))
        .collect();
    for r in rects {
        h.mask(r);
    }
    mask_session(&mut h);
    h.snapshot("training_captures_view");
    h.get_by_label("open capture").click();
    h.run_steps(1);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &five, 5);
    assert_eq!(h.state().state.view, View::Sequence);
    let _ = seven;
}

/// The GUI walk for `scripts/capture_walk_screenshot.sh`: writes a capture
/// with a planted `reset_before_matmul` into `$DUALSCOPE_WALK_DIR`, opens it,
/// runs the ladder (which must fail first at the fault's rung), and saves
/// the session as `walk.ron` there, the stepper at the dominant position.
#[test]
#[ignore]
fn capture_walk_for_the_screenshot() {
    let dir = PathBuf::from(std::env::var("DUALSCOPE_WALK_DIR").expect("DUALSCOPE_WALK_DIR: where to write the walk"));
    let c = write_capture(&dir.join("captures"), 187, Some("persistent=reset_before_matmul"), 33);
    init_env();
    let app = App::new(LaunchOptions { capture: Some(c.clone()), state: Some(tiny(40)), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_capture(&mut h);
    assert_capture_shown(&h, &c, 187);
    h.get_by_label("Run ladder").click();
    h.run_steps(2);
    wait_for_ladder(&mut h);
    let expected = EngineFault::ResetBeforeMatmul.expected_rung();
    assert_eq!(h.state().ladder().first_failed(), Some(expected), "status: {}", message(&h));
    let top = h.state().capture().unwrap().top().cloned().unwrap();
    assert_eq!((h.state().capture_row(), h.state().state.cursor), (Some(top.row), top.pos));
    let path = dir.join("walk.ron");
    h.state_mut().queue(Command::SaveSession(path.clone()));
    h.run_steps(2);
    assert!(message(&h).contains("Saved"), "{}", message(&h));
    eprintln!("walk: {} (row {}, position {}, first failed {expected})", path.display(), top.row, top.pos);
}

/// The Replay button runs `triage::replay` on the open capture; the panel
/// shows the verdict and its evidence (a planted persistent fault: *engine*).
#[test]
fn replay_shows_the_verdict_of_a_planted_capture() {
    let dir = tempfile::tempdir().unwrap();
    let c = write_capture(dir.path(), 42, Some("persistent=reset_before_matmul"), 17);
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::OpenCapture(c.clone()));
    h.run_steps(1);
    wait_for_capture(&mut h);
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    h.get_by_label("Replay").click();
    h.run_steps(2);
    wait_until(&mut h, "the replay", |a| !a.replay().is_busy());
    let r = match h.state().replay().of(&c) {
        Some(Ok(r)) => r.clone(),
        other => panic!("no report: {other:?}; status: {}", message(&h)),
    };
    assert_eq!(r.verdict, dualscope::triage::verdict::Verdict::Engine, "{}", r.verdict_line());
    assert!(message(&h).contains("Replay of step 42: verdict: engine"), "{}", message(&h));
    // The panel's verdict line (and the status bar's).
    h.get_by_label(&dualscope::ui::diagnose::ascii(&r.verdict_line()));
    assert!(!r.evidence.is_empty());
    for e in &r.evidence {
        let e = dualscope::ui::diagnose::ascii(e);
        assert!(h.query_all_by_label(&e).count() >= 1, "evidence line shown: {e}");
    }
    // The verdict belongs to this capture: another one shows none.
    let other = write_capture(dir.path(), 43, None, 17);
    h.state_mut().queue(Command::OpenCapture(other));
    h.run_steps(1);
    wait_for_capture(&mut h);
    assert_eq!(h.query_all_by_label_contains("verdict: engine").count(), 0);
}

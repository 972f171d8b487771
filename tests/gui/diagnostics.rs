//! Diagnostics: the length bisect and the audit (each saved, shown and a
//! click away from the position it names), and the training curves of a log
//! and of a `drift` run.

use dualscope::session::state::{State, View};
use dualscope::ui::App;
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::session;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{harness, mask_all, mask_session, message, pick_in_combo, tiny, wait_for_trace, wait_until};

/// Clicks "Go to position": the sequence view opens at `pos`.
fn go_to_position(h: &mut Harness<'static, App>, pos: usize) {
    h.get_by_label("Go to position").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, pos);
    assert_eq!(h.state().state.view, View::Sequence);
}

#[test]
fn bisect_finds_the_window_edge_and_goes_there() {
    let dir = tempfile::tempdir().unwrap();
    let state = State { view: View::Bisect, bisect_max_len: 12, ..tiny(40) };
    let mut h = harness(state, (1400.0, 900.0));
    wait_for_trace(&mut h);
    pick_in_combo(&mut h, "Bisect fault", "window_off_by_one");
    let t0 = std::time::Instant::now();
    h.get_by_label("Run bisect").click();
    h.run_steps(2);
    wait_until(&mut h, "the bisect", |a| !a.bisect().is_busy());
    eprintln!("bisect took {:.1} s", t0.elapsed().as_secs_f64());
    if dualscope::ui::engines::gpu_availability().is_err() {
        assert!(message(&h).contains("bisect"), "{}", message(&h));
        return;
    }
    let r = h.state().state.bisect.clone().expect("the bisect's result is kept");
    let window = dualscope::model::Config::tiny().window;
    assert_eq!(window, 3);
    assert_eq!(r.smallest_failing, Some(window));
    assert_eq!(r.last_good, Some(window - 1));
    let f = r.failure.as_ref().unwrap();
    assert_eq!(f.rung.as_deref(), Some("attn_fwd"));
    assert_eq!(f.position, Some(window - 1));
    assert_eq!(r.probes.first().map(|p| p.len), Some(12));
    h.get_by_label("smallest failing length: 3");
    h.get_by_label("last good length: 2");
    mask_all(&mut h, &["positions in", "Bisect:"]);
    mask_session(&mut h);
    h.snapshot("bisect_view");

    // Saved with the session, and read back.
    let path = dir.path().join("s.ron");
    h.state_mut().queue(Command::SaveSession(path.clone()));
    h.run_steps(2);
    let loaded = session::load(&path).unwrap();
    assert_eq!(loaded.bisect.as_ref(), Some(&r));

    go_to_position(&mut h, 2);
}

#[test]
fn audit_without_a_fault_is_all_noise() {
    let mut h = harness(State { view: View::Audit, ..tiny(40) }, (1400.0, 1000.0));
    wait_for_trace(&mut h);
    let t0 = std::time::Instant::now();
    h.get_by_label("Run audit").click();
    h.run_steps(2);
    wait_until(&mut h, "the audit", |a| !a.audit().is_busy());
    eprintln!("audit took {:.1} s", t0.elapsed().as_secs_f64());
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    let r = h.state().audit().report.clone().expect("the audit ran");
    assert_eq!(r.len, 39);
    assert!(!r.tensors.is_empty());
    for t in &r.tensors {
        assert_eq!(t.verdict, dualscope::ladder::audit::Verdict::Noise, "{}: {}", t.tensor, t.evidence);
    }
    assert_eq!(h.query_all_by_label("noise").count(), r.tensors.len());
    let second = r.tensors[1].tensor.clone();
    h.get_by_label(&second).click();
    h.run_steps(2);
    assert_eq!(h.state().audit().selected, 1);
    h.get_by_label_contains(&format!("{second}: per-token contribution norm"));
    h.state_mut().queue(Command::PickAuditPosition(7));
    h.run_steps(2);
    h.get_by_label_contains("picked position 7");
    mask_all(&mut h, &["positions in", "Audit:", "loss CPU"]);
    mask_session(&mut h);
    h.snapshot("audit_view");
    go_to_position(&mut h, 7);
}

#[test]
fn training_curves_load_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for step in 1..=12u64 {
        let (loss, norm, skipped, actions) = match step {
            5 => ("null".to_string(), "null".to_string(), "\"non-finite gradient norm\"".to_string(),
                  r#"[{"step":5,"action":"skip","reason":"gradient norm is not finite"},{"step":5,"action":"lr_cut","reason":"after a skipped step","lr_factor":0.5}]"#.to_string()),
            _ => (format!("{}", 5.5 - 0.1 * step as f64), format!("{}", 2.0 + (step % 3) as f64), "null".into(), "[]".into()),
        };
        lines += &format!(
            r#"{{"step":{step},"loss":{loss},"grad_norm":{norm},"skipped":{skipped},"clipped":false,"capped_tokens":0,"lr":0.001,"scale":1.0,"optim_step":{step},"actions":{actions},"ms":3.0}}"#
        );
        lines.push('\n');
    }
    lines += "{\"step\": 13, \"loss\"\n"; // a line cut by a kill
    std::fs::write(dir.path().join("log.jsonl"), lines).unwrap();

    let mut h = harness(State { view: View::Training, ..tiny(20) }, (1400.0, 1000.0));
    wait_for_trace(&mut h);
    // A missing log: the status bar says so.
    h.state_mut().train_log_path = dir.path().join("nope").display().to_string();
    h.run_steps(1);
    h.get_by_label("Load log").click();
    wait_until(&mut h, "reading the log", |a| !a.train_log().is_busy());
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    assert!(message(&h).contains("cannot load the training log"), "{}", message(&h));

    h.state_mut().train_log_path = dir.path().display().to_string();
    h.run_steps(1);
    h.get_by_label("Load log").click();
    wait_until(&mut h, "reading the log", |a| !a.train_log().is_busy());
    let log = h.state().train_log().log.clone().expect("the log loaded");
    assert_eq!(log.steps.len(), 12);
    assert_eq!(log.bad_lines, 1);
    assert_eq!(log.actions.len(), 2);
    assert!(log.steps[4].loss.is_nan() && log.steps[4].skipped.is_some());
    assert_eq!(h.state().state.train_log.as_deref(), Some(dir.path().join("log.jsonl").as_path()));
    h.get_by_label_contains("12 steps (up to step 12), 1 skipped, 2 controller actions");
    h.get_by_label("gradient norm is not finite");
    h.get_by_label("lr_cut");
    h.get_by_label("gradient norm (unscaled, before clipping)");
    let rects: Vec<egui::Rect> = h.get_all_by_role(Role::TextInput).map(|n| n.rect()).collect();
    for r in rects {
        h.mask(r);
    }
    // Labels holding the temporary directory's name: masked to a fixed width
    // (the name's width in a proportional font varies from run to run).
    let rects: Vec<egui::Rect> = ["controller actions,", "Read 12"]
        .iter()
        .map(|t| h.get_by_label_contains(t).rect())
        .map(|r| egui::Rect::from_min_size(r.min, egui::vec2(900.0, r.height())))
        .collect();
    for r in rects {
        h.mask(r);
    }
    mask_session(&mut h);
    h.snapshot("training_view");
}

/// A `dualscope drift --out DIR` run opens in the Training curves view: its
/// summary line and plot, and its capture of the first step outside the
/// envelope one click away.
#[test]
fn training_curves_show_a_drift_run() {
    if dualscope::ui::engines::gpu_availability().is_err() {
        eprintln!("SKIPPED: no Vulkan device for the drift run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("text.txt");
    std::fs::write(&data, "the quick brown fox jumps over the lazy dog. ".repeat(40)).unwrap();
    let out = dir.path().join("drift");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dualscope"))
        .args(["drift", "--data", data.to_str().unwrap(), "--config", "tiny", "--steps", "5", "--batch", "2"])
        .args(["--seq-len", "12", "--inject", "persistent@3", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let mut h = harness(State { view: View::Training, ..tiny(20) }, (1400.0, 1000.0));
    wait_for_trace(&mut h);
    h.state_mut().train_log_path = out.display().to_string();
    h.run_steps(1);
    h.get_by_label("Load log").click();
    wait_until(&mut h, "reading the drift report", |a| !a.train_log().is_busy());
    assert!(h.state().train_log().drift.is_some() && h.state().train_log().log.is_none());
    let line = h.state().train_log().drift.as_ref().unwrap().0.summary_line();
    assert!(line.starts_with("first step outside the rounding envelope: 3 ("), "{line}");
    h.get_by_label(&line); // the plot's heading (the status line says it too)
    h.get_by_label("open capture").click();
    h.run_steps(1);
    wait_until(&mut h, "opening the capture", |a| !a.capture_busy() && !a.is_busy());
    let open = h.state().capture().expect("the drift capture is open");
    assert_eq!(open.path, out.join("captures/step_000003"));
    assert_eq!(open.capture.meta.triggers, ["drift"]);
}

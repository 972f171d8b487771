//! The ladder panel and the inspector: rungs run on the Vulkan engine and
//! inspected, tensors exported, sessions with the ladder's results and side
//! file, the shipped failing session, a planted fault from the combo box, the
//! per-token guard and the precision control; the inspector's snapshot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dualscope::session::state::{ConfigName, State};
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::{App, LaunchOptions, session};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{harness, init_env, mask_all, mask_session, message, pick_in_combo, tiny, wait_for_ladder, wait_for_trace};

/// The ladder panel runs rung 1 on the Vulkan engine (lavapipe here), shows
/// its verdict, and the inspector lists its cases when the rung is clicked.
#[test]
fn ladder_panel_runs_and_inspects_a_rung() {
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    // Eleven rungs and the end-to-end step, none run yet.
    assert_eq!(h.get_all_by_label("not run").count(), 12);
    h.get_by_label("Run ladder").click();
    h.run_steps(2);
    assert!(h.state().ladder().is_busy() || !h.state().ladder().results.is_empty());
    for _ in 0..6000 {
        h.step();
        if !h.state().ladder().is_busy() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    h.run_steps(2);
    let gemm = h.state().ladder().results.get("gemm").expect("rung 1 ran");
    match dualscope::ui::engines::gpu_availability() {
        Ok(_) => {
            let r = gemm.as_ref().expect("rung 1 ran on the GPU");
            assert_eq!(r.status, dualscope::ladder::Status::Pass);
            for id in dualscope::ladder::ALL_RUNGS {
                let r = h.state().ladder().results.get(id).expect("every rung ran");
                assert_eq!(r.as_ref().map(|r| r.status), Ok(dualscope::ladder::Status::Pass), "{id}");
            }
            let e2e = h.state().ladder().end_to_end.as_ref().expect("the end-to-end step ran");
            assert_eq!(e2e.as_ref().map(|e| e.status), Ok(dualscope::ladder::Status::Pass));
            assert_eq!(h.get_all_by_label("pass").count(), 12);
        }
        Err(_) => assert!(gemm.is_err(), "without a GPU the rung reports why"),
    }
    assert_eq!(h.query_all_by_label("not run").count(), 0);
    h.get_by_label("gemm").click();
    h.run_steps(2);
    assert_eq!(h.state().state.selected_rung.as_deref(), Some("gemm"));
    h.get_by_label_contains("Cases of rung gemm");
    h.get_by_label_contains("cases, worst rel L2");
    // The selection is part of the session.
    h.state_mut().queue(Command::SelectRung(None));
    h.run_steps(2);
    assert_eq!(h.state().state.selected_rung, None);
}

fn wait_for_export(h: &mut Harness<'static, App>) {
    for _ in 0..4000 {
        h.step();
        if !h.state().is_exporting() {
            h.run_steps(1);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the export did not finish");
}

/// The whole path a user takes: the stepper compares the GPU's trace with the
/// CPU's, the ladder runs, a click on a rung opens its tensors in the
/// inspector, jump to the worst element, export, and the session (with the
/// ladder results and tensors) saves and loads back.
#[test]
fn ladder_inspector_export_and_session() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    let gpu = dualscope::ui::engines::gpu_availability();

    // The stepper: CPU vs GPU where there is a GPU, else why not.
    match &gpu {
        Ok(_) => {
            let c = h.state().computed().unwrap();
            let g = c.gpu.as_ref().expect("the GPU trace");
            assert!((g.loss - c.loss).abs() < 1e-5 * c.loss.abs(), "GPU loss {} vs CPU {}", g.loss, c.loss);
            assert_eq!(c.gpu_row("gru.l1.h", 3).len(), 5);
            let worst = c.worst_divergence().unwrap();
            h.get_by_label_contains("GPU trace of the same row");
            h.get_by_label("Worst divergence").click();
            h.run_steps(2);
            assert_eq!(h.state().state.cursor, worst);
            let c = h.state().computed().unwrap();
            let g = c.gpu.as_ref().unwrap();
            assert!(g.divergence.iter().all(|&d| d <= g.divergence[worst]));
            assert!(g.divergence[worst] < 1e-4, "an honest GPU stays close: {}", g.divergence[worst]);
        }
        Err(_) => {
            h.get_by_label_contains("CPU only:");
        }
    }

    // The GPU trace can be turned off (and on again).
    h.get_by_label("Compare with the GPU in the stepper").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(!h.state().state.gpu_trace);
    assert_eq!(h.state().computed().unwrap().gpu.as_ref().err().map(String::as_str), Some("the GPU trace is off"));
    h.get_by_label_contains("CPU only: the GPU trace is off");
    h.get_by_label("Compare with the GPU in the stepper").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().computed().unwrap().gpu.is_ok(), gpu.is_ok());

    h.get_by_label("Run ladder").click();
    h.run_steps(1);
    wait_for_ladder(&mut h);
    h.get_by_label("gru_fwd").click();
    h.run_steps(2);
    assert_eq!(h.state().state.view, dualscope::session::state::View::Inspector);
    h.get_by_label("Tensors of rung gru_fwd");
    if gpu.is_err() {
        h.get_by_label_contains("no GPU engine");
        return;
    }
    // Every tensor of the rung is listed: 2 layers × gi, gh, r, z, n, h.
    assert_eq!(h.state().ladder().tensors["gru_fwd"].len(), 12);
    // (Buttons: the ladder panel's case list names them too, as labels.)
    for name in ["gru.l0.gi", "gru.l1.h", "gru.l1.n"] {
        h.get_by_role_and_label(Role::Button, name);
    }
    h.get_by_role_and_label(Role::Button, "gru.l1.h").click();
    h.run_steps(2);
    let t = h.state().inspected().unwrap().clone();
    assert_eq!(t.name, "gru.l1.h");
    assert_eq!(t.shape, [39, 1, 5]);
    assert_eq!((t.cpu.rows, t.cpu.cols), (39, 5));
    assert!(t.stats.rel_l2 < 2e-5 && t.stats.rel_l2_cpu_f64.is_some());
    // The three heatmaps and the slice plot are there.
    for name in ["inspector CPU", "inspector GPU", "inspector difference"] {
        h.get_by_label(name);
    }
    h.get_by_label_contains("Slice: row");

    // Jump to the worst element: the maps zoom onto it, the grid shows it.
    h.get_by_label("Jump to worst").click();
    h.run_steps(3);
    let (wr, wc) = t.cell(t.stats.worst.unwrap());
    assert_eq!(h.state().inspector().focus, Some((wr, wc)));
    let v = h.state().inspector().view().unwrap();
    assert!(v.height() <= 16.0 && v.contains(egui::pos2(wc as f32 + 0.5, wr as f32 + 0.5)), "{v:?} for {wr},{wc}");

    // Export: CSV and safetensors through the path field; a bad path is an error in the status bar.
    let csv = dir.path().join("h.csv");
    h.state_mut().inspector_mut().export_path = csv.display().to_string();
    h.run_steps(1);
    h.get_by_label("Export CSV").click();
    h.run_steps(1);
    wait_for_export(&mut h);
    assert!(message(&h).contains("Exported gru.l1.h"), "{}", message(&h));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 39 * 5 + 1);
    h.get_by_label("Export safetensors").click();
    h.run_steps(1);
    wait_for_export(&mut h);
    let bytes = std::fs::read(dir.path().join("h.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.tensor("diff").unwrap().shape(), &[39, 1, 5]);
    h.state_mut().inspector_mut().export_path = dir.path().join("missing/dir/x.csv").display().to_string();
    h.run_steps(1);
    h.get_by_label("Export CSV").click();
    h.run_steps(1);
    wait_for_export(&mut h);
    assert_eq!(h.state().message().unwrap().level, Level::Error, "{}", message(&h));
    assert!(!dir.path().join("missing").exists());

    // Save the session with the ladder; change things; load it back.
    let path = dir.path().join("with-ladder.ron");
    h.state_mut().session_path = path.display().to_string();
    h.run_steps(1);
    h.get_by_label("Save session").click();
    h.run_steps(2);
    assert!(message(&h).contains("Saved"), "{}", message(&h));
    assert!(dir.path().join("with-ladder.tensors.safetensors").exists());
    let saved = h.state().state.clone();
    assert_eq!(saved.selected_tensor.as_deref(), Some("gru.l1.h"));
    h.state_mut().queue(Command::SelectRung(Some("head_fwd".into())));
    h.state_mut().queue(Command::SetView(dualscope::session::state::View::Speedup));
    h.run_steps(2);
    h.get_by_label("Load session").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state, saved);
    assert_eq!(h.state().ladder().results.len(), 11);
    assert_eq!(h.state().inspected().unwrap().stats, t.stats, "the tensors came back from the side file");

    // Without its side file, the session still loads: a warning, the results, no tensors.
    std::fs::remove_file(dir.path().join("with-ladder.tensors.safetensors")).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().message().unwrap().level, Level::Warning, "{}", message(&h));
    assert!(message(&h).contains("tensors cannot be read"), "{}", message(&h));
    assert_eq!(h.state().ladder().results.len(), 11);
    assert!(h.state().inspected().is_none());
    h.get_by_label_contains("side file is missing");
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions").join(name)
}

/// The shipped failing session: the ladder's verdicts as saved, and the
/// failing rung's tensors in the inspector.
#[test]
fn failing_rung_from_the_example_session() {
    init_env();
    let app = App::new(LaunchOptions { session: Some(example("example-failing.ron")), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_trace(&mut h);
    assert_eq!(h.state().message().unwrap().level, Level::Info, "{}", message(&h));
    let l = h.state().ladder();
    let fault = l.input.as_ref().and_then(|i| i.fault.clone()).expect("the example names its fault");
    assert!(fault.to_string().contains("param.gru.weight_hh_l1"), "{fault}");
    let gru = l.results["gru_fwd"].as_ref().unwrap();
    assert_eq!(gru.status, dualscope::ladder::Status::Fail);
    assert_eq!(l.results["embed_fwd"].as_ref().unwrap().status, dualscope::ladder::Status::Pass);
    assert_eq!(h.state().state.view, dualscope::session::state::View::Inspector);
    let t = h.state().inspected().unwrap();
    assert!(t.name.starts_with("gru.l1."), "the worst tensor is in layer 1: {}", t.name);
    assert!(t.stats.rel_l2 > 1e-3, "{}", t.stats.rel_l2);
    assert!(h.get_all_by_label("FAIL").count() >= 2);
    assert_eq!(h.get_all_by_label_contains("injected fault").count(), 2, "the ladder panel and the inspector say so");
    // Layer 0 is untouched by the fault.
    h.get_by_role_and_label(Role::Button, "gru.l0.h").click();
    h.run_steps(2);
    assert!(h.state().inspected().unwrap().stats.rel_l2 < 2e-5);
    h.get_by_role_and_label(Role::Button, "gru.l1.h").click();
    h.run_steps(1);
    h.get_by_label("Jump to worst").click();
    // The session field shows where the checkout is; the status bar how long the trace took.
    h.state_mut().session_path = "sessions/example-failing.ron".into();
    h.run_steps(3);
    mask_all(&mut h, &["positions in"]);
    mask_session(&mut h);
    h.snapshot("inspector_failing_rung");
}

/// The inspector on a passing rung, snapshotted (tiny config, one row of 40 tokens).
#[test]
fn snapshot_inspector_view() {
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    h.get_by_label("Run ladder").click();
    h.run_steps(1);
    wait_for_ladder(&mut h);
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    h.get_by_label("attn_fwd").click();
    h.run_steps(2);
    h.get_by_role_and_label(Role::Button, "ctx.attn").click();
    h.run_steps(3);
    // Hide the times, which vary from run to run.
    // The ladder panel's times vary from run to run: hide everything right of its time column.
    let left = h.query_all_by_label("GPU / CPU ms").map(|n| n.rect().min.x).fold(f32::INFINITY, f32::min);
    h.mask(egui::Rect::from_min_max(egui::pos2(left - 4.0, 0.0), egui::pos2(1600.0, 1000.0)));
    mask_session(&mut h);
    h.snapshot("inspector_view");
}

/// Writes `sessions/example-failing.ron` and its side file: the ladder on the
/// `tiny` model (seed 0) over the first 64 tokens of the embedded corpus, on
/// this machine's Vulkan device, with one weight of the GPU's copy of
/// `gru.weight_hh_l1` changed before the rungs run. Run it by hand:
/// `cargo test --test gui -- --ignored generate_example_sessions`.
#[test]
#[ignore]
fn generate_example_sessions() {
    use dualscope::ladder::Corruption;
    use dualscope::session::results::LadderInput;
    use dualscope::session::state::View;
    use dualscope::ui::ladder_run::{self, LadderJob, LadderView};
    init_env();
    let ds = dualscope::dataset::default_dataset();
    let len = 64;
    let tokens = ds.window(0, len).unwrap();
    let fault = Corruption {
        tensor: "param.gru.weight_hh_l1".into(),
        corrupt: std::sync::Arc::new(|w: &mut [f32]| w[7] += 0.5),
    };
    let describe = "param.gru.weight_hh_l1[7] (row 1: r gate, unit 1; column 2: from h[2]) += 0.5 on the GPU";
    let input = LadderInput {
        config: ConfigName::Tiny,
        seed: 0,
        dataset_hash: Some(ds.content_hash()),
        offset: 0,
        len,
        checkpoint: None,
        fault: Some(dualscope::session::results::Planted::Described(describe.into())),
        capture: None,
    };
    let job = LadderJob {
        input,
        tokens,
        engine_fault: None,
        precision: dualscope::step::Precision::F32,
        precision_map: None,
        token_cap: None,
        capture: None,
        weights: Default::default(), // the seed's initialisation
    };
    let mut view = LadderView::default();
    view.input = Some(job.input.clone());
    ladder_run::run(&job, &dualscope::ladder::Rung::ALL, Some(fault), &mut |r| view.apply(r));
    let state = State {
        dataset: dualscope::session::state::DatasetRef { path: None, hash: Some(ds.content_hash()) },
        cursor: 10,
        selected_rung: Some("gru_fwd".into()),
        view: View::Inspector,
        ..tiny(len)
    };
    session::save_with_ladder(&example("example-failing.ron"), &state, view.to_saved(), &view.tensors).unwrap();
    let statuses: Vec<String> =
        view.results.iter().map(|(k, r)| format!("{k}: {:?}", r.as_ref().map(|r| r.status))).collect();
    eprintln!("example-failing.ron: {}", statuses.join(", "));
}

#[test]
fn fault_combo_plants_a_fault_in_the_ladder() {
    let mut h = harness(tiny(40), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    pick_in_combo(&mut h, "Fault", "window_off_by_one");
    assert_eq!(h.state().state.ladder_fault.map(|f| f.to_string()).as_deref(), Some("window_off_by_one"));
    h.get_by_label("Run ladder").click();
    h.run_steps(2);
    wait_for_ladder(&mut h);
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    let attn = h.state().ladder().results.get("attn_fwd").expect("attn_fwd ran");
    assert_eq!(attn.as_ref().map(|r| r.status), Ok(dualscope::ladder::Status::Fail));
    assert_eq!(h.state().ladder().first_failed(), Some("attn_fwd"));
    assert_eq!(h.state().ladder().planted(), Some(dualscope::step::Fault::WindowOffByOne));
    h.get_by_label("planted: window_off_by_one (expected to fail first: attn_fwd)");
    h.get_by_label("first failed: attn_fwd, as expected");
    // A failing rung is the ladder's result, not an error.
    assert_eq!(h.state().message().unwrap().level, Level::Result, "{}", message(&h));
    assert_eq!(message(&h), "Ladder: rung 4 attn_fwd failed first");
}

/// The per-token guard from the side panel: the trace runs with the cap, the
/// stepper shows how many positions it capped; the ladder's gemm rung runs in
/// the precision chosen there; both are saved in the session.
#[test]
fn token_guard_and_precision_controls() {
    let mut h = harness(tiny(30), (1600.0, 1000.0));
    wait_for_trace(&mut h);
    h.get_by_label("off");
    h.get_by_label("Per-token guard").click();
    h.run_steps(2);
    assert_eq!(h.state().state.token_cap, Some(0.01));
    // A cap far below every position's norm caps them all.
    h.state_mut().queue(Command::SetTokenCap(Some(1e-9)));
    h.state_mut().queue(Command::Run);
    h.run_steps(2);
    wait_for_trace(&mut h);
    let c = h.state().computed().unwrap();
    assert_eq!((c.token_cap, c.capped), (Some(1e-9), c.t));
    h.get_by_label_contains(&format!("{} of {} positions capped", c.t, c.t));
    // Nonsense caps switch the guard off rather than poisoning the trace.
    h.state_mut().queue(Command::SetTokenCap(Some(-1.0)));
    h.run_steps(1);
    assert_eq!(h.state().state.token_cap, None);
    h.state_mut().queue(Command::SetPrecision(dualscope::step::Precision::Bf16));
    h.run_steps(1);
    let saved = ron::to_string(&h.state().state).unwrap();
    assert!(saved.contains("precision:bf16") || saved.contains("precision: bf16"), "{saved}");
    if dualscope::ui::engines::gpu_availability().is_err() {
        return;
    }
    h.get_by_label("Run ladder").click();
    h.run_steps(1);
    wait_for_ladder(&mut h);
    let gemm = h.state().ladder().results.get("gemm").unwrap().as_ref().unwrap();
    assert_eq!(gemm.precision, dualscope::step::Precision::Bf16);
    assert_eq!(gemm.status, dualscope::ladder::Status::Pass);
    // The model rungs check the bf16 mixed step too, under its own tolerances.
    let gru = h.state().ladder().results.get("gru_bwd").unwrap().as_ref().unwrap();
    assert_eq!(gru.precision, dualscope::step::Precision::Bf16);
    assert_ne!(gru.status, dualscope::ladder::Status::Fail, "{gru:?}");
}

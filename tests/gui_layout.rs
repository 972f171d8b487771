//! The GUI's layout, sessions and words through egui_kittest (the real app,
//! rendered with wgpu on lavapipe): the side panels keep their widths, the
//! inspector's three maps fit side by side, every view scrolls; sessions save
//! to the per-user data folder from any working directory, the recent list,
//! the window title's `*`, the typed-path field without a portal; tooltips on
//! the controls and the `?` overlay. Snapshots at 1280×800 and 1600×1000.

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::{env_data_dir, init_env};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dualscope::session::state::{ConfigName, State, View};
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::{App, LaunchOptions};
use egui::Key;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};

fn tiny(len: usize) -> State {
    State { config: ConfigName::Tiny, len, ..State::default() }
}

fn build(app: App, size: (f32, f32)) -> Harness<'static, App> {
    Harness::builder()
        .with_size(egui::vec2(size.0, size.1))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app)
}

/// An app with its own empty data folder and a fixed session path (snapshots stay the same).
fn isolated(opts: LaunchOptions, data: &Path, size: (f32, f32)) -> Harness<'static, App> {
    init_env();
    let mut app = App::new(opts);
    app.set_data_dir(data);
    if app.session_path.starts_with(data.to_str().unwrap()) {
        app.session_path = "/tmp/dualscope/session.ron".into();
    }
    build(app, size)
}

fn wait_for_trace(h: &mut Harness<'static, App>) {
    for _ in 0..3000 {
        h.step();
        if !h.state().is_busy() && h.state().computed().is_some() {
            h.run_steps(2);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the worker did not finish; status: {:?}", h.state().message());
}

fn message(h: &Harness<'static, App>) -> String {
    h.state().message().map(|m| m.text.clone()).unwrap_or_default()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions").join(name)
}

/// The shipped failing session (the inspector on the failing rung gru_fwd).
fn failing(size: (f32, f32)) -> (Harness<'static, App>, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let opts = LaunchOptions { session: Some(example("example-failing.ron")), ..Default::default() };
    let mut h = isolated(opts, data.path(), size);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.view, View::Inspector);
    (h, data)
}

/// The ladder panel's width: from its heading's left edge (less the panel's margin) to the window's right.
fn ladder_width(h: &Harness<'static, App>, window: f32) -> f32 {
    window - h.get_by_label("Ladder").rect().min.x + 8.0
}

/// Hides the session section (its paths and recent list name this machine's folders).
fn mask_session(h: &mut Harness<'static, App>) {
    let top = h.get_by_label("Session").rect().min.y;
    let right = h.get_by_label("Sequence").rect().min.x - 6.0;
    h.mask(egui::Rect::from_min_max(egui::pos2(0.0, top), egui::pos2(right, 4000.0)));
}

fn mask_all(h: &mut Harness<'static, App>, texts: &[&str]) {
    let rects: Vec<egui::Rect> =
        texts.iter().flat_map(|t| h.query_all_by_label_contains(t).map(|n| n.rect()).collect::<Vec<_>>()).collect();
    for r in rects {
        h.mask(r);
    }
}

/// At both sizes: the ladder panel keeps its width range when rungs are
/// clicked (the cases are in the inspector view, not in the panel), the
/// inspector's three maps lie inside the window side by side without
/// overlapping, and the Speedup view shows no rung's cases.
#[test]
fn inspector_layout_holds_at_two_sizes() {
    for (w, hgt) in [(1280.0, 800.0), (1600.0, 1000.0)] {
        let (mut h, _data) = failing((w, hgt));
        for rung in ["attn_fwd", "gru_fwd"] {
            h.get_by_label(rung).click();
            h.run_steps(3);
            let lw = ladder_width(&h, w);
            assert!((290.0..=530.0).contains(&lw), "{w}x{hgt}: the ladder panel is {lw} wide after clicking {rung}");
        }
        assert_eq!(h.state().state.selected_rung.as_deref(), Some("gru_fwd"));
        h.get_by_label_contains("Cases of rung gru_fwd");
        // Bring the maps into view (the inspector scrolls), then check them.
        h.get_by_label("inspector GPU").scroll_to_me();
        h.run_steps(3);
        let central_left = h.get_by_label("Sequence").rect().min.x;
        let window = egui::Rect::from_min_max(
            egui::pos2(central_left - 10.0, 0.0),
            egui::pos2(w - ladder_width(&h, w) + 10.0, hgt),
        );
        let maps: Vec<egui::Rect> = ["inspector CPU", "inspector GPU", "inspector difference"]
            .iter()
            .map(|l| h.get_by_label(l).rect())
            .collect();
        for (i, r) in maps.iter().enumerate() {
            assert!(window.contains_rect(*r), "{w}x{hgt}: map {i} {r:?} outside the central area {window:?}");
            assert!(r.width() >= 120.0 && r.height() >= 120.0, "{w}x{hgt}: map {i} is {r:?}");
            for (j, q) in maps.iter().enumerate().skip(i + 1) {
                assert!(!r.intersects(*q), "{w}x{hgt}: maps {i} {r:?} and {j} {q:?} overlap");
            }
        }
        // The numeric grid is reachable by scrolling.
        h.get_by_label_contains("values, rows").scroll_to_me();
        h.run_steps(3);
        let g = h.get_by_label_contains("values, rows").rect();
        assert!(g.max.y <= hgt && g.min.y >= 0.0, "{w}x{hgt}: the grid's title {g:?}");
        // Another view: no cases, the same ladder panel.
        h.get_by_label("Speedup").click();
        h.run_steps(3);
        assert!(h.query_by_label_contains("Cases of rung").is_none(), "the cases stay with the inspector");
        let lw = ladder_width(&h, w);
        assert!((290.0..=530.0).contains(&lw), "{w}x{hgt}: the ladder panel is {lw} wide on the Speedup view");
    }
}

/// The Sequence view scrolls: the context-gradient heatmap can be brought
/// fully into the window at both sizes.
#[test]
fn sequence_view_scrolls_to_the_gradient_map() {
    let data = tempfile::tempdir().unwrap();
    for (w, hgt) in [(1280.0, 800.0), (1600.0, 1000.0)] {
        let state = State { len: 300, cursor: 120, ..State::default() };
        let mut h = isolated(LaunchOptions { state: Some(state), ..Default::default() }, data.path(), (w, hgt));
        wait_for_trace(&mut h);
        h.get_by_label("context gradient heatmap").scroll_to_me();
        h.run_steps(3);
        let r = h.get_by_label("context gradient heatmap").rect();
        assert!(r.max.y <= hgt && r.min.y >= 0.0, "{w}x{hgt}: the gradient map {r:?} runs off the window");
        let lw = ladder_width(&h, w);
        assert!((290.0..=530.0).contains(&lw), "{w}x{hgt}: ladder panel {lw}");
    }
}

const SIZES: [(f32, f32, &str); 2] = [(1280.0, 800.0, "1280x800"), (1600.0, 1000.0, "1600x1000")];

/// Snapshots `h` at both sizes (one harness, resized: kittest merges one harness's results).
fn snapshot_both(h: &mut Harness<'static, App>, name: &str) {
    for (w, hgt, tag) in SIZES {
        h.set_size(egui::vec2(w, hgt));
        h.run_steps(4);
        mask_all(h, &["computed in", "positions in"]);
        mask_session(h);
        h.snapshot(format!("{name}_{tag}"));
    }
}

#[test]
fn snapshot_sequence_at_two_sizes() {
    let data = tempfile::tempdir().unwrap();
    let state = State { len: 300, cursor: 120, ..State::default() };
    let mut h = isolated(LaunchOptions { state: Some(state), ..Default::default() }, data.path(), (1280.0, 800.0));
    wait_for_trace(&mut h);
    snapshot_both(&mut h, "layout_sequence");
}

#[test]
fn snapshot_failing_inspector_at_two_sizes() {
    let (mut h, _d) = failing((1280.0, 800.0));
    snapshot_both(&mut h, "layout_inspector_failing");
}

/// Speedup, with known samples (a live run's times vary).
#[test]
fn snapshot_speedup_at_two_sizes() {
    use dualscope::engine::EngineKind as Engine;
    use dualscope::ui::speed::Sample;
    let (mut h, _d) = failing((1280.0, 800.0));
    h.state_mut().queue(Command::SetView(View::Speedup));
    let samples = &mut h.state_mut().speed_mut().samples;
    for step in 0..30u64 {
        let wobble = ((step * 7) % 5) as f64;
        let s = |engine, wall_ms, device_ms| Sample { engine, step, wall_ms, device_ms, loss: 5.5 };
        samples.push(s(Engine::Cpu, 40.0 + wobble, None));
        samples.push(s(Engine::Vulkan, 8.0 + wobble / 5.0, Some(5.0 + wobble / 8.0)));
    }
    h.run_steps(3);
    snapshot_both(&mut h, "layout_speedup");
}

/// "Save session" with its default path: an absolute path in the data folder
/// (`DUALSCOPE_DATA_DIR` here), whatever the working directory (the old default,
/// `sessions/session.ron`, failed outside the checkout); the data folder's
/// `sessions/` is created on the first save and the session and its side
/// tensors file written there; the status bar names the full path.
#[test]
fn default_save_works_from_any_directory() {
    init_env();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // A new app's session field holds the default: absolute, in the data folder.
    let fresh = App::new(LaunchOptions::default());
    assert!(Path::new(&fresh.session_path).is_absolute(), "the default {} is absolute", fresh.session_path);
    assert!(
        fresh.session_path.starts_with(env_data_dir().to_str().unwrap()),
        "the default comes from the env override"
    );
    drop(fresh);
    let mut app = App::new(LaunchOptions { session: Some(example("example-failing.ron")), ..Default::default() });
    app.set_data_dir(&data);
    let mut h = build(app, (1280.0, 1600.0));
    wait_for_trace(&mut h);
    // The session field now names the example; type the default back (as a new user's field would hold).
    let default = dualscope::session::data::default_session(&data);
    // Opening the example recorded it in the recent list (in the data folder); the sessions folder is not there yet.
    assert!(!default.parent().unwrap().exists(), "the sessions folder is created on first save only");
    h.state_mut().session_path = default.display().to_string();
    h.run_steps(2);
    press(&mut h, "Save session");
    h.run_steps(2);
    assert!(default.is_file(), "{} written; status: {}", default.display(), message(&h));
    assert_eq!(h.state().message().unwrap().level, Level::Info, "{}", message(&h));
    assert!(message(&h).contains(&default.display().to_string()), "{}", message(&h));
    assert!(default.with_file_name("session.tensors.safetensors").is_file(), "the side file next to it");
    assert_eq!(h.state().recent()[0], default, "first in the recent list");
    assert_eq!(dualscope::session::load(&default).unwrap().selected_rung.as_deref(), Some("gru_fwd"));
}

/// The title names the session and marks unsaved changes; the recent list
/// is most recent first, drops missing files, and opens a session in one click.
#[test]
fn title_marks_unsaved_changes_and_recent_sessions_open() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut h = isolated(LaunchOptions { state: Some(tiny(40)), ..Default::default() }, &data, (1280.0, 1600.0));
    wait_for_trace(&mut h);
    assert_eq!(h.state().title(), "new session — dualscope", "nothing changed yet");
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert!(h.state().title().starts_with("new session *"), "{}", h.state().title());
    let (a, b) = (dir.path().join("a.ron"), dir.path().join("b.ron"));
    for p in [&a, &b] {
        h.state_mut().session_path = p.display().to_string();
        h.run_steps(1);
        press(&mut h, "Save session");
        h.run_steps(2);
        assert!(message(&h).contains("Saved"), "{}", message(&h));
    }
    let title = h.state().title();
    assert!(title.starts_with("b.ron (") && !title.contains('*'), "{title}");
    assert_eq!(h.state().recent(), [b.clone(), a.clone()]);
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert!(h.state().title().starts_with("b.ron * ("), "{}", h.state().title());

    // A new app over the same data folder: the list as saved, missing files dropped.
    std::fs::remove_file(&b).unwrap();
    let mut h = isolated(LaunchOptions { state: Some(tiny(30)), ..Default::default() }, &data, (1280.0, 1600.0));
    wait_for_trace(&mut h);
    assert_eq!(h.state().recent(), std::slice::from_ref(&a));
    h.get_by_label_contains("a.ron  (").scroll_to_me();
    h.run_steps(2);
    h.get_by_label_contains("a.ron  (").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.len, 40, "the session a.ron is loaded; status: {}", message(&h));
    assert!(h.state().title().starts_with("a.ron ("), "{}", h.state().title());
}

/// Without a desktop portal "Save session as…" opens a typed-path field
/// with a message instead of doing nothing; its OK saves there.
#[test]
fn save_as_without_a_portal_falls_back_to_a_path_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = isolated(
        LaunchOptions { state: Some(tiny(20)), ..Default::default() },
        &dir.path().join("d"),
        (1280.0, 1600.0),
    );
    wait_for_trace(&mut h);
    let target = dir.path().join("typed/s.ron");
    h.state_mut().session_path = target.display().to_string();
    h.run_steps(1);
    press(&mut h, "Save session as…");
    for _ in 0..2000 {
        h.step();
        if h.state().prompt_open() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(h.state().prompt_open(), "no typed-path field; status: {}", message(&h));
    assert!(message(&h).contains("no file dialog can open here"), "{}", message(&h));
    h.run_steps(2);
    h.get_by_label_contains("No desktop portal answered");
    h.run_steps(1);
    h.get_by_label("OK").click();
    h.run_steps(3);
    assert!(!h.state().prompt_open());
    assert!(target.is_file(), "saved through the typed path; status: {}", message(&h));
    // Esc closes it unused.
    press(&mut h, "Load session…");
    for _ in 0..2000 {
        h.step();
        if h.state().prompt_open() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(h.state().prompt_open());
    h.key_press(Key::Escape);
    h.run_steps(2);
    assert!(!h.state().prompt_open());
}

/// `?` opens the shortcut overlay listing the stepper's keys and the
/// commands; `?` again or Esc closes it; the button opens it too.
#[test]
fn question_mark_shows_the_shortcuts() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = isolated(LaunchOptions { state: Some(tiny(20)), ..Default::default() }, dir.path(), (1280.0, 800.0));
    wait_for_trace(&mut h);
    assert!(h.query_by_label("Keyboard shortcuts").is_none());
    h.key_press(Key::Questionmark);
    h.run_steps(2);
    h.get_by_label("Keyboard shortcuts");
    h.get_by_label("Right arrow");
    h.get_by_label("Next position (right arrow)");
    assert!(h.query_all_by_label("Run ladder").count() >= 2, "the overlay lists the ladder's button too");
    h.key_press(Key::Escape);
    h.run_steps(2);
    assert!(h.query_by_label("Keyboard shortcuts").is_none(), "Esc closes it");
    h.get_by_label("Shortcuts (?)").click();
    h.run_steps(2);
    h.get_by_label("Keyboard shortcuts");
    h.key_press(Key::Questionmark);
    h.run_steps(2);
    assert!(h.query_by_label("Keyboard shortcuts").is_none(), "? toggles it");
}

/// Every button, checkbox, combo box and radio button in the main views
/// (Sequence, the inspector on a failing rung, Speedup, Bisect, Audit,
/// Training curves) says what it does when hovered (its accessible description).
#[test]
fn every_control_has_a_tooltip() {
    let (mut h, _d) = failing((1600.0, 1000.0));
    let mut missing = std::collections::BTreeSet::new();
    for view in View::ALL {
        h.state_mut().queue(Command::SetView(view));
        h.run_steps(3);
        if view == View::Inspector {
            h.state_mut().queue(Command::SelectRung(Some("gru_fwd".into())));
            h.run_steps(3);
        }
        for n in h.root().children_recursive() {
            let node = n.accesskit_node();
            if !matches!(node.role(), Role::Button | Role::CheckBox | Role::ComboBox | Role::RadioButton) {
                continue;
            }
            // The inspector's slice plot legend: egui_plot draws its entries as
            // checkboxes that show or hide a series, with no description of their own.
            let legend = ["CPU", "GPU", "GPU - CPU", "picked"];
            if view == View::Inspector
                && node.role() == Role::CheckBox
                && legend.contains(&node.label().unwrap_or_default().as_str())
            {
                continue;
            }
            if node.description().is_none_or(|d| d.trim().is_empty()) {
                missing.insert(format!("{:?} {:?} ({})", node.role(), node.label().unwrap_or_default(), view.label()));
            }
        }
    }
    assert!(missing.is_empty(), "controls without a tooltip:\n{}", missing.into_iter().collect::<Vec<_>>().join("\n"));
}

/// Scrolls the side panel to the button labelled `label` and clicks it (a
/// button below the panel's fold is not under the pointer until then).
fn press(h: &mut Harness<'static, App>, label: &str) {
    h.get_by_label(label).scroll_to_me();
    h.run_steps(2);
    h.get_by_label(label).click();
}

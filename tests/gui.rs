//! The GUI driven through egui_kittest: the real app, its worker thread and its
//! panels, headless, rendered with wgpu on lavapipe for the snapshots.

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::init_env;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dualscope::session::state::{ConfigName, State};
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::{App, LaunchOptions, session};
use egui::Key;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

fn tiny(len: usize) -> State {
    State { config: ConfigName::Tiny, len, ..State::default() }
}

fn harness(state: State, size: (f32, f32)) -> Harness<'static, App> {
    init_env();
    let app = App::new(LaunchOptions { state: Some(state), ..Default::default() });
    Harness::builder()
        .with_size(egui::vec2(size.0, size.1))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app)
}

/// Clicks "Go to position": the sequence view opens at `pos`.
fn go_to_position(h: &mut Harness<'static, App>, pos: usize) {
    h.get_by_label("Go to position").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, pos);
    assert_eq!(h.state().state.view, View::Sequence);
}

/// Steps until the worker has delivered the trace.
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

#[test]
fn starts_computes_and_steps_with_keys() {
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);
    assert_eq!(h.state().computed().unwrap().t, 39);
    assert_eq!(h.state().state.cursor, 0);
    // The engines are listed: the GPU's name, or why there is none.
    match dualscope::ui::engines::gpu_availability() {
        Ok(device) => h.get_by_label_contains(&device),
        Err(why) => h.get_by_label_contains(&why),
    };

    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1);
    h.key_press(Key::End);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 38);
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 38, "the cursor stays on the last position");
    h.key_press(Key::Home);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 0);

    h.get_by_label("Next >").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1);

    h.get_by_label("Worst loss").click();
    h.run_steps(2);
    let c = h.state().computed().unwrap();
    let worst = c.series("loss.token").iter().cloned().fold(f32::MIN, f32::max);
    assert_eq!(c.scalar("loss.token", h.state().state.cursor), worst);
    // Moving the cursor never rebuilds the heatmap textures.
    assert_eq!(h.state().texture_builds(), (1, 1));
}

#[test]
fn heatmap_click_and_slider_move_the_cursor() {
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);
    // The centre of the attention heatmap's widget (the map, a line of column
    // labels above it): one of the middle rows of 39.
    h.get_by_label("attention heatmap").click();
    h.run_steps(2);
    let c = h.state().state.cursor;
    assert!((16..=22).contains(&c), "a click in the map's middle moves the cursor to the middle, got {c}");

    h.key_press(Key::Home);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 0);
    h.get_by_label("context gradient heatmap").click();
    h.run_steps(2);
    let c = h.state().state.cursor;
    assert!((10..=28).contains(&c), "a click in the gradient map's middle moves the cursor to the middle, got {c}");

    h.key_press(Key::Home);
    h.run_steps(2);
    h.get_by_role(egui::accesskit::Role::Slider).click();
    h.run_steps(2);
    let c = h.state().state.cursor;
    assert!((10..=28).contains(&c), "a click in the slider's middle moves the cursor to the middle, got {c}");

    // Another head: a new texture, once.
    h.get_by_label("head 1").click();
    h.run_steps(2);
    assert_eq!(h.state().state.head, 1);
    assert_eq!(h.state().texture_builds(), (2, 1));
}

#[derive(Debug)]
struct Dropped(PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn bad_datasets_show_in_the_status_bar_and_the_app_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);

    // A directory dropped on the window.
    h.input_mut().dropped_files.push(Arc::new(Dropped(dir.path().to_path_buf())));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("is a directory"), "{}", message(&h));
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    h.get_by_label_contains("is a directory");

    // An empty file, typed into the dataset field.
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    h.state_mut().data_path = empty.display().to_string();
    h.run_steps(1);
    h.get_by_label("Open").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("is empty"), "{}", message(&h));
    assert_eq!(h.state().dataset().name(), "embedded:synthetic");

    // Still usable.
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1);

    // A good (binary) file opens and is computed.
    let bin = dir.path().join("data.bin");
    std::fs::write(&bin, (0..=255u8).cycle().take(300).collect::<Vec<_>>()).unwrap();
    h.input_mut().dropped_files.push(Arc::new(Dropped(bin.clone())));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().dataset().name(), "data.bin");
    assert_eq!(h.state().state.dataset.path.as_deref(), Some(bin.as_path()));
    assert_eq!(h.state().computed().unwrap().tokens[..3], [0, 1, 2]);
}

#[test]
fn sessions_save_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.ron");
    let mut h = harness(State { seed: 3, ..tiny(40) }, (1400.0, 900.0));
    wait_for_trace(&mut h);
    for _ in 0..5 {
        h.key_press(Key::ArrowRight);
    }
    h.run_steps(2);
    h.get_by_label("head 1").click();
    h.run_steps(2);
    h.state_mut().session_path = path.display().to_string();
    h.run_steps(1);
    h.get_by_label("Save session").click();
    h.run_steps(2);
    assert!(message(&h).contains("Saved"), "{}", message(&h));
    let saved = h.state().state.clone();
    assert_eq!(session::load(&path).unwrap(), saved);
    assert_eq!((saved.cursor, saved.head, saved.seed), (5, 1, 3));

    // Change things, then load the session back.
    h.key_press(Key::End);
    h.state_mut().queue(Command::SetSeed(9));
    h.state_mut().queue(Command::SelectHead(0));
    h.run_steps(2);
    assert_ne!(h.state().state, saved);
    h.get_by_label("Load session").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state, saved);
    assert_eq!(h.state().computed().unwrap().spec.seed, 3);

    // A corrupt file changes nothing and says where it broke.
    std::fs::write(&path, "(format_version: 1, seed: [").unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(2);
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    assert!(message(&h).contains("s.ron"), "{}", message(&h));
    assert_eq!(h.state().state, saved);

    // Another format version is named.
    let other = State { format_version: 2, ..saved.clone() };
    std::fs::write(&path, session::to_ron(&other).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(2);
    assert!(message(&h).contains("format version 2"), "{}", message(&h));

    // A missing dataset: a warning, and the rest still loads.
    let gone = State {
        dataset: dualscope::session::state::DatasetRef { path: Some(dir.path().join("gone.txt")), hash: None },
        cursor: 7,
        ..saved.clone()
    };
    std::fs::write(&path, session::to_ron(&gone).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().message().unwrap().level, Level::Warning);
    assert!(message(&h).contains("gone.txt"), "{}", message(&h));
    assert_eq!(h.state().state.cursor, 7);
    assert_eq!(h.state().dataset().name(), "embedded:synthetic");

    // A changed dataset: a warning naming the hashes, the session restored.
    let data = dir.path().join("d.txt");
    std::fs::write(&data, "hello world, hello dualscope\n".repeat(4)).unwrap();
    let changed = State {
        dataset: dualscope::session::state::DatasetRef {
            path: Some(data.clone()),
            hash: Some("0000000000000000".into()),
        },
        ..saved.clone()
    };
    std::fs::write(&path, session::to_ron(&changed).unwrap()).unwrap();
    h.state_mut().queue(Command::LoadSession(path.clone()));
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert!(message(&h).contains("changed since it was saved"), "{}", message(&h));
    assert_eq!(h.state().dataset().name(), "d.txt");
    assert_eq!(h.state().state.cursor, 5);
}

/// Hides the labels that show how long the computation took.
fn mask_timings(h: &mut Harness<'static, App>) {
    let rects: Vec<egui::Rect> =
        ["computed in", "positions in"].iter().map(|t| h.get_by_label_contains(t).rect()).collect();
    for r in rects {
        h.mask(r);
    }
}

/// Hides the side panel's session section: its paths (the data folder of
/// this run, the working directory) and recent list differ from run to run.
fn mask_session(h: &mut Harness<'static, App>) {
    let (Some(top), Some(tab)) = (h.query_by_label("Session").map(|n| n.rect().min.y), h.query_by_label("Sequence"))
    else {
        return;
    };
    let right = tab.rect().min.x - 6.0;
    h.mask(egui::Rect::from_min_max(egui::pos2(0.0, top), egui::pos2(right, 4000.0)));
}

/// Hides every label containing one of `texts` (those present).
fn mask_all(h: &mut Harness<'static, App>, texts: &[&str]) {
    let rects: Vec<egui::Rect> =
        texts.iter().flat_map(|t| h.query_all_by_label_contains(t).map(|n| n.rect()).collect::<Vec<_>>()).collect();
    for r in rects {
        h.mask(r);
    }
}

#[test]
fn snapshot_main_view() {
    let mut h = harness(State { len: 300, cursor: 120, ..State::default() }, (1600.0, 1000.0));
    wait_for_trace(&mut h);
    h.run_steps(2);
    mask_timings(&mut h);
    mask_session(&mut h);
    h.snapshot("main_view_small");
}

#[test]
fn snapshot_tiny_view() {
    let mut h = harness(State { cursor: 20, ..tiny(60) }, (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.run_steps(2);
    mask_timings(&mut h);
    mask_session(&mut h);
    h.snapshot("main_view_tiny");
}

#[test]
fn session_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.ron");
    let want = State { seed: 4, cursor: 9, head: 1, offset: 100, ..tiny(30) };
    session::save(&path, &want).unwrap();
    init_env();
    let app = App::new(LaunchOptions { session: Some(path.clone()), state: Some(tiny(40)), ..Default::default() });
    let mut h =
        Harness::builder().with_size(egui::vec2(1400.0, 900.0)).build_ui_state(|ui, app: &mut App| app.show(ui), app);
    wait_for_trace(&mut h);
    let got = &h.state().state;
    assert_eq!((got.seed, got.cursor, got.head, got.offset, got.len), (4, 9, 1, 100, 30));
    assert_eq!(h.state().computed().unwrap().spec.offset, 100);
    assert_eq!(h.state().session_path, path.display().to_string());
}

#[test]
fn file_dialog_without_a_portal_says_so() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.get_by_label("Open dataset…").click();
    for _ in 0..2000 {
        h.step();
        if message(&h).contains("no file chosen") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // With a desktop portal a real dialog would be open; this machine has none.
    assert!(message(&h).contains("no file chosen"), "{}", message(&h));
    h.key_press(Key::ArrowRight);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 1, "the app stays usable");
}

#[test]
fn long_sequences_stay_responsive() {
    let mut h = harness(State { len: 4097, ..State::default() }, (1600.0, 1000.0));
    wait_for_trace(&mut h);
    assert_eq!(h.state().computed().unwrap().t, 4096);
    let start = std::time::Instant::now();
    for _ in 0..20 {
        h.key_press(Key::ArrowRight);
        h.step();
    }
    let per_frame = start.elapsed() / 20;
    eprintln!("4096 positions (small): {per_frame:?} per frame while stepping");
    assert_eq!(h.state().state.cursor, 20);
    assert_eq!(h.state().texture_builds(), (1, 1));
    assert!(per_frame < Duration::from_millis(500), "{per_frame:?} per frame");
}

#[test]
fn heatmap_zooms_pans_and_resets() {
    let mut h = harness(tiny(200), (1400.0, 900.0));
    wait_for_trace(&mut h);
    let full = h.state().attention_map().view().unwrap();
    assert_eq!((full.min.y, full.max.y), (0.0, 199.0));
    let centre = h.get_by_label("attention heatmap").rect().center();
    h.hover_at(centre);
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, 200.0),
        phase: egui::TouchPhase::Move,
        modifiers: egui::Modifiers::NONE,
        source: egui::MouseWheelSource::Wheel,
    });
    // egui smooths wheel scrolling over a few frames.
    h.run_steps(30);
    let zoomed = h.state().attention_map().view().unwrap();
    assert!(zoomed.height() < full.height() * 0.8, "scrolling zooms in on positions: {zoomed:?}");
    assert_eq!((zoomed.min.x, zoomed.max.x), (full.min.x, full.max.x), "columns keep their zoom");

    // Drag upwards: the view moves down the sequence.
    h.drag_at(centre);
    h.hover_at(centre - egui::vec2(0.0, 60.0));
    h.run_steps(1);
    h.drop_at(centre - egui::vec2(0.0, 60.0));
    h.run_steps(2);
    let panned = h.state().attention_map().view().unwrap();
    assert!(panned.min.y > zoomed.min.y, "{zoomed:?} -> {panned:?}");
    assert!((panned.height() - zoomed.height()).abs() < 1e-3);
    let cursor = h.state().state.cursor;
    assert_eq!(cursor, 0, "a drag is not a click");

    // A double-click shows everything again. (The clicks carry explicit times:
    // the harness's own clock does not put two clicks within egui's 0.3 s.)
    for t in [1e6, 1e6 + 0.1] {
        h.input_mut().time = Some(t);
        h.get_by_label("attention heatmap").click();
        h.run_steps(1);
    }
    h.run_steps(1);
    assert_eq!(h.state().attention_map().view().unwrap(), full);
}

#[test]
fn run_recomputes_with_new_settings() {
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::SetSeed(11));
    h.state_mut().queue(Command::SetLen(25));
    h.state_mut().queue(Command::SetOffset(1000));
    h.run_steps(2);
    h.get_by_label_contains("settings changed");
    assert_eq!(h.state().computed().unwrap().spec.seed, 0, "nothing recomputes before Run");
    h.get_by_label("Run").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    let spec = &h.state().computed().unwrap().spec;
    assert_eq!((spec.seed, spec.len, spec.offset), (11, 25, 1000));
    assert_eq!(h.state().computed().unwrap().t, 24);
}

/// The heatmap widget alone, on data with NaN and ±Inf: their own colours,
/// the gutter marks, the colour bar and the cursor row.
#[test]
fn snapshot_heatmap_non_finite() {
    use dualscope::ui::colormap::ColorMap;
    use dualscope::ui::computed::Matrix;
    use dualscope::ui::heatmap::{Heatmap, HeatmapStyle};
    init_env();
    let (rows, cols) = (300, 40);
    let mut data: Vec<f32> =
        (0..rows * cols).map(|i| ((i % cols) as f32 * 0.3 + (i / cols) as f32 * 0.05).sin()).collect();
    for c in 0..cols {
        data[50 * cols + c] = f32::NAN;
    }
    data[120 * cols + 7] = f32::INFINITY;
    data[121 * cols + 7] = f32::NEG_INFINITY;
    data[200 * cols + 30] = f32::NAN;
    let m = Arc::new(Matrix { rows, cols, data });
    let mut map = Heatmap::new("test heatmap", ColorMap::Diverging);
    let mut h = Harness::builder().with_size(egui::vec2(520.0, 330.0)).wgpu().build_ui(move |ui| {
        map.set_data(ui.ctx(), 1, || m.clone());
        let describe = |r: usize, c: usize| format!("row {r}, column {c}");
        map.show(ui, &HeatmapStyle { height: 290.0, cursor_row: Some(150), describe: &describe });
    });
    h.run_steps(2);
    h.snapshot("heatmap_non_finite");
}

/// The sessions shipped in `sessions/` parse, and name the embedded corpus as it is.
#[test]
fn shipped_sessions_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let hash = dualscope::dataset::default_dataset().content_hash();
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ron") {
            let s = session::load(&path).unwrap_or_else(|e| panic!("{e}"));
            if s.dataset.path.is_none() {
                assert_eq!(s.dataset.hash.as_deref(), Some(hash.as_str()), "{}", path.display());
            }
            // Its side file, where it names one, reads and holds the tensors of every rung that has some.
            if let Some(tensors) = session::load_side_file(&path, &s).unwrap_or_else(|e| panic!("{e}")) {
                let ladder = s.ladder.as_ref().expect("a side file comes with ladder results");
                for rung in ladder.rungs.keys().filter(|r| *r != "gemm") {
                    assert!(!tensors[rung].is_empty(), "{}: no tensors for {rung}", path.display());
                }
            }
            n += 1;
        }
    }
    assert!(n > 0, "no session in {}", dir.display());
}

#[test]
fn data_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("corpus.txt");
    std::fs::write(&good, "the quick brown fox jumps over the lazy dog\n".repeat(10)).unwrap();
    for (data, name, error) in
        [(good.clone(), "corpus.txt", None), (dir.path().join("nope.txt"), "embedded:synthetic", Some("no such file"))]
    {
        init_env();
        let app = App::new(LaunchOptions { data: Some(data), state: Some(tiny(40)), ..Default::default() });
        let mut h = Harness::builder()
            .with_size(egui::vec2(1400.0, 900.0))
            .build_ui_state(|ui, app: &mut App| app.show(ui), app);
        wait_for_trace(&mut h);
        assert_eq!(h.state().dataset().name(), name);
        assert_eq!(h.state().computed().unwrap().spec.dataset_name, name);
        if let Some(e) = error {
            assert!(message(&h).contains(e), "{}", message(&h));
        }
    }
}

#[test]
fn hovering_a_file_says_what_dropping_does() {
    let mut h = harness(tiny(20), (1000.0, 700.0));
    wait_for_trace(&mut h);
    let brightness = |h: &mut Harness<'static, App>| {
        let shot = h.render().expect("render");
        shot.pixels().map(|p| p.0[..3].iter().map(|&c| c as f64).sum::<f64>()).sum::<f64>()
            / (shot.width() * shot.height()) as f64
    };
    let before = brightness(&mut h);
    h.input_mut().hovered_files.push(egui::HoveredFile { path: Some("/tmp/corpus.txt".into()), ..Default::default() });
    h.run_steps(1);
    // The overlay dims the whole window.
    let during = brightness(&mut h);
    assert!(during < 0.6 * before, "brightness {before} -> {during}");
}

/// While the worker computes a heavier trace, frames stay fast and the status
/// bar says what is going on.
#[test]
fn ui_stays_responsive_while_the_worker_computes() {
    let mut h = harness(State { config: ConfigName::Bench, len: 600, ..State::default() }, (1400.0, 900.0));
    h.step();
    h.step();
    assert!(h.state().is_busy());
    h.get_by_label_contains("Working:");
    let mut slowest = Duration::ZERO;
    let mut frames = 0;
    while h.state().is_busy() {
        let start = std::time::Instant::now();
        h.step();
        slowest = slowest.max(start.elapsed());
        frames += 1;
        std::thread::sleep(Duration::from_millis(10));
        assert!(frames < 20_000, "the worker never finished");
    }
    eprintln!("{frames} frames while computing, slowest {slowest:?}");
    assert!(frames > 1);
    assert!(slowest < Duration::from_millis(250), "slowest frame {slowest:?}");
    h.run_steps(2);
    assert_eq!(h.state().computed().unwrap().t, 599);
}

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

/// Steps until the ladder run has ended.
fn wait_for_ladder(h: &mut Harness<'static, App>) {
    for _ in 0..20_000 {
        h.step();
        if !h.state().ladder().is_busy() {
            h.run_steps(2);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the ladder did not finish; status: {:?}", message(h));
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

/// Opens the Speedup view, starts the run and waits until each engine (the
/// CPU, and the GPU where there is one) has timed `steps` steps; returns
/// whether there is a GPU.
fn start_speedup(h: &mut Harness<'static, App>, steps: usize) -> bool {
    h.get_by_label("Speedup").click();
    h.run_steps(2);
    h.get_by_label("Start").click();
    let gpu = dualscope::ui::engines::gpu_availability().is_ok();
    let enough = |h: &Harness<'static, App>| {
        let s = &h.state().speed().samples;
        let n = |e| s.iter().filter(|x| x.engine == e).count();
        n(dualscope::engine::EngineKind::Cpu) >= steps && (!gpu || n(dualscope::engine::EngineKind::Vulkan) >= steps)
    };
    for _ in 0..4000 {
        h.step();
        if enough(h) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(enough(h), "samples: {:?}", h.state().speed().samples);
    gpu
}

/// The speedup panel times both engines live, and stops.
#[test]
fn speedup_panel_runs_and_stops() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    let gpu = start_speedup(&mut h, 3);
    assert!(h.state().speed().is_running());
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(!h.state().speed().is_running());
    let s = &h.state().speed().samples;
    assert!(s.iter().all(|x| x.wall_ms > 0.0 && x.loss.is_finite()));
    // Both engines train the same model on the same batches: the same first loss.
    if gpu {
        let first = |e| s.iter().find(|x| x.engine == e).unwrap().loss;
        let (c, g) = (first(dualscope::engine::EngineKind::Cpu), first(dualscope::engine::EngineKind::Vulkan));
        assert!((c - g).abs() < 1e-4 * c.abs(), "CPU loss {c}, GPU loss {g}");
        assert!(h.query_all_by_label_contains("×").count() >= 2, "the speedups are shown");
        // The GPU step's per-kernel breakdown: the recurrences and the products are in it.
        let means = dualscope::ui::speed::kernel_means(&h.state().speed().kernels);
        assert!(means.iter().any(|k| k.0.contains("recurrence")) && means.iter().any(|k| k.0.starts_with("gemm")));
        assert!(means.iter().all(|k| k.1 >= 0.0 && k.1.is_finite()), "{means:?}");
        h.get_by_label_contains("GPU step by kernel");
    } else {
        h.get_by_label_contains("GPU not timed");
    }
}

/// With "with the controller" ticked, the speedup run steps each engine as
/// `train` does by default (compute, the controller's judgement, apply; on the
/// GPU the split step): the label says so, and both engines' losses agree.
#[test]
fn speedup_panel_runs_the_controllers_path() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.get_by_label("Speedup").click();
    h.run_steps(2);
    h.get_by_label("with the controller").click();
    h.run_steps(1);
    assert!(h.state().speed().controller, "the checkbox sets the run's path");
    let gpu = start_speedup(&mut h, 3);
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(h.state().speed().label.contains("with the controller"), "{}", h.state().speed().label);
    let s = &h.state().speed().samples;
    assert!(s.iter().all(|x| x.wall_ms > 0.0 && x.loss.is_finite()));
    if gpu {
        for step in 0..3 {
            let at = |e| s.iter().find(|x| x.engine == e && x.step == step).unwrap().loss;
            let (c, g) = (at(dualscope::engine::EngineKind::Cpu), at(dualscope::engine::EngineKind::Vulkan));
            assert!((c - g).abs() < 1e-4 * c.abs(), "step {step}: CPU loss {c}, GPU loss {g}");
        }
    }
}

/// With the precision control at f16, the speedup run's GPU step is the
/// mixed-precision step (f16 products, f32 elsewhere, loss scale): the panel
/// says so, and its first loss stays within the mixed step's reach of the
/// CPU's f32 loss.
#[test]
fn speedup_panel_times_the_mixed_step() {
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::SetPrecision(dualscope::step::Precision::F16));
    let gpu = start_speedup(&mut h, 2);
    h.get_by_label("Stop").click();
    h.run_steps(2);
    assert!(h.state().speed().label.contains("mixed precision (f16 products"), "{}", h.state().speed().label);
    h.get_by_label_contains("mixed precision (f16 products");
    if gpu {
        let s = &h.state().speed().samples;
        let first = |e| s.iter().find(|x| x.engine == e).unwrap().loss;
        let (c, g) = (first(dualscope::engine::EngineKind::Cpu), first(dualscope::engine::EngineKind::Vulkan));
        // f16 products move the first loss by about 1e-3 relative at most; another
        // model or batch would move it far more.
        assert!((c - g).abs() < 5e-3 * c.abs(), "CPU loss {c}, mixed GPU loss {g}");
    }
}

/// The speedup view with known samples (a live run's times vary from run to run).
#[test]
fn snapshot_speedup_view() {
    use dualscope::engine::EngineKind as Engine;
    use dualscope::ui::speed::Sample;
    let mut h = harness(tiny(20), (1400.0, 900.0));
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::SetView(dualscope::session::state::View::Speedup));
    let samples = &mut h.state_mut().speed_mut().samples;
    for step in 0..30u64 {
        let wobble = ((step * 7) % 5) as f64;
        let s = |engine, wall_ms, device_ms| Sample { engine, step, wall_ms, device_ms, loss: 5.5 };
        samples.push(s(Engine::Cpu, 40.0 + wobble, None));
        samples.push(s(Engine::Vulkan, 8.0 + wobble / 5.0, Some(5.0 + wobble / 8.0)));
    }
    let kernels: Vec<(String, f64)> = [
        ("gru bwd recurrence", 1.9),
        ("gru fwd recurrence", 1.4),
        ("gemm 1024x384x64 tb", 0.6),
        ("attn_fwd", 0.3),
        ("adamw", 0.1),
    ]
    .iter()
    .map(|(k, ms)| (k.to_string(), *ms))
    .collect();
    h.state_mut().speed_mut().kernels.push_back(kernels);
    h.run_steps(3);
    h.get_by_label_contains("GPU step by kernel");
    // Medians of the last 20: CPU 42 ms, GPU 8.4 ms.
    h.get_by_label("5.00×");
    mask_all(&mut h, &["positions in"]);
    mask_session(&mut h);
    h.snapshot("speedup_view");
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

/// Parameters from a checkpoint: a good one changes the trace, one of another
/// config or a missing file is an error in the status bar, and the seed's
/// initialisation comes back with "Init from seed".
#[test]
fn checkpoint_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dualscope::model::Config::tiny();
    let good = dir.path().join("tiny.safetensors");
    dualscope::checkpoint::save_params(&good, &cfg, &dualscope::model::Params::<f32>::init(&cfg, 77)).unwrap();
    let small = dir.path().join("small.safetensors");
    let scfg = dualscope::model::Config::small();
    dualscope::checkpoint::save_params(&small, &scfg, &dualscope::model::Params::<f32>::init(&scfg, 0)).unwrap();

    let mut h = harness(tiny(30), (1400.0, 900.0));
    wait_for_trace(&mut h);
    let seed_loss = h.state().computed().unwrap().loss;
    h.state_mut().checkpoint_path = good.display().to_string();
    h.run_steps(1);
    h.get_by_label("Use checkpoint").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.checkpoint.as_deref(), Some(good.as_path()));
    let ckpt_loss = h.state().computed().unwrap().loss;
    assert_ne!(ckpt_loss, seed_loss, "the checkpoint's parameters are used");

    for (bad, says) in [(small, "another configuration"), (dir.path().join("nope.safetensors"), "nope.safetensors")] {
        h.state_mut().queue(Command::SetCheckpoint(Some(bad)));
        h.run_steps(1);
        wait_for_trace(&mut h);
        assert_eq!(h.state().message().unwrap().level, Level::Error, "{}", message(&h));
        assert!(message(&h).contains(says), "{}", message(&h));
    }
    h.get_by_label("Init from seed").click();
    h.run_steps(1);
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.checkpoint, None);
    assert_eq!(h.state().computed().unwrap().loss, seed_loss);
}

/// A checkpoint whose embedding row of one byte is NaN: every position reading
/// that byte is non-finite on both engines, and "Next non-finite" walks them.
#[test]
fn next_non_finite_with_a_nan_weight() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dualscope::model::Config::tiny();
    let good = dir.path().join("tiny.safetensors");
    dualscope::checkpoint::save_params(&good, &cfg, &dualscope::model::Params::<f32>::init(&cfg, 0)).unwrap();
    let (mut tensors, meta) = dualscope::checkpoint::load_tensors(&good).unwrap();
    let byte = b' ' as usize;
    let embed = tensors.get_mut("embed.weight").unwrap();
    for v in &mut embed.data[byte * cfg.d_embed..(byte + 1) * cfg.d_embed] {
        *v = f32::NAN;
    }
    let bad = dir.path().join("nan.safetensors");
    let named: Vec<(String, &dualscope::tensor::Tensor<f32>)> = tensors.iter().map(|(k, v)| (k.clone(), v)).collect();
    dualscope::checkpoint::save_tensors(&bad, &named, &meta).unwrap();

    let mut h = harness(State { checkpoint: Some(bad), ..tiny(40) }, (1400.0, 900.0));
    wait_for_trace(&mut h);
    let c = h.state().computed().unwrap();
    let first_space = c.tokens.iter().position(|&b| b == b' ').expect("a space in the first 40 bytes");
    assert!(first_space > 0);
    // The forward pass turns NaN at the first space and stays NaN (the GRU carries it);
    // the backward pass carries it to every earlier position's gradients.
    let nan = |v: &[f32]| v.iter().any(|x| x.is_nan());
    assert!(!nan(c.row("gru.l0.h", first_space - 1)) && nan(c.row("gru.l0.h", first_space)));
    if dualscope::ui::engines::gpu_availability().is_ok() {
        assert!(c.gpu.is_ok(), "{:?}", c.gpu.as_ref().err());
        assert!(!nan(c.gpu_row("gru.l0.h", first_space - 1)) && nan(c.gpu_row("gru.l0.h", first_space)));
        assert!(c.gpu.as_ref().unwrap().non_finite[first_space], "the GPU's trace is non-finite too");
    }
    let want = c.next_non_finite(0).expect("non-finite positions");
    assert!(c.non_finite_at(want));
    assert_eq!(h.state().state.cursor, 0);
    h.get_by_label("Next non-finite").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, want);
    h.get_by_label("Next non-finite").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, want + 1, "every later position is non-finite as well");
}

// ---- Diagnostics: planted faults, the length bisect, the audit, training curves ----

use dualscope::session::state::View;

/// Opens the combo box labelled `combo` and picks `item` in it.
fn pick_in_combo(h: &mut Harness<'static, App>, combo: &str, item: &str) {
    h.get_by_role_and_label(Role::ComboBox, combo).click();
    h.run_steps(2);
    h.get_by_label(item).click();
    h.run_steps(2);
}

fn wait_until(h: &mut Harness<'static, App>, what: &str, done: impl Fn(&App) -> bool) {
    for _ in 0..40_000 {
        h.step();
        if done(h.state()) {
            h.run_steps(3);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{what} did not finish; status: {:?}", message(h));
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
fn sessions_without_diagnostics_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.ron");
    std::fs::write(&path, "(format_version: 1, config: Tiny, len: 40)").unwrap();
    let s = session::load(&path).unwrap();
    assert_eq!(s.bisect, None);
    assert_eq!(s.ladder_fault, None);
    assert_eq!(s.bisect_max_len, 512);
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

// ---- captures -------------------------------------------------------------

use dualscope::capture::{self as cap, BatchMeta, CaptureMeta, Recorded};
use dualscope::step::Fault as EngineFault;

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
        written_by: "tests/gui.rs".into(),
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

//! The sequence view: the stepper's keys and buttons, the heatmaps (clicks,
//! zoom and pan, non-finite values), Run with new settings, frames on long
//! sequences and while the worker computes, "Next non-finite"; snapshots of
//! the main view.

use std::sync::Arc;
use std::time::Duration;

use dualscope::session::state::{ConfigName, State};
use dualscope::ui::App;
use dualscope::ui::command::Command;
use egui::Key;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use crate::{harness, init_env, mask_session, tiny, wait_for_trace};

#[test]
fn starts_computes_and_steps_with_keys() {
    let mut h = harness(tiny(40), (1400.0, 900.0));
    wait_for_trace(&mut h);
    assert_eq!(h.state().computed().unwrap().t, 39);
    assert_eq!(h.state().state.cursor, 0);
    // The engines are listed: the GPU's name, or why there is none.
    match dualscope::ui::engines::gpu_availability() {
        Ok(device) => h.get_by_label_contains(&device),
        Err(why) => h.get_by_label_contains(&why.to_string()),
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

/// Hides the labels that show how long the computation took.
fn mask_timings(h: &mut Harness<'static, App>) {
    let rects: Vec<egui::Rect> =
        ["computed in", "positions in"].iter().map(|t| h.get_by_label_contains(t).rect()).collect();
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

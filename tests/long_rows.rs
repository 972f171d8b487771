//! Long rows (docs/long-rows.md): the whole ladder on one row of 4096 (and,
//! ignored here for their time, 16384) positions in f32 and in the mixed step,
//! in both modes; the GUI's sequence view on a 16384-position row (it draws,
//! the cursor reaches the last position, the heatmaps' views follow it); and,
//! ignored, the frame-time probe that docs/long-rows.md records.

mod common;

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::init_env;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dualscope::ladder::inputs::{BatchChoice, ParamSource, ladder_batch, load_dataset, load_params};
use dualscope::ladder::{self, Mode, Rung, Status};
use dualscope::session::state::{ConfigName, State};
use dualscope::step::Precision;
use dualscope::ui::{App, LaunchOptions};
use dualscope::vk::Context;
use egui::Key;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

/// Runs every rung and the end-to-end gate at `small` on one row of `len`
/// positions of the embedded text, as `dualscope ladder --len LEN` does, and
/// asserts that all of it passed with no validation error.
fn ladder_long_row(test: &str, ctx: &Arc<Context>, len: usize, precision: Precision, mode: Mode) {
    let (cfg, params) = load_params(ParamSource::Init { config: "small", seed: 1 }).unwrap();
    let ds = load_dataset(None).unwrap();
    let (batch, source) = ladder_batch(&ds, &cfg, BatchChoice::Row { offset: 0, len }).unwrap();
    assert_eq!((batch.rows, batch.t), (1, len), "{source}");
    let setup = ladder::Setup { cfg, params, batch, opts: dualscope::step::StepOptions::default(), mode, precision };
    let start = Instant::now();
    let report = ladder::run(ctx, ladder::LadderSpec::new(Rung::ALL.to_vec(), setup), |_| {}).unwrap();
    let worst = report
        .rungs
        .iter()
        .flat_map(|r| r.cases.iter().map(move |c| (c.rel_l2 / c.tolerance.max(f64::MIN_POSITIVE), r.id, &c.name)))
        .filter(|(x, ..)| x.is_finite())
        .max_by(|a, b| a.0.total_cmp(&b.0));
    eprintln!("{test}: {:?}, worst rel_l2 / tolerance {worst:?}", start.elapsed());
    // A warning (f16 headroom, docs/headroom.md) is not a failure.
    let failed: Vec<_> =
        report.rungs.iter().filter(|r| !matches!(r.status, Status::Pass | Status::Warn)).map(|r| r.id).collect();
    assert!(failed.is_empty(), "{test}: rungs not passing: {failed:?}");
    assert_eq!(report.rungs.len(), Rung::ALL.len());
    let e2e = report.end_to_end.as_ref().expect("the end-to-end gate ran");
    assert_eq!(e2e.status, Status::Pass, "{e2e:?}");
    assert_eq!(report.validation_errors, 0);
    assert_eq!(report.status, Status::Pass);
}

#[test]
fn ladder_t4096_f32_isolated() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 4096, Precision::F32, Mode::Isolated);
}

#[test]
fn ladder_t4096_f32_chained() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 4096, Precision::F32, Mode::Chained);
}

#[test]
fn ladder_t4096_f16_isolated() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 4096, Precision::F16, Mode::Isolated);
}

#[test]
fn ladder_t4096_f16_chained() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 4096, Precision::F16, Mode::Chained);
}

/// About 6 minutes each on lavapipe (docs/long-rows.md).
#[test]
#[ignore]
fn ladder_t16384_f32_isolated() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 16384, Precision::F32, Mode::Isolated);
}

#[test]
#[ignore]
fn ladder_t16384_f32_chained() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 16384, Precision::F32, Mode::Chained);
}

#[test]
#[ignore]
fn ladder_t16384_f16_isolated() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 16384, Precision::F16, Mode::Isolated);
}

#[test]
#[ignore]
fn ladder_t16384_f16_chained() {
    let (test, ctx) = common::vulkan!();
    ladder_long_row(test, &ctx, 16384, Precision::F16, Mode::Chained);
}

/// The ladder's memory check counts what a run holds (both CPU traces, the
/// GPU's values, the kept tensors: `LADDER_BYTES_PER_VALUE`), not the f64
/// trace alone: a row whose f64 activations take half the memory limit is
/// refused before any work, in one line naming `--len` (the check counted 8
/// bytes a value before, passed it, and went on to cut the row).
#[test]
fn the_ladder_refuses_a_row_its_traces_would_not_fit() {
    let dir = common::Dir::new();
    let data = dir.path("short.txt");
    std::fs::write(&data, b"a short text").unwrap();
    let cfg = dualscope::model::Config::bench();
    let per_position = dualscope::cpu::activation_bytes(&cfg, 1, 1, 1);
    // 16 bytes a value: twice the old check's 8, half the new one's 32.
    let len = dualscope::memory::memory_limit() / (16 * per_position);
    let len = len.to_string();
    let o = common::run(&["ladder", "--config", "bench", "--data", common::s(&data), "--len", &len]);
    let err = common::fails(&o, 1);
    assert!(err.contains(&format!("--len {len}")) && err.contains("MiB of memory"), "{err}");
}

/// The app on a 16384-position row of the embedded text at `small` (the CPU
/// trace only: the GPU trace of such a row takes minutes on lavapipe), its
/// trace computed.
fn long_row_app() -> Harness<'static, App> {
    init_env();
    let state = State { config: ConfigName::Small, len: 16385, gpu_trace: false, ..State::default() };
    let app = App::new(LaunchOptions { state: Some(state), ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    let start = Instant::now();
    while h.state().is_busy() || h.state().computed().is_none() {
        h.step();
        std::thread::sleep(Duration::from_millis(20));
        assert!(start.elapsed() < Duration::from_secs(600), "no trace: {:?}", h.state().message());
    }
    eprintln!("the 16384-position trace at small: {:?}", start.elapsed());
    // The frames that take the trace in and build the heatmaps' textures.
    let first: Vec<Duration> = (0..2).map(|_| frame(&mut h)).collect();
    eprintln!("the frames that build the textures: {first:?}");
    h
}

fn wheel(h: &Harness<'static, App>, dy: f32) {
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, dy),
        phase: egui::TouchPhase::Move,
        modifiers: egui::Modifiers::NONE,
        source: egui::MouseWheelSource::Wheel,
    });
}

/// The view (rows) of the attention heatmap.
fn rows_in_view(h: &Harness<'static, App>) -> (f32, f32) {
    let v = h.state().attention_map().view().expect("the heatmap was drawn");
    (v.min.y, v.max.y)
}

/// A 16384-position row draws; the cursor reaches the last position and the
/// first again, and a zoomed heatmap's view moves with it (keeping its zoom);
/// the textures are built once.
#[test]
fn the_sequence_view_follows_the_cursor_over_16k_positions() {
    let mut h = long_row_app();
    assert_eq!(h.state().computed().unwrap().t, 16384, "the GUI takes a row of 16384 positions");
    h.get_by_label("attention heatmap");
    assert_eq!(rows_in_view(&h), (0.0, 16384.0));
    assert!(h.state().attention_map().tiles_per_level()[0] >= 2, "full resolution in tiles");

    // Zoom in around the middle of the map.
    let centre = h.get_by_label("attention heatmap").rect().center();
    h.hover_at(centre);
    for _ in 0..4 {
        wheel(&h, 400.0);
        h.run_steps(15);
    }
    let (lo, hi) = rows_in_view(&h);
    assert!(hi - lo < 4096.0, "zoomed in: {lo}..{hi}");
    assert!(lo > 0.0, "the zoom is around the pointer, away from the cursor at 0: {lo}..{hi}");
    let span = hi - lo;

    h.key_press(Key::End);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 16383);
    let (lo, hi) = rows_in_view(&h);
    assert!(lo <= 16383.0 && hi >= 16384.0, "the view follows the cursor to the end: {lo}..{hi}");
    assert!((hi - lo - span).abs() < 1e-2, "and keeps its zoom");

    for _ in 0..3 {
        h.key_press(Key::ArrowLeft);
        h.step();
    }
    assert_eq!(h.state().state.cursor, 16380);
    assert_eq!(rows_in_view(&h), (lo, hi), "a cursor inside the view leaves it where it is");

    h.key_press(Key::Home);
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, 0);
    let (lo, hi) = rows_in_view(&h);
    assert!(lo == 0.0 && hi > 1.0, "back at the start: {lo}..{hi}");
    h.get_by_label_contains("0 of 16384");
    assert_eq!(h.state().texture_builds(), (1, 1), "textures built once");
}

/// One frame's CPU time: the UI pass (with its texture uploads) and the
/// tessellation of what it drew.
fn frame(h: &mut Harness<'static, App>) -> Duration {
    let start = Instant::now();
    h.step();
    let shapes = h.output().shapes.clone();
    let ppp = h.output().pixels_per_point;
    let _ = h.ctx.tessellate(shapes, ppp);
    start.elapsed()
}

fn key(h: &Harness<'static, App>, key: Key, pressed: bool) {
    h.event(egui::Event::Key { key, physical_key: None, pressed, repeat: false, modifiers: egui::Modifiers::NONE });
}

/// The frame-time probe of docs/long-rows.md (a benchmark: it prints, asserts
/// nothing about time): the median and the largest frame time of each
/// interaction on a 16384-position row at `small`.
/// `cargo test --release --test long_rows gui_frame_times -- --ignored --nocapture`
#[test]
#[ignore]
fn gui_frame_times_at_16k_positions() {
    let mut h = long_row_app();
    let centre = h.get_by_label("attention heatmap").rect().center();
    let grad = h.get_by_label("context gradient heatmap").rect().center();
    let mut report = Vec::new();
    let mut measure = |name: &str, times: Vec<Duration>| {
        let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let line = format!(
            "{name:<34} frames {:>4}  median {:>7.2} ms  max {:>7.2} ms",
            ms.len(),
            ms[ms.len() / 2],
            ms[ms.len() - 1]
        );
        eprintln!("{line}");
        report.push(line);
    };
    measure("idle (open)", (0..30).map(|_| frame(&mut h)).collect());
    let mut t = Vec::new();
    for _ in 0..50 {
        key(&h, Key::ArrowRight, true);
        t.push(frame(&mut h));
        key(&h, Key::ArrowRight, false);
        t.push(frame(&mut h));
    }
    measure("step the cursor (50 ×)", t);
    h.hover_at(centre);
    let mut t = Vec::new();
    for _ in 0..6 {
        wheel(&h, 300.0);
        t.extend((0..20).map(|_| frame(&mut h)));
    }
    measure("zoom the attention heatmap", t);
    let mut t = Vec::new();
    h.drag_at(centre);
    for k in 1..=40 {
        h.hover_at(centre - egui::vec2(0.0, 3.0 * k as f32));
        t.push(frame(&mut h));
    }
    h.drop_at(centre - egui::vec2(0.0, 120.0));
    t.push(frame(&mut h));
    measure("pan the attention heatmap", t);
    h.hover_at(grad);
    let mut t = Vec::new();
    for _ in 0..3 {
        wheel(&h, -300.0);
        t.extend((0..20).map(|_| frame(&mut h)));
    }
    measure("scroll the gradient heatmap", t);
    let mut t = Vec::new();
    for k in [Key::End, Key::Home, Key::End] {
        key(&h, k, true);
        t.push(frame(&mut h));
        key(&h, k, false);
        t.push(frame(&mut h));
        t.extend((0..3).map(|_| frame(&mut h)));
    }
    measure("jump to the end and back", t);
    assert_eq!(h.state().state.cursor, 16383);
    assert_eq!(h.state().texture_builds(), (1, 1));
    if let Ok(path) = std::env::var("GUI_FRAMES_OUT") {
        std::fs::write(path, report.join("\n") + "\n").unwrap();
    }
}

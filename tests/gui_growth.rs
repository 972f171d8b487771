//! The error-growth section of the GUI through egui_kittest (the real app,
//! its worker and a growth run on lavapipe): the panel draws a report, a
//! click in its plot moves the stepper's cursor, and a planted report's
//! first-outside button moves it to the planted position.

mod common;

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::init_env;
use std::path::Path;
use std::time::Duration;

use dualscope::model::{Config, Params};
use dualscope::session::state::{ConfigName, State};
use dualscope::step::{GemmChoice, Precision};
use dualscope::triage::growth::GrowthPlan;
use dualscope::ui::panels::growth::PLOT_LABEL;
use dualscope::ui::{App, LaunchOptions};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

/// The app on the tiny config and a row of `len` tokens.
fn harness(len: usize) -> Harness<'static, App> {
    let state = State { config: ConfigName::Tiny, len, ..State::default() };
    let app = App::new(LaunchOptions { state: Some(state), ..Default::default() });
    Harness::builder()
        .with_size(egui::vec2(1400.0, 1300.0))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app)
}

fn wait_until(h: &mut Harness<'static, App>, what: &str, done: impl Fn(&App) -> bool) {
    for _ in 0..6000 {
        h.step();
        if done(h.state()) {
            h.run_steps(2);
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{what} did not finish; status: {:?}", h.state().message());
}

#[test]
fn the_panel_draws_a_report_and_a_click_moves_the_cursor() {
    init_env();
    let (_, ctx) = common::vulkan!();
    let mut h = harness(301);
    wait_until(&mut h, "the trace", |a| !a.is_busy() && a.computed().is_some());
    assert_eq!(h.state().computed().unwrap().t, 300);
    h.get_by_label("Error growth along the sequence").click();
    h.run_steps(2);
    h.get_by_label("Error growth").click();
    h.run_steps(2);
    wait_until(&mut h, "the growth run", |a| !a.growth().is_busy() && a.growth().report.is_some());
    let r = h.state().growth().report.clone().unwrap();
    assert_eq!((r.len, r.series.len()), (300, 6));
    assert_eq!(r.first_outside, None, "{}", r.summary_line());
    // The panel's summary (and the status bar's message).
    let said = "first position outside the rounding envelope: none in 300 positions";
    assert!(h.query_all_by_label_contains(said).next().is_some(), "the panel says: {said}");
    assert!(h.query_all_by_label("embed.d_out").next().is_some(), "a row of the table per series");
    assert_eq!(h.state().state.cursor, 0);
    h.get_by_label(PLOT_LABEL).click();
    h.run_steps(2);
    let c = h.state().state.cursor;
    assert!((110..=190).contains(&c), "a click in the plot's middle moves the cursor to the middle, got {c}");

    // A report of the same row with the GPU's token at P changed: the
    // summary names P, and a forward series' first-outside button goes there.
    const P: usize = 150;
    let cfg = Config::tiny();
    let row = h.state().computed().unwrap().tokens.clone();
    let plan = GrowthPlan {
        params: Params::init(&cfg, h.state().computed().unwrap().spec.seed),
        config: cfg,
        row,
        source: "the row shown".into(),
        offset: 0,
        precision: Precision::F32,
        gemm: GemmChoice::Auto,
        plant_token_at: Some(P),
    };
    let planted = dualscope::triage::growth::run(&ctx, &plan, &mut |_| {}).unwrap();
    let n = planted.series("gru.l0.h").unwrap().n_outside;
    h.state_mut().growth_mut().set_report(planted);
    h.run_steps(2);
    let said = format!("first position outside the rounding envelope: {P} (");
    assert!(h.query_all_by_label_contains(&said).next().is_some(), "the panel says: {said}");
    h.query_all_by_label(&format!("{P} ({n} outside)")).next().expect("a first-outside button").click();
    h.run_steps(2);
    assert_eq!(h.state().state.cursor, P);
    // DUALSCOPE_SCREENSHOTS=DIR keeps the frame (docs/images/growth_panel.png).
    if let Some(dir) = std::env::var_os("DUALSCOPE_SCREENSHOTS") {
        h.render().expect("render").save(Path::new(&dir).join("growth_panel.png")).expect("write the screenshot");
    }
}

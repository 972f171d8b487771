//! The model controls through egui_kittest (the real app and its jobs): the
//! app opens on the embedded trained model, "Seeded init" is one click away,
//! and "Train here" trains the model in place on a worker thread with its
//! progress, or is cancelled and leaves the model as it was.

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::init_env;
use std::time::Duration;

use dualscope::model::{Config, Params};
use dualscope::session::state::{ConfigName, ModelSource, State};
use dualscope::session::weights::Weights;
use dualscope::ui::command::Command;
use dualscope::ui::panels::status::Level;
use dualscope::ui::train_here::Progress;
use dualscope::ui::{App, LaunchOptions};
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

/// The app on `state` with the CPU trace only (the GPU's is not what these
/// tests are about).
fn harness(state: State) -> Harness<'static, App> {
    init_env();
    let state = State { gpu_trace: false, ..state };
    let app = App::new(LaunchOptions { state: Some(state), ..Default::default() });
    Harness::builder()
        .with_size(egui::vec2(1400.0, 1100.0))
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

fn wait_for_trace(h: &mut Harness<'static, App>) {
    wait_until(h, "the trace", |a| !a.is_busy() && a.computed().is_some());
}

/// Opens the "Model" combo box and picks `item`.
fn pick_model(h: &mut Harness<'static, App>, item: &str) {
    h.get_by_role_and_label(Role::ComboBox, "Model").click();
    h.run_steps(2);
    h.get_by_label(item).click();
    h.run_steps(2);
}

fn live(app: &App) -> Params<f32> {
    match app.weights() {
        Weights::Live(p) => Params::clone(&p),
        other => panic!("no parameters trained here: {other:?}"),
    }
}

#[test]
fn opens_on_the_embedded_model_and_seeded_init_is_one_click_away() {
    let mut h = harness(State { len: 256, ..State::default() });
    wait_for_trace(&mut h);
    assert!(matches!(h.state().weights(), Weights::Embedded));
    let trained_loss = h.state().computed().unwrap().loss;
    pick_model(&mut h, "Seeded init (seed 0)");
    wait_for_trace(&mut h);
    assert_eq!(h.state().state.model, ModelSource::Seeded);
    let seeded_loss = h.state().computed().unwrap().loss;
    assert!(seeded_loss > 5.0, "the seed's model predicts about uniformly: {seeded_loss}");
    assert!(trained_loss < 1.5, "the embedded model has learned the corpus: {trained_loss}");
    pick_model(&mut h, "Embedded trained");
    wait_for_trace(&mut h);
    assert_eq!(h.state().computed().unwrap().loss, trained_loss);
}

#[test]
fn train_three_steps_here_updates_the_model_in_place() {
    let mut h = harness(State { config: ConfigName::Tiny, len: 40, ..State::default() });
    wait_for_trace(&mut h);
    let before = h.state().computed().unwrap().loss;
    assert!(h.query_by_label("Train here").is_some(), "the button is drawn");
    h.state_mut().queue(Command::TrainHere { steps: 3, lr: 1e-2 });
    h.run_steps(1);
    wait_until(&mut h, "the training", |a| !a.train_here().is_busy() && !a.is_busy());
    let t = h.state().train_here();
    assert_eq!(t.steps, 3);
    assert!(matches!(t.last, Some(Progress { done: 3, loss }) if loss.is_finite()), "{:?}", t.last);
    assert_eq!(h.state().trained_steps(), Some(3));
    let cfg = Config::tiny();
    assert_ne!(live(h.state()), Params::<f32>::init(&cfg, 0), "the parameters changed");
    assert_ne!(h.state().computed().unwrap().loss, before, "the trace was computed again on the trained model");
    assert_eq!(h.state().message().unwrap().level, Level::Info);

    // Another run starts from the trained model and adds its steps.
    let first = live(h.state());
    h.state_mut().queue(Command::TrainHere { steps: 2, lr: 1e-2 });
    h.run_steps(1);
    wait_until(&mut h, "the second training", |a| !a.train_here().is_busy() && !a.is_busy());
    assert_eq!(h.state().trained_steps(), Some(5));
    assert_ne!(live(h.state()), first);

    // Choosing a source drops what was trained here.
    pick_model(&mut h, "Seeded init (seed 0)");
    wait_for_trace(&mut h);
    assert_eq!(h.state().trained_steps(), None);
    assert_eq!(h.state().computed().unwrap().loss, before);
}

#[test]
fn a_cancelled_run_leaves_the_model_as_it_was() {
    let mut h = harness(State { config: ConfigName::Tiny, len: 40, ..State::default() });
    wait_for_trace(&mut h);
    h.state_mut().queue(Command::TrainHere { steps: 100_000, lr: 1e-2 });
    h.run_steps(1);
    wait_until(&mut h, "the first step", |a| a.train_here().last.is_some());
    assert!(h.state().train_here().is_busy());
    h.get_by_label("Cancel training").click();
    h.run_steps(1);
    wait_until(&mut h, "the cancel", |a| !a.train_here().is_busy());
    assert_eq!(h.state().trained_steps(), None);
    assert!(matches!(h.state().weights(), Weights::Seeded));
    assert!(h.state().message().unwrap().text.contains("cancelled"), "{:?}", h.state().message());
}

#[test]
fn bad_train_here_settings_are_one_line_errors() {
    let mut h = harness(State { config: ConfigName::Tiny, len: 40, ..State::default() });
    wait_for_trace(&mut h);
    for (cmd, says) in [
        (Command::TrainHere { steps: 0, lr: 1e-2 }, "steps must be from 1"),
        (Command::TrainHere { steps: 3, lr: f64::NAN }, "learning rate"),
    ] {
        h.state_mut().queue(cmd);
        h.run_steps(2);
        let m = h.state().message().unwrap();
        assert_eq!(m.level, Level::Error);
        assert!(m.text.contains(says), "{}", m.text);
        assert_eq!(h.state().trained_steps(), None);
    }
}

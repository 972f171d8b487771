//! The GUI driven through egui_kittest: the real app, its worker thread and its
//! panels, headless, rendered with wgpu on lavapipe for the snapshots.
//!
//! One test binary (one link of egui and wgpu), its tests by concern: the
//! sequence view ([`sequence`]), datasets, sessions and checkpoints
//! ([`files`]), the ladder and the inspector ([`ladder`]), the speedup panel
//! ([`speedup`]), the bisect, the audit and the training curves
//! ([`diagnostics`]), captures ([`capture`]) and the Detection power view
//! ([`mutation`]). The helpers they share are
//! here. Snapshots are named as before and stay in `tests/snapshots/`.

#[path = "../common/gui_env.rs"]
mod gui_env;

mod capture;
mod diagnostics;
mod files;
mod ladder;
mod mutation;
mod sequence;
mod speedup;

use gui_env::init_env;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dualscope::session::state::{ConfigName, State};
use dualscope::ui::{App, LaunchOptions};
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

//! The visual debugger: an eframe app over the CPU trace of one sequence.
//!
//! What a session saves, its files, the background [`Job`](crate::session::Job)
//! type and the shared GPU context are in [`crate::session`]. Here: `command`
//! every user action; `worker` the thread that computes traces; `computed`
//! what it hands back; `heatmap` the reusable colour-mapped view; `panels` the
//! small functions that draw; `session` the GUI's side of the session files
//! (the inspector's tensors); `capture_view` an open capture; `app` ties them together and applies commands at
//! the end of each frame.

pub mod app;
pub mod capture_view;
pub mod colormap;
pub mod command;
pub mod computed;
pub mod diagnose;
pub mod engines;
pub mod error;
pub mod heatmap;
pub mod inspect;
pub mod ladder_run;
pub mod loader;
pub mod mutation_view;
pub mod panels;
pub mod precision_bisect_run;
pub mod script;
pub mod session;
pub mod speed;
pub mod train_here;
pub mod worker;

pub use app::{App, LaunchOptions};

/// The window's size when none is asked for.
pub const DEFAULT_WINDOW_SIZE: [f32; 2] = [1600.0, 1000.0];

/// Opens the window and runs until it is closed.
pub fn run(opts: LaunchOptions) -> Result<(), String> {
    run_sized(opts, DEFAULT_WINDOW_SIZE)
}

/// [`run`] with the window's inner size in logical pixels (`gui --window-size`).
pub fn run_sized(opts: LaunchOptions, size: [f32; 2]) -> Result<(), String> {
    let native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("dualscope")
            .with_inner_size(size)
            .with_drag_and_drop(true),
        ..Default::default()
    };
    eframe::run_native("dualscope", native, Box::new(move |_cc| Ok(Box::new(App::new(opts)))))
        .map_err(|e| format!("cannot open the window: {e}"))
}

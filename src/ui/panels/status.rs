//! The status bar: the last message (errors in red, never a panic; a tool's
//! finding, such as a failing rung, in the result colour) and the worker's progress.

use std::time::Duration;

use egui::{Color32, RichText};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    /// What a tool found (a failing rung, a failing length, a divergence):
    /// the program doing its job, not an error.
    Result,
    Warning,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub level: Level,
    pub text: String,
}

/// What the worker is doing, if anything.
pub struct Progress<'a> {
    pub stage: &'a str,
    /// Time since the work started, where it is known.
    pub elapsed: Option<Duration>,
}

/// The colour of a tool's finding in the status bar.
pub const RESULT_COLOR: Color32 = Color32::from_rgb(110, 190, 255);

pub fn show(ui: &mut egui::Ui, message: Option<&Message>, progress: Option<Progress<'_>>) {
    ui.horizontal(|ui| {
        if let Some(p) = progress {
            ui.spinner();
            match p.elapsed {
                Some(t) => ui.label(format!("Working: {} ({:.1} s)", p.stage, t.as_secs_f32())),
                None => ui.label(format!("Working: {}", p.stage)),
            };
            ui.separator();
        }
        match message {
            Some(m) => {
                let (prefix, color) = match m.level {
                    Level::Info => ("", ui.visuals().text_color()),
                    Level::Result => ("", RESULT_COLOR),
                    Level::Warning => ("Warning: ", Color32::from_rgb(230, 180, 40)),
                    Level::Error => ("Error: ", Color32::from_rgb(240, 80, 80)),
                };
                ui.label(RichText::new(format!("{prefix}{}", m.text)).color(color));
            }
            None => {
                ui.label("Ready");
            }
        }
    });
}

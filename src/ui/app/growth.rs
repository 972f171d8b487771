//! The error-growth section of the Sequence view: starting a growth run on
//! the row the stepper shows, polling it, and drawing its panel.

use super::{App, waker};
use crate::ui::command::Command;
use crate::ui::panels::growth::{GrowthJob, GrowthRun};
use crate::ui::panels::{self, status::Level};

impl App {
    /// The error-growth run and its last report.
    pub fn growth(&self) -> &GrowthRun {
        &self.growth
    }

    /// The error-growth run, to show a report made elsewhere (tests).
    pub fn growth_mut(&mut self) -> &mut GrowthRun {
        &mut self.growth
    }

    /// Starts a growth run on the computed row (the stepper's), with its
    /// model and the chosen precision.
    pub(super) fn run_growth(&mut self) {
        if self.growth.is_busy() {
            return;
        }
        let Some(c) = self.computed.clone() else {
            return self.say(Level::Error, "cannot run error growth: nothing computed yet");
        };
        let source = format!("{}: {} positions at offset {}", c.spec.dataset_name, c.t, c.spec.offset);
        let capture = self.capture.open.as_ref().map(|o| &o.capture);
        let weights = self.weights();
        let preset = (c.spec.config, c.spec.seed, &weights);
        let started = GrowthJob::new(capture, preset, c.tokens.clone(), c.spec.offset, source, self.state.precision)
            .and_then(|job| self.growth.start(job, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, format!("Error growth over {} positions…", c.t)),
            Err(e) => self.say(Level::Error, format!("cannot run error growth: {e}")),
        }
    }

    pub(super) fn poll_growth(&mut self) {
        match self.growth.poll() {
            Some(Ok(())) => {
                let r = self.growth.report.as_ref();
                let line = r.map(|r| r.summary_line()).unwrap_or_default();
                // A position outside the envelope is a finding, not an error.
                let found = r.is_some_and(|r| r.first_outside.is_some());
                self.say(if found { Level::Result } else { Level::Info }, format!("Error growth: {line}"));
            }
            Some(Err(e)) => self.say(Level::Error, format!("error growth failed: {e}")),
            None => {}
        }
    }

    /// The collapsible section under the stepper.
    pub(super) fn growth_section(&mut self, ui: &mut egui::Ui, cursor: usize, cmds: &mut Vec<Command>) {
        let row = self
            .computed
            .as_ref()
            .map(|c| format!("on the row shown ({} positions), GPU in {}", c.t, self.state.precision.name()));
        egui::CollapsingHeader::new("Error growth along the sequence")
            .id_salt("growth_section")
            .default_open(self.growth.report.is_some() || self.growth.is_busy())
            // A run started without a click in it (a command file's `growth`) opens it too.
            .open(self.growth.is_busy().then_some(true))
            .show(ui, |ui| panels::growth::show(ui, &self.growth, cursor, row.as_deref(), cmds));
    }
}

//! Opening a capture: read on a job, then the app's model, batch, dataset,
//! precision and ladder fault become the capture's, and the stepper goes to
//! the position that dominates its gradient.

use std::path::Path;
use std::sync::Arc;

use super::{App, waker};
use crate::session::state::{DatasetRef, FaultTool, View};
use crate::ui::capture_view::{OpenCapture, Opening};
use crate::ui::panels::status::Level;

impl App {
    /// Starts reading the capture at `path` (its folder or its `capture.json`).
    pub(super) fn open_capture(&mut self, path: &Path, opening: Opening) {
        match self.capture.load(path.to_path_buf(), opening, waker(&self.ctx_slot)) {
            Ok(()) => self.say(Level::Info, format!("Opening the capture {}…", path.display())),
            Err(e) => self.say(Level::Error, e),
        }
    }

    /// Applies a capture once read; a capture that did not load changes
    /// nothing but the status line.
    pub(super) fn poll_capture(&mut self) {
        let Some((opening, result)) = self.capture.poll() else { return };
        match result {
            Ok(open) => self.apply_capture(open, opening),
            Err(e) => self.say(Level::Error, e),
        }
    }

    fn apply_capture(&mut self, open: OpenCapture, opening: Opening) {
        let open = Arc::new(open);
        let meta = &open.capture.meta;
        self.dataset = open.rows.clone();
        self.state.dataset = DatasetRef { path: None, hash: Some(self.dataset.content_hash()) };
        self.data_path.clear();
        self.state.capture = Some(open.path.clone());
        self.state.precision = meta.precision;
        self.state.token_cap = meta.optim.token_cap;
        self.state.checkpoint = None;
        self.checkpoint_path.clear();
        if let Some(preset) = open.preset() {
            self.state.config = preset;
        }
        match opening {
            Opening::Fresh => {
                // The capture's own engine: its planted persistent fault, or none.
                self.state.set_fault(FaultTool::Ladder, open.planted_fault());
                self.ladder.clear();
                let (row, pos) = open.top().map_or((0, 0), |t| (t.row, t.pos));
                self.place_on_row(&open, row, pos);
                self.state.view = View::Sequence;
            }
            Opening::Session { offset, len, cursor } => {
                (self.state.offset, self.state.len, self.state.cursor) = (offset, len, cursor);
                self.clamp_sequence();
            }
        }
        let text = format!(
            "Opened the capture of step {} ({}): {} rows{}",
            meta.step,
            meta.triggers.join(", "),
            open.capture.batch.rows,
            meta.reasons.first().map(|r| format!(": {r}")).unwrap_or_default()
        );
        self.capture.open = Some(open);
        self.needs_run = true;
        self.say(Level::Info, crate::ui::diagnose::ascii(&text));
    }

    /// Shows `row` of `open`'s batch in the stepper, the cursor at `pos`.
    fn place_on_row(&mut self, open: &OpenCapture, row: usize, pos: usize) {
        if let Some((offset, len)) = open.row_window(row) {
            self.state.offset = offset;
            self.state.len = len.max(2);
            self.state.cursor = pos;
            self.clamp_sequence();
        }
    }

    /// Moves the stepper to `row` and `pos` of the open capture's batch.
    pub(super) fn capture_go_to(&mut self, row: usize, pos: usize) {
        let Some(open) = self.capture.open.clone() else { return };
        let same_row = open.row_window(row) == Some((self.state.offset, self.state.len));
        self.place_on_row(&open, row, pos);
        self.state.view = View::Sequence;
        if same_row {
            self.set_cursor(pos);
        } else {
            self.needs_run = true;
        }
    }

    /// Forgets the open capture: the model is the preset's again (the rows
    /// stay the dataset until another is opened).
    pub(super) fn close_capture(&mut self) {
        if self.capture.open.take().is_some() {
            self.state.capture = None;
            self.needs_run = true;
        }
    }

    /// Starts the replay of the open capture.
    pub(super) fn replay_capture(&mut self) {
        let Some(open) = self.capture.open.clone() else { return };
        match self.capture.replay.start(&open, waker(&self.ctx_slot)) {
            Ok(()) => self.say(Level::Info, format!("Replaying step {}…", open.capture.meta.step)),
            Err(e) => self.say(Level::Error, e),
        }
    }

    /// Says the replay's verdict once it ended.
    pub(super) fn poll_replay(&mut self) {
        let text = match self.capture.replay.poll() {
            None => return,
            Some(Ok(r)) => Ok(crate::ui::diagnose::ascii(&format!("Replay of step {}: {}", r.step, r.verdict_line()))),
            Some(Err(e)) => Err(e.to_string()),
        };
        match text {
            Ok(t) => self.say(Level::Info, t),
            Err(e) => self.say(Level::Error, e),
        }
    }

    /// The open capture's replay (its report once one ran).
    pub fn replay(&self) -> &crate::ui::capture_view::ReplayRun {
        &self.capture.replay
    }

    /// The row of the open capture the stepper shows, if it shows one.
    pub fn capture_row(&self) -> Option<usize> {
        self.capture.open.as_ref()?.row_at(self.state.offset, self.state.len)
    }
}

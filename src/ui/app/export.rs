//! Exporting the inspected tensor (CSV or safetensors), as a job: a large
//! tensor's CSV takes a while.

use crate::ui::error::UiError;
use std::path::PathBuf;

use super::{App, waker};
use crate::session::job::Job;
use crate::ui::inspect::{self, ExportFormat};
use crate::ui::panels::status::Level;

impl App {
    /// Says how the exports that ended went.
    pub(super) fn poll_exports(&mut self) {
        let mut ended = Vec::new();
        self.exports.retain_mut(|job| match job.poll().done {
            None => true,
            Some(r) => {
                ended.push(r.map_err(UiError::from).and_then(|r| r));
                false
            }
        });
        for r in ended {
            match r {
                Ok(text) => self.say(Level::Info, text),
                Err(e) => self.say(Level::Error, format!("export failed: {e}")),
            }
        }
    }

    /// Writes the inspected tensor on a job of its own.
    pub(super) fn export(&mut self, format: ExportFormat, path: PathBuf) {
        let (Some(rung), Some(t)) = (self.state.selected_rung.clone(), self.inspected().cloned()) else {
            return self.say(Level::Error, "export: no tensor is selected (click a rung, then a tensor)");
        };
        if path.as_os_str().is_empty() {
            return self.say(Level::Error, "export: type a file path first");
        }
        let name = t.name.clone();
        let spawned = Job::spawn("export", waker(&self.ctx_slot), move |_| inspect::export(&path, format, &rung, &t));
        match spawned {
            Ok(job) => {
                self.exports.push(job);
                self.say(Level::Info, format!("Exporting {name}…"));
            }
            Err(e) => self.say(Level::Error, format!("cannot start the export: {e}")),
        }
    }
}

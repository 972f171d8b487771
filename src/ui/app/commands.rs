//! Applying a [`Command`]: each variant's effect on the state, or the job it starts.

use std::sync::Arc;

use super::files::DialogPurpose;
use super::{App, waker};
use crate::dataset::synthetic;
use crate::session::state::{MAX_LEN, View};
use crate::ui::capture_view::Opening;
use crate::ui::command::Command;
use crate::ui::loader::AfterOpen;
use crate::ui::panels::status::Level;

impl App {
    pub(super) fn set_cursor(&mut self, pos: usize) {
        if let Some(c) = &self.computed {
            self.state.cursor = pos.min(c.t.saturating_sub(1));
        }
    }

    /// Keeps offset and length inside the dataset.
    pub(super) fn clamp_sequence(&mut self) {
        let total = self.dataset.len_tokens();
        self.state.offset = self.state.offset.min(total.saturating_sub(2));
        self.state.len = self.state.len.clamp(2, MAX_LEN).min(total - self.state.offset);
    }

    pub fn apply(&mut self, cmd: Command) {
        let cursor = self.state.cursor;
        match cmd {
            Command::Run => self.needs_run = true,
            Command::SetCursor(p) => self.set_cursor(p),
            Command::StepCursor(d) => self.set_cursor(cursor.saturating_add_signed(d)),
            Command::CursorFirst => self.set_cursor(0),
            Command::CursorLast => self.set_cursor(usize::MAX),
            Command::NextNonFinite => match self.computed.as_ref().map(|c| c.next_non_finite(cursor)) {
                Some(Some(p)) => self.set_cursor(p),
                Some(None) => self.say(Level::Info, "no non-finite value in this sequence"),
                None => {}
            },
            Command::WorstLoss => {
                if let Some(p) = self.computed.as_ref().and_then(|c| c.worst_loss()) {
                    self.set_cursor(p);
                }
            }
            Command::SelectHead(h) => self.state.head = h,
            // Another model than the capture's: the capture closes.
            Command::SetConfig(c) => {
                self.close_capture();
                self.trained = None;
                self.state.config = c;
            }
            Command::SetSeed(s) => {
                self.close_capture();
                self.trained = None;
                self.state.seed = s;
            }
            Command::SetPrecision(p) => self.state.precision = p,
            Command::SetPrecisionMap(m) => self.state.precision_map = m,
            Command::SetTokenCap(c) => self.state.token_cap = c.filter(|x| x.is_finite() && *x > 0.0),
            Command::SetOffset(o) => {
                self.state.offset = o;
                self.clamp_sequence();
            }
            Command::SetLen(l) => {
                self.state.len = l;
                self.clamp_sequence();
            }
            Command::OpenDatasetDialog => self.dialog(DialogPurpose::OpenDataset),
            Command::SaveSessionDialog => self.dialog(DialogPurpose::SaveSession),
            Command::LoadSessionDialog => self.dialog(DialogPurpose::LoadSession),
            Command::OpenDataset(path) => self.open_dataset(&path, AfterOpen::Plain),
            Command::UseEmbeddedDataset => {
                self.set_dataset(Arc::new(synthetic::default_dataset()), None);
                self.say(Level::Info, "Using the embedded dataset");
            }
            Command::SaveSession(path) => self.save_session(&path),
            Command::LoadSession(path) => self.load_session(&path),
            Command::RunLadder => self.run_ladder(),
            Command::SelectRung(id) => {
                if id.is_some() {
                    self.state.view = View::Inspector;
                } else if self.state.view == View::Inspector {
                    self.state.view = View::Sequence;
                }
                if id != self.state.selected_rung {
                    self.state.selected_tensor = None;
                }
                self.state.selected_rung = id;
            }
            Command::SelectTensor(name) => self.state.selected_tensor = Some(name),
            Command::JumpToWorst => {
                if let Some(t) = self.inspected().cloned() {
                    self.inspector.jump_to_worst(&t);
                }
            }
            Command::ExportTensor(format, path) => self.export(format, path),
            Command::ExportTensorDialog => self.dialog(DialogPurpose::Export),
            Command::WorstDivergence => match self.computed.as_ref().map(|c| c.worst_divergence()) {
                Some(Some(p)) => self.set_cursor(p),
                Some(None) => {
                    let why = self.computed.as_ref().and_then(|c| c.gpu.as_ref().err().cloned()).unwrap_or_default();
                    self.say(Level::Info, format!("no GPU trace to compare with: {why}"));
                }
                None => {}
            },
            Command::SetView(v) => self.state.view = v,
            Command::StartSpeed => {
                let wake = waker(&self.ctx_slot);
                let (config, seed, weights) = (self.state.config, self.state.seed, self.weights());
                let precision = self.state.precision;
                self.speed.start(self.dataset.clone(), config, seed, weights, precision, wake);
                self.say(Level::Info, "Timing training steps on both engines…");
            }
            Command::StopSpeed => self.speed.stop(),
            Command::SetCheckpoint(p) => {
                self.close_capture();
                self.trained = None;
                if p.is_none() {
                    self.state.model = crate::session::state::ModelSource::Seeded;
                }
                self.state.checkpoint = p;
                self.needs_run = true;
            }
            Command::SetModelSource(m) => self.set_model_source(m),
            Command::TrainHere { steps, lr } => self.start_train_here(steps, lr),
            Command::CancelTrainHere => self.train_here.cancel(),
            Command::SetGpuTrace(on) => {
                self.state.gpu_trace = on;
                self.needs_run = true;
            }
            Command::SetFault(tool, f) => self.state.set_fault(tool, f),
            Command::RunBisect => self.run_bisect(),
            Command::RunPrecisionBisect => self.run_precision_bisect(),
            Command::SetBisectMaxLen(l) => self.state.bisect_max_len = l.clamp(1, MAX_LEN),
            Command::RunAudit => self.run_audit(),
            Command::SelectAuditTensor(i) => {
                self.audit.selected = i;
                self.audit.position = None;
            }
            Command::PickAuditPosition(p) => self.audit.position = Some(p),
            Command::GoToPosition(p) => {
                self.state.view = View::Sequence;
                self.set_cursor(p);
            }
            Command::LoadTrainLog(path) => {
                if let Err(e) = self.train_log.load(path, waker(&self.ctx_slot)) {
                    self.say(Level::Error, e);
                }
            }
            Command::TrainLogDialog => self.dialog(DialogPurpose::TrainLog),
            Command::LoadCampaign(path) => {
                if let Err(e) = self.mutation.load(path, waker(&self.ctx_slot)) {
                    self.say(Level::Error, e);
                }
            }
            Command::SelectMutant(id) => self.mutation.selected = Some(id),
            Command::OpenMutant(dir) => match crate::ui::mutation_view::open_mutant(&dir) {
                Ok(said) => self.say(Level::Info, said),
                Err(e) => self.say(Level::Error, e),
            },
            Command::OpenCapture(path) => self.open_capture(&path, Opening::Fresh),
            Command::CloseCapture => self.close_capture(),
            Command::ReplayCapture => self.replay_capture(),
            Command::CaptureGoTo { row, pos } => self.capture_go_to(row, pos),
            Command::RunGrowth => self.run_growth(),
            Command::TogglePanel(p) => {
                let on = self.state.panels.get_mut(p);
                *on = !*on;
            }
        }
    }
}

//! File dialogs, datasets and sessions: the dialogs run as jobs (a desktop
//! portal may take a while, or never answer), datasets open on the loader's
//! threads, and a session's side file is read on a job of its own.

use crate::ui::error::UiResult;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{App, waker};
use crate::dataset::{Dataset, synthetic};
use crate::session::job::Job;
use crate::session::state::{DatasetRef, State};
use crate::ui::capture_view::Opening;
use crate::ui::command::Command;
use crate::ui::inspect::ExportFormat;
use crate::ui::loader::{AfterOpen, Opened};
use crate::ui::panels::status::Level;
use crate::ui::session::{self, RungTensors};

/// What a file dialog's file is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DialogPurpose {
    OpenDataset,
    SaveSession,
    LoadSession,
    Export,
    TrainLog,
}

/// A dialog that returns nothing sooner than this had no portal to ask.
const NO_PORTAL_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether a desktop portal could answer: a session bus named by
/// `DBUS_SESSION_BUS_ADDRESS`, or the standard socket `$XDG_RUNTIME_DIR/bus`.
fn portal_reachable() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| Path::new(&d).join("bus").exists())
}

/// A session's side file as read on its job: (session, tensors or why not).
pub(super) type SideFile = (PathBuf, UiResult<Option<RungTensors>>);

impl App {
    /// Turns the files chosen in dialogs into the commands they were for. A
    /// dialog that returns nothing at once had no desktop portal to ask (a
    /// person takes longer to cancel): the typed-path field opens instead.
    pub(super) fn poll_dialogs(&mut self) {
        let mut chosen = Vec::new();
        self.dialogs.retain_mut(|(purpose, opened, job)| match job.poll().done {
            None => true,
            Some(path) => {
                chosen.push((*purpose, opened.elapsed(), path.ok().flatten()));
                false
            }
        });
        for (purpose, took, path) in chosen {
            let Some(path) = path else {
                if took < NO_PORTAL_WITHIN {
                    self.open_prompt(purpose);
                    self.say(
                        Level::Warning,
                        "no file chosen: no desktop portal answered, so the file dialog cannot open here; \
                         type the path in the field that opened (or drop a file on the window)",
                    );
                } else {
                    self.say(Level::Info, "no file chosen");
                }
                continue;
            };
            let cmd = self.command_for(purpose, path);
            self.pending.push(cmd);
        }
    }

    /// The command a chosen (or typed) file is for.
    pub(super) fn command_for(&mut self, purpose: DialogPurpose, path: PathBuf) -> Command {
        match purpose {
            DialogPurpose::OpenDataset => Command::OpenDataset(path),
            DialogPurpose::SaveSession => Command::SaveSession(path),
            DialogPurpose::LoadSession => Command::LoadSession(path),
            DialogPurpose::Export => {
                let format = ExportFormat::of_path(&path).unwrap_or(ExportFormat::Safetensors);
                Command::ExportTensor(format, path)
            }
            DialogPurpose::TrainLog => {
                self.train_log_path = path.display().to_string();
                Command::LoadTrainLog(path)
            }
        }
    }

    /// Runs a file dialog on its own thread: the portal may take a while to
    /// answer (or never appear), and the UI keeps drawing meanwhile.
    pub(super) fn dialog(&mut self, purpose: DialogPurpose) {
        // No session bus to reach a portal through: the typed-path field at once.
        if !portal_reachable() {
            self.open_prompt(purpose);
            return self.say(
                Level::Warning,
                "no file chosen: there is no desktop session bus, so no file dialog can open here; \
                 type the path in the field that opened (or drop a file on the window)",
            );
        }
        let spawned = Job::spawn("dialog", waker(&self.ctx_slot), move |_| {
            let d = rfd::FileDialog::new();
            match purpose {
                DialogPurpose::OpenDataset => d.set_title("Open a dataset").pick_file(),
                DialogPurpose::LoadSession => d.add_filter("session", &["ron"]).pick_file(),
                DialogPurpose::TrainLog => {
                    d.set_title("A training run's log.jsonl").add_filter("log", &["jsonl"]).pick_file()
                }
                DialogPurpose::SaveSession => {
                    d.add_filter("session", &["ron"]).set_file_name("session.ron").save_file()
                }
                DialogPurpose::Export => d
                    .add_filter("safetensors", &["safetensors"])
                    .add_filter("CSV", &["csv"])
                    .set_file_name("tensor.safetensors")
                    .save_file(),
            }
        });
        match spawned {
            Ok(job) => self.dialogs.push((purpose, std::time::Instant::now(), job)),
            Err(e) => self.say(Level::Error, format!("cannot start the file dialog: {e}")),
        }
    }

    /// Uses `dir` as the data folder (tests; the default comes from
    /// [`crate::session::data::data_dir`]): the recent list is read from it, and
    /// the session field's default path moves there.
    pub fn set_data_dir(&mut self, dir: &Path) {
        let old_default = crate::session::data::default_session(&self.data_dir).display().to_string();
        if self.session_path == old_default {
            self.session_path = crate::session::data::default_session(dir).display().to_string();
        }
        self.data_dir = dir.to_path_buf();
        self.recent = crate::session::data::Recent::load(dir);
    }

    /// The data folder (default sessions, the recent list).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The recent sessions, most recent first.
    pub fn recent(&self) -> &[PathBuf] {
        &self.recent.sessions
    }

    /// Records `session` as the open one and first in the recent list (the
    /// list's file is a convenience: a failure to write it is only a warning).
    fn remember_session(&mut self, session: &Path) {
        self.open_session = Some(session.to_path_buf());
        self.recent.push(session);
        if let Err(e) = self.recent.save(&self.data_dir) {
            self.say(Level::Warning, format!("cannot keep the recent-sessions list: {e}"));
        }
    }

    pub(super) fn set_dataset(&mut self, ds: Arc<Dataset>, path: Option<PathBuf>) {
        self.close_capture();
        self.state.dataset = DatasetRef { path: path.clone(), hash: Some(ds.content_hash()) };
        self.data_path = path.map(|p| p.display().to_string()).unwrap_or_default();
        self.dataset = ds;
        self.clamp_sequence();
        self.needs_run = true;
    }

    /// Opens `path` on a loader thread; [`Self::poll_loader`] takes the result.
    pub(super) fn open_dataset(&mut self, path: &Path, after: AfterOpen) {
        if let Err(e) = self.loader.open(path.to_path_buf(), after, waker(&self.ctx_slot)) {
            self.say(Level::Error, e);
        }
    }

    pub(super) fn poll_loader(&mut self) {
        for Opened { path, result, after } in self.loader.poll() {
            match (after, result) {
                (AfterOpen::Plain, Ok(ds)) => {
                    let text = format!("Opened {} ({} tokens)", ds.name(), ds.len_tokens());
                    self.set_dataset(Arc::new(ds), Some(path));
                    self.say(Level::Info, text);
                }
                (AfterOpen::Plain, Err(e)) => self.say(Level::Error, format!("cannot open the dataset: {e}")),
                (AfterOpen::Session { state, session }, Ok(ds)) => {
                    self.set_dataset(Arc::new(ds), Some(path));
                    self.restore_session(*state, &session, None);
                }
                (AfterOpen::Session { state, session }, Err(e)) => {
                    let problem = format!("the session's dataset cannot be opened ({e}); kept {}", self.dataset.name());
                    self.restore_session(*state, &session, Some(problem));
                }
            }
        }
    }

    fn read_side_file(&mut self, session: &Path, name: Option<String>) {
        if name.is_none() {
            return;
        }
        let session = session.to_path_buf();
        let probe = State { tensors_file: name, ..State::default() };
        let spawned = Job::spawn("side-file", waker(&self.ctx_slot), move |_| {
            let r = session::load_side_file(&session, &probe);
            (session, r)
        });
        match spawned {
            Ok(job) => self.side_file = Some(job),
            Err(e) => self.say(Level::Error, format!("cannot start reading the side file: {e}")),
        }
    }

    /// Takes the side file's tensors, once the session itself is restored (its
    /// dataset may still be opening), so that a problem is the last word in the status bar.
    pub(super) fn poll_side_file(&mut self) {
        if self.loader.is_busy() {
            return;
        }
        let Some(job) = &mut self.side_file else { return };
        let Some(done) = job.poll().done else { return };
        self.side_file = None;
        let (session, result) = match done {
            Ok(r) => r,
            Err(lost) => (PathBuf::from(self.session_path.clone()), Err(lost.into())),
        };
        match result {
            Ok(tensors) if !self.ladder.is_busy() => self.ladder.tensors = tensors.unwrap_or_default(),
            Ok(_) => {} // a new ladder run started meanwhile
            Err(e) => self.say(
                Level::Warning,
                format!(
                    "session {}: the inspector's tensors cannot be read ({e}); the rest is restored",
                    session.display()
                ),
            ),
        }
    }

    pub(super) fn save_session(&mut self, path: &Path) {
        self.state.dataset.hash = Some(self.dataset.content_hash());
        let ladder = self.ladder.to_saved();
        // A fresh data folder (or any missing folder the user typed) is created first.
        let saved = crate::session::data::ensure_parent(path).and_then(|()| {
            session::save_with_ladder(path, &self.state, ladder, &self.ladder.tensors).map_err(|e| e.to_string())
        });
        match saved {
            Ok(()) => {
                let full = crate::session::data::absolute(path);
                self.session_path = path.display().to_string();
                self.baseline = self.state.clone();
                self.remember_session(&full);
                self.say(Level::Info, format!("Saved the session to {}", full.display()));
            }
            Err(e) => self.say(Level::Error, e),
        }
    }

    /// Loads a session: a file that does not parse changes nothing; a session
    /// whose dataset is missing or changed still restores everything else.
    pub(super) fn load_session(&mut self, path: &Path) {
        let mut loaded = match session::load(path) {
            Ok(s) => s,
            Err(e) => return self.say(Level::Error, e.to_string()),
        };
        self.session_path = path.display().to_string();
        self.remember_session(&crate::session::data::absolute(path));
        // The ladder results: shown as saved; the side file's tensors follow
        // from a thread (a large side file takes a while to read and summarise).
        self.side_file = None;
        match loaded.ladder.take() {
            Some(l) => {
                self.ladder.restore(l, Default::default());
                self.read_side_file(path, loaded.tensors_file.take());
            }
            None => self.ladder.clear(),
        }
        // A session with a capture: the capture brings its own dataset (its rows).
        if let Some(cap) = loaded.capture.clone() {
            let opening = Opening::Session { offset: loaded.offset, len: loaded.len, cursor: loaded.cursor };
            self.restore_session(loaded, path, None);
            return self.open_capture(&cap, opening);
        }
        match loaded.dataset.path.clone() {
            None => {
                if self.state.dataset.path.is_some() || self.capture.open.is_some() {
                    self.set_dataset(Arc::new(synthetic::default_dataset()), None);
                }
                self.restore_session(loaded, path, None);
            }
            Some(p) => {
                self.say(Level::Info, format!("Opening the session's dataset {}", p.display()));
                let after = AfterOpen::Session { state: Box::new(loaded), session: path.to_path_buf() };
                self.open_dataset(&p, after);
            }
        }
    }

    /// Applies a loaded session over the current dataset; `problem` says why
    /// its own dataset could not be used.
    pub(super) fn restore_session(&mut self, loaded: State, path: &Path, mut problem: Option<String>) {
        let now = self.dataset.content_hash();
        if problem.is_none()
            && loaded.capture.is_none()
            && let Some(saved) = &loaded.dataset.hash
            && *saved != now
        {
            problem = Some(format!(
                "the session's dataset {} changed since it was saved (content hash {saved}, now {now})",
                self.dataset.name()
            ));
        }
        self.close_capture();
        let dataset = self.state.dataset.clone();
        // The capture is recorded again once it has opened.
        self.state = State { dataset, ladder: None, tensors_file: None, capture: None, ..loaded };
        self.trained = None; // parameters trained here are not part of a session
        self.checkpoint_path = self.state.checkpoint.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        if let Some(p) = &self.state.train_log {
            self.train_log_path = p.display().to_string();
        }
        self.clamp_sequence();
        self.needs_run = true;
        self.baseline = self.state.clone();
        match problem {
            Some(p) => self.say(Level::Warning, format!("session {}: {p}; the rest is restored", path.display())),
            None => self.say(Level::Info, format!("Loaded the session {}", path.display())),
        }
    }
}

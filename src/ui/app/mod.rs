//! The app: owns the live data (dataset, worker, computed trace, heatmap
//! textures, status, background jobs) around the saved [`State`], draws the
//! frame, and applies the frame's [`Command`]s at its end.
//!
//! Split by concern: `commands` applies a command; `view` draws the central
//! views and reads the keyboard and dropped files; `files` runs the file
//! dialogs, opens datasets and saves or restores sessions (and their side
//! files); `export` writes the inspected tensor; `jobs` starts and polls the
//! trace, the ladder, the bisect and the audit; `capture` opens a capture;
//! `overlays` draws the typed-path prompt (no desktop portal), the shortcut
//! overlay (`?`) and keeps the window title (the session, `*` when unsaved).

mod capture;
mod commands;
mod export;
mod files;
mod growth;
mod jobs;
mod model;
mod overlays;
mod view;

use crate::ui::error::UiResult;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::dataset::{Dataset, synthetic};
use crate::session::data::{self, Recent};
use crate::session::job::{Job, Waker};
use crate::session::state::{DatasetRef, State};

use super::capture_view::{CaptureRun, OpenCapture};
use super::colormap::ColorMap;
use super::command::Command;
use super::computed::Computed;
use super::diagnose::{AuditRun, BisectRun, TrainLogView};
use super::heatmap::Heatmap;
use super::inspect;
use super::ladder_run::LadderView;
use super::loader::Loader;
use super::panels::inspector::InspectorUi;
use super::panels::{self, status::Level, status::Message};
use super::speed::SpeedRun;
use super::worker::Worker;
use crate::session::state::FaultTool;
use files::{DialogPurpose, SideFile};

/// What the command line asks for.
#[derive(Clone, Debug, Default)]
pub struct LaunchOptions {
    pub data: Option<PathBuf>,
    pub session: Option<PathBuf>,
    /// A capture folder (or its `capture.json`) to open.
    pub capture: Option<PathBuf>,
    /// Initial settings (tests start on a tiny config); `None`: the defaults.
    pub state: Option<State>,
    /// Steps of a command file (`--commands`), run in order once idle.
    pub commands: Vec<super::script::Line>,
}

/// The trace the worker computes now.
struct Running {
    generation: u64,
    stage: &'static str,
    started: Instant,
}

/// Wakes the UI from a background thread: a repaint request once the egui
/// context is known (from the first frame on).
fn waker(slot: &Arc<Mutex<Option<egui::Context>>>) -> Waker {
    let slot = slot.clone();
    Waker::new(move || {
        if let Some(ctx) = slot.lock().ok().and_then(|c| c.clone()) {
            ctx.request_repaint();
        }
    })
}

pub struct App {
    pub state: State,
    dataset: Arc<Dataset>,
    worker: Worker,
    /// The context, known from the first frame on, for the worker to wake the UI.
    ctx_slot: Arc<Mutex<Option<egui::Context>>>,
    generation: u64,
    running: Option<Running>,
    computed: Option<Arc<Computed>>,
    attention_map: Heatmap,
    gradient_map: Heatmap,
    message: Option<Message>,
    pending: Vec<Command>,
    needs_run: bool,
    /// The path typed in the side panel's dataset field.
    pub data_path: String,
    /// The path typed in the side panel's session field.
    pub session_path: String,
    /// The path typed in the side panel's checkpoint field.
    pub checkpoint_path: String,
    loader: Loader,
    /// File dialogs open now, each with what its file is for and when it opened.
    dialogs: Vec<(DialogPurpose, Instant, Job<(), Option<PathBuf>>)>,
    /// The typed-path field shown when no file dialog could open.
    prompt: Option<overlays::PathPrompt>,
    /// The per-user data folder (default sessions, the recent list).
    data_dir: PathBuf,
    recent: Recent,
    /// The session file open now (saved or loaded), if any.
    open_session: Option<PathBuf>,
    /// The state as last saved or opened: the title marks any difference.
    baseline: State,
    /// The title last sent to the window.
    title_sent: String,
    /// The keyboard-shortcut overlay is open.
    pub help_open: bool,
    newline: Option<&'static str>,
    ladder: LadderView,
    inspector: InspectorUi,
    speed: SpeedRun,
    /// Exports being written: what each wrote, or why not.
    exports: Vec<Job<(), UiResult<String>>>,
    /// The side file of the session being loaded, read on a thread.
    side_file: Option<Job<(), SideFile>>,
    bisect: BisectRun,
    precision_bisect: crate::ui::precision_bisect_run::PrecisionBisectRun,
    audit: AuditRun,
    train_log: TrainLogView,
    /// The path typed in the training-curves view's field.
    pub train_log_path: String,
    mutation: crate::ui::mutation_view::MutationView,
    /// The path typed in the Detection power view's field.
    pub campaign_path: String,
    capture: CaptureRun,
    growth: panels::growth::GrowthRun,
    script: super::script::Script,
    /// The "Train N steps here" run.
    train_here: super::train_here::TrainHere,
    /// Parameters trained here and the steps they took; `None`: the state's source.
    trained: Option<(Arc<crate::model::Params<f32>>, usize)>,
    /// Last, so it drops after every job above: waits for their threads.
    _join: crate::session::job::JoinDropped,
}

impl App {
    pub fn new(opts: LaunchOptions) -> App {
        let ctx_slot: Arc<Mutex<Option<egui::Context>>> = Arc::default();
        let worker = Worker::new(waker(&ctx_slot));
        let data_dir = data::data_dir();
        let recent = Recent::load(&data_dir);
        let mut app = App {
            state: opts.state.unwrap_or_default(),
            dataset: Arc::new(synthetic::default_dataset()),
            worker,
            ctx_slot,
            generation: 0,
            running: None,
            computed: None,
            attention_map: Heatmap::new("attention heatmap", ColorMap::Sequential),
            gradient_map: Heatmap::new("context gradient heatmap", ColorMap::Sequential),
            message: None,
            pending: Vec::new(),
            needs_run: true,
            data_path: String::new(),
            session_path: opts
                .session
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| data::default_session(&data_dir).display().to_string()),
            checkpoint_path: String::new(),
            loader: Loader::default(),
            dialogs: Vec::new(),
            prompt: None,
            data_dir,
            recent,
            open_session: None,
            baseline: State::default(),
            title_sent: String::new(),
            help_open: false,
            newline: None,
            ladder: Default::default(),
            inspector: InspectorUi::default(),
            speed: SpeedRun::default(),
            exports: Vec::new(),
            side_file: None,
            bisect: BisectRun::default(),
            precision_bisect: Default::default(),
            audit: AuditRun::default(),
            train_log: TrainLogView::default(),
            train_log_path: String::new(),
            mutation: Default::default(),
            campaign_path: String::new(),
            capture: CaptureRun::default(),
            growth: Default::default(),
            script: super::script::Script::new(opts.commands),
            train_here: Default::default(),
            trained: None,
            _join: Default::default(),
        };
        if let Some(p) = &app.state.train_log {
            app.train_log_path = p.display().to_string();
        }
        app.state.dataset = DatasetRef { path: None, hash: Some(app.dataset.content_hash()) };
        app.baseline = app.state.clone();
        if let Some(p) = opts.session {
            app.pending.push(Command::LoadSession(p));
        }
        if let Some(p) = opts.data {
            app.pending.push(Command::OpenDataset(p));
        }
        if let Some(p) = opts.capture {
            app.pending.push(Command::OpenCapture(p));
        }
        app
    }

    /// The ladder runs and their results.
    pub fn ladder(&self) -> &LadderView {
        &self.ladder
    }

    /// The inspector's view state.
    pub fn inspector(&self) -> &InspectorUi {
        &self.inspector
    }

    /// The inspector's view state, to type into its fields (tests).
    pub fn inspector_mut(&mut self) -> &mut InspectorUi {
        &mut self.inspector
    }

    /// The speedup run.
    pub fn speed(&self) -> &SpeedRun {
        &self.speed
    }

    /// The speedup run, to fill with known samples (snapshot tests).
    pub fn speed_mut(&mut self) -> &mut SpeedRun {
        &mut self.speed
    }

    /// The bisect in flight (its probes so far).
    pub fn bisect(&self) -> &BisectRun {
        &self.bisect
    }

    /// The audit's result and selection.
    pub fn audit(&self) -> &AuditRun {
        &self.audit
    }

    /// The training run's log the curves view shows.
    pub fn train_log(&self) -> &TrainLogView {
        &self.train_log
    }

    /// The Detection power view's campaign and pick.
    pub fn mutation(&self) -> &crate::ui::mutation_view::MutationView {
        &self.mutation
    }

    /// The open capture, if any.
    pub fn capture(&self) -> Option<&OpenCapture> {
        self.capture.open.as_deref()
    }

    /// True while a capture is being read.
    pub fn capture_busy(&self) -> bool {
        self.capture.is_busy()
    }

    /// True while a bisect, an audit or a log read runs.
    pub fn diagnostics_busy(&self) -> bool {
        self.bisect.is_busy() || self.audit.is_busy() || self.train_log.is_busy()
    }

    /// True while an export is being written.
    pub fn is_exporting(&self) -> bool {
        !self.exports.is_empty()
    }

    /// The tensor the inspector shows, if any.
    pub fn inspected(&self) -> Option<&inspect::InspectedTensor> {
        let rung = self.state.selected_rung.as_deref()?;
        let list = self.ladder.tensors.get(rung)?;
        panels::inspector::pick(rung, list, self.state.selected_tensor.as_deref())
    }

    /// The last computed sequence, if any.
    pub fn computed(&self) -> Option<&Computed> {
        self.computed.as_deref()
    }

    /// True while the worker computes or a dataset is being opened.
    pub fn is_busy(&self) -> bool {
        self.running.is_some() || self.needs_run || self.loader.is_busy() || self.side_file.is_some()
    }

    /// Every background task running now, by name: the one list that decides
    /// whether the app is idle and whether it keeps repainting while it waits.
    pub fn running_jobs(&self) -> Vec<&'static str> {
        let jobs = [
            ("trace", self.running.is_some() || self.needs_run),
            ("dataset", self.loader.is_busy()),
            ("side file", self.side_file.is_some()),
            ("ladder", self.ladder.is_busy()),
            ("speedup", self.speed.is_running()),
            ("export", self.is_exporting()),
            ("bisect", self.bisect.is_busy()),
            ("audit", self.audit.is_busy()),
            ("training log", self.train_log.is_busy()),
            ("capture", self.capture.is_busy()),
            ("replay", self.capture.replay.is_busy()),
            ("growth", self.growth.is_busy()),
            ("precision bisect", self.precision_bisect.is_busy()),
            ("train here", self.train_here.is_busy()),
            ("file dialog", !self.dialogs.is_empty()),
        ];
        jobs.into_iter().filter(|(_, on)| *on).map(|(name, _)| name).collect()
    }

    /// True when no job runs (trace, dataset, ladder, tools, exports, dialogs):
    /// a command file's next step waits for this.
    pub fn is_idle(&self) -> bool {
        self.running_jobs().is_empty()
    }

    /// True once every step of the command file ran (or there was none).
    pub fn script_done(&self) -> bool {
        self.script.is_done()
    }

    /// The status bar's message.
    pub fn message(&self) -> Option<&Message> {
        self.message.as_ref()
    }

    /// The current dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// How many times each heatmap texture was built: (attention, gradient).
    pub fn texture_builds(&self) -> (u64, u64) {
        (self.attention_map.builds(), self.gradient_map.builds())
    }

    /// The attention heatmap (its view, for tests).
    pub fn attention_map(&self) -> &Heatmap {
        &self.attention_map
    }

    /// Queues a command as if a panel had issued it.
    pub fn queue(&mut self, cmd: Command) {
        self.pending.push(cmd);
    }

    /// Draws one frame and applies its commands.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        if let Ok(mut slot) = self.ctx_slot.lock()
            && slot.is_none()
        {
            *slot = Some(ctx.clone());
        }
        self.poll_worker();
        self.poll_dialogs();
        self.poll_loader();
        self.poll_side_file();
        self.poll_capture();
        self.poll_replay();
        self.speed.poll();
        self.poll_exports();
        if self.ladder.poll() {
            let (level, text) = self.ladder.verdict();
            self.say(level, text);
        }
        self.poll_diagnostics();
        self.poll_growth();
        self.poll_train_here();
        match self.script.next(self.is_idle() && self.pending.is_empty()) {
            Some(super::script::ScriptStep::Command(c)) => self.pending.push(c),
            Some(super::script::ScriptStep::ScrollToHeadroom) => self.inspector.scroll_to_headroom = true,
            Some(super::script::ScriptStep::PrecisionMap(spec)) => {
                match super::script::resolve_map(spec.as_deref(), self.state.config, self.state.precision) {
                    Ok(m) => self.pending.push(Command::SetPrecisionMap(m)),
                    Err(e) => self.say(Level::Error, e),
                }
            }
            Some(super::script::ScriptStep::Open(section)) => super::script::request_open(&ctx, section),
            Some(super::script::ScriptStep::Sleep(_)) | None => {}
        }
        let mut cmds = std::mem::take(&mut self.pending);
        self.help_keys(&ctx);
        self.keyboard(&ctx, &mut cmds);
        self.dropped_files(&ctx, &mut cmds);
        Self::hovered_files(&ctx);
        let newline = *self.newline.get_or_insert_with(|| panels::text::newline_glyph(&ctx));

        egui::Panel::bottom("status_bar").show(ui, |ui| {
            let progress = self
                .running
                .as_ref()
                .map(|r| panels::status::Progress { stage: r.stage, elapsed: Some(r.started.elapsed()) });
            panels::status::show(ui, self.message.as_ref(), progress);
        });
        self.keep_title(&ctx);
        // Side panels: resizable within a range, never wider than that with their
        // content (what does not fit scrolls or wraps inside them).
        egui::Panel::left("controls").default_size(280.0).size_range(220.0..=420.0).resizable(true).show(ui, |ui| {
            let stale = self.is_stale();
            let controls = panels::controls::Controls {
                state: &self.state,
                dataset: &self.dataset,
                data_path: &mut self.data_path,
                session_path: &mut self.session_path,
                checkpoint_path: &mut self.checkpoint_path,
                train_here: &mut self.train_here,
                trained_steps: self.trained.as_ref().map(|t| t.1),
                capture_open: self.capture.open.is_some(),
                stale,
                precision_bisect: &self.precision_bisect,
                session: panels::session::SessionInfo {
                    recent: &self.recent.sessions,
                    open: self.open_session.as_deref(),
                },
            };
            panels::controls::show(ui, controls, &mut cmds);
        });
        // The rung's cases live in the inspector view (central), not here: the
        // ladder panel keeps its width whatever rung is selected.
        egui::Panel::right("ladder").default_size(400.0).size_range(300.0..=520.0).resizable(true).show(ui, |ui| {
            egui::ScrollArea::both().id_salt("ladder_scroll").show(ui, |ui| {
                let fault = self.state.fault(FaultTool::Ladder);
                let capture = self.capture.open.as_ref().map(|c| c.describe());
                let selected = self.state.selected_rung.as_deref();
                panels::ladder::show(ui, &self.ladder, selected, fault, capture.as_deref(), &mut cmds);
            });
        });
        egui::CentralPanel::default().show(ui, |ui| self.central_area(ui, newline, &mut cmds));
        self.prompt_window(&ctx, &mut cmds);
        self.help_overlay(&ctx);

        for cmd in cmds {
            self.apply(cmd);
        }
        if std::mem::take(&mut self.needs_run) {
            self.run();
        }
        if !self.running_jobs().is_empty() || self.script.is_pending() {
            // The threads wake us when they report; this is a fallback.
            ctx.request_repaint_after(std::time::Duration::from_millis(100));
        }
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        let text = text.into();
        if !matches!(level, Level::Info | Level::Result) {
            eprintln!("dualscope: {text}");
        }
        self.message = Some(Message { level, text });
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }
}

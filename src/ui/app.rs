//! The app: owns the live data (dataset, worker, computed trace, heatmap
//! textures, status) around the saved [`State`], draws the panels, and applies
//! the frame's [`Command`]s at its end.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::dataset::{Dataset, synthetic};

use super::colormap::ColorMap;
use super::command::Command;
use super::computed::Computed;
use super::diagnose::{AuditRun, BisectRun, RowJob, TrainLogView};
use super::heatmap::Heatmap;
use super::inspect::{self, ExportFormat};
use super::ladder_run::{ENGINE_FAULT_PREFIX, LadderJob, LadderView};
use super::loader::{AfterOpen, Loader, Opened};
use super::panels::inspector::InspectorUi;
use super::panels::{self, status::Level, status::Message};
use super::saved::LadderInput;
use super::session;
use super::speed::SpeedRun;
use super::state::{DatasetRef, FaultTool, MAX_LEN, PanelId, State, View};
use super::worker::{Job, Report, Worker};

/// What the command line asks for.
#[derive(Clone, Debug, Default)]
pub struct LaunchOptions {
    pub data: Option<PathBuf>,
    pub session: Option<PathBuf>,
    /// Initial settings (tests start on a tiny config); `None`: the defaults.
    pub state: Option<State>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DialogPurpose {
    OpenDataset,
    SaveSession,
    LoadSession,
    Export,
    TrainLog,
}

struct Running {
    generation: u64,
    stage: &'static str,
    started: Instant,
}

/// A session's side file as read on its thread: (session, tensors or why not).
type SideFile = (PathBuf, Result<Option<super::saved::RungTensors>, String>);

/// A callback for a background thread: asks the UI for a repaint once the
/// context is known (from the first frame on).
fn waker(slot: &Arc<Mutex<Option<egui::Context>>>) -> Box<dyn Fn() + Send> {
    let slot = slot.clone();
    Box::new(move || {
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
    dialogs_tx: Sender<(DialogPurpose, Option<PathBuf>)>,
    dialogs_rx: Receiver<(DialogPurpose, Option<PathBuf>)>,
    newline: Option<&'static str>,
    ladder: LadderView,
    inspector: InspectorUi,
    speed: SpeedRun,
    exports_tx: Sender<Result<String, String>>,
    exports_rx: Receiver<Result<String, String>>,
    /// Exports running on their threads.
    exporting: usize,
    /// The side file of the session being loaded, read on a thread: (session, result).
    side_rx: Option<Receiver<SideFile>>,
    bisect: BisectRun,
    audit: AuditRun,
    train_log: TrainLogView,
    /// The path typed in the training-curves view's field.
    pub train_log_path: String,
}

impl App {
    pub fn new(opts: LaunchOptions) -> App {
        let ctx_slot: Arc<Mutex<Option<egui::Context>>> = Arc::default();
        let worker = Worker::spawn(waker(&ctx_slot));
        let (dialogs_tx, dialogs_rx) = channel();
        let (exports_tx, exports_rx) = channel();
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
                .unwrap_or_else(|| "sessions/session.ron".to_string()),
            checkpoint_path: String::new(),
            loader: Loader::default(),
            dialogs_tx,
            dialogs_rx,
            newline: None,
            ladder: Default::default(),
            inspector: InspectorUi::default(),
            speed: SpeedRun::default(),
            exports_tx,
            exports_rx,
            exporting: 0,
            side_rx: None,
            bisect: BisectRun::default(),
            audit: AuditRun::default(),
            train_log: TrainLogView::default(),
            train_log_path: String::new(),
        };
        if let Some(p) = &app.state.train_log {
            app.train_log_path = p.display().to_string();
        }
        app.state.dataset = DatasetRef { path: None, hash: Some(app.dataset.content_hash()) };
        if let Some(p) = opts.session {
            app.pending.push(Command::LoadSession(p));
        }
        if let Some(p) = opts.data {
            app.pending.push(Command::OpenDataset(p));
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

    /// True while a bisect, an audit or a log read runs.
    pub fn diagnostics_busy(&self) -> bool {
        self.bisect.is_busy() || self.audit.is_busy() || self.train_log.is_busy()
    }

    /// True while an export is being written.
    pub fn is_exporting(&self) -> bool {
        self.exporting > 0
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
        self.running.is_some() || self.needs_run || self.loader.is_busy() || self.side_rx.is_some()
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
        self.speed.poll();
        self.poll_exports();
        if self.ladder.poll() {
            let failed = self
                .ladder
                .results
                .values()
                .any(|r| r.as_ref().map_or(true, |r| r.status == crate::ladder::Status::Fail));
            if failed {
                self.say(Level::Error, "Ladder finished: a rung failed or could not run");
            } else {
                self.say(Level::Info, "Ladder finished: every implemented rung passed");
            }
        }
        self.poll_diagnostics();
        let mut cmds = std::mem::take(&mut self.pending);
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
        egui::Panel::left("controls").default_size(270.0).resizable(true).show(ui, |ui| {
            let stale = self.is_stale();
            let controls = panels::controls::Controls {
                state: &self.state,
                dataset: &self.dataset,
                data_path: &mut self.data_path,
                session_path: &mut self.session_path,
                checkpoint_path: &mut self.checkpoint_path,
                stale,
            };
            panels::controls::show(ui, controls, &mut cmds);
        });
        egui::Panel::right("ladder").default_size(380.0).resizable(true).show(ui, |ui| {
            let fault = self.state.fault(FaultTool::Ladder);
            panels::ladder::show(ui, &self.ladder, self.state.selected_rung.as_deref(), fault, &mut cmds);
            if let Some(id) = self.state.selected_rung.clone() {
                ui.separator();
                panels::ladder::inspector(ui, &self.ladder, &id);
            }
        });
        egui::CentralPanel::default().show(ui, |ui| {
            ui.horizontal(|ui| {
                for v in View::ALL {
                    if ui
                        .selectable_label(self.state.view == v, v.label())
                        .on_hover_text(Command::SetView(v).tooltip())
                        .clicked()
                    {
                        cmds.push(Command::SetView(v));
                    }
                }
            });
            ui.separator();
            match self.state.view {
                View::Sequence => self.central(ui, newline, &mut cmds),
                View::Inspector => {
                    egui::ScrollArea::vertical().id_salt("inspector_scroll").show(ui, |ui| {
                        panels::inspector::show(
                            ui,
                            &mut self.inspector,
                            &self.ladder,
                            self.state.selected_rung.as_deref(),
                            self.state.selected_tensor.as_deref(),
                            &mut cmds,
                        );
                    });
                }
                View::Speedup => panels::speed::show(ui, &self.speed, &mut cmds),
                View::Bisect => {
                    egui::ScrollArea::vertical().id_salt("bisect_scroll").show(ui, |ui| {
                        panels::bisect::show(ui, &self.state, &self.bisect, &mut cmds);
                    });
                }
                View::Audit => {
                    egui::ScrollArea::vertical().id_salt("audit_scroll").show(ui, |ui| {
                        panels::audit::show(ui, &self.state, &self.audit, &mut cmds);
                    });
                }
                View::Training => {
                    egui::ScrollArea::vertical().id_salt("training_scroll").show(ui, |ui| {
                        panels::training::show(ui, &self.train_log, &mut self.train_log_path, &mut cmds);
                    });
                }
            }
        });

        for cmd in cmds {
            self.apply(cmd);
        }
        if std::mem::take(&mut self.needs_run) {
            self.run();
        }
        if self.running.is_some()
            || self.loader.is_busy()
            || self.ladder.is_busy()
            || self.speed.is_running()
            || self.exporting > 0
            || self.diagnostics_busy()
        {
            // The threads wake us when they report; this is a fallback.
            ctx.request_repaint_after(std::time::Duration::from_millis(100));
        }
    }

    fn central(&mut self, ui: &mut egui::Ui, newline: &str, cmds: &mut Vec<Command>) {
        let Some(c) = self.computed.clone() else {
            ui.centered_and_justified(|ui| {
                ui.label(if self.running.is_some() {
                    "Computing the trace…"
                } else {
                    "Nothing computed yet: press Run"
                });
            });
            return;
        };
        let cursor = self.state.cursor.min(c.t.saturating_sub(1));
        let p = self.state.panels.clone();
        ui.horizontal(|ui| {
            ui.heading(format!("{} · {} · seed {}", c.spec.dataset_name, c.spec.config.label(), c.spec.seed));
            ui.label(format!(
                "tokens {}..{} ({} positions), loss {:.4}, computed in {:.2} s on the CPU",
                c.spec.offset,
                c.spec.offset + c.spec.len,
                c.t,
                c.loss,
                c.elapsed.as_secs_f32()
            ));
        });
        if p.stepper {
            panels::stepper::show(ui, &c, cursor, newline, cmds);
        }
        ui.separator();
        egui::ScrollArea::vertical().id_salt("central_scroll").show(ui, |ui| {
            ui.columns(2, |cols| {
                let (left, right) = cols.split_at_mut(1);
                let (left, right) = (&mut left[0], &mut right[0]);
                if p.gru {
                    left.strong(PanelId::Gru.label());
                    panels::gru::show(left, &c, cursor);
                    left.separator();
                }
                if p.attention_rows {
                    left.strong(PanelId::AttentionRows.label());
                    panels::attention::rows(left, &c, cursor, self.state.head, cmds);
                }
                if p.attention_heatmap {
                    right.strong(PanelId::AttentionHeatmap.label());
                    panels::attention::heatmap(right, &c, &mut self.attention_map, self.state.head, cursor, cmds);
                    right.separator();
                }
                if p.gradient_heatmap {
                    right.strong(PanelId::GradientHeatmap.label());
                    panels::gradient::heatmap(right, &c, &mut self.gradient_map, cursor, cmds);
                    panels::gradient::norm_plot(right, &c, cursor, cmds);
                }
            });
        });
    }

    fn keyboard(&self, ctx: &egui::Context, cmds: &mut Vec<Command>) {
        if ctx.text_edit_focused() {
            return;
        }
        for cmd in Command::KEYED {
            if let Some(key) = cmd.shortcut()
                && ctx.input_mut(|i| i.consume_key(egui::Modifiers::NONE, key))
            {
                cmds.push(cmd);
            }
        }
    }

    /// While files hover over the window, says what dropping them does.
    fn hovered_files(ctx: &egui::Context) {
        let hovered = ctx.input(|i| i.raw.hovered_files.first().and_then(|f| f.path.clone()));
        if let Some(path) = hovered {
            let painter =
                ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("drop_overlay")));
            let rect = ctx.content_rect();
            painter.rect_filled(rect, 0.0, egui::Color32::from_black_alpha(180));
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                format!("Drop to open {} as the dataset", path.display()),
                egui::FontId::proportional(22.0),
                egui::Color32::WHITE,
            );
        }
    }

    fn dropped_files(&mut self, ctx: &egui::Context, cmds: &mut Vec<Command>) {
        let dropped = ctx.input(|i| i.raw.dropped_files.first().map(|f| f.path().to_path_buf()));
        if let Some(path) = dropped {
            cmds.push(Command::OpenDataset(path));
        }
    }

    fn is_stale(&self) -> bool {
        match &self.computed {
            Some(c) => {
                let s = &self.state;
                let spec = &c.spec;
                spec.config != s.config
                    || spec.seed != s.seed
                    || spec.offset != s.offset
                    || spec.len != s.len
                    || spec.dataset_name != self.dataset.name()
            }
            None => false,
        }
    }

    fn say(&mut self, level: Level, text: impl Into<String>) {
        let text = text.into();
        if level != Level::Info {
            eprintln!("dualscope: {text}");
        }
        self.message = Some(Message { level, text });
    }

    fn poll_worker(&mut self) {
        for report in self.worker.poll() {
            match report {
                Report::Progress { generation, stage } => {
                    if let Some(r) = self.running.as_mut().filter(|r| r.generation == generation) {
                        r.stage = stage;
                    }
                }
                Report::Done { generation, result } => {
                    if self.running.as_ref().is_none_or(|r| r.generation != generation) {
                        continue; // superseded
                    }
                    self.running = None;
                    match result {
                        Ok(c) => {
                            self.state.cursor = self.state.cursor.min(c.t.saturating_sub(1));
                            self.state.head = self.state.head.min(c.cfg.heads.saturating_sub(1));
                            if self.message.as_ref().is_none_or(|m| m.level == Level::Info) {
                                let text = format!("Computed {} positions in {:.2} s", c.t, c.elapsed.as_secs_f32());
                                self.say(Level::Info, text);
                            }
                            self.computed = Some(Arc::from(c));
                        }
                        Err(e) => self.say(Level::Error, format!("cannot compute the trace: {e}")),
                    }
                }
            }
        }
    }

    fn poll_dialogs(&mut self) {
        while let Ok((purpose, path)) = self.dialogs_rx.try_recv() {
            let Some(path) = path else {
                self.say(
                    Level::Warning,
                    "no file chosen (without a desktop portal the file dialog cannot open: \
                     use --data, drop a file on the window, or type a path)",
                );
                continue;
            };
            self.pending.push(match purpose {
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
            });
        }
    }

    /// Runs a file dialog on its own thread: the portal may take a while to
    /// answer (or never appear), and the UI keeps drawing meanwhile.
    fn dialog(&mut self, purpose: DialogPurpose) {
        let tx = self.dialogs_tx.clone();
        let ctx = self.ctx_slot.lock().ok().and_then(|c| c.clone());
        let spawned = std::thread::Builder::new().name("dualscope-dialog".into()).spawn(move || {
            let d = rfd::FileDialog::new();
            let path = match purpose {
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
            };
            let _ = tx.send((purpose, path));
            if let Some(ctx) = ctx {
                ctx.request_repaint();
            }
        });
        if let Err(e) = spawned {
            self.say(Level::Error, format!("cannot start the file dialog: {e}"));
        }
    }

    /// Submits the current settings to the worker.
    fn run(&mut self) {
        self.generation += 1;
        self.running = Some(Running { generation: self.generation, stage: "queued", started: Instant::now() });
        self.worker.submit(Job {
            generation: self.generation,
            dataset: self.dataset.clone(),
            config: self.state.config,
            seed: self.state.seed,
            offset: self.state.offset,
            len: self.state.len,
            checkpoint: self.state.checkpoint.clone(),
            gpu: self.state.gpu_trace,
            token_cap: self.state.token_cap,
        });
    }

    fn poll_exports(&mut self) {
        while let Ok(r) = self.exports_rx.try_recv() {
            self.exporting = self.exporting.saturating_sub(1);
            match r {
                Ok(text) => self.say(Level::Info, text),
                Err(e) => self.say(Level::Error, format!("export failed: {e}")),
            }
        }
    }

    /// Writes the inspected tensor on a thread of its own (a large tensor's CSV takes a while).
    fn export(&mut self, format: ExportFormat, path: PathBuf) {
        let (Some(rung), Some(t)) = (self.state.selected_rung.clone(), self.inspected().cloned()) else {
            return self.say(Level::Error, "export: no tensor is selected (click a rung, then a tensor)");
        };
        if path.as_os_str().is_empty() {
            return self.say(Level::Error, "export: type a file path first");
        }
        let tx = self.exports_tx.clone();
        let wake = waker(&self.ctx_slot);
        let name = t.name.clone();
        let spawned = std::thread::Builder::new().name("dualscope-export".into()).spawn(move || {
            let _ = tx.send(inspect::export(&path, format, &rung, &t));
            wake();
        });
        match spawned {
            Ok(_) => {
                self.exporting += 1;
                self.say(Level::Info, format!("Exporting {name}…"));
            }
            Err(e) => self.say(Level::Error, format!("cannot start the export: {e}")),
        }
    }

    /// Starts the ladder on the sequence shown.
    fn run_ladder(&mut self) {
        if self.ladder.is_busy() {
            return;
        }
        let tokens = match self.dataset.window(self.state.offset, self.state.len) {
            Ok(t) => t,
            Err(e) => return self.say(Level::Error, format!("cannot run the ladder: {e}")),
        };
        let engine_fault = self.state.fault(FaultTool::Ladder);
        let input = LadderInput {
            config: self.state.config,
            seed: self.state.seed,
            dataset_hash: Some(self.dataset.content_hash()),
            offset: self.state.offset,
            len: self.state.len,
            checkpoint: self.state.checkpoint.clone(),
            fault: engine_fault.map(|f| format!("{ENGINE_FAULT_PREFIX}{}", f.name())),
        };
        let job = LadderJob {
            input,
            tokens,
            engine_fault,
            precision: self.state.precision.ladder(),
            token_cap: self.state.token_cap,
        };
        self.ladder.start(crate::ladder::ALL_RUNGS.to_vec(), job, waker(&self.ctx_slot));
        match engine_fault {
            Some(f) => self.say(Level::Info, format!("Running the ladder with the fault {} planted…", f.name())),
            None => self.say(Level::Info, "Running the ladder…"),
        }
    }

    /// The sequence's row from its offset, `len` tokens, for a bisect or an audit.
    fn row_job(&self, len: usize, tool: FaultTool) -> Result<RowJob, String> {
        let tokens = self.dataset.window(self.state.offset, len).map_err(|e| e.to_string())?;
        Ok(RowJob {
            config: self.state.config,
            seed: self.state.seed,
            checkpoint: self.state.checkpoint.clone(),
            tokens,
            fault: self.state.fault(tool),
        })
    }

    fn run_bisect(&mut self) {
        if self.bisect.is_busy() {
            return;
        }
        let max_len = self.state.bisect_max_len.max(1);
        let started = self
            .row_job(max_len + 1, FaultTool::Bisect)
            .and_then(|job| self.bisect.start(job, max_len, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, format!("Bisecting lengths up to {max_len}…")),
            Err(e) => self.say(Level::Error, format!("cannot run the bisect: {e}")),
        }
    }

    fn run_audit(&mut self) {
        if self.audit.is_busy() {
            return;
        }
        let started =
            self.row_job(self.state.len, FaultTool::Audit).and_then(|job| self.audit.start(job, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, "Auditing the CPU and GPU gradient contributions…"),
            Err(e) => self.say(Level::Error, format!("cannot run the audit: {e}")),
        }
    }

    fn poll_diagnostics(&mut self) {
        match self.bisect.poll() {
            Some(Ok(r)) => {
                let text = match (r.smallest_failing, &r.failure) {
                    (Some(l), Some(f)) => format!(
                        "Bisect: smallest failing length {l} (rung {}, position {})",
                        f.rung.as_deref().unwrap_or("-"),
                        f.position.map_or("-".into(), |p| p.to_string())
                    ),
                    _ => "Bisect: every length passed".to_string(),
                };
                self.say(Level::Info, text);
                self.state.bisect = Some(r);
            }
            Some(Err(e)) => self.say(Level::Error, format!("the bisect failed: {e}")),
            None => {}
        }
        match self.audit.poll() {
            Some(Ok(())) => {
                let r = self.audit.report.as_deref().expect("kept on success");
                let off = r.tensors.iter().filter(|t| t.verdict != crate::ladder::audit::Verdict::Noise).count();
                self.say(Level::Info, format!("Audit: {} tensors, {off} outside the f32 envelope", r.tensors.len()));
            }
            Some(Err(e)) => self.say(Level::Error, format!("the audit failed: {e}")),
            None => {}
        }
        match self.train_log.poll() {
            Some(Ok(l)) => {
                self.state.train_log = Some(l.path.clone());
                self.say(Level::Info, format!("Read {} training steps from {}", l.steps.len(), l.path.display()));
            }
            Some(Err(e)) => self.say(Level::Error, format!("cannot load the training log: {e}")),
            None => {}
        }
    }

    fn set_cursor(&mut self, pos: usize) {
        if let Some(c) = &self.computed {
            self.state.cursor = pos.min(c.t.saturating_sub(1));
        }
    }

    /// Keeps offset and length inside the dataset.
    fn clamp_sequence(&mut self) {
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
            Command::SetConfig(c) => self.state.config = c,
            Command::SetSeed(s) => self.state.seed = s,
            Command::SetPrecision(p) => self.state.precision = p,
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
                let (config, seed, ckpt) = (self.state.config, self.state.seed, self.state.checkpoint.clone());
                let precision = self.state.precision.ladder();
                self.speed.start(self.dataset.clone(), config, seed, ckpt, precision, wake);
                self.say(Level::Info, "Timing training steps on both engines…");
            }
            Command::StopSpeed => self.speed.stop(),
            Command::SetCheckpoint(p) => {
                self.state.checkpoint = p;
                self.needs_run = true;
            }
            Command::SetGpuTrace(on) => {
                self.state.gpu_trace = on;
                self.needs_run = true;
            }
            Command::SetFault(tool, f) => self.state.set_fault(tool, f),
            Command::RunBisect => self.run_bisect(),
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
            Command::TogglePanel(p) => {
                let on = self.state.panels.get_mut(p);
                *on = !*on;
            }
        }
    }

    fn set_dataset(&mut self, ds: Arc<Dataset>, path: Option<PathBuf>) {
        self.state.dataset = DatasetRef { path: path.clone(), hash: Some(ds.content_hash()) };
        self.data_path = path.map(|p| p.display().to_string()).unwrap_or_default();
        self.dataset = ds;
        self.clamp_sequence();
        self.needs_run = true;
    }

    /// Opens `path` on a loader thread; [`Self::poll_loader`] takes the result.
    fn open_dataset(&mut self, path: &Path, after: AfterOpen) {
        let ctx = self.ctx_slot.lock().ok().and_then(|c| c.clone());
        let wake = move || {
            if let Some(ctx) = &ctx {
                ctx.request_repaint();
            }
        };
        if let Err(e) = self.loader.open(path.to_path_buf(), after, wake) {
            self.say(Level::Error, e);
        }
    }

    fn poll_loader(&mut self) {
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
        let (tx, rx) = channel();
        let wake = waker(&self.ctx_slot);
        let session = session.to_path_buf();
        let probe = State { tensors_file: name, ..State::default() };
        let spawned = std::thread::Builder::new().name("dualscope-side-file".into()).spawn(move || {
            let r = session::load_side_file(&session, &probe);
            let _ = tx.send((session, r));
            wake();
        });
        match spawned {
            Ok(_) => self.side_rx = Some(rx),
            Err(e) => self.say(Level::Error, format!("cannot start reading the side file: {e}")),
        }
    }

    /// Takes the side file's tensors, once the session itself is restored (its
    /// dataset may still be opening), so that a problem is the last word in the status bar.
    fn poll_side_file(&mut self) {
        if self.loader.is_busy() {
            return;
        }
        let Some(rx) = &self.side_rx else { return };
        let Ok((session, result)) = rx.try_recv() else { return };
        self.side_rx = None;
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

    fn save_session(&mut self, path: &Path) {
        self.state.dataset.hash = Some(self.dataset.content_hash());
        let ladder = self.ladder.to_saved();
        match session::save_with_ladder(path, &self.state, ladder, &self.ladder.tensors) {
            Ok(()) => {
                self.session_path = path.display().to_string();
                self.say(Level::Info, format!("Saved the session to {}", path.display()));
            }
            Err(e) => self.say(Level::Error, e.to_string()),
        }
    }

    /// Loads a session: a file that does not parse changes nothing; a session
    /// whose dataset is missing or changed still restores everything else.
    fn load_session(&mut self, path: &Path) {
        let mut loaded = match session::load(path) {
            Ok(s) => s,
            Err(e) => return self.say(Level::Error, e.to_string()),
        };
        self.session_path = path.display().to_string();
        // The ladder results: shown as saved; the side file's tensors follow
        // from a thread (a large side file takes a while to read and summarise).
        self.side_rx = None;
        match loaded.ladder.take() {
            Some(l) => {
                self.ladder.restore(l, Default::default());
                self.read_side_file(path, loaded.tensors_file.take());
            }
            None => self.ladder.clear(),
        }
        match loaded.dataset.path.clone() {
            None => {
                if self.state.dataset.path.is_some() {
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
    fn restore_session(&mut self, loaded: State, path: &Path, mut problem: Option<String>) {
        let now = self.dataset.content_hash();
        if problem.is_none()
            && let Some(saved) = &loaded.dataset.hash
            && *saved != now
        {
            problem = Some(format!(
                "the session's dataset {} changed since it was saved (content hash {saved}, now {now})",
                self.dataset.name()
            ));
        }
        let dataset = self.state.dataset.clone();
        self.state = State { dataset, ladder: None, tensors_file: None, ..loaded };
        self.checkpoint_path = self.state.checkpoint.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        if let Some(p) = &self.state.train_log {
            self.train_log_path = p.display().to_string();
        }
        self.clamp_sequence();
        self.needs_run = true;
        match problem {
            Some(p) => self.say(Level::Warning, format!("session {}: {p}; the rest is restored", path.display())),
            None => self.say(Level::Info, format!("Loaded the session {}", path.display())),
        }
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }
}

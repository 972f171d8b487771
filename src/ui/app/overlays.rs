//! What floats over the frame: the typed-path field that stands in for a
//! file dialog when no desktop portal answers, the keyboard-shortcut overlay
//! (`?`, Esc closes it), and the window title (the open session, `*` when
//! the state differs from what was saved or opened).

use super::App;
use super::files::DialogPurpose;
use crate::ui::command::Command;

/// The typed-path field: what the file is for and the text typed so far.
pub(super) struct PathPrompt {
    purpose: DialogPurpose,
    text: String,
}

impl DialogPurpose {
    fn title(self) -> &'static str {
        match self {
            DialogPurpose::OpenDataset => "Open a dataset: type its path",
            DialogPurpose::SaveSession => "Save the session: type a path",
            DialogPurpose::LoadSession => "Load a session: type its path",
            DialogPurpose::Export => "Export the tensor: type a path (.safetensors or .csv)",
            DialogPurpose::TrainLog => "A training run's log.jsonl (or its folder): type its path",
        }
    }
}

/// The stepper's keys, as the overlay lists them (the keys the app reads).
pub fn key_lines() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> =
        Command::KEYED.iter().filter_map(|c| c.shortcut().map(|k| (key_name(k).to_string(), c.tooltip()))).collect();
    out.push(("?".into(), "Show or hide this list of shortcuts"));
    out.push(("Esc".into(), "Close this list (or the typed-path field)"));
    out
}

/// A key as the overlay writes it.
fn key_name(k: egui::Key) -> &'static str {
    match k {
        egui::Key::ArrowLeft => "Left arrow",
        egui::Key::ArrowRight => "Right arrow",
        other => other.name(),
    }
}

/// The commands the overlay lists besides the keys: the main buttons, with what they do.
fn command_lines() -> Vec<Command> {
    use std::path::PathBuf;
    vec![
        Command::Run,
        Command::WorstLoss,
        Command::WorstDivergence,
        Command::NextNonFinite,
        Command::RunLadder,
        Command::JumpToWorst,
        Command::RunBisect,
        Command::RunAudit,
        Command::RunGrowth,
        Command::RunPrecisionBisect,
        Command::StartSpeed,
        Command::OpenDatasetDialog,
        Command::SaveSession(PathBuf::new()),
        Command::SaveSessionDialog,
        Command::LoadSessionDialog,
        Command::ExportTensorDialog,
    ]
}

impl App {
    /// Opens the typed-path field for `purpose`, starting from the path the panel holds.
    pub(super) fn open_prompt(&mut self, purpose: DialogPurpose) {
        let text = match purpose {
            DialogPurpose::OpenDataset => self.data_path.clone(),
            DialogPurpose::SaveSession | DialogPurpose::LoadSession => self.session_path.clone(),
            DialogPurpose::Export => self.inspector.export_path.clone(),
            DialogPurpose::TrainLog => self.train_log_path.clone(),
        };
        self.prompt = Some(PathPrompt { purpose, text });
    }

    /// The typed-path field, while open.
    pub fn prompt_open(&self) -> bool {
        self.prompt.is_some()
    }

    pub(super) fn prompt_window(&mut self, ctx: &egui::Context, cmds: &mut Vec<Command>) {
        let Some(p) = &mut self.prompt else { return };
        let mut done: Option<bool> = None;
        egui::Window::new(p.purpose.title())
            .id(egui::Id::unique("path_prompt"))
            .collapsible(false)
            .resizable(false)
            .show(ctx, |ui| {
                ui.label("No desktop portal answered, so the system's file dialog cannot open here.");
                let r = ui.add(egui::TextEdit::singleline(&mut p.text).hint_text("file path").desired_width(420.0));
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                ui.horizontal(|ui| {
                    let ok = !p.text.trim().is_empty();
                    if ui.add_enabled(ok, egui::Button::new("OK")).on_hover_text("Use this path").clicked()
                        || (ok && enter)
                    {
                        done = Some(true);
                    }
                    if ui.button("Cancel").on_hover_text("Close this field (Esc)").clicked() {
                        done = Some(false);
                    }
                });
            });
        if ctx.input(|i| i.key_pressed(egui::Key::Escape)) {
            done = Some(false);
        }
        match done {
            Some(true) => {
                let p = self.prompt.take().expect("open");
                let cmd = self.command_for(p.purpose, p.text.trim().into());
                cmds.push(cmd);
            }
            Some(false) => self.prompt = None,
            None => {}
        }
    }

    /// Opens or closes the shortcut overlay on `?` (not while typing); Esc closes it.
    pub(super) fn help_keys(&mut self, ctx: &egui::Context) {
        if ctx.text_edit_focused() {
            return;
        }
        let question = ctx.input_mut(|i| {
            let typed = i.events.iter().any(|e| matches!(e, egui::Event::Text(t) if t == "?"));
            let key = i.consume_key(egui::Modifiers::NONE, egui::Key::Questionmark)
                || i.consume_key(egui::Modifiers::SHIFT, egui::Key::Questionmark);
            typed || key
        });
        if question {
            self.help_open = !self.help_open;
        } else if self.help_open && ctx.input(|i| i.key_pressed(egui::Key::Escape)) {
            self.help_open = false;
        }
    }

    pub(super) fn help_overlay(&mut self, ctx: &egui::Context) {
        if !self.help_open {
            return;
        }
        let mut open = true;
        egui::Window::new("Keyboard shortcuts")
            .id(egui::Id::unique("shortcuts_overlay"))
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
            .show(ctx, |ui| {
                ui.strong("Token stepper (Sequence view; not while typing in a field)");
                egui::Grid::new("shortcut_keys").num_columns(2).striped(true).show(ui, |ui| {
                    for (key, what) in key_lines() {
                        ui.monospace(key);
                        ui.label(what);
                        ui.end_row();
                    }
                });
                ui.separator();
                ui.strong("Commands");
                egui::ScrollArea::vertical().max_height(360.0).show(ui, |ui| {
                    egui::Grid::new("shortcut_commands").num_columns(2).striped(true).show(ui, |ui| {
                        for c in command_lines() {
                            ui.label(c.label());
                            ui.label(egui::RichText::new(c.tooltip()).small());
                            ui.end_row();
                        }
                    });
                });
                ui.label(egui::RichText::new("Every control explains itself when hovered.").weak().small());
            });
        self.help_open &= open;
    }

    /// The window title: the open session's file name (its folder after), `*` when unsaved.
    pub fn title(&self) -> String {
        let dirty = if self.state != self.baseline { " *" } else { "" };
        match &self.open_session {
            Some(p) => {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let dir = p.parent().map(|d| d.display().to_string()).unwrap_or_default();
                format!("{name}{dirty} ({dir}) — dualscope")
            }
            None => format!("new session{dirty} — dualscope"),
        }
    }

    /// Sends the title to the window when it changed.
    pub(super) fn keep_title(&mut self, ctx: &egui::Context) {
        let t = self.title();
        if t != self.title_sent {
            ctx.send_viewport_cmd(egui::ViewportCommand::Title(t.clone()));
            self.title_sent = t;
        }
    }
}

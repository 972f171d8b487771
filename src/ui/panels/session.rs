//! The side panel's session section: the path field (by default in the
//! per-user data folder, its full path shown), save and load, the dialogs
//! (a typed-path field stands in where no portal answers), and the recent
//! sessions, each one click away.

use std::path::{Path, PathBuf};

use egui::RichText;

use crate::session::data;
use crate::ui::command::{Command, button};

/// What the section shows besides the path field.
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionInfo<'a> {
    /// Most recent first; only files that existed when the list was read.
    pub recent: &'a [PathBuf],
    /// The session saved or opened last, if any.
    pub open: Option<&'a Path>,
}

/// A recent session's button text: the file name, then its folder.
fn recent_label(p: &Path) -> String {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = p.parent().map(|d| d.display().to_string()).unwrap_or_default();
    format!("{name}  ({dir})")
}

pub fn show(ui: &mut egui::Ui, path: &mut String, info: &SessionInfo<'_>, out: &mut Vec<Command>) {
    ui.heading("Session");
    ui.add(egui::TextEdit::singleline(path).hint_text("session file (.ron)").desired_width(f32::INFINITY))
        .on_hover_text(
            "Where \"Save session\" writes and \"Load session\" reads (a relative path is from the working directory)",
        );
    let typed = path.trim();
    let ok = !typed.is_empty();
    if ok {
        let full = data::absolute(Path::new(typed));
        ui.label(RichText::new(format!("saves to {}", full.display())).small().weak())
            .on_hover_text("The session's full path; its tensors go next to it (.tensors.safetensors)");
    }
    ui.horizontal(|ui| {
        button(ui, Command::SaveSession(typed.into()), ok, out);
        button(ui, Command::LoadSession(typed.into()), ok, out);
    });
    ui.horizontal(|ui| {
        button(ui, Command::SaveSessionDialog, true, out);
        button(ui, Command::LoadSessionDialog, true, out);
    });
    if let Some(open) = info.open {
        ui.label(RichText::new(format!("open: {}", open.display())).small());
    }
    if !info.recent.is_empty() {
        egui::CollapsingHeader::new(format!("Recent sessions ({})", info.recent.len()))
            .id_salt("recent_sessions")
            .default_open(true)
            .show(ui, |ui| {
                for p in info.recent {
                    let r = ui
                        .add(egui::Button::new(RichText::new(recent_label(p)).small()).truncate())
                        .on_hover_text(format!("Load {}", p.display()));
                    if r.clicked() {
                        out.push(Command::LoadSession(p.clone()));
                    }
                }
            });
    }
}

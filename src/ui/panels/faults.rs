//! The fault catalogue's combo box, shared by the ladder, bisect and audit.

use crate::session::state::FaultTool;
use crate::step::Fault as EngineFault;
use crate::ui::command::Command;
use crate::ui::diagnose::{fault_description, fault_label};

/// A combo box labelled `label` choosing the fault `tool` plants.
pub fn combo(ui: &mut egui::Ui, label: &str, tool: FaultTool, current: Option<EngineFault>, out: &mut Vec<Command>) {
    egui::ComboBox::from_label(label)
        .selected_text(fault_label(current))
        .width(170.0)
        .show_ui(ui, |ui| {
            if ui.selectable_label(current.is_none(), "none").on_hover_text("No fault: the engine as built").clicked() {
                out.push(Command::SetFault(tool, None));
            }
            for f in EngineFault::ALL {
                let hover = format!("{}\nexpected to be caught by rung {}", fault_description(f), f.expected_rung());
                if ui.selectable_label(current == Some(f), f.name()).on_hover_text(hover).clicked() {
                    out.push(Command::SetFault(tool, Some(f)));
                }
            }
        })
        .response
        .on_hover_text(Command::SetFault(tool, None).tooltip());
}

//! The sequence view (the stepper and the heatmaps of the computed trace),
//! and what the frame reads besides the panels: keys, hovered and dropped files.

use std::path::Path;

use super::App;
use crate::session::state::{PanelId, View};
use crate::ui::command::Command;
use crate::ui::panels;

impl App {
    /// The view tabs and the chosen view.
    pub(super) fn central_area(&mut self, ui: &mut egui::Ui, newline: &str, cmds: &mut Vec<Command>) {
        // The shortcuts button at the right, the tabs in the space left of
        // it, on a second line where a narrow window has no room for them all.
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Min), |ui| {
            if ui
                .button("Shortcuts (?)")
                .on_hover_text("List the keyboard shortcuts and the commands (key ?)")
                .clicked()
            {
                self.help_open = !self.help_open;
            }
            ui.with_layout(egui::Layout::left_to_right(egui::Align::Min).with_main_wrap(true), |ui| {
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
        });
        ui.separator();
        match self.state.view {
            // Every view scrolls rather than clipping at a small window (the
            // Sequence view's heatmaps are wider than the centre at 1280 wide).
            View::Sequence => {
                egui::ScrollArea::both().id_salt("central_scroll").show(ui, |ui| self.sequence_view(ui, newline, cmds));
            }
            View::Inspector => {
                egui::ScrollArea::vertical().id_salt("inspector_scroll").show(ui, |ui| {
                    panels::inspector::show(
                        ui,
                        &mut self.inspector,
                        &self.ladder,
                        self.state.selected_rung.as_deref(),
                        self.state.selected_tensor.as_deref(),
                        cmds,
                    );
                });
            }
            View::Speedup => {
                egui::ScrollArea::vertical()
                    .id_salt("speed_scroll")
                    .show(ui, |ui| panels::speed::show(ui, &mut self.speed, cmds));
            }
            View::Bisect => {
                egui::ScrollArea::vertical().id_salt("bisect_scroll").show(ui, |ui| {
                    panels::bisect::show(ui, &self.state, &self.bisect, cmds);
                });
            }
            View::Audit => {
                egui::ScrollArea::vertical().id_salt("audit_scroll").show(ui, |ui| {
                    panels::audit::show(ui, &self.state, &self.audit, cmds);
                });
            }
            View::Training => {
                egui::ScrollArea::vertical().id_salt("training_scroll").show(ui, |ui| {
                    panels::training::show(ui, &self.train_log, &mut self.train_log_path, cmds);
                });
            }
            View::Mutation => {
                egui::ScrollArea::vertical().id_salt("mutation_scroll").show(ui, |ui| {
                    panels::mutation::show(ui, &self.mutation, &mut self.campaign_path, cmds);
                });
            }
        }
    }

    pub(super) fn sequence_view(&mut self, ui: &mut egui::Ui, newline: &str, cmds: &mut Vec<Command>) {
        if let Some(open) = self.capture.open.clone() {
            panels::capture::show(ui, &open, &self.capture.replay, self.capture_row(), self.state.cursor, cmds);
            ui.separator();
        }
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
        ui.horizontal_wrapped(|ui| {
            let model = match (&self.capture.open, self.capture_row()) {
                (Some(_), Some(row)) => format!("row {row} · the capture's weights"),
                (Some(_), None) => "the capture's weights".to_string(),
                (None, _) => format!("{} · {}", c.spec.config.label(), c.spec.model),
            };
            ui.heading(format!("{} · {model}", c.spec.dataset_name));
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
        self.growth_section(ui, cursor, cmds);
        ui.separator();
        {
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
        }
    }

    pub(super) fn keyboard(&self, ctx: &egui::Context, cmds: &mut Vec<Command>) {
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
    pub(super) fn hovered_files(ctx: &egui::Context) {
        let hovered = ctx.input(|i| i.raw.hovered_files.first().and_then(|f| f.path.clone()));
        if let Some(path) = hovered {
            let painter =
                ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("drop_overlay")));
            let rect = ctx.content_rect();
            painter.rect_filled(rect, 0.0, egui::Color32::from_black_alpha(180));
            let what = if is_capture(&path) { "the capture" } else { "the dataset" };
            painter.text(
                rect.center(),
                egui::Align2::CENTER_CENTER,
                format!("Drop to open {} as {what}", path.display()),
                egui::FontId::proportional(22.0),
                egui::Color32::WHITE,
            );
        }
    }

    pub(super) fn dropped_files(&mut self, ctx: &egui::Context, cmds: &mut Vec<Command>) {
        let dropped = ctx.input(|i| i.raw.dropped_files.first().map(|f| f.path().to_path_buf()));
        if let Some(path) = dropped {
            cmds.push(if is_capture(&path) { Command::OpenCapture(path) } else { Command::OpenDataset(path) });
        }
    }

    pub(super) fn is_stale(&self) -> bool {
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
}

/// A dropped path that is a capture: a folder holding `capture.json`, or the
/// `capture.json` itself.
pub(super) fn is_capture(path: &Path) -> bool {
    let meta = crate::capture::META_FILE;
    (path.is_dir() && path.join(meta).is_file()) || (path.is_file() && path.file_name().is_some_and(|n| n == meta))
}

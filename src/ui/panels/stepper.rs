//! The token stepper: cursor controls, the text around the cursor, and what the
//! model predicts there.

use egui::text::{LayoutJob, TextFormat};
use egui::{Color32, FontId, RichText};

use super::text;
use crate::ui::command::{Command, button};
use crate::ui::computed::Computed;
use crate::ui::heatmap::fmt_value;

/// Bytes of context shown on each side of the cursor.
const CONTEXT: usize = 48;

pub fn show(ui: &mut egui::Ui, c: &Computed, cursor: usize, newline: &str, out: &mut Vec<Command>) {
    let last = c.t.saturating_sub(1);
    ui.horizontal(|ui| {
        button(ui, Command::CursorFirst, cursor > 0, out);
        button(ui, Command::StepCursor(-1), cursor > 0, out);
        button(ui, Command::StepCursor(1), cursor < last, out);
        button(ui, Command::CursorLast, cursor < last, out);
        ui.separator();
        let any_bad = (0..c.t).any(|p| c.non_finite_at(p));
        button(ui, Command::NextNonFinite, any_bad, out);
        button(ui, Command::WorstLoss, c.t > 0, out);
        button(ui, Command::WorstDivergence, c.gpu.is_ok() && c.t > 0, out);
        ui.separator();
        ui.spacing_mut().slider_width = (ui.available_width() - 140.0).clamp(120.0, 600.0);
        let mut pos = cursor;
        let slider = egui::Slider::new(&mut pos, 0..=last).text("position").clamping(egui::SliderClamping::Always);
        if ui.add(slider).changed() {
            out.push(Command::SetCursor(pos));
        }
    });
    context_line(ui, c, cursor, newline);
    // A vertical separator here would stretch to the bottom of the panel: use space.
    ui.horizontal_top(|ui| {
        values_grid(ui, c, cursor, newline);
        ui.add_space(32.0);
        top_k_grid(ui, c, cursor, newline);
    });
}

/// The text around the cursor: the input byte highlighted, its target outlined.
fn context_line(ui: &mut egui::Ui, c: &Computed, cursor: usize, newline: &str) {
    let font = FontId::monospace(15.0);
    let normal = TextFormat { font_id: font.clone(), color: ui.visuals().text_color(), ..Default::default() };
    let weak = TextFormat { color: ui.visuals().weak_text_color(), ..normal.clone() };
    let current = TextFormat { background: Color32::from_rgb(255, 140, 0), color: Color32::BLACK, ..normal.clone() };
    let target = TextFormat {
        underline: egui::Stroke::new(2.0, Color32::from_rgb(90, 200, 120)),
        color: Color32::from_rgb(120, 230, 150),
        ..normal.clone()
    };
    let from = cursor.saturating_sub(CONTEXT);
    let to = (cursor + CONTEXT).min(c.tokens.len() - 1);
    let mut job = LayoutJob::default();
    if from > 0 {
        job.append("…", 0.0, weak.clone());
    }
    for i in from..=to {
        let b = c.tokens[i];
        let is_escape = !(0x20..=0x7e).contains(&b);
        let fmt = match i {
            _ if i == cursor => current.clone(),
            _ if i == cursor + 1 => target.clone(),
            _ if is_escape => weak.clone(),
            _ => normal.clone(),
        };
        job.append(&text::byte(b, newline), 0.0, fmt);
    }
    if to + 1 < c.tokens.len() {
        job.append("…", 0.0, weak);
    }
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_min_width(ui.available_width());
        ui.label(job);
    });
}

fn values_grid(ui: &mut egui::Ui, c: &Computed, pos: usize, newline: &str) {
    egui::Grid::new("stepper_values").num_columns(2).striped(true).show(ui, |ui| {
        let row = |ui: &mut egui::Ui, k: &str, v: String| {
            ui.label(k);
            ui.label(RichText::new(v).monospace());
            ui.end_row();
        };
        row(ui, "position", format!("{pos} of {}", c.t));
        row(ui, "input byte", format!("{} (0x{:02x})", text::quoted(c.tokens[pos], newline), c.tokens[pos]));
        let tgt = c.tokens[pos + 1];
        row(ui, "target byte", format!("{} (0x{tgt:02x})", text::quoted(tgt, newline)));
        row(ui, "token loss", fmt_value(c.scalar("loss.token", pos)));
        row(ui, "ctx grad norm", fmt_value(c.scalar("ctx.token_norm", pos)));
        let guard = match c.token_cap {
            None => "off".to_string(),
            Some(tau) => {
                let here = c.scalar("ctx.token_norm", pos) as f64 > tau;
                format!("tau {tau}: {} of {} positions capped{}", c.capped, c.t, if here { " (this one)" } else { "" })
            }
        };
        row(ui, "per-token guard", guard);
        let bad = match (c.non_finite[pos], c.gpu.as_ref().map(|g| g.non_finite[pos])) {
            (true, Ok(true)) => "CPU and GPU",
            (true, _) => "CPU",
            (false, Ok(true)) => "GPU",
            _ => "no",
        };
        row(ui, "non-finite here", bad.to_string());
        if let Ok(g) = &c.gpu {
            row(ui, "max |GPU - CPU|", fmt_value(g.divergence[pos]));
        }
        row(ui, "sequence loss", format!("{:.4}", c.loss));
    });
}

fn top_k_grid(ui: &mut egui::Ui, c: &Computed, pos: usize, newline: &str) {
    let target = c.tokens[pos + 1];
    ui.vertical(|ui| {
        ui.label(RichText::new("Top-5 next byte").strong());
        egui::Grid::new("stepper_topk").num_columns(3).striped(true).show(ui, |ui| {
            for (rank, (b, p)) in c.top_k(pos, 5).into_iter().enumerate() {
                ui.label(format!("{}.", rank + 1));
                let t = RichText::new(text::quoted(b, newline)).monospace();
                ui.label(if b == target { t.color(Color32::from_rgb(120, 230, 150)).strong() } else { t });
                ui.label(RichText::new(format!("{:.4}", p)).monospace());
                ui.end_row();
            }
        });
    });
}

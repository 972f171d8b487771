//! The training-curves view: a `dualscope train --out DIR` run's loss,
//! gradient norm and skipped steps over the steps, and the controller's
//! actions with their reasons.

use std::path::PathBuf;

use egui::{Color32, RichText};
use egui_plot::{Legend, Line, Plot, PlotPoints, Points};

use crate::ui::command::{Command, button};
use crate::ui::diagnose::TrainLogView;

pub fn show(ui: &mut egui::Ui, view: &TrainLogView, path: &mut String, out: &mut Vec<Command>) {
    ui.heading("Training curves");
    ui.horizontal(|ui| {
        ui.label("log");
        ui.add(egui::TextEdit::singleline(path).desired_width(420.0).hint_text("DIR or DIR/log.jsonl"))
            .on_hover_text("A `dualscope train --out DIR` run's directory or its log.jsonl");
        let p = PathBuf::from(path.trim());
        button(ui, Command::LoadTrainLog(p), !path.trim().is_empty() && !view.is_busy(), out);
        button(ui, Command::TrainLogDialog, !view.is_busy(), out);
        if view.is_busy() {
            ui.spinner();
        }
    });
    ui.separator();
    let Some(log) = view.log.as_deref() else {
        ui.label("No log loaded: type a run's directory (or its log.jsonl) and press \"Load log\".");
        return;
    };
    let skipped: Vec<_> = log.steps.iter().filter(|s| s.skipped.is_some()).collect();
    let last = log.steps.last().expect("a log has steps");
    ui.label(format!(
        "{}: {} steps (up to step {}), {} skipped, {} controller actions, last loss {:.4}{}",
        log.path.display(),
        log.steps.len(),
        last.step,
        skipped.len(),
        log.actions.len(),
        last.loss,
        if log.bad_lines > 0 { format!(", {} unreadable lines", log.bad_lines) } else { String::new() }
    ));
    let series = |f: &dyn Fn(&crate::ui::diagnose::LogStep) -> f64| -> PlotPoints {
        log.steps.iter().filter(|s| f(s).is_finite()).map(|s| [s.step as f64, f(s)]).collect()
    };
    let skip_marks = |f: &dyn Fn(&crate::ui::diagnose::LogStep) -> f64| -> PlotPoints {
        skipped.iter().map(|s| [s.step as f64, if f(s).is_finite() { f(s) } else { 0.0 }]).collect()
    };
    let red = Color32::from_rgb(230, 60, 60);
    let blue = Color32::from_rgb(100, 160, 240);
    ui.strong("loss");
    Plot::new("train_loss_plot").height(170.0).legend(Legend::default()).x_axis_label("step").show(ui, |p| {
        p.line(Line::new("loss", series(&|s| s.loss)).color(blue));
        p.points(Points::new("skipped", skip_marks(&|s| s.loss)).color(red).radius(4.0));
    });
    ui.strong("gradient norm (unscaled, before clipping)");
    Plot::new("train_norm_plot").height(170.0).legend(Legend::default()).x_axis_label("step").show(ui, |p| {
        p.line(Line::new("grad norm", series(&|s| s.grad_norm)).color(blue));
        p.points(Points::new("skipped", skip_marks(&|s| s.grad_norm)).color(red).radius(4.0));
    });
    ui.strong("skipped steps (cumulative)");
    let mut n = 0.0;
    let cumulative: PlotPoints = log
        .steps
        .iter()
        .map(|s| {
            n += if s.skipped.is_some() { 1.0 } else { 0.0 };
            [s.step as f64, n]
        })
        .collect();
    Plot::new("train_skip_plot").height(100.0).include_y(0.0).x_axis_label("step").show(ui, |p| {
        p.line(Line::new("skipped", cumulative).color(red));
    });
    ui.separator();
    ui.strong(format!("controller actions ({})", log.actions.len()));
    if log.actions.is_empty() {
        ui.label(RichText::new("none: every step was applied as it came").weak());
        return;
    }
    egui::ScrollArea::vertical().id_salt("train_actions").max_height(200.0).show(ui, |ui| {
        egui::Grid::new("train_actions_grid").striped(true).num_columns(3).show(ui, |ui| {
            for h in ["step", "action", "reason"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for a in &log.actions {
                ui.label(format!("{}", a.step));
                ui.label(RichText::new(&a.action).color(Color32::YELLOW));
                ui.label(&a.reason);
                ui.end_row();
            }
        });
    });
}

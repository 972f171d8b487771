//! The training-curves view: a `dualscope train --out DIR` run's loss,
//! gradient norm and skipped steps over the steps, and the controller's
//! actions with their reasons; steps with a capture are marked, and a click
//! opens the capture.

use std::path::PathBuf;

use egui::{Color32, RichText};
use egui_plot::{Legend, Line, MarkerShape, Plot, PlotPoints, Points};

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
    if let Some((r, file)) = &view.drift {
        drift(ui, view, r, file, out);
        return;
    }
    let Some(log) = view.log.as_deref() else {
        ui.label(
            "No log loaded: type a run's directory (or its log.jsonl), or a `dualscope drift --out DIR` \
             directory (or its drift.json), and press \"Load log\".",
        );
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
    // Steps with a capture, at the step's value (0 where it has none).
    let capture_marks = |f: &dyn Fn(&crate::ui::diagnose::LogStep) -> f64| -> PlotPoints {
        view.captures
            .keys()
            .map(|&step| {
                let v = log.steps.iter().find(|s| s.step == step).map_or(0.0, f);
                [step as f64, if v.is_finite() { v } else { 0.0 }]
            })
            .collect()
    };
    let red = Color32::from_rgb(230, 60, 60);
    let blue = Color32::from_rgb(100, 160, 240);
    let green = Color32::from_rgb(90, 220, 120);
    ui.strong("loss");
    Plot::new("train_loss_plot").height(170.0).legend(Legend::default()).x_axis_label("step").show(ui, |p| {
        p.line(Line::new("loss", series(&|s| s.loss)).color(blue));
        p.points(Points::new("skipped", skip_marks(&|s| s.loss)).color(red).radius(4.0));
        p.points(captured("captured", capture_marks(&|s| s.loss), green));
    });
    ui.strong("gradient norm (unscaled, before clipping)");
    Plot::new("train_norm_plot").height(170.0).legend(Legend::default()).x_axis_label("step").show(ui, |p| {
        p.line(Line::new("grad norm", series(&|s| s.grad_norm)).color(blue));
        p.points(Points::new("skipped", skip_marks(&|s| s.grad_norm)).color(red).radius(4.0));
        p.points(captured("captured", capture_marks(&|s| s.grad_norm), green));
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
    ui.strong(format!("controller actions ({}), {} captures", log.actions.len(), view.captures.len()));
    if let Some(e) = &view.captures_error {
        ui.colored_label(red, format!("the captures cannot be listed: {e}"));
    }
    if log.actions.is_empty() {
        ui.label(RichText::new("none: every step was applied as it came").weak());
    } else {
        egui::ScrollArea::vertical().id_salt("train_actions").max_height(200.0).show(ui, |ui| {
            egui::Grid::new("train_actions_grid").striped(true).num_columns(4).show(ui, |ui| {
                for h in ["step", "action", "reason", "capture"] {
                    ui.label(RichText::new(h).strong());
                }
                ui.end_row();
                for a in &log.actions {
                    ui.label(format!("{}", a.step));
                    ui.label(RichText::new(&a.action).color(Color32::YELLOW));
                    ui.label(&a.reason);
                    match view.captures.get(&a.step) {
                        Some(dir) => _ = button(ui, Command::OpenCapture(dir.clone()), true, out),
                        None => _ = ui.label(""),
                    }
                    ui.end_row();
                }
            });
        });
    }
    // Captures of steps without an action (asked for with --capture-at, say).
    let others: Vec<_> = view.captures.iter().filter(|(s, _)| !log.actions.iter().any(|a| a.step == **s)).collect();
    if !others.is_empty() {
        ui.horizontal_wrapped(|ui| {
            ui.label("other captures:");
            for (step, dir) in others {
                if ui.link(format!("step {step}")).on_hover_text(Command::OpenCapture(dir.clone()).tooltip()).clicked()
                {
                    out.push(Command::OpenCapture(dir.clone()));
                }
            }
        });
    }
}

/// The marker of a step with a capture: an open diamond, apart from the skip dots.
fn captured<'a>(name: &'static str, pts: PlotPoints<'a>, color: Color32) -> Points<'a> {
    Points::new(name, pts).color(color).shape(MarkerShape::Diamond).filled(false).radius(7.0)
}

/// A `dualscope drift` run: its summary and plot, and its capture of the
/// first step outside the envelope.
fn drift(
    ui: &mut egui::Ui,
    view: &TrainLogView,
    r: &crate::triage::drift::DriftReport,
    file: &std::path::Path,
    out: &mut Vec<Command>,
) {
    ui.label(format!(
        "{}: drift of {} steps, {} on {}, {} rows × {} positions",
        file.display(),
        r.steps.len(),
        r.precision.name(),
        r.gemm_path,
        r.rows,
        r.t
    ));
    if let Some(o) = &r.first_outside
        && let Some(c) = view.captures.get(&o.step)
    {
        button(ui, Command::OpenCapture(c.clone()), true, out);
    }
    super::drift::drift_plot(ui, r);
}

//! The ladder panel: the eleven rungs of docs/model.md and the end-to-end step as a
//! checklist; and the selected rung's cases, which the inspector view shows
//! (there the wide table has the central area's width, and it goes away
//! with the view).

use egui::{Color32, RichText};

use crate::ladder::{self, RungResult, Status};
use crate::session::state::FaultTool;
use crate::step::Fault as EngineFault;
use crate::ui::command::{Command, button};
use crate::ui::ladder_run::LadderView;

fn status_rich(status: Status) -> RichText {
    match status {
        Status::Pass => RichText::new("pass").color(Color32::LIGHT_GREEN),
        Status::Warn => RichText::new("warn").color(Color32::YELLOW),
        // Not a pass: nothing ran (a kernel this device lacks).
        Status::NotRun => RichText::new("not run").color(Color32::from_rgb(200, 140, 255)).italics(),
        Status::Fail => RichText::new("FAIL").color(Color32::LIGHT_RED).strong(),
    }
}

fn status_text(view: &LadderView, id: &str) -> RichText {
    if !ladder::IMPLEMENTED.contains(&id) {
        return RichText::new("not implemented").color(Color32::GRAY);
    }
    if view.running == Some(id) {
        return RichText::new("running…").color(Color32::LIGHT_BLUE);
    }
    match view.results.get(id) {
        None => RichText::new("not run").color(Color32::GRAY),
        Some(Err(_)) => RichText::new("error").color(Color32::LIGHT_RED),
        Some(Ok(r)) => status_rich(r.status),
    }
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// The checklist. Clicking a rung's name selects it for the inspector.
/// `capture` describes the open capture the next run checks, if one is open.
pub fn show(
    ui: &mut egui::Ui,
    view: &LadderView,
    selected: Option<&str>,
    fault: Option<EngineFault>,
    capture: Option<&str>,
    cmds: &mut Vec<Command>,
) {
    ui.heading("Ladder");
    ui.add_enabled_ui(!view.is_busy(), |ui| super::faults::combo(ui, "Fault", FaultTool::Ladder, fault, cmds));
    ui.horizontal(|ui| {
        button(ui, Command::RunLadder, !view.is_busy(), cmds);
        if let (true, Some(t)) = (view.is_busy(), view.started) {
            ui.spinner();
            ui.label(format!("{:.1} s", t.elapsed().as_secs_f64()));
        }
    });
    match &view.input {
        Some(input) => {
            let text = format!("GPU vs CPU, f32, on {}", input.describe());
            let text = RichText::new(text).small();
            ui.label(if input.fault.is_some() { text.color(Color32::from_rgb(230, 180, 40)) } else { text.weak() });
        }
        None => {
            let on = capture.map_or("the sequence shown (one row)".to_string(), |c| format!("the batch of {c}"));
            ui.label(RichText::new(format!("GPU vs CPU, f32, on {on}")).small().weak());
        }
    }
    if let Some(f) = view.planted() {
        let expected = f.expected_rung();
        ui.label(RichText::new(format!("planted: {} (expected to fail first: {expected})", f.name())).strong());
        if !view.is_busy() {
            match view.first_failed() {
                Some(id) if id == expected => {
                    ui.colored_label(Color32::LIGHT_GREEN, format!("first failed: {id}, as expected"));
                }
                Some(id) => {
                    ui.colored_label(Color32::LIGHT_RED, format!("first failed: {id}, NOT {expected}"));
                }
                None if view.results.is_empty() => {}
                None => {
                    ui.colored_label(Color32::LIGHT_RED, "no rung failed: the fault was NOT caught");
                }
            }
        }
    }
    egui::Grid::new("ladder_grid").striped(true).num_columns(5).show(ui, |ui| {
        ui.label("#");
        ui.label("rung");
        ui.label("status");
        ui.label("rel L2 / tol");
        ui.label("GPU / CPU ms");
        ui.end_row();
        for (i, id) in ladder::ALL_RUNGS.iter().enumerate() {
            ui.label(format!("{}", i + 1));
            let is_selected = selected == Some(*id);
            if ui
                .selectable_label(is_selected, *id)
                .on_hover_text("Inspect this rung's tensors (click again to close)")
                .clicked()
            {
                cmds.push(Command::SelectRung((!is_selected).then(|| id.to_string())));
            }
            ui.label(status_text(view, id));
            match view.results.get(*id) {
                Some(Ok(r)) => {
                    ui.label(format!("{:.1e} / {:.0e}", r.rel_l2, r.tolerance));
                    ui.label(format!("{} / {}", ms(r.gpu_ms), ms(Some(r.cpu_ms))));
                }
                _ => {
                    ui.label("");
                    ui.label("");
                }
            }
            ui.end_row();
        }
        ui.label("");
        ui.label("end-to-end");
        match &view.end_to_end {
            None => {
                ui.label(RichText::new("not run").color(Color32::GRAY));
            }
            Some(Err(_)) => {
                ui.label(RichText::new("error").color(Color32::LIGHT_RED));
            }
            Some(Ok(e)) => {
                ui.label(status_rich(e.status)).on_hover_text(e.notes.join("\n"));
                ui.label(format!("loss {:.1e} / {:.0e}", e.loss_rel_err, e.loss_tolerance))
                    .on_hover_text(format!("gradient norms differ by {:.2e} relative", e.grad_norm_rel_diff));
                ui.label(format!("{} / {}", ms(e.gpu_ms), ms(Some(e.cpu_ms))));
            }
        }
        ui.end_row();
    });
}

/// The selected rung: its verdict and every case, worst first.
pub fn inspector(ui: &mut egui::Ui, view: &LadderView, id: &str) {
    ui.label(RichText::new("click the rung's name in the ladder panel again to close").small().weak());
    match view.results.get(id) {
        None if !ladder::IMPLEMENTED.contains(&id) => {
            ui.label(format!("Rung {id} is not implemented yet; implemented: {}.", ladder::IMPLEMENTED.join(", ")));
        }
        None => {
            ui.label("Not run yet: press \"Run ladder\".");
        }
        Some(Err(e)) => {
            ui.colored_label(Color32::LIGHT_RED, e);
        }
        Some(Ok(r)) => cases(ui, r),
    }
}

fn cases(ui: &mut egui::Ui, r: &RungResult) {
    ui.label(format!(
        "{} cases, worst rel L2 {:.3e} (tolerance {:.1e}), max abs error {:.3e}, sentinels {}, non-finite CPU/GPU {}/{}",
        r.cases.len(),
        r.rel_l2,
        r.tolerance,
        r.max_abs_err,
        if r.sentinel_ok { "intact" } else { "OVERWRITTEN" },
        r.non_finite_cpu,
        r.non_finite_gpu
    ));
    let mut order: Vec<usize> = (0..r.cases.len()).collect();
    order.sort_by(|&a, &b| {
        (r.cases[b].rel_l2 / r.cases[b].tolerance).total_cmp(&(r.cases[a].rel_l2 / r.cases[a].tolerance))
    });
    egui::ScrollArea::both().id_salt("rung_cases_scroll").max_height(220.0).show(ui, |ui| {
        egui::Grid::new("rung_cases").striped(true).num_columns(8).show(ui, |ui| {
            for h in
                ["status", "case", "shape", "rel L2", "CPU f32 rel L2", "max abs (index)", "non-finite", "GPU / CPU ms"]
            {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for &i in &order {
                let c = &r.cases[i];
                ui.label(status_rich(c.status)).on_hover_text(c.notes.join("\n"));
                ui.label(&c.name);
                ui.label(RichText::new(&c.params).monospace());
                ui.label(format!("{:.3e}", c.rel_l2));
                ui.label(format!("{:.3e}", c.rel_l2_cpu_f32));
                ui.label(format!("{:.3e} ({})", c.max_abs_err, c.max_abs_index));
                ui.label(format!("{}/{}", c.non_finite_cpu, c.non_finite_gpu));
                ui.label(format!("{} / {:.2}", ms(c.gpu_ms), c.cpu_ms));
                ui.end_row();
            }
        });
    });
}

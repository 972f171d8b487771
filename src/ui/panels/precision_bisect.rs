//! The precision bisect beside the precision map editor: its button, each
//! probe as a row (the stages it kept in f32, pass or fail, where it failed),
//! the result and "apply this map".

use egui::{Color32, RichText};

use crate::ladder::{MapProbe, Outcome};
use crate::ui::command::{Command, button};
use crate::ui::precision_bisect_run::PrecisionBisectRun;

fn probes(ui: &mut egui::Ui, list: &[MapProbe]) {
    egui::ScrollArea::vertical().id_salt("precision_bisect_probes").max_height(220.0).show(ui, |ui| {
        egui::Grid::new("precision_bisect_grid").striped(true).num_columns(5).show(ui, |ui| {
            for h in ["#", "phase", "result", "kept in f32", "first failure"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for (i, p) in list.iter().enumerate() {
                ui.label(format!("{}", i + 1));
                ui.label(&p.phase);
                if p.pass {
                    ui.label(RichText::new("pass").color(Color32::LIGHT_GREEN));
                } else {
                    ui.label(RichText::new("FAIL").color(Color32::LIGHT_RED).strong());
                }
                ui.label(if p.f32_stages.is_empty() { "none".to_string() } else { p.f32_stages.join(", ") });
                let at =
                    p.rung.as_ref().map_or("-".to_string(), |r| format!("{r}: {}", p.tensor.as_deref().unwrap_or("")));
                ui.label(at).on_hover_text(format!("{:.0} ms; map {}", p.ms, p.map));
                ui.end_row();
            }
        });
    });
}

pub fn show(ui: &mut egui::Ui, run: &PrecisionBisectRun, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        button(ui, Command::RunPrecisionBisect, !run.is_busy(), out);
        if let (true, Some(t)) = (run.is_busy(), run.started) {
            ui.spinner();
            ui.label(format!("{} probes, {:.0} s", run.probes.len(), t.elapsed().as_secs_f64()));
        }
    });
    let shown = if run.is_busy() { &run.probes[..] } else { run.report.as_ref().map_or(&[][..], |r| &r.probes[..]) };
    if !shown.is_empty() {
        probes(ui, shown);
    }
    let Some(r) = run.report.as_ref().filter(|_| !run.is_busy()) else { return };
    let line = match r.outcome {
        Outcome::AllF16Passes => "every candidate stage passes in f16: nothing must stay in f32".to_string(),
        Outcome::Found => format!("keep in f32: {}", r.keep_f32.join(", ")),
        Outcome::NotPrecision => "even every stage in f32 fails: not a precision problem".to_string(),
        Outcome::Cancelled => "cancelled".to_string(),
    };
    let colour = if r.map.is_some() { Color32::LIGHT_GREEN } else { Color32::LIGHT_RED };
    ui.label(RichText::new(line).strong().color(colour));
    if let Some(m) = &r.map {
        let cmd = Command::SetPrecisionMap(Some(m.clone()));
        if ui.button("Apply this map").on_hover_text(cmd.tooltip()).clicked() {
            out.push(cmd);
        }
    }
}

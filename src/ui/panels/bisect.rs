//! The length bisect: the fault, the longest length, each probe as it
//! arrives and the smallest failing length with where it fails.

use egui::{Color32, RichText};

use crate::ladder::{BisectReport, Probe};
use crate::session::state::{FaultTool, MAX_LEN, State};
use crate::ui::command::{Command, button};
use crate::ui::diagnose::BisectRun;

fn opt<T: std::fmt::Display>(x: &Option<T>) -> String {
    x.as_ref().map_or("-".into(), |v| v.to_string())
}

fn token(t: Option<u8>) -> String {
    match t {
        Some(b) if b.is_ascii_graphic() => format!("{b} '{}'", b as char),
        Some(b) => format!("{b}"),
        None => "-".into(),
    }
}

fn probes(ui: &mut egui::Ui, list: &[Probe]) {
    egui::ScrollArea::vertical().id_salt("bisect_probes").max_height(300.0).show(ui, |ui| {
        egui::Grid::new("bisect_grid").striped(true).num_columns(7).show(ui, |ui| {
            for h in ["#", "length", "result", "rung", "tensor", "position", "token"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for (i, p) in list.iter().enumerate() {
                ui.label(format!("{}", i + 1));
                ui.label(format!("{}", p.len));
                if p.failed {
                    ui.label(RichText::new("FAIL").color(Color32::LIGHT_RED).strong());
                } else {
                    ui.label(RichText::new("pass").color(Color32::LIGHT_GREEN));
                }
                ui.label(opt(&p.rung));
                ui.label(opt(&p.tensor));
                ui.label(opt(&p.position));
                ui.label(token(p.token));
                ui.end_row();
            }
        });
    });
}

fn result(ui: &mut egui::Ui, r: &BisectReport, out: &mut Vec<Command>) {
    ui.label(format!("fault: {}", r.fault.as_deref().unwrap_or("none")));
    let Some(len) = r.smallest_failing else {
        ui.colored_label(Color32::LIGHT_GREEN, format!("every length passed (longest tried: {})", opt(&r.last_good)));
        return;
    };
    ui.label(RichText::new(format!("smallest failing length: {len}")).strong().color(Color32::LIGHT_RED));
    ui.label(format!("last good length: {}", opt(&r.last_good)));
    if let Some(f) = &r.failure {
        ui.label(format!(
            "first rung {}, tensor {}, position {}, token {}{}",
            opt(&f.rung),
            opt(&f.tensor),
            opt(&f.position),
            token(f.token),
            f.position_rel_l2.map_or(String::new(), |e| format!(" (rel L2 {e:.2e} there)"))
        ));
        if let Some(p) = f.position {
            button(ui, Command::GoToPosition(p), true, out);
        }
    }
}

pub fn show(ui: &mut egui::Ui, state: &State, run: &BisectRun, out: &mut Vec<Command>) {
    ui.heading("Length bisect");
    ui.label(
        RichText::new(
            "Rungs 2-11 on the row capped at 64, 128, ... positions, then a binary search between the last good \
             and the first bad length.",
        )
        .small()
        .weak(),
    );
    ui.horizontal(|ui| {
        ui.add_enabled_ui(!run.is_busy(), |ui| {
            super::faults::combo(ui, "Bisect fault", FaultTool::Bisect, state.fault(FaultTool::Bisect), out);
            let mut max = state.bisect_max_len;
            ui.label("max length");
            if ui
                .add(egui::DragValue::new(&mut max).range(1..=MAX_LEN))
                .on_hover_text(Command::SetBisectMaxLen(0).tooltip())
                .changed()
            {
                out.push(Command::SetBisectMaxLen(max));
            }
        });
        button(ui, Command::RunBisect, !run.is_busy(), out);
        if let (true, Some(t)) = (run.is_busy(), run.started) {
            ui.spinner();
            ui.label(format!("{:.1} s", t.elapsed().as_secs_f64()));
        }
    });
    ui.label(
        RichText::new(format!(
            "on tokens {}..{} of the dataset (the sequence's offset), model from the sequence's config and seed",
            state.offset,
            state.offset + state.bisect_max_len + 1
        ))
        .small()
        .weak(),
    );
    ui.separator();
    if run.is_busy() {
        ui.label(format!("probes so far ({}):", run.probes.len()));
        probes(ui, &run.probes);
        return;
    }
    match &state.bisect {
        None => {
            ui.label("No bisect yet: press \"Run bisect\".");
        }
        Some(r) => {
            result(ui, r, out);
            ui.separator();
            ui.label(format!("probes ({}):", r.probes.len()));
            probes(ui, &r.probes);
        }
    }
}

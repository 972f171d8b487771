//! The *Detection power* view: a `dualscope mutate` campaign's score, per
//! kernel file, and its survivors (missed by tolerance, equivalent on these
//! inputs) with each one's diff and a button that opens its mutated kernels
//! in a second window, with the ladder and the inspector on them.

use std::path::PathBuf;

use egui::{Color32, RichText};

use crate::mutate::campaign::Outcome;
use crate::mutate::read::Campaign;
use crate::ui::command::{Command, button};
use crate::ui::mutation_view::MutationView;

pub fn show(ui: &mut egui::Ui, view: &MutationView, path: &mut String, out: &mut Vec<Command>) {
    ui.heading("Detection power");
    ui.horizontal(|ui| {
        ui.label("campaign");
        ui.add(egui::TextEdit::singleline(path).desired_width(420.0).hint_text("DIR or DIR/report.json"))
            .on_hover_text("A `dualscope mutate --out DIR` folder, or its report.json");
        let p = PathBuf::from(path.trim());
        button(ui, Command::LoadCampaign(p), !path.trim().is_empty() && !view.is_busy(), out);
        if view.is_busy() {
            ui.spinner();
        }
    });
    ui.separator();
    let Some(c) = view.campaign.as_deref() else {
        ui.label(
            "No campaign loaded. Run `dualscope mutate --out DIR` (docs/mutation.md), then type DIR here and \
             press \"Load campaign\": the score, every survivor with its diff, and a button that opens a \
             survivor's kernels with the ladder.",
        );
        return;
    };
    summary(ui, c);
    ui.separator();
    ui.columns(2, |cols| {
        let (left, right) = cols.split_at_mut(1);
        kernels(&mut left[0], c);
        survivors(&mut right[0], c, view.selected.as_deref(), out);
    });
    ui.separator();
    selected(ui, c, view.selected.as_deref(), out);
}

fn summary(ui: &mut egui::Ui, c: &Campaign) {
    let t = c.total();
    ui.label(RichText::new(format!("mutation score {}", t.score_line())).strong().color(if t.missed == 0 {
        Color32::from_rgb(90, 220, 120)
    } else {
        Color32::from_rgb(240, 170, 60)
    }));
    ui.label(format!(
        "{} mutants: {} killed, {} timed out, {} crashed, {} missed by tolerance, {} equivalent on these inputs, \
         {} stillborn, {} with the clean SPIR-V{}",
        t.mutants,
        t.killed,
        t.timeout,
        t.crashed,
        t.missed,
        t.equivalent,
        t.stillborn,
        t.same_spirv,
        if c.finished { "" } else { " (not finished: the results stored so far)" }
    ));
    if !c.suites.is_empty() {
        ui.label(format!("suites: {}", c.suites.join(" · ")));
    }
}

fn kernels(ui: &mut egui::Ui, c: &Campaign) {
    ui.strong("per kernel file");
    egui::ScrollArea::both().id_salt("mutation_kernels").max_height(260.0).show(ui, |ui| {
        egui::Grid::new("mutation_kernel_grid").striped(true).num_columns(5).show(ui, |ui| {
            for h in ["file", "mutants", "killed", "survived", "score"] {
                ui.strong(h);
            }
            ui.end_row();
            for (k, t) in c.by_kernel() {
                ui.label(k);
                ui.label(t.mutants.to_string());
                ui.label((t.killed + t.timeout + t.crashed).to_string());
                ui.label((t.missed + t.equivalent).to_string());
                ui.label(t.score_line());
                ui.end_row();
            }
        });
    });
}

fn survivors(ui: &mut egui::Ui, c: &Campaign, selected: Option<&str>, out: &mut Vec<Command>) {
    let t = c.total();
    ui.strong(format!("survivors ({})", t.missed + t.equivalent));
    if t.missed + t.equivalent == 0 {
        ui.label("none: every mutant that ran was detected");
        return;
    }
    egui::ScrollArea::both().id_salt("mutation_survivors").max_height(260.0).show(ui, |ui| {
        for r in c.survivors() {
            let class = match r.outcome {
                Outcome::Missed { .. } => RichText::new("missed").color(Color32::from_rgb(240, 90, 90)),
                _ => RichText::new("equivalent").color(Color32::GRAY),
            };
            ui.horizontal(|ui| {
                ui.label(class);
                let picked = selected == Some(r.mutant.id.as_str());
                // Where it is; the full id (with its occurrence and hash) on hover.
                let m = &r.mutant;
                let short = m.id.splitn(5, ':').take(4).collect::<Vec<_>>().join(":");
                if ui
                    .selectable_label(picked, RichText::new(short).monospace())
                    .on_hover_text(format!("{}\n{}", m.id, Command::SelectMutant(m.id.clone()).tooltip()))
                    .clicked()
                {
                    out.push(Command::SelectMutant(r.mutant.id.clone()));
                }
            });
        }
    });
}

fn selected(ui: &mut egui::Ui, c: &Campaign, selected: Option<&str>, out: &mut Vec<Command>) {
    let Some(r) = selected.and_then(|id| c.results.iter().find(|r| r.mutant.id == id)) else {
        return;
    };
    ui.horizontal(|ui| {
        ui.strong(&r.mutant.id);
        ui.label(format!("`{}` becomes `{}`", r.mutant.original, r.mutant.replacement));
    });
    ui.label(match &r.outcome {
        Outcome::Missed { changed } => format!(
            "missed by tolerance: {} compared tensor(s) changed and every rung passed ({}): a comparator gap",
            changed.len(),
            changed.iter().take(6).cloned().collect::<Vec<_>>().join(", ")
        ),
        Outcome::Equivalent => {
            "equivalent on these inputs: every compared tensor is bit-identical to the clean run's, so no \
             comparator could see it (a coverage gap, or a change that computes the same)"
                .to_string()
        }
        o => o.name().to_string(),
    });
    ui.add(
        egui::TextEdit::multiline(&mut r.diff.as_str())
            .code_editor()
            .desired_rows(r.diff.lines().count().clamp(3, 16))
            .desired_width(f32::INFINITY),
    );
    match c.shader_folder(&r.mutant.id) {
        Some(dir) => {
            button(ui, Command::OpenMutant(dir), true, out);
        }
        None => {
            ui.add_enabled(false, egui::Button::new(Command::OpenMutant(PathBuf::new()).label()))
                .on_disabled_hover_text(format!(
                    "The campaign kept no shader folder for it: `dualscope mutate --mutant '{}' --out DIR` keeps one",
                    r.mutant.id
                ));
        }
    }
}

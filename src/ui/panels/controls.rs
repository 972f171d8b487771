//! The side panel: dataset, sequence and model, engines, panels, session.

use egui::{DragValue, RichText};

use crate::dataset::{Dataset, human_size};
use crate::engine::EngineKind;
use crate::session::state::{ConfigName, MAX_LEN, PanelId, State};
use crate::step::Precision;
use crate::ui::command::{Command, button};
use crate::ui::engines;

pub struct Controls<'a> {
    pub state: &'a State,
    pub dataset: &'a Dataset,
    /// The path typed in the dataset field.
    pub data_path: &'a mut String,
    /// The path typed in the session field.
    pub session_path: &'a mut String,
    /// The path typed in the checkpoint field.
    pub checkpoint_path: &'a mut String,
    /// The train-here run (its controls are in the model section).
    pub train_here: &'a mut crate::ui::train_here::TrainHere,
    /// Steps trained here on top of the model source (None: none).
    pub trained_steps: Option<usize>,
    /// A capture is open (its weights are shown).
    pub capture_open: bool,
    /// The settings differ from what was last computed.
    pub stale: bool,
    /// The precision bisect, drawn with the precision map.
    pub precision_bisect: &'a crate::ui::precision_bisect_run::PrecisionBisectRun,
    /// The open session and the recent list, for the session section.
    pub session: crate::ui::panels::session::SessionInfo<'a>,
}

pub fn show(ui: &mut egui::Ui, c: Controls<'_>, out: &mut Vec<Command>) {
    egui::ScrollArea::vertical().show(ui, |ui| {
        dataset_section(ui, &c, out);
        let Controls { data_path, session_path, checkpoint_path, train_here, .. } = c;
        ui.horizontal(|ui| {
            ui.add(egui::TextEdit::singleline(data_path).hint_text("dataset file path").desired_width(170.0));
            button(ui, Command::OpenDataset(data_path.trim().into()), !data_path.trim().is_empty(), out);
        });
        ui.separator();
        sequence_section(ui, c.state, c.dataset, c.stale, out);
        crate::ui::panels::precision_bisect::show(ui, c.precision_bisect, out);
        let model = crate::ui::panels::model_source::ModelControls {
            state: c.state,
            checkpoint_path,
            train: train_here,
            trained_steps: c.trained_steps,
            capture_open: c.capture_open,
        };
        crate::ui::panels::model_source::show(ui, model, out);
        ui.separator();
        engines_section(ui, c.state, out);
        ui.separator();
        panels_section(ui, c.state, out);
        ui.separator();
        crate::ui::panels::session::show(ui, session_path, &c.session, out);
    });
}

/// The precision map: a collapsible grid, one row per stage with f32/f16
/// radio buttons (the map starts from the precision's step, the recurrences
/// as the per-row kernels run them), and a reset to that step.
fn precision_map_editor(ui: &mut egui::Ui, s: &State, out: &mut Vec<Command>) {
    use crate::step::{PrecisionMap, StageKind};
    let layers = s.config.config().layers;
    let set = s.precision_map.as_ref().filter(|m| m.layers() == layers);
    let title = match set {
        Some(m) => format!("Precision map: {}", m.summary()),
        None => "Precision map: the precision's step".to_string(),
    };
    let open = crate::ui::script::take_open(ui.ctx(), "precision-map"); // a command file's `open precision-map`
    egui::CollapsingHeader::new(title).id_salt("precision_map").open(open).show(ui, |ui| {
        let map = set.cloned().unwrap_or_else(|| PrecisionMap::default_for(s.precision, layers, false));
        egui::Grid::new("precision_map_grid").num_columns(3).striped(true).show(ui, |ui| {
            for (stage, p) in map.iter() {
                ui.label(stage.name());
                for choice in [Precision::F32, Precision::F16] {
                    let no_kernel = choice != Precision::F32 && stage.kind == StageKind::Embed && stage.backward;
                    let r = ui
                        .add_enabled(!no_kernel, egui::RadioButton::new(p == choice, choice.name()))
                        .on_disabled_hover_text("no f16 kernel: the embedding's backward is a scatter-add");
                    if r.clicked() && p != choice {
                        let mut m = map.clone();
                        m.set(stage, choice);
                        out.push(Command::SetPrecisionMap(Some(m)));
                    }
                }
                ui.end_row();
            }
        });
        button(ui, Command::SetPrecisionMap(None), set.is_some(), out);
    });
}

fn dataset_section(ui: &mut egui::Ui, c: &Controls<'_>, out: &mut Vec<Command>) {
    ui.heading("Dataset");
    ui.label(RichText::new(c.dataset.name()).strong());
    ui.label(format!("{}, {} tokens", human_size(c.dataset.len_bytes()), c.dataset.len_tokens()));
    ui.horizontal(|ui| {
        button(ui, Command::OpenDatasetDialog, true, out);
        button(ui, Command::UseEmbeddedDataset, c.state.dataset.path.is_some(), out);
    });
    ui.label(RichText::new("or drop a file on the window").weak().small());
}

fn sequence_section(ui: &mut egui::Ui, s: &State, ds: &Dataset, stale: bool, out: &mut Vec<Command>) {
    ui.heading("Sequence and model");
    egui::ComboBox::from_label("Config")
        .selected_text(s.config.label())
        .show_ui(ui, |ui| {
            for name in ConfigName::ALL {
                if ui.selectable_label(s.config == name, name.label()).clicked() && s.config != name {
                    out.push(Command::SetConfig(name));
                }
            }
        })
        .response
        .on_hover_text("The model's size: small, bench (the benchmark's width) or tiny (the tests')");
    egui::ComboBox::from_label("Precision")
        .selected_text(s.precision.name())
        .show_ui(ui, |ui| {
            for p in [Precision::F32, Precision::F16, Precision::Bf16] {
                if ui.selectable_label(s.precision == p, p.name()).clicked() && s.precision != p {
                    out.push(Command::SetPrecision(p));
                }
            }
        })
        .response
        .on_hover_text(Command::SetPrecision(s.precision).tooltip());
    precision_map_editor(ui, s, out);
    ui.horizontal(|ui| {
        let mut on = s.token_cap.is_some();
        let r = ui.checkbox(&mut on, "Per-token guard").on_hover_text(Command::SetTokenCap(None).tooltip());
        if r.changed() {
            out.push(Command::SetTokenCap(on.then_some(0.01)));
        }
        if let Some(mut tau) = s.token_cap {
            ui.label("tau");
            let r = ui.add(DragValue::new(&mut tau).speed(0.001).range(1e-6..=1e6));
            if r.changed() {
                out.push(Command::SetTokenCap(Some(tau)));
            }
        }
    });
    egui::Grid::new("sequence_grid").num_columns(2).show(ui, |ui| {
        let mut seed = s.seed;
        ui.label("Seed");
        if ui.add(DragValue::new(&mut seed)).on_hover_text(Command::SetSeed(0).tooltip()).changed() {
            out.push(Command::SetSeed(seed));
        }
        ui.end_row();

        let total = ds.len_tokens();
        let mut offset = s.offset;
        ui.label("Offset");
        let r = ui.add(DragValue::new(&mut offset).range(0..=total.saturating_sub(2)));
        if r.on_hover_text(Command::SetOffset(0).tooltip()).changed() {
            out.push(Command::SetOffset(offset));
        }
        ui.end_row();

        let mut len = s.len;
        ui.label("Length");
        let max_len = MAX_LEN.min(total.saturating_sub(s.offset)).max(2);
        let r = ui.add(DragValue::new(&mut len).range(2..=max_len).speed(4.0));
        if r.on_hover_text(Command::SetLen(0).tooltip()).changed() {
            out.push(Command::SetLen(len));
        }
        ui.end_row();
    });
    ui.horizontal(|ui| {
        button(ui, Command::Run, true, out);
        if stale {
            ui.label(RichText::new("settings changed: press Run").weak());
        }
    });
}

fn engines_section(ui: &mut egui::Ui, s: &State, out: &mut Vec<Command>) {
    ui.heading("Engines");
    let mut on = s.gpu_trace;
    let cmd = Command::SetGpuTrace(!on);
    if ui.checkbox(&mut on, cmd.label()).on_hover_text(cmd.tooltip()).changed() {
        out.push(Command::SetGpuTrace(on));
    }
    for engine in [EngineKind::Cpu, EngineKind::Vulkan] {
        ui.horizontal_wrapped(|ui| match engines::availability(engine) {
            Ok(what) => {
                ui.label(
                    RichText::new(format!("{}: available", engines::label(engine))).color(egui::Color32::LIGHT_GREEN),
                );
                ui.label(RichText::new(what).weak());
            }
            Err(why) => {
                ui.label(RichText::new(format!("{}: {why}", engines::label(engine))).weak());
            }
        });
    }
}

fn panels_section(ui: &mut egui::Ui, s: &State, out: &mut Vec<Command>) {
    ui.heading("Panels");
    for p in PanelId::ALL {
        let mut on = s.panels.get(p);
        if ui.checkbox(&mut on, p.label()).on_hover_text(Command::TogglePanel(p).tooltip()).changed() {
            out.push(Command::TogglePanel(p));
        }
    }
}

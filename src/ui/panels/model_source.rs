//! The model controls: where the parameters come from (the embedded trained
//! model, the seed's initialisation or a checkpoint file) and "Train N steps
//! here" with its progress bar.

use egui::{DragValue, RichText};

use crate::session::state::{ConfigName, ModelSource, State};
use crate::ui::command::{Command, button};
use crate::ui::train_here::{MAX_STEPS, TrainHere};

pub struct ModelControls<'a> {
    pub state: &'a State,
    /// The path typed in the checkpoint field.
    pub checkpoint_path: &'a mut String,
    /// The train-here run (its step count and learning rate are edited here).
    pub train: &'a mut TrainHere,
    /// Steps trained here on top of the state's source (None: none).
    pub trained_steps: Option<usize>,
    /// A capture is open: its weights are shown, not the source's.
    pub capture_open: bool,
}

pub fn show(ui: &mut egui::Ui, c: ModelControls<'_>, out: &mut Vec<Command>) {
    let s = c.state;
    let small = s.config == ConfigName::Small;
    let file = s.checkpoint.is_some();
    let embedded = !file && s.model == ModelSource::Embedded && small;
    let seeded = !file && !embedded;
    let typed = c.checkpoint_path.trim().to_string();
    let emb = Command::SetModelSource(ModelSource::Embedded);
    let seed = Command::SetModelSource(ModelSource::Seeded);
    let seed_label = format!("{} (seed {})", seed.label(), s.seed);
    let use_file = Command::SetCheckpoint(Some(typed.clone().into()));
    let shown = if file {
        "Checkpoint file"
    } else if embedded {
        emb.label()
    } else {
        &seed_label
    };
    // One line: the source as a combo box (embedded trained | seeded init | checkpoint file).
    egui::ComboBox::from_label("Model")
        .selected_text(shown)
        .show_ui(ui, |ui| {
            let r = ui
                .add_enabled(small, egui::Button::selectable(embedded, emb.label()))
                .on_hover_text(emb.tooltip())
                .on_disabled_hover_text("the embedded trained model is `small`: choose the small config");
            // Picking the source shown again also drops what was trained here.
            if r.clicked() {
                out.push(emb.clone());
            }
            if ui.selectable_label(seeded, &seed_label).on_hover_text(seed.tooltip()).clicked() {
                out.push(seed.clone());
            }
            let r = ui
                .add_enabled(file || !typed.is_empty(), egui::Button::selectable(file, "Checkpoint file"))
                .on_hover_text(use_file.tooltip())
                .on_disabled_hover_text("type a checkpoint path below, then Use checkpoint");
            if r.clicked() && !file {
                out.push(use_file.clone());
            }
        })
        .response
        .on_hover_text("Where the parameters come from (docs/default-model.md)");
    ui.horizontal(|ui| {
        let field = egui::TextEdit::singleline(c.checkpoint_path).hint_text("checkpoint (.safetensors)");
        ui.add(field.desired_width(170.0));
        button(ui, use_file, !typed.is_empty(), out);
    });
    let what = match (&s.checkpoint, c.trained_steps) {
        _ if c.capture_open => "the open capture's weights".to_string(),
        (_, Some(n)) => format!("trained here: {n} steps on the source above (not saved in the session)"),
        (Some(p), None) => format!("parameters from {}", p.display()),
        (None, None) if embedded => "the small model trained on the embedded corpus".to_string(),
        (None, None) => "parameters initialised from the seed".to_string(),
    };
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(what).weak().small());
        if file {
            button(ui, Command::SetCheckpoint(None), true, out);
        }
    });
    train_here(ui, c.train, c.capture_open, out);
}

/// "Train N steps here": the step count, the learning rate, the button, and
/// while it runs the progress bar and Cancel.
fn train_here(ui: &mut egui::Ui, t: &mut TrainHere, capture_open: bool, out: &mut Vec<Command>) {
    let busy = t.is_busy();
    ui.horizontal(|ui| {
        ui.add_enabled(!busy, DragValue::new(&mut t.n).range(1..=MAX_STEPS).suffix(" steps"))
            .on_hover_text("Steps the next Train here runs");
        ui.label("lr");
        ui.add_enabled(!busy, DragValue::new(&mut t.lr).range(1e-6..=1.0).speed(1e-4))
            .on_hover_text("The learning rate of the training (AdamW, the other settings docs/model.md's defaults)");
        let cmd = Command::TrainHere { steps: t.n, lr: t.lr };
        let r = button(ui, cmd, !busy && !capture_open, out);
        if capture_open {
            r.on_disabled_hover_text("close the capture first: training starts from the chosen model");
        }
    });
    if busy {
        let done = t.last.map_or(0, |p| p.done);
        let steps = t.steps.max(1);
        let loss = t.last.map_or("-".to_string(), |p| format!("{:.4}", p.loss));
        ui.horizontal(|ui| {
            let bar = egui::ProgressBar::new(done as f32 / steps as f32)
                .text(format!("{done}/{steps} · loss {loss}"))
                .desired_width(150.0);
            ui.add(bar);
            button(ui, Command::CancelTrainHere, true, out);
        });
    }
}

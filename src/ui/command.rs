//! Every user action is one [`Command`]. Panels push commands while they draw;
//! the app applies them at the end of the frame. Labels, tooltips and keyboard
//! shortcuts come from one `match` each.

use std::path::PathBuf;

use egui::Key;

use super::inspect::ExportFormat;
use crate::session::state::{ConfigName, FaultTool, PanelId, View};
use crate::step::Fault as EngineFault;

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Recompute the trace of the chosen sequence on the worker.
    Run,
    SetCursor(usize),
    StepCursor(isize),
    CursorFirst,
    CursorLast,
    NextNonFinite,
    WorstLoss,
    SelectHead(usize),
    SetConfig(ConfigName),
    SetSeed(u64),
    /// The ladder's precision (f32, or the mixed-precision step).
    SetPrecision(crate::step::Precision),
    /// The per-token guard's cap (None: off).
    SetTokenCap(Option<f64>),
    /// Each stage's precision for the ladder (None: the precision's step).
    SetPrecisionMap(Option<crate::step::PrecisionMap>),
    SetOffset(usize),
    SetLen(usize),
    OpenDatasetDialog,
    OpenDataset(PathBuf),
    UseEmbeddedDataset,
    SaveSession(PathBuf),
    LoadSession(PathBuf),
    SaveSessionDialog,
    LoadSessionDialog,
    TogglePanel(PanelId),
    /// Run every implemented rung of the ladder (on its own thread).
    RunLadder,
    /// Show this rung in the inspector (None: close it).
    SelectRung(Option<String>),
    /// Show this tensor of the selected rung.
    SelectTensor(String),
    /// Centre the inspector's maps on the selected tensor's worst element.
    JumpToWorst,
    /// Write the selected tensor (CPU, GPU, difference) to a file.
    ExportTensor(ExportFormat, PathBuf),
    ExportTensorDialog,
    /// Move the cursor to the largest GPU–CPU difference of the sequence.
    WorstDivergence,
    SetView(View),
    StartSpeed,
    StopSpeed,
    /// Take the parameters from a checkpoint (None: drop it and initialise from the seed).
    SetCheckpoint(Option<PathBuf>),
    /// Also compute the GPU's trace of the sequence (for the stepper's CPU vs GPU).
    SetGpuTrace(bool),
    /// The engine fault a tool plants (None: none).
    SetFault(FaultTool, Option<EngineFault>),
    /// Bisect the sequence's row for the smallest failing length (on its own thread).
    RunBisect,
    /// Find the fewest stages that must stay in f32 (precision bisect, on its own thread).
    RunPrecisionBisect,
    SetBisectMaxLen(usize),
    /// Audit the CPU/GPU gradient contributions of the sequence (on its own thread).
    RunAudit,
    /// Show this tensor (index in the audit) in the audit's plot.
    SelectAuditTensor(usize),
    /// Pick a position in the audit's plot.
    PickAuditPosition(usize),
    /// Move the stepper's cursor there and show the sequence.
    GoToPosition(usize),
    /// Read a training run's log.jsonl (or the run's directory).
    LoadTrainLog(PathBuf),
    /// Read a `dualscope mutate --out DIR` campaign (or its report.json).
    LoadCampaign(PathBuf),
    /// Show this survivor's diff in the Detection power view.
    SelectMutant(String),
    /// Open a second dualscope window on a survivor's mutated shader folder.
    OpenMutant(PathBuf),
    TrainLogDialog,
    /// Open a capture folder (or its `capture.json`): its model, batch,
    /// precision and planted fault replace the GUI's.
    OpenCapture(PathBuf),
    /// Close the open capture (the model is the chosen preset's again).
    CloseCapture,
    /// Replay the open capture on both engines and classify what happened.
    ReplayCapture,
    /// Show this row and position of the open capture's batch in the stepper.
    CaptureGoTo {
        row: usize,
        pos: usize,
    },
    /// Run `dualscope growth` on the row shown: per position the GPU-CPU
    /// difference of each state and gradient against the rounding envelope.
    RunGrowth,
    /// Where the parameters come from (the checkpoint file is `SetCheckpoint`).
    SetModelSource(crate::session::state::ModelSource),
    /// Train the current model this many steps on the current dataset (on its
    /// own thread); the trained parameters replace the model's.
    TrainHere {
        steps: usize,
        lr: f64,
    },
    /// Stop the train-here run (the model stays as it was).
    CancelTrainHere,
}

impl Command {
    /// The text of the button or menu entry that issues the command.
    pub fn label(&self) -> &'static str {
        match self {
            Command::Run => "Run",
            Command::SetCursor(_) => "Go to position",
            Command::StepCursor(d) if *d < 0 => "< Prev",
            Command::StepCursor(_) => "Next >",
            Command::CursorFirst => "<< First",
            Command::CursorLast => "Last >>",
            Command::NextNonFinite => "Next non-finite",
            Command::WorstLoss => "Worst loss",
            Command::SelectHead(_) => "Head",
            Command::SetConfig(_) => "Config",
            Command::SetSeed(_) => "Seed",
            Command::SetPrecision(_) => "Precision",
            Command::SetTokenCap(_) => "Per-token guard",
            Command::SetPrecisionMap(None) => "Reset to mixed default",
            Command::SetPrecisionMap(Some(_)) => "Precision map",
            Command::SetOffset(_) => "Offset",
            Command::SetLen(_) => "Length",
            Command::OpenDatasetDialog => "Open dataset…",
            Command::OpenDataset(_) => "Open",
            Command::UseEmbeddedDataset => "Use embedded",
            Command::SaveSession(_) => "Save session",
            Command::LoadSession(_) => "Load session",
            Command::SaveSessionDialog => "Save session as…",
            Command::LoadSessionDialog => "Load session…",
            Command::TogglePanel(p) => p.label(),
            Command::RunLadder => "Run ladder",
            Command::SelectRung(_) => "Inspect rung",
            Command::SelectTensor(_) => "Inspect tensor",
            Command::JumpToWorst => "Jump to worst",
            Command::ExportTensor(ExportFormat::Safetensors, _) => "Export safetensors",
            Command::ExportTensor(ExportFormat::Csv, _) => "Export CSV",
            Command::ExportTensorDialog => "Export…",
            Command::WorstDivergence => "Worst divergence",
            Command::SetView(v) => v.label(),
            Command::StartSpeed => "Start",
            Command::StopSpeed => "Stop",
            Command::SetCheckpoint(Some(_)) => "Use checkpoint",
            Command::SetCheckpoint(None) => "Init from seed",
            Command::SetGpuTrace(_) => "Compare with the GPU in the stepper",
            Command::SetFault(..) => "Fault",
            Command::RunBisect => "Run bisect",
            Command::RunPrecisionBisect => "Precision bisect",
            Command::SetBisectMaxLen(_) => "Max length",
            Command::RunAudit => "Run audit",
            Command::SelectAuditTensor(_) => "Audit tensor",
            Command::PickAuditPosition(_) => "Pick position",
            Command::GoToPosition(_) => "Go to position",
            Command::LoadTrainLog(_) => "Load log",
            Command::LoadCampaign(_) => "Load campaign",
            Command::SelectMutant(_) => "Show mutant",
            Command::OpenMutant(_) => "Open in the ladder",
            Command::TrainLogDialog => "Browse...",
            Command::OpenCapture(_) => "open capture",
            Command::CloseCapture => "Close capture",
            Command::ReplayCapture => "Replay",
            Command::CaptureGoTo { .. } => "Go there",
            Command::RunGrowth => "Error growth",
            Command::SetModelSource(crate::session::state::ModelSource::Embedded) => "Embedded trained",
            Command::SetModelSource(crate::session::state::ModelSource::Seeded) => "Seeded init",
            Command::TrainHere { .. } => "Train here",
            Command::CancelTrainHere => "Cancel training",
        }
    }

    pub fn tooltip(&self) -> &'static str {
        match self {
            Command::Run => "Recompute the CPU trace of the chosen sequence (on a worker thread)",
            Command::SetCursor(_) => "Move the cursor to a position",
            Command::StepCursor(d) if *d < 0 => "Previous position (left arrow)",
            Command::StepCursor(_) => "Next position (right arrow)",
            Command::CursorFirst => "First position (Home)",
            Command::CursorLast => "Last position (End)",
            Command::NextNonFinite => "Jump to the next position where any per-position value is NaN or Inf",
            Command::WorstLoss => "Jump to the position with the largest per-token loss",
            Command::SelectHead(_) => "Attention head the heatmap shows",
            Command::SetConfig(_) => "Model configuration (parameters initialised from the seed)",
            Command::SetSeed(_) => "Seed of the parameter initialisation",
            Command::SetPrecision(_) => {
                "Precision of the ladder and of the speedup run's GPU step: f32, or the mixed-precision step (f16/bf16 products with f32 accumulation, the rest f32; f16 with a loss scale), checked under its own tolerances"
            }
            Command::SetPrecisionMap(_) => {
                "Each stage of the ladder's step in f32 or f16 (docs/precision.md); reset: the precision's own step"
            }
            Command::SetTokenCap(_) => {
                "Cap each position's contribution to the W_ctx gradient at tau (docs/model.md's per-token guard); press Run"
            }
            Command::SetOffset(_) => "First token of the sequence in the dataset",
            Command::SetLen(_) => "Tokens in the sequence (one row)",
            Command::OpenDatasetDialog => {
                "Choose a dataset file (needs a desktop portal; or drop a file on the window)"
            }
            Command::OpenDataset(_) => "Open the dataset file at this path",
            Command::UseEmbeddedDataset => "Go back to the embedded synthetic corpus",
            Command::SaveSession(_) => "Write the session (RON) to this path, atomically",
            Command::LoadSession(_) => "Read the session (RON) at this path",
            Command::SaveSessionDialog => "Choose where to save the session (needs a desktop portal)",
            Command::LoadSessionDialog => "Choose a session file to load (needs a desktop portal)",
            Command::TogglePanel(_) => "Show or hide this panel",
            Command::RunLadder => {
                "Run every implemented rung, CPU reference against the Vulkan engine, on the config's shapes"
            }
            Command::SelectRung(_) => "Show this rung's cases and tensors in the inspector",
            Command::SelectTensor(_) => "Show this tensor's CPU, GPU and difference",
            Command::JumpToWorst => {
                "Zoom the maps onto the element with the largest |GPU - CPU| (or the first new non-finite value)"
            }
            Command::ExportTensor(ExportFormat::Safetensors, _) => {
                "Write cpu, gpu, diff (and f64) tensors as safetensors to this path, atomically"
            }
            Command::ExportTensor(ExportFormat::Csv, _) => {
                "Write one line per element (index, cpu, gpu, diff, f64) as CSV to this path, atomically"
            }
            Command::ExportTensorDialog => {
                "Choose where to export (.safetensors or .csv; needs a desktop portal, else type a path)"
            }
            Command::WorstDivergence => "Jump to the position with the largest |GPU - CPU| over every traced tensor",
            Command::SetView(_) => "Show this view in the central area",
            Command::StartSpeed => "Train on both engines, alternating steps, and plot each step's time",
            Command::StopSpeed => "Stop after the current step",
            Command::SetCheckpoint(_) => "Parameters from a checkpoint (safetensors) of the chosen config",
            Command::SetGpuTrace(_) => {
                "Run the same row through the Vulkan engine too and show its hidden states, gates and differences"
            }
            Command::SetFault(..) => "A bug from the fault catalogue planted in the Vulkan engine for this tool's runs",
            Command::RunPrecisionBisect => {
                "Rungs 2-11 and the loss gate on the sequence with every stage in f16, then halves of the stages in f32, down to the fewest that must stay in f32"
            }
            Command::RunBisect => {
                "Run rungs 2-11 on the row capped at 64, 128, ... positions, then bisect down to the smallest failing length"
            }
            Command::SetBisectMaxLen(_) => "The most positions the bisect tries (the row holds one token more)",
            Command::RunAudit => {
                "Per token and per tensor, the CPU and GPU gradient contributions and their norms, each divergence classified"
            }
            Command::SelectAuditTensor(_) => "Plot this tensor's per-token contribution norms",
            Command::PickAuditPosition(_) => "Show the values at this position",
            Command::GoToPosition(_) => "Move the token stepper's cursor to this position and show the sequence",
            Command::LoadTrainLog(_) => "Read the log.jsonl at this path (or in this run directory)",
            Command::LoadCampaign(_) => {
                "Read the report.json of this `dualscope mutate --out` folder (or the results stored so far)"
            }
            Command::SelectMutant(_) => "Show this survivor's diff and class",
            Command::OpenMutant(_) => {
                "Start a second dualscope window whose kernels are built from this mutant's shader folder \
                 (dualscope --shaders DIR gui): run the ladder and open its rungs in the inspector there"
            }
            Command::TrainLogDialog => "Choose a training run's log.jsonl (needs a desktop portal; else type a path)",
            Command::OpenCapture(_) => {
                "Open this step's capture: its weights, whole batch, precision and planted fault, the stepper at the position that dominates the gradient"
            }
            Command::CloseCapture => "Go back to the chosen config and seed (the capture's rows stay the dataset)",
            Command::ReplayCapture => {
                "Run the captured step again on the GPU (twice, in its precision and in f32) and the CPU (f32, f64), and say whether the data, the engine, the precision or a transient fault made it"
            }
            Command::CaptureGoTo { .. } => "Show this row in the token stepper, the cursor at this position",
            Command::RunGrowth => {
                "Run the row on the GPU (in the chosen precision) and the CPU (f32, f64): per position, each GRU state's, the attention output's and the gradients' GPU-CPU difference against the envelope rounding explains"
            }
            Command::SetModelSource(crate::session::state::ModelSource::Embedded) => {
                "The small model trained on the embedded corpus, built into the program (docs/default-model.md)"
            }
            Command::SetModelSource(crate::session::state::ModelSource::Seeded) => {
                "Parameters freshly initialised from the seed (uniform attention, random predictions)"
            }
            Command::TrainHere { .. } => {
                "Train the model shown this many steps on the current dataset (CPU reference; the GPU for a mixed precision), on a worker thread; the views then use the trained parameters"
            }
            Command::CancelTrainHere => "Stop the training after its current step; the model stays as it was",
        }
    }

    /// The key that issues the command, where there is one.
    pub fn shortcut(&self) -> Option<Key> {
        match self {
            Command::StepCursor(d) if *d < 0 => Some(Key::ArrowLeft),
            Command::StepCursor(_) => Some(Key::ArrowRight),
            Command::CursorFirst => Some(Key::Home),
            Command::CursorLast => Some(Key::End),
            _ => None,
        }
    }

    /// Commands bound to a key, checked once per frame.
    pub const KEYED: [Command; 4] =
        [Command::StepCursor(-1), Command::StepCursor(1), Command::CursorFirst, Command::CursorLast];
}

/// A button for `cmd` with its label and tooltip; pushes `cmd` when clicked.
pub fn button(ui: &mut egui::Ui, cmd: Command, enabled: bool, out: &mut Vec<Command>) -> egui::Response {
    let r = ui.add_enabled(enabled, egui::Button::new(cmd.label())).on_hover_text(cmd.tooltip());
    if r.clicked() {
        out.push(cmd);
    }
    r
}

//! What a session saves: the serde [`State`] and the small enums it holds.
//! Everything live (the dataset's bytes, the computed trace, textures, the
//! background jobs) lives in the app, not here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::step::Precision;

pub use super::config::ConfigName;

/// The session file format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The longest sequence the GUI computes (tokens, one row): 16384 positions
/// and their last target. The heatmaps draw long rows in tiles of texture
/// (docs/long-rows.md), so the texture size does not bound it.
pub const MAX_LEN: usize = 16384 + 1;

/// Which dataset the session looked at: a file, or the embedded default
/// (`path: None`), with the content hash it had when saved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DatasetRef {
    pub path: Option<PathBuf>,
    pub hash: Option<String>,
}

/// Panels that can be shown or hidden.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanelId {
    Stepper,
    Gru,
    AttentionRows,
    AttentionHeatmap,
    GradientHeatmap,
}

impl PanelId {
    pub const ALL: [PanelId; 5] =
        [PanelId::Stepper, PanelId::Gru, PanelId::AttentionRows, PanelId::AttentionHeatmap, PanelId::GradientHeatmap];

    pub fn label(self) -> &'static str {
        match self {
            PanelId::Stepper => "Token stepper",
            PanelId::Gru => "GRU state at cursor",
            PanelId::AttentionRows => "Attention at cursor",
            PanelId::AttentionHeatmap => "Attention heatmap",
            PanelId::GradientHeatmap => "Context gradient heatmap",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Panels {
    pub stepper: bool,
    pub gru: bool,
    pub attention_rows: bool,
    pub attention_heatmap: bool,
    pub gradient_heatmap: bool,
}

impl Default for Panels {
    fn default() -> Self {
        Panels { stepper: true, gru: true, attention_rows: true, attention_heatmap: true, gradient_heatmap: true }
    }
}

impl Panels {
    pub fn get(&self, p: PanelId) -> bool {
        match p {
            PanelId::Stepper => self.stepper,
            PanelId::Gru => self.gru,
            PanelId::AttentionRows => self.attention_rows,
            PanelId::AttentionHeatmap => self.attention_heatmap,
            PanelId::GradientHeatmap => self.gradient_heatmap,
        }
    }

    pub fn get_mut(&mut self, p: PanelId) -> &mut bool {
        match p {
            PanelId::Stepper => &mut self.stepper,
            PanelId::Gru => &mut self.gru,
            PanelId::AttentionRows => &mut self.attention_rows,
            PanelId::AttentionHeatmap => &mut self.attention_heatmap,
            PanelId::GradientHeatmap => &mut self.gradient_heatmap,
        }
    }
}

/// The view the central area shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum View {
    /// The token stepper and the heatmaps over the sequence.
    #[default]
    Sequence,
    /// The tensors of the selected rung.
    Inspector,
    /// Per-step times of both engines.
    Speedup,
    /// The length bisect on the sequence's row.
    Bisect,
    /// The CPU/GPU norm audit of the sequence.
    Audit,
    /// The loss, norm and skip curves of a training run.
    Training,
    /// A mutation campaign's score and survivors (`dualscope mutate`).
    Mutation,
}

impl View {
    pub const ALL: [View; 7] =
        [View::Sequence, View::Inspector, View::Speedup, View::Bisect, View::Audit, View::Training, View::Mutation];

    pub fn label(self) -> &'static str {
        match self {
            View::Sequence => "Sequence",
            View::Inspector => "Tensor inspector",
            View::Speedup => "Speedup",
            View::Bisect => "Bisect",
            View::Audit => "Audit",
            View::Training => "Training curves",
            View::Mutation => "Detection power",
        }
    }
}

/// The saved part of the app. Missing fields take their defaults when a
/// session is read, so older files of the same format version still load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    pub format_version: u32,
    pub dataset: DatasetRef,
    pub config: ConfigName,
    pub seed: u64,
    /// First token of the sequence in the dataset.
    pub offset: usize,
    /// Tokens in the sequence (positions = `len - 1`).
    pub len: usize,
    /// The position the stepper shows.
    pub cursor: usize,
    /// The attention head the heatmap shows.
    pub head: usize,
    pub panels: Panels,
    /// The rung the inspector shows.
    pub selected_rung: Option<String>,
    /// The tensor of that rung the inspector shows.
    pub selected_tensor: Option<String>,
    /// The view in the central area.
    pub view: View,
    /// Also compute the GPU's trace of the sequence (the stepper's CPU vs GPU).
    pub gpu_trace: bool,
    /// A checkpoint (safetensors) to take the parameters from instead of
    /// `model`'s; its config must be the chosen one.
    pub checkpoint: Option<PathBuf>,
    /// Where the parameters come from when no checkpoint is chosen. A session
    /// written before this field existed meant the seed's initialisation, so
    /// a missing field reads as [`ModelSource::Seeded`] (a new state starts on
    /// the embedded trained model).
    #[serde(default)]
    pub model: ModelSource,
    /// Ladder results. Only in session files: the app keeps its live results
    /// in its ladder view and fills this in when it saves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ladder: Option<super::results::SavedLadder>,
    /// The side file holding the inspector's tensors, next to the session
    /// file (its name only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensors_file: Option<String>,
    /// The engine fault (catalogue name) the ladder plants; `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::step::fault_name")]
    pub ladder_fault: Option<crate::step::Fault>,
    /// The engine fault the bisect plants.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::step::fault_name")]
    pub bisect_fault: Option<crate::step::Fault>,
    /// The most positions the bisect tries.
    pub bisect_max_len: usize,
    /// The last bisect's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisect: Option<crate::ladder::BisectReport>,
    /// The engine fault the audit plants.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::step::fault_name")]
    pub audit_fault: Option<crate::step::Fault>,
    /// The training run's log the curves view shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_log: Option<PathBuf>,
    /// The ladder's precision: f32, or the mixed-precision step (every rung).
    pub precision: Precision,
    /// Each stage's precision for the ladder (docs/precision.md); None: the
    /// precision's own step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_map: Option<crate::step::PrecisionMap>,
    /// The per-token guard's cap on the `W_ctx` gradient (docs/model.md); `None`: off.
    /// Applies to the traces and the ladder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_cap: Option<f64>,
    /// The capture folder open in the GUI (its batch, weights and precision
    /// replace the sequence's); reopened with the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<PathBuf>,
}

/// Where the GUI's parameters come from when no checkpoint file is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelSource {
    /// Initialised from the session's seed (what every session before this
    /// choice existed used; the default of a missing field).
    #[default]
    Seeded,
    /// The embedded `small` model trained on the embedded corpus
    /// (docs/default-model.md); another config starts from the seed.
    Embedded,
}

/// The tools that plant an engine fault, each with its own choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTool {
    Ladder,
    Bisect,
    Audit,
}

impl State {
    /// The parameters this state names (not counting any trained in the
    /// app): the checkpoint file, else the embedded model where the config is
    /// `small`, else the seed's initialisation.
    pub fn weights(&self) -> super::weights::Weights {
        use super::weights::Weights;
        match (&self.checkpoint, self.model, self.config) {
            (Some(p), _, _) => Weights::File(p.clone()),
            (None, ModelSource::Embedded, ConfigName::Small) => Weights::Embedded,
            _ => Weights::Seeded,
        }
    }

    /// The fault `tool` plants. A saved name that is not in the catalogue
    /// does not load (the session's reader names it).
    pub fn fault(&self, tool: FaultTool) -> Option<crate::step::Fault> {
        match tool {
            FaultTool::Ladder => self.ladder_fault,
            FaultTool::Bisect => self.bisect_fault,
            FaultTool::Audit => self.audit_fault,
        }
    }

    pub fn set_fault(&mut self, tool: FaultTool, f: Option<crate::step::Fault>) {
        let name = f;
        match tool {
            FaultTool::Ladder => self.ladder_fault = name,
            FaultTool::Bisect => self.bisect_fault = name,
            FaultTool::Audit => self.audit_fault = name,
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            format_version: FORMAT_VERSION,
            dataset: DatasetRef::default(),
            config: ConfigName::Small,
            seed: 0,
            offset: 0,
            len: 512,
            cursor: 0,
            head: 0,
            panels: Panels::default(),
            selected_rung: None,
            selected_tensor: None,
            view: View::Sequence,
            gpu_trace: true,
            checkpoint: None,
            model: ModelSource::Embedded,
            ladder: None,
            tensors_file: None,
            ladder_fault: None,
            bisect_fault: None,
            bisect_max_len: 512,
            bisect: None,
            audit_fault: None,
            train_log: None,
            precision: Precision::F32,
            precision_map: None,
            token_cap: None,
            capture: None,
        }
    }
}

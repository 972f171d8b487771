//! Captures: one training step, kept so that it can be run again. A capture
//! is a folder `step_NNNNNN/` holding
//!
//! - `capture.json`: what the step was ([`CaptureMeta`]): why it was kept, the
//!   engine, precision, optimizer options, token cap, seed, the loss scale
//!   and optimizer step before it, the dataset's name and content hash, each
//!   row's origin (document, offset), what the step did as recorded, the
//!   controller's running norm levels, a planted event, and the lead-up;
//! - `state.safetensors`: the weights and AdamW moments before the step (a
//!   training checkpoint, checksummed);
//! - `batch.bin`: the batch's tokens, `rows × (t + 1)` bytes, row-major;
//! - `lead_up.bin`: the tokens of the steps before it, when it has any;
//! - `carry.safetensors`: the carried state the step started from, for a step
//!   of `train --carry-state` (`carry: true` in `capture.json`; see
//!   docs/carry-state.md).
//!
//! A capture is written into a hidden temporary folder and renamed into
//! place ([`write`]), so a half-written capture never exists under its name;
//! [`load`] checks every file and field and says which one is wrong.

mod evidence;
pub mod float;
mod read;
mod write;

use serde::{Deserialize, Serialize};

pub use evidence::{TokenGrad, context_around, dominant_positions, dominant_positions_with};
pub use read::{CaptureError, list, load};
pub use write::{dir_name, prune, remove_stale, write, write_hooked};

use crate::dataset::{Batch, RowOrigin};
use crate::engine::TrainState;
use crate::model::Config;
use crate::step::Precision;
use crate::step::{LossScale, StepOptions};

/// The version of the capture format this code writes and reads.
pub const CAPTURE_FORMAT: u32 = 1;
/// The files of a capture folder.
pub const META_FILE: &str = "capture.json";
pub const STATE_FILE: &str = "state.safetensors";
pub const BATCH_FILE: &str = "batch.bin";
pub const LEAD_UP_FILE: &str = "lead_up.bin";
pub const CARRY_FILE: &str = "carry.safetensors";
/// The folder `train --out OUT` keeps its captures in: `OUT/captures/`.
pub const CAPTURES_DIR: &str = "captures";

/// The dataset a capture's batch was cut from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetRef {
    pub name: String,
    /// The path it was opened from (absent for the embedded corpus).
    pub path: Option<String>,
    /// [`crate::dataset::Dataset::content_hash`].
    pub content_hash: String,
    pub len_bytes: u64,
}

/// The batch's shape and provenance; its tokens are in `batch.bin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchMeta {
    pub rows: usize,
    /// Positions per row (each row has `t + 1` token slots).
    pub t: usize,
    pub lens: Vec<usize>,
    /// Each row's document and offset; empty when the batch was not cut from
    /// a dataset by position (a hand-made batch).
    pub origins: Vec<RowOrigin>,
    /// FNV-1a 64 of `batch.bin`, 16 hex digits.
    pub tokens_hash: String,
}

/// What the step did when it first ran (absent for a capture made outside a
/// training run, e.g. by `scan`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    #[serde(with = "float")]
    pub loss: f64,
    /// Global gradient norm, unscaled, before clipping (may be non-finite).
    #[serde(with = "float")]
    pub grad_norm: f64,
    /// Per-tensor gradient norms, canonical order (empty when the step ran
    /// without the controller's two-phase path).
    #[serde(with = "float::named")]
    pub tensor_norms: Vec<(String, f64)>,
    /// Why the step was not applied, if it was not.
    pub skipped: Option<String>,
    /// The loss scale after the step.
    #[serde(with = "float")]
    pub scale_after: f64,
}

/// A running level of one gradient norm as the controller saw it before
/// the step: the exponential moving mean and standard deviation of `ln(norm)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NormLevel {
    /// `global`, or a parameter tensor's name.
    pub name: String,
    /// Steps of history.
    pub n: u64,
    pub ln_mean: f64,
    pub ln_std: f64,
}

/// One step before the captured one (the ring of `--capture-before`); its
/// tokens follow each other in `lead_up.bin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeadUp {
    pub step: u64,
    pub t: usize,
    pub lens: Vec<usize>,
    pub origins: Vec<RowOrigin>,
    #[serde(with = "float")]
    pub loss: f64,
    #[serde(with = "float")]
    pub grad_norm: f64,
    pub applied: bool,
}

/// Everything `capture.json` holds. Field order is the file's key order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureMeta {
    pub format_version: u32,
    /// The training step (data position), or a window's index for `scan`.
    pub step: u64,
    /// What made it a capture: `skip`, `scale_backoff`, `lr_cut`, `rollback`,
    /// `planted`, `requested`, `scan`, `drift`.
    pub triggers: Vec<String>,
    /// Why, as the controller (or the tool) wrote it, one line each.
    pub reasons: Vec<String>,
    /// `cpu` or `gpu`.
    pub engine: String,
    pub precision: Precision,
    /// The kernel of the step's products (`GemmPath::name`, or `cpu`).
    pub gemm_path: String,
    /// The optimizer options of the step (its learning rate included), and
    /// the per-token guard's cap (`token_cap`).
    pub optim: StepOptions,
    pub seed: u64,
    /// The loss scale before the step.
    pub loss_scale: LossScale,
    /// The AdamW step counter before the step.
    pub optim_step: u64,
    pub dataset: DatasetRef,
    pub batch: BatchMeta,
    pub recorded: Option<Recorded>,
    /// The controller's levels before the step (empty without history).
    pub norm_levels: Vec<NormLevel>,
    /// A planted event active at this step (`train --inject`), by name, e.g.
    /// `persistent=reset_before_matmul`: replay plants it again where it is
    /// part of the engine.
    pub planted: Option<String>,
    pub lead_up: Vec<LeadUp>,
    /// The dualscope version that wrote it.
    pub written_by: String,
    /// The precision map the step ran (`train --precision-map`, the whole
    /// map as `STAGE=PREC,…`); absent for the precision's own step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_map: Option<String>,
    /// Whether the step started from a carried state (`train --carry-state`):
    /// `carry.safetensors` then holds it. Absent: every row started from zero.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub carry: bool,
    /// With `carry`: the run's `--carry-windows` K (the state restarts from
    /// zero every K steps) and the carried prefix's length P.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry_windows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry_prefix_len: Option<usize>,
}

/// A capture in memory: its metadata, the model, the state before the step,
/// the batch and the lead-up batches.
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    pub meta: CaptureMeta,
    pub config: Config,
    pub state: TrainState,
    pub batch: Batch,
    /// The batches of `meta.lead_up`, in the same order.
    pub lead_up: Vec<Batch>,
    /// The carried state the step started from (`meta.carry`); `None`: from zero.
    pub carry: Option<crate::step::Carry<f32>>,
}

impl Capture {
    /// The row origins of the batch, if it has them.
    pub fn origin(&self, row: usize) -> Option<RowOrigin> {
        self.meta.batch.origins.get(row).copied()
    }

    /// Checks that `ds` is the dataset the capture was cut from: the same
    /// content hash, and every row cut again from its origin equal to the
    /// captured row.
    pub fn verify_dataset(&self, ds: &crate::dataset::Dataset, shown: &str) -> Result<(), CaptureError> {
        read::verify_dataset(self, ds, shown)
    }
}

/// `name` 's level among `levels`.
pub fn level<'a>(levels: &'a [NormLevel], name: &str) -> Option<&'a NormLevel> {
    levels.iter().find(|l| l.name == name)
}

/// How many deviations `norm` is above `lvl` (with `min_std` as the
/// controller's floor on the deviation); `None` without history.
pub fn z_score(lvl: &NormLevel, norm: f64, min_std: f64) -> Option<f64> {
    (lvl.n > 0 && norm > 0.0 && norm.is_finite()).then(|| (norm.ln() - lvl.ln_mean) / lvl.ln_std.max(min_std))
}

#[cfg(test)]
mod tests;

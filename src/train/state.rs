//! A run's resumable state: `train_state.safetensors` in `--out` holds the
//! weights and AdamW moments, and as its `train_state` metadata (JSON) the
//! [`RunState`] beside them: the data position, the optimizer step, the loss
//! scale, the controller and what the run trains on.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TrainError;
use super::controller::Controller;
use super::log::{CONTROLLER_FILE, LOG_FILE};
use crate::checkpoint::{LoadOptions, TrainCheckpoint, load_train_checkpoint_with, save_train_checkpoint};
use crate::engine::TrainState;
use crate::model::Config;
use crate::step::{LossScale, OptimState};

/// Name of the resumable checkpoint in `--out`.
pub const TRAIN_STATE_FILE: &str = "train_state.safetensors";
/// The version of [`RunState`] this code writes and reads.
pub const RUN_STATE_VERSION: u32 = 1;

/// The run's state beside the tensors of a training checkpoint. The field
/// order is the metadata's key order: keep it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunState {
    pub version: u32,
    /// Steps done: the data position (step k trains on the batch of seed and k).
    pub step: u64,
    /// The AdamW step counter (behind `step` by the skipped and rolled-back steps).
    pub optim_step: u64,
    pub loss_scale: LossScale,
    pub controller: Controller,
    pub seed: u64,
    pub batch: usize,
    pub seq_len: usize,
    pub dataset: String,
    pub dataset_hash: String,
    /// `--carry-state`'s walk (absent: random windows from zero); the
    /// carried state itself is `carry_state.safetensors` beside this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry: Option<super::carry::CarryWalk>,
}

/// A saved run: its model config, training state and run state.
pub struct SavedRun {
    pub config: Config,
    pub state: TrainState,
    pub run: RunState,
}

/// A checkpoint path given to `--resume`: a directory holding
/// `train_state.safetensors`, or the file.
pub fn resume_file(p: &Path) -> PathBuf {
    if p.is_dir() { p.join(TRAIN_STATE_FILE) } else { p.to_path_buf() }
}

/// Reads a run's `train_state.safetensors`, with `opts`.
pub fn load_run(path: &Path, opts: LoadOptions) -> Result<SavedRun, TrainError> {
    let ck = load_train_checkpoint_with(path, opts)?;
    let rs: RunState = serde_json::from_str(&ck.state)
        .map_err(|e| TrainError::Failed(format!("{}: invalid train_state metadata: {e}", path.display())))?;
    if rs.version != RUN_STATE_VERSION {
        return Err(TrainError::Failed(format!(
            "{}: train_state version {} is not {RUN_STATE_VERSION}",
            path.display(),
            rs.version
        )));
    }
    let state = TrainState {
        params: ck.params,
        optim: OptimState { m: ck.m, v: ck.v, step: rs.optim_step },
        scale: rs.loss_scale.clone(),
    };
    Ok(SavedRun { config: ck.config, state, run: rs })
}

/// Writes `state` and `run` as `dir/train_state.safetensors` (atomically).
pub fn save_run(dir: &Path, config: &Config, state: &TrainState, run: &RunState) -> Result<(), TrainError> {
    let ck = TrainCheckpoint {
        config: config.clone(),
        params: state.params.clone(),
        m: state.optim.m.clone(),
        v: state.optim.v.clone(),
        state: serde_json::to_string(run).expect("plain data"),
    };
    Ok(save_train_checkpoint(&dir.join(TRAIN_STATE_FILE), &ck)?)
}

/// Creates `--out` (refusing a path that is not a directory).
pub(super) fn prepare_dir(dir: &Path) -> Result<(), TrainError> {
    if dir.exists() && !dir.is_dir() {
        return Err(TrainError::Usage(format!("--out {}: exists and is not a directory", dir.display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| TrainError::Failed(format!("--out {}: {e}", dir.display())))
}

/// Removes temporary files of atomic writes cut short by a kill (`.NAME.tmp.PID.N`).
pub(super) fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = [TRAIN_STATE_FILE, "last.safetensors", LOG_FILE, CONTROLLER_FILE, "step_"]
            .iter()
            .any(|n| name.starts_with(&format!(".{n}")));
        if ours && name.contains(".tmp.") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

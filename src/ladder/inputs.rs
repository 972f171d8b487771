//! What ladder, bisect and audit run on: the parameters (a checkpoint, whose
//! config wins, or a seeded init of a config), the dataset (the embedded one
//! by default) and the ladder's batch drawn from it.

use std::path::Path;

use super::{LadderError, default_batch};
use crate::checkpoint::CheckpointError;
use crate::dataset::{Batch, BatchError, Dataset, DatasetError};
use crate::model::{Config, ConfigError, Params};

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Model(#[from] crate::engine::inputs::ModelError),
    /// The default batch could not be drawn (too little data).
    #[error(transparent)]
    Ladder(#[from] LadderError),
}

pub use crate::engine::inputs::ParamSource;

/// The config and the parameters of `source` (a seeded init checked to fit
/// the ladder's four f32 copies first).
pub fn load_params(source: ParamSource<'_>) -> Result<(Config, Params<f32>), InputError> {
    Ok(crate::engine::inputs::load_model(source, 4, 4)?)
}

/// The dataset at `data`, else the embedded one.
pub fn load_dataset(data: Option<&Path>) -> Result<Dataset, DatasetError> {
    match data {
        Some(path) => Dataset::open(path),
        None => Ok(crate::dataset::synthetic::default_dataset()),
    }
}

/// The parameters, their config and the dataset of a run.
pub struct Inputs {
    pub cfg: Config,
    pub params: Params<f32>,
    pub ds: Dataset,
}

/// [`load_params`] then [`load_dataset`].
pub fn load(source: ParamSource<'_>, data: Option<&Path>) -> Result<Inputs, InputError> {
    let (cfg, params) = load_params(source)?;
    let ds = load_dataset(data)?;
    Ok(Inputs { cfg, params, ds })
}

/// Bytes a ladder run holds at its peak per value of the batch's activations
/// (`cpu::activation_bytes` at one byte a value), for its memory check: the
/// CPU traces in f32 (4) and f64 (8), the GPU's values of every compared
/// tensor from the chained step (4), and each rung's kept tensors for the
/// inspector, CPU f32, GPU and f64 (4 + 4 + 8). Measured on lavapipe at
/// `small`, B = 1, T = 4096: 880 MB peak for 25.2 M values, 29 bytes a value
/// over the process's ~150 MB base (docs/long-rows.md). The check counted
/// 8 (the f64 trace alone) before, so a long row could pass it and still be
/// killed for memory.
pub const LADDER_BYTES_PER_VALUE: usize = 32;

/// Which batch the model rungs run on.
#[derive(Clone, Copy, Debug)]
pub enum BatchChoice {
    /// One row of `len` positions (`len + 1` tokens) from token `offset`.
    Row { offset: usize, len: usize },
    /// [`default_batch`]: the config's batch of random windows from `seed`.
    Windows { seed: u64 },
}

/// The batch `choice` draws from `ds`, and where it came from in words.
pub fn ladder_batch(ds: &Dataset, cfg: &Config, choice: BatchChoice) -> Result<(Batch, String), InputError> {
    Ok(match choice {
        BatchChoice::Row { offset, len } => {
            let row = ds.window(offset, len + 1)?;
            (Batch::from_rows(&[row])?, format!("{}: one row of {len} positions at offset {offset}", ds.name()))
        }
        BatchChoice::Windows { seed } => {
            let b = default_batch(ds, cfg, seed)?;
            let what =
                format!("{} random windows of up to {} positions, every other row shortened", cfg.batch, cfg.seq_len);
            (b, format!("{}: {what} (seed {seed})", ds.name()))
        }
    })
}

//! From a bad step to its cause: `replay` runs a capture again on both
//! engines and says whether the data, the engine, the precision or a
//! transient fault made it; `drift` trains both engines in lockstep and
//! finds where they part beyond rounding; `growth` finds where along one
//! long row the GPU leaves the error rounding explains; `scan` runs every
//! window of a dataset and ranks them by risk. Each is a library function the CLI and
//! the GUI call.

pub mod drift;
mod drift_run;
pub mod growth;
mod growth_run;
pub mod replay;
mod replay_runs;
pub mod verdict;

use crate::capture::CaptureError;
use crate::dataset::{BatchError, DatasetError};
use crate::engine::EngineError;
use crate::engine::reference::CpuError;
use crate::ladder::LadderError;

/// Why a replay, drift or scan could not run (not a verdict: a verdict is
/// a result).
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    /// A request that cannot be run as asked (exit 2).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// Engine errors: no Vulkan device is exit 2, the rest 1.
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Ladder(#[from] LadderError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    /// Anything else (a report or state file that cannot be written).
    #[error("{0}")]
    Failed(String),
}
pub mod scan;

//! Training: the risk controller, the training loop (resume, rollback,
//! checkpoints, logs, injected faults) over an [`Engine`](crate::engine::Engine),
//! the typed logs and the run state. The loop reports to an [`Observer`], so
//! that the command line prints and the GUI could plot from the same loop.

mod captures;
pub mod carry;
pub mod controller;
pub mod inject;
pub mod log;
mod run;
mod start;
pub mod state;

pub use captures::{CaptureInfo, CaptureOptions};
pub use carry::{CARRY_FILE, CarryWalk, Walker};
pub use controller::{Action, ActionKind, Assessment, Controller, ControllerConfig, Ema, Outcome};
pub use inject::{Inject, Injections};
pub use log::{LogAction, LogEntry, LogStep, ReadAction, ReadLogError, TrainLog, read_train_log};
pub use run::{Begin, MemoryCheck, Observer, StepEvent, TrainPlan, TrainSummary, train};
pub use start::{batch_seed, pad_to};
pub use state::{RunState, SavedRun, TRAIN_STATE_FILE, load_run, resume_file, save_run};

use crate::checkpoint::CheckpointError;
use crate::dataset::{BatchError, DatasetError};
use crate::engine::EngineError;
use crate::engine::reference::CpuError;
use crate::model::ConfigError;

/// Why a training run did not finish.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The run asked for cannot be (a clash with the run being resumed, an
    /// `--out` that holds another run, …).
    #[error("{0}")]
    Usage(String),
    /// The controller gave the run up as diverged at `step`.
    #[error("step {step}: {reason}")]
    Stopped { step: u64, reason: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Batch(#[from] BatchError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    /// Anything else (a log that cannot be written, a bad checkpoint's metadata).
    #[error("{0}")]
    Failed(String),
    /// The observer asked the run to stop before `step` ([`Observer::stop_requested`]).
    #[error("stopped before step {step}")]
    Cancelled { step: u64 },
}

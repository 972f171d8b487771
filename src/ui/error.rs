//! The GUI's error type: what went wrong in a job or an action, kept as the
//! library's own error where one exists, so that the status bar and the log
//! say the library's words and the code can tell the cases apart.

use crate::capture::CaptureError;
use crate::dataset::DatasetError;
use crate::engine::EngineError;
use crate::ladder::LadderError;
use crate::session::{Lost, SessionError};
use crate::train::TrainError;
use crate::triage::TriageError;

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Ladder(#[from] LadderError),
    #[error(transparent)]
    Triage(#[from] TriageError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Batch(#[from] crate::dataset::BatchError),
    #[error(transparent)]
    Size(#[from] crate::memory::SizeError),
    #[error(transparent)]
    Cpu(#[from] crate::engine::reference::CpuError),
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
    #[error(transparent)]
    Log(#[from] crate::train::log::ReadLogError),
    #[error(transparent)]
    Parse(#[from] crate::step::ParseError),
    /// A background job's thread ended without an answer.
    #[error(transparent)]
    Lost(#[from] Lost),
    /// A thread could not be started, a file could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// What the GUI refuses itself (a count out of range, a GPU it cannot
    /// open, a file of the wrong kind), in words that name the control or file.
    #[error("{0}")]
    Refused(String),
}

impl UiError {
    /// A refusal in the GUI's own words.
    pub fn refused(text: impl Into<String>) -> UiError {
        UiError::Refused(text.into())
    }
}

/// A message from a library function that still reports in words (the
/// session's weights and shared GPU): kept as a refusal with its text.
impl From<String> for UiError {
    fn from(text: String) -> UiError {
        UiError::Refused(text)
    }
}

impl From<&str> for UiError {
    fn from(text: &str) -> UiError {
        UiError::Refused(text.to_string())
    }
}

/// The status bar and the log take an error's words.
impl From<UiError> for String {
    fn from(e: UiError) -> String {
        e.to_string()
    }
}

impl From<&UiError> for String {
    fn from(e: &UiError) -> String {
        e.to_string()
    }
}

/// The GUI's result type.
pub type UiResult<T> = Result<T, UiError>;

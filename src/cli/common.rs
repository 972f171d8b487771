//! What the commands share: the error type and its exit codes, output in
//! human or JSON form, progress bars, and the checks of inputs and outputs.

use std::path::Path;

use super::progress::Bar;

use crate::checkpoint::CheckpointError;
use crate::dataset::{Batch, BatchError, DatasetError};
use crate::engine::EngineError;
use crate::engine::inputs::InputError;
use crate::engine::reference::CpuError;
use crate::model::{Config, ConfigError};
use crate::train::TrainError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A usage error: exit code 2.
    #[error("{0}")]
    Usage(String),
    /// The engine asked for is not available: exit code 2.
    #[error("{0}")]
    Engine(String),
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
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::Engine(_) => 2,
            _ => 1,
        }
    }
}

/// Prints `value` as one JSON object, or runs `human` to print prose.
pub fn emit(json: bool, value: serde_json::Value, human: impl FnOnce()) {
    if json {
        println!("{value}");
    } else {
        human();
    }
}

/// A progress bar on stderr over `len` items (hidden when stderr is not a
/// terminal; `.hidden_if(quiet)` for `--json` and `--quiet`).
pub fn progress(len: u64, what: &str) -> Bar {
    Bar::new(what, Some(len), super::progress::shown(false, false))
}

/// Prints a log line above the progress bar, or plainly when the bar is hidden
/// (stderr is not a terminal), so that logs survive redirection.
pub fn log_line(pb: &Bar, line: String) {
    pb.println(line);
}

/// Each `--data` file is one row made of all its bytes (see
/// [`rows_from_files`](crate::engine::inputs::rows_from_files)).
pub fn rows_from_files(paths: &[std::path::PathBuf], cfg: &Config, elem: usize) -> Result<Batch, CliError> {
    if paths.is_empty() {
        return Err(CliError::Usage("at least one --data FILE is needed".into()));
    }
    crate::engine::inputs::rows_from_files(paths, cfg, elem).map_err(|e| match e {
        InputError::TooLong { .. } => CliError::Failed(e.to_string()),
        InputError::Dataset(e) => CliError::Dataset(e),
        InputError::Batch(e) => CliError::Batch(e),
    })
}

/// Refuses an output `flag` (`--out`, `--save-batch`, …) that names a
/// directory, a special file (device, FIFO, socket), a file in a folder that
/// does not exist or cannot be written, or one of `inputs`: checked before any
/// work, so that a bad output never costs a run. `write_atomic` checks the
/// same again when it writes.
pub fn check_output(flag: &str, out: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    let shown = show(out);
    let (dir, _) = crate::checkpoint::check_writable(out).map_err(|e| match e {
        CheckpointError::IsDirectory { .. } if !out.exists() => {
            CliError::Usage(format!("{flag} {shown}: ends in '/'; give the file's name"))
        }
        CheckpointError::IsDirectory { .. } => CliError::Usage(format!("{flag} {shown}: is a directory")),
        CheckpointError::NoDirectory { dir, .. } => {
            CliError::Usage(format!("{flag} {shown}: the folder {dir} does not exist"))
        }
        CheckpointError::Invalid { reason, .. } => CliError::Usage(format!("{flag} {shown}: {reason}")),
        e => CliError::Checkpoint(e),
    })?;
    if !writable(dir) {
        return Err(CliError::Usage(format!("{flag} {shown}: the folder {} cannot be written", show(dir))));
    }
    if crate::engine::inputs::overwrites_input(out, inputs) {
        return Err(CliError::Usage(format!("{flag} {shown} would overwrite an input")));
    }
    Ok(())
}

/// Whether this process may create files in `dir` (`access(2)` with `W_OK`).
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The file a `--config` value names, if it is not a preset: an input that
/// no output may replace.
pub fn config_file(config: &str) -> Option<&Path> {
    (!crate::model::Config::PRESETS.contains(&config)).then(|| Path::new(config))
}

/// A path as messages show it (control characters escaped).
pub use crate::dataset::show_path as show;

/// A dataset that cannot be opened, named after the `--data` flag that gave
/// it (`--data x.txt: is empty`).
pub fn data_error(e: DatasetError) -> CliError {
    CliError::Failed(format!("--data {e}"))
}

impl From<crate::engine::inputs::SizeError> for CliError {
    fn from(e: crate::engine::inputs::SizeError) -> Self {
        CliError::Failed(e.to_string())
    }
}

impl From<crate::engine::inputs::ModelError> for CliError {
    fn from(e: crate::engine::inputs::ModelError) -> Self {
        use crate::engine::inputs::ModelError as M;
        match e {
            M::Checkpoint(e) => CliError::Checkpoint(e),
            M::Config(e) => CliError::Config(e),
            M::Size(e) => e.into(),
        }
    }
}

/// An engine error as the commands report it: Vulkan missing or unable is an
/// engine error (exit 2), a failure once open exit 1, each named after the
/// `--engine gpu` that asked for it.
impl From<EngineError> for CliError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::NoVulkan(e) => CliError::Engine(e.to_string()),
            EngineError::Unsupported(e) => CliError::Engine(format!("--engine gpu: {e}")),
            EngineError::Vulkan(e) => CliError::Failed(format!("--engine gpu: {e}")),
            EngineError::Validation(n) => CliError::Failed(format!(
                "--engine gpu: the Vulkan validation layer reported {n} error(s) (see above); nothing was written"
            )),
            EngineError::Usage(m) => CliError::Usage(m),
            EngineError::Cpu(e) => CliError::Cpu(e),
        }
    }
}

impl From<TrainError> for CliError {
    fn from(e: TrainError) -> Self {
        match e {
            TrainError::Usage(m) => CliError::Usage(m),
            e @ (TrainError::Stopped { .. } | TrainError::Cancelled { .. }) => CliError::Failed(e.to_string()),
            TrainError::Engine(e) => e.into(),
            TrainError::Dataset(e) => CliError::Dataset(e),
            TrainError::Batch(e) => CliError::Batch(e),
            TrainError::Checkpoint(e) => CliError::Checkpoint(e),
            TrainError::Config(e) => CliError::Config(e),
            TrainError::Cpu(e) => CliError::Cpu(e),
            TrainError::Failed(m) => CliError::Failed(m),
        }
    }
}

/// A replay, drift or scan error as the commands report it: a request that
/// cannot run is a usage error (exit 2), the device as for the engines, a
/// capture that cannot be read or a changed dataset exit 1.
impl From<crate::triage::TriageError> for CliError {
    fn from(e: crate::triage::TriageError) -> Self {
        use crate::triage::TriageError as T;
        match e {
            T::Usage(m) => CliError::Usage(m),
            T::Engine(e) => e.into(),
            T::Ladder(crate::ladder::LadderError::Vk(e)) => EngineError::from(e).into(),
            T::Ladder(e) => CliError::Failed(e.to_string()),
            T::Capture(e) => CliError::Failed(e.to_string()),
            T::Dataset(e) => CliError::Dataset(e),
            T::Batch(e) => CliError::Batch(e),
            T::Cpu(e) => CliError::Cpu(e),
            T::Failed(m) => CliError::Failed(m),
        }
    }
}

/// The model a command starts from: `--checkpoint`'s weights or `--config`'s
/// init from `seed` (`small` when neither is given; both is a usage error).
/// `copies` tensors of `elem` bytes per value are checked against memory first.
pub fn checkpoint_or_config(
    checkpoint: Option<&std::path::Path>,
    config: Option<&str>,
    load: crate::checkpoint::LoadOptions,
    seed: u64,
    copies: u64,
    elem: u64,
) -> Result<(crate::model::Config, crate::model::Params<f32>), CliError> {
    use crate::engine::inputs::{ParamSource, load_model};
    match (checkpoint, config) {
        (Some(_), Some(_)) => {
            Err(CliError::Usage("--config and --checkpoint: the checkpoint holds its config; give one".into()))
        }
        (Some(p), None) => Ok(load_model(ParamSource::Checkpoint(p, load), copies, elem)?),
        (None, c) => Ok(load_model(ParamSource::Init { config: c.unwrap_or("small"), seed }, copies, elem)?),
    }
}

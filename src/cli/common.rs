//! What the commands share: the error type and its exit codes, output in
//! human or JSON form, progress bars, and the loading of inputs.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

use crate::checkpoint::CheckpointError;
use crate::cpu::CpuError;
use crate::dataset::{Batch, BatchError, DatasetError};
use crate::model::{Config, ConfigError};

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

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// Prints a log line above the progress bar, or plainly when the bar is hidden
/// (stderr is not a terminal), so that logs survive redirection.
pub fn log_line(pb: &ProgressBar, line: String) {
    if pb.is_hidden() {
        println!("{line}");
    } else {
        pb.println(line);
    }
}

/// Each file is one row made of all its bytes. The sizes are checked against
/// the memory the step would need before any file is read, so that a huge file
/// is refused at once instead of being read in full.
pub fn rows_from_files(paths: &[std::path::PathBuf], cfg: &Config, elem: usize) -> Result<Batch, CliError> {
    if paths.is_empty() {
        return Err(CliError::Usage("at least one --data FILE is needed".into()));
    }
    // Unreadable files are left to `read_row_file`, which names the problem.
    let longest =
        paths.iter().filter_map(|p| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| (m.len(), p))).max();
    if let Some((len, path)) = longest {
        let t = usize::try_from(len).unwrap_or(usize::MAX).saturating_sub(1);
        fits_in_memory(cfg, paths.len(), t, elem)
            .map_err(|e| CliError::Failed(format!("{}: a row of {len} bytes is too long: {e}", path.display())))?;
    }
    let mut rows = Vec::with_capacity(paths.len());
    for p in paths {
        rows.push(crate::dataset::read_row_file(p)?);
    }
    Ok(Batch::from_rows(&rows)?)
}

/// Refuses a batch whose activations would not fit in memory.
pub fn check_memory(cfg: &Config, batch: &Batch, elem: usize) -> Result<(), CliError> {
    Ok(fits_in_memory(cfg, batch.rows, batch.t, elem)?)
}

/// Refuses a batch shape (`rows` rows of `t` positions) whose activations
/// would not fit in memory, before any batch is cut.
pub fn check_shape(cfg: &Config, rows: usize, t: usize, elem: usize) -> Result<(), CliError> {
    Ok(fits_in_memory(cfg, rows, t, elem)?)
}

fn fits_in_memory(cfg: &Config, rows: usize, t: usize, elem: usize) -> Result<(), CpuError> {
    let need = crate::cpu::activation_bytes(cfg, rows, t, elem);
    let limit = available_memory().unwrap_or(8 << 30) * 7 / 10;
    if need > limit {
        return Err(CpuError::TooLarge { need_mib: need >> 20, limit_mib: limit >> 20 });
    }
    Ok(())
}

fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses to write over an input or into a directory, before any work is done.
pub fn check_output(out: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    if out.is_dir() {
        return Err(CliError::Usage(format!("--out {}: is a directory", out.display())));
    }
    for i in inputs {
        if let (Ok(a), Ok(b)) = (out.canonicalize(), i.canonicalize())
            && a == b
        {
            return Err(CliError::Usage(format!("--out {} would overwrite an input", out.display())));
        }
    }
    Ok(())
}

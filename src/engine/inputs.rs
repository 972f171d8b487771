//! Checks of a step's inputs before any work: whether a batch's activations
//! fit in memory, and a batch made of whole files (the CLI's `grads` and
//! `step`; the GUI can call them too).

use std::path::{Path, PathBuf};

use crate::cpu::CpuError;
use crate::dataset::{Batch, BatchError, DatasetError};
use crate::model::Config;

/// Why a batch of files was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The longest file would not fit in memory as a row.
    #[error("{}: a row of {len} bytes is too long: {source}", path.display())]
    TooLong { path: PathBuf, len: u64, source: CpuError },
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// Each file is one row made of all its bytes. The sizes are checked against
/// the memory the step would need (`elem` bytes a value) before any file is
/// read, so that a huge file is refused at once instead of being read in full.
pub fn rows_from_files(paths: &[PathBuf], cfg: &Config, elem: usize) -> Result<Batch, InputError> {
    // Unreadable files are left to `read_row_file`, which names the problem.
    let longest =
        paths.iter().filter_map(|p| std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| (m.len(), p))).max();
    if let Some((len, path)) = longest {
        let t = usize::try_from(len).unwrap_or(usize::MAX).saturating_sub(1);
        fits_in_memory(cfg, paths.len(), t, elem).map_err(|source| InputError::TooLong {
            path: path.clone(),
            len,
            source,
        })?;
    }
    let mut rows = Vec::with_capacity(paths.len());
    for p in paths {
        rows.push(crate::dataset::read_row_file(p)?);
    }
    Ok(Batch::from_rows(&rows)?)
}

/// Refuses a batch whose activations would not fit in memory.
pub fn check_memory(cfg: &Config, batch: &Batch, elem: usize) -> Result<(), CpuError> {
    fits_in_memory(cfg, batch.rows, batch.t, elem)
}

/// Refuses a batch shape (`rows` rows of `t` positions) whose activations
/// would not fit in memory, before any batch is cut.
pub fn check_shape(cfg: &Config, rows: usize, t: usize, elem: usize) -> Result<(), CpuError> {
    fits_in_memory(cfg, rows, t, elem)
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

/// Whether writing `out` would overwrite one of `inputs` (the same file).
pub fn overwrites_input(out: &Path, inputs: &[&Path]) -> bool {
    inputs.iter().any(|i| matches!((out.canonicalize(), i.canonicalize()), (Ok(a), Ok(b)) if a == b))
}

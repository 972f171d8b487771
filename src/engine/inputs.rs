//! Checks of a command's inputs before any work: whether what it is about to
//! allocate (a batch's activations, a model's parameters, any buffer sized by
//! a user's number) fits in memory, and a batch made of whole files (the
//! CLI's `grads` and `step`; the GUI can call them too). Every size computed
//! from user numbers goes through [`check_alloc`], the one place that compares
//! it with the memory available.

use std::path::{Path, PathBuf};

use crate::memory::memory_limit;
pub use crate::memory::{SizeError, bytes_of, check_alloc};

use crate::checkpoint::{CheckpointError, LoadOptions};
use crate::cpu::CpuError;
use crate::dataset::{Batch, BatchError, DatasetError};
use crate::model::{Config, ConfigError, Params};

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
    let limit = memory_limit();
    if need > limit {
        return Err(CpuError::TooLarge { need_mib: need >> 20, limit_mib: limit >> 20 });
    }
    Ok(())
}

/// Refuses a model whose parameters, `copies` times over (1 to initialise;
/// 4 to train: weights, gradients, two optimizer moments) in `elem`-byte
/// values, would not fit in memory. `what` names where the config came from.
pub fn check_params(cfg: &Config, copies: u64, elem: u64, what: &str) -> Result<(), SizeError> {
    let count = crate::model::param_specs(cfg).iter().try_fold(0u64, |acc, (_, shape)| {
        let n = bytes_of(&shape.iter().map(|&d| d as u64).collect::<Vec<_>>())?;
        acc.checked_add(n)
    });
    check_alloc(&format!("{what}: the model's parameters"), count.and_then(|n| bytes_of(&[n, copies, elem])))
}

/// Where a command's weights come from.
#[derive(Clone, Copy, Debug)]
pub enum ParamSource<'a> {
    /// A checkpoint, loaded with these options; its config is the run's.
    Checkpoint(&'a Path, LoadOptions),
    /// A seeded init of a config (`small`, `bench`, `tiny` or a JSON file).
    Init { config: &'a str, seed: u64 },
}

/// Why a model could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Size(#[from] SizeError),
}

/// The config and parameters of `source`. A seeded init is first checked to
/// fit `copies` sets of `elem`-byte parameters (weights, gradients, moments …)
/// in memory, so a huge JSON config is refused naming `--config` before any
/// allocation; a checkpoint's reader checks its own sizes.
pub fn load_model(source: ParamSource<'_>, copies: u64, elem: u64) -> Result<(Config, Params<f32>), ModelError> {
    match source {
        ParamSource::Checkpoint(path, opts) => Ok(crate::checkpoint::load_params_opts(path, opts)?),
        ParamSource::Init { config, seed } => {
            let cfg = Config::resolve(config)?;
            check_params(&cfg, copies, elem, &format!("--config {config}"))?;
            let params = Params::init(&cfg, seed);
            Ok((cfg, params))
        }
    }
}

/// Refuses a batch of `rows` rows of `t` positions whose activations (in
/// `elem`-byte values) would not fit in memory; `what` names the arguments
/// that chose the shape.
pub fn check_batch(cfg: &Config, rows: usize, t: usize, elem: usize, what: &str) -> Result<(), SizeError> {
    check_alloc(what, Some(crate::cpu::activation_bytes(cfg, rows, t, elem)).filter(|&b| b != u64::MAX))
}

/// Whether writing `out` would overwrite one of `inputs` (the same file).
pub fn overwrites_input(out: &Path, inputs: &[&Path]) -> bool {
    inputs.iter().any(|i| matches!((out.canonicalize(), i.canonicalize()), (Ok(a), Ok(b)) if a == b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_that_overflow_or_exceed_memory_are_refused_naming_the_input() {
        assert_eq!(bytes_of(&[1 << 40, 1 << 30]), None);
        assert_eq!(bytes_of(&[3, 4, 5]), Some(60));
        let e = check_alloc("--steps 7", None).unwrap_err().to_string();
        assert!(e.starts_with("--steps 7:") && e.contains("64 bits"), "{e}");
        let e = check_alloc("--len 9", Some(u64::MAX)).unwrap_err().to_string();
        assert!(e.starts_with("--len 9:") && e.contains("MiB"), "{e}");
        check_alloc("--len 9", Some(1 << 10)).unwrap();
    }

    #[test]
    fn a_model_too_wide_for_memory_is_refused_before_its_init() {
        check_params(&Config::tiny(), 4, 4, "--config tiny").unwrap();
        let wide = Config { hidden: 1 << 16, layers: 8, ..Config::tiny() };
        let e = check_params(&wide, 1, 4, "--config wide.json").unwrap_err().to_string();
        assert!(e.contains("--config wide.json: the model's parameters"), "{e}");
    }
}

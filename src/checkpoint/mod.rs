//! Checkpoint files: the model's parameters (or gradients) as safetensors.
//!
//! The contract of docs/model.md: float32, little-endian, row-major tensors under the
//! names of [`param_specs`](crate::model::param_specs), and the configuration as
//! JSON under the safetensors metadata key `config`. This module adds a
//! `format` key ([`FORMAT`]) and lets callers add their own entries (`kind`,
//! `step`, `loss`, ...).
//!
//! Every write goes through [`write_atomic`]: no reader ever sees a
//! half-written file, and every file written carries a content checksum
//! (`checksum` metadata, see [`checksum`]) that every read verifies. Every
//! read checks the file completely and reports the first problem as one line
//! that starts with the file's path; no input bytes make it panic. Loading
//! parameters (or a training state) also refuses non-finite values unless
//! [`LoadOptions::allow_non_finite`] says otherwise.

mod atomic;
pub mod checksum;
mod embedded;
mod named;
mod read;
mod train_state;
mod write;

#[cfg(test)]
mod atomic_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::{Config, Params};
use crate::tensor::{Real, Tensor};

pub use atomic::{check_writable, write_atomic};
pub use checksum::CHECKSUM_KEY;
pub use embedded::{EMBEDDED_BYTES, EMBEDDED_NAME, embedded_default};
pub use named::{NamedRef, NamedTensor, Values, ValuesRef, encode_named, load_named, named_from_bytes, save_named};
pub use read::{
    load_params, load_params_opts, load_params_with, load_params_with_meta, load_tensors, params_from_bytes,
    params_from_bytes_with, tensors_from_bytes,
};
pub use train_state::{
    TRAIN_FORMAT, TRAIN_STATE_KEY, TrainCheckpoint, load_train_checkpoint, load_train_checkpoint_with,
    save_train_checkpoint,
};
pub use write::{encode_tensors, save_params, save_params_with, save_tensors};

/// Safetensors metadata (`__metadata__`): string keys to string values.
pub type Metadata = BTreeMap<String, String>;

/// Value of the `format` metadata key in files written by [`save_params`].
pub const FORMAT: &str = "dualscope-params-v1";

/// Metadata key holding the configuration as JSON.
pub const CONFIG_KEY: &str = "config";

/// Metadata key holding [`FORMAT`].
pub const FORMAT_KEY: &str = "format";

/// How strict loading parameters is about their values (the file's
/// structure and checksum are always checked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Accept NaN and infinite values (to debug such a checkpoint) instead of
    /// refusing the file.
    pub allow_non_finite: bool,
}

impl LoadOptions {
    /// Loading that accepts non-finite values: for the GUI, and for the
    /// commands' `--allow-non-finite`.
    pub const DEBUG: LoadOptions = LoadOptions { allow_non_finite: true };
}

/// What went wrong reading or writing a checkpoint. Every message is one line
/// and starts with the path of the file concerned.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The file does not exist.
    #[error("{path}: no such file")]
    NotFound { path: String },
    /// The path names a directory where a file was expected.
    #[error("{path}: is a directory, not a safetensors file")]
    IsDirectory { path: String },
    /// The directory to write into does not exist (or is not a directory).
    #[error("{path}: directory {dir} does not exist")]
    NoDirectory { path: String, dir: String },
    /// An operating-system error; `action` says what was being done.
    #[error("{path}: {action}: {source}")]
    Io {
        path: String,
        action: String,
        #[source]
        source: std::io::Error,
    },
    /// The file holds no bytes at all.
    #[error("{path}: empty file (0 bytes), not a safetensors file")]
    Empty { path: String },
    /// The bytes do not look like safetensors at all.
    #[error("{path}: not a safetensors file: {reason}")]
    NotSafetensors { path: String, reason: String },
    /// The header or the data runs past the end of the file.
    #[error("{path}: truncated: {reason}")]
    Truncated { path: String, reason: String },
    /// The file's structure is wrong in a way this module recognises.
    #[error("{path}: invalid safetensors file: {reason}")]
    Corrupt { path: String, reason: String },
    /// Any other problem the safetensors parser (or serializer) reports.
    #[error("{path}: invalid safetensors file: {source}")]
    Safetensors {
        path: String,
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// The metadata has no `config` entry.
    #[error("{path}: no `config` key in the safetensors metadata")]
    MissingConfig { path: String },
    /// The `config` entry is not valid JSON or fails [`Config::validate`].
    #[error("{path}: invalid config metadata: {reason}")]
    BadConfig { path: String, reason: String },
    /// The `format` entry names a format other than [`FORMAT`].
    #[error("{path}: metadata format is \"{found}\", expected \"{FORMAT}\"")]
    WrongFormat { path: String, found: String },
    /// Parameters the configuration needs are not in the file.
    #[error("{path}: missing {}", tensor_list(.names))]
    MissingTensors { path: String, names: Vec<String> },
    /// The file holds tensors the configuration does not know.
    #[error("{path}: unexpected {}", tensor_list(.names))]
    UnexpectedTensors { path: String, names: Vec<String> },
    /// A tensor's shape differs from the configuration's.
    #[error("{path}: tensor {name} has shape {found:?}, expected {expected:?}")]
    WrongShape { path: String, name: String, expected: Vec<usize>, found: Vec<usize> },
    /// A tensor is stored in a dtype other than F32.
    #[error("{path}: tensor {name} has dtype {found}, expected F32")]
    WrongDtype { path: String, name: String, found: String },
    /// A tensor of a generic file ([`load_named`]) is stored in a dtype other than F32 or F64.
    #[error("{path}: tensor {name} has dtype {found}, expected F32 or F64")]
    UnsupportedDtype { path: String, name: String, found: String },
    /// The `checksum` metadata does not match the contents.
    #[error(
        "{path}: checksum mismatch: the file records {stored}, its contents give {computed} \
         (it was changed or damaged after it was written)"
    )]
    ChecksumMismatch { path: String, stored: String, computed: String },
    /// A parameter holds NaN or infinite values (and [`LoadOptions`] does not allow them).
    #[error(
        "{path}: parameter {name} has {count} non-finite value{} (first at index {first}){}; \
         refused (--allow-non-finite loads it anyway, for debugging)",
        plural(.count),
        more_params(.others)
    )]
    NonFinite { path: String, name: String, count: usize, first: usize, others: usize },
    /// The caller asked to write something that cannot be written.
    #[error("{path}: cannot save: {reason}")]
    Invalid { path: String, reason: String },
}

/// "tensor a" or "tensors a, b".
fn tensor_list(names: &[String]) -> String {
    let s = if names.len() == 1 { "" } else { "s" };
    format!("tensor{s} {}", names.join(", "))
}

/// "s" unless `n` is 1.
fn plural(n: &usize) -> &'static str {
    if *n == 1 { "" } else { "s" }
}

/// ", and N more parameters have some" (nothing when `n` is 0).
fn more_params(n: &usize) -> String {
    match n {
        0 => String::new(),
        1 => ", and 1 more parameter has some".into(),
        n => format!(", and {n} more parameters have some"),
    }
}

pub(crate) use crate::dataset::{one_line, show_path as show};

/// Number of NaN and infinite values in `t`. Loading refuses non-finite
/// weights unless [`LoadOptions::allow_non_finite`]; this helper finds them.
pub fn count_non_finite<T: Real>(t: &Tensor<T>) -> usize {
    t.data.iter().filter(|x| !x.is_finite()).count()
}

/// (name, count) of every parameter holding non-finite values, in canonical
/// order; empty when all values are finite.
pub fn non_finite_params<T: Real>(cfg: &Config, params: &Params<T>) -> Vec<(String, usize)> {
    params.named(cfg).into_iter().map(|(name, t)| (name, count_non_finite(t))).filter(|&(_, n)| n > 0).collect()
}

/// Refuses the first of `named` tensors that holds a non-finite value, unless
/// `opts` allows them; `label` names the file.
pub(crate) fn check_finite<'a>(
    label: &Path,
    opts: LoadOptions,
    named: impl IntoIterator<Item = (String, &'a Tensor<f32>)>,
) -> Result<(), CheckpointError> {
    if opts.allow_non_finite {
        return Ok(());
    }
    let mut bad = named.into_iter().filter(|(_, t)| t.data.iter().any(|x| !x.is_finite()));
    let Some((name, t)) = bad.next() else { return Ok(()) };
    let first = t.data.iter().position(|x| !x.is_finite()).expect("has a non-finite value");
    Err(CheckpointError::NonFinite {
        path: show(label),
        name: one_line(&name),
        count: count_non_finite(t),
        first,
        others: bad.count(),
    })
}

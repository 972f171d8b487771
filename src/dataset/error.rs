//! `DatasetError`: everything that can go wrong opening a dataset or cutting rows
//! out of it. Every message is one line that names the file (or the dataset) and
//! the problem.

use std::io;
use std::path::{Path, PathBuf};

use super::batch::BatchError;

/// Errors from [`Dataset`](super::Dataset). Variants that carry a `path` come from
/// opening (for in-memory datasets the path is the dataset's name); those that
/// carry a `name` come from reading rows out of an opened dataset.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{}: no such file", show_path(.path))]
    NotFound { path: PathBuf },
    #[error("{}: is a directory, not a dataset file", show_path(.path))]
    IsDirectory { path: PathBuf },
    #[error("{}: is not a regular file", show_path(.path))]
    NotAFile { path: PathBuf },
    #[error("{}: permission denied", show_path(.path))]
    PermissionDenied { path: PathBuf },
    #[error("{}: cannot read: {source}", show_path(.path))]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: is empty", show_path(.path))]
    Empty { path: PathBuf },
    #[error("{}: has {len} byte; a dataset needs at least 2 bytes: one input and its target", show_path(.path))]
    TooShort { path: PathBuf, len: usize },
    #[error("{}: has no documents (every line is blank)", show_path(.path))]
    NoDocuments { path: PathBuf },
    #[error("{}: line {line}: bad JSON: {message}", show_path(.path))]
    BadJson { path: PathBuf, line: usize, message: String },
    #[error("{}: line {line}: no string `text` field ({problem})", show_path(.path))]
    NoText { path: PathBuf, line: usize, problem: String },
    #[error(
        "{}: all {documents} documents are shorter than 2 bytes; \
         a row needs one input and its target", show_path(.path)
    )]
    DocumentsTooShort { path: PathBuf, documents: usize },

    #[error("{}: a batch needs at least one row, got 0", one_line(.name))]
    NoRows { name: String },
    #[error("{}: a row of {len} bytes is too short; it needs at least 2: one input and its target", one_line(.name))]
    RowTooShort { name: String, len: usize },
    #[error(
        "{}: window of {len} bytes at offset {offset} runs past the end \
         ({offset} + {len} > {total} bytes)", one_line(.name)
    )]
    WindowOutOfRange { name: String, offset: usize, len: usize, total: usize },
    #[error("{}: no document {index}; there are {count}", one_line(.name))]
    NoSuchDocument { name: String, index: usize, count: usize },
    #[error(
        "{}: {count} documents from document {start} run past the end \
         (there are {total})", one_line(.name)
    )]
    DocumentsOutOfRange { name: String, start: usize, count: usize, total: usize },
    #[error("{}: the {count} documents from document {start} are all shorter than 2 bytes", one_line(.name))]
    NoUsableDocuments { name: String, start: usize, count: usize },
    #[error("{}: the file changed on disk after it was opened ({detail})", one_line(.name))]
    Changed { name: String, detail: String },
    #[error(transparent)]
    Batch(#[from] BatchError),
}

/// A path as every message shows it (datasets, configs, checkpoints, the
/// CLI): control characters (a newline above all) escaped, so that the
/// message stays one line.
pub fn show_path(path: &Path) -> String {
    one_line(&path.display().to_string())
}

/// `s` with its control characters escaped.
pub fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Classifies an I/O error met while opening `path`.
pub(super) fn io_error(path: &Path, err: io::Error) -> DatasetError {
    let path = path.to_path_buf();
    match err.kind() {
        io::ErrorKind::NotFound => DatasetError::NotFound { path },
        io::ErrorKind::PermissionDenied => DatasetError::PermissionDenied { path },
        io::ErrorKind::IsADirectory => DatasetError::IsDirectory { path },
        _ => DatasetError::Io { path, source: err },
    }
}

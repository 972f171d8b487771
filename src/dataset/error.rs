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
    #[error("{path}: no such file")]
    NotFound { path: PathBuf },
    #[error("{path}: is a directory, not a dataset file")]
    IsDirectory { path: PathBuf },
    #[error("{path}: is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("{path}: permission denied")]
    PermissionDenied { path: PathBuf },
    #[error("{path}: cannot read: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: is empty")]
    Empty { path: PathBuf },
    #[error("{path}: has {len} byte; a dataset needs at least 2 bytes: one input and its target")]
    TooShort { path: PathBuf, len: usize },
    #[error("{path}: has no documents (every line is blank)")]
    NoDocuments { path: PathBuf },
    #[error("{path}: line {line}: bad JSON: {message}")]
    BadJson { path: PathBuf, line: usize, message: String },
    #[error("{path}: line {line}: no string `text` field ({problem})")]
    NoText { path: PathBuf, line: usize, problem: String },
    #[error(
        "{path}: all {documents} documents are shorter than 2 bytes; \
         a row needs one input and its target"
    )]
    DocumentsTooShort { path: PathBuf, documents: usize },

    #[error("{name}: a batch needs at least one row, got 0")]
    NoRows { name: String },
    #[error("{name}: a row of {len} bytes is too short; it needs at least 2: one input and its target")]
    RowTooShort { name: String, len: usize },
    #[error(
        "{name}: window of {len} bytes at offset {offset} runs past the end \
         ({offset} + {len} > {total} bytes)"
    )]
    WindowOutOfRange { name: String, offset: usize, len: usize, total: usize },
    #[error("{name}: no document {index}; there are {count}")]
    NoSuchDocument { name: String, index: usize, count: usize },
    #[error(
        "{name}: {count} documents from document {start} run past the end \
         (there are {total})"
    )]
    DocumentsOutOfRange { name: String, start: usize, count: usize, total: usize },
    #[error("{name}: the {count} documents from document {start} are all shorter than 2 bytes")]
    NoUsableDocuments { name: String, start: usize, count: usize },
    #[error("{name}: the file changed on disk after it was opened ({detail})")]
    Changed { name: String, detail: String },
    #[error(transparent)]
    Batch(#[from] BatchError),
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

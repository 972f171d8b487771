//! Byte-level datasets: any file, `.jsonl` documents, and the embedded synthetic
//! corpus; rows come out as `Batch`es.
//!
//! A token is one byte (vocabulary 256) and a training row is `x[0..=T]`, `T + 1`
//! bytes. [`Dataset::open`] takes any file: a name ending in `.jsonl` makes it a
//! JSON-lines dataset of documents (`{"text": "..."}` per line), anything else a
//! byte dataset. [`Dataset::window`], [`Dataset::random_windows`] (and
//! [`RandomWindows`] for per-step batches) and [`Dataset::documents`] cut rows;
//! [`Dataset::random_windows_traced`] also says where each row came from
//! ([`RowOrigin`], cut again by [`Dataset::row_at`]);
//! [`synthetic::default_dataset`] is the built-in corpus.

mod batch;
mod error;
mod jsonl;
mod rows;
mod source;
pub mod synthetic;

#[cfg(test)]
mod tests;

pub use batch::{Batch, BatchError, RowOrigin};
pub use error::{DatasetError, one_line, show_path};
pub use rows::RandomWindows;
pub use source::{
    Dataset, DatasetKind, FileProblem, fnv1a64, human_size, open_input_file, read_row_file, special_kind,
};
pub use synthetic::{corpus, default_dataset};

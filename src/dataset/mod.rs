//! Byte-level datasets: any file, `.jsonl` documents, and the embedded synthetic
//! corpus; rows come out as `Batch`es.

mod batch;

pub use batch::{Batch, BatchError};

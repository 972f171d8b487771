//! The session layer, between the library and the GUI: what a session saves
//! and its files, the GUI's background jobs and its one Vulkan context.
//!
//! - [`state`]: the serde [`State`] (what is saved; nothing live); [`config`] the configs it names.
//! - [`results`]: ladder results as saved: the input they ran on and the ladder's own types.
//! - [`file`](mod@file): the RON session file, its format version and loader, its errors.
//! - [`side`]: the side file of compared tensors, through `checkpoint`'s safetensors code.
//! - [`data`]: the per-user data folder (default sessions, the recent-sessions list).
//! - [`job`]: [`Job`], the one background job type (thread, progress, cancel, result, waker).
//! - [`gpu`]: the shared, lazily opened Vulkan context.
//! - [`weights`]: where a job's parameters come from (seeded, embedded, a file, trained here).

pub mod config;
pub mod data;
pub mod file;
pub mod gpu;
pub mod job;
pub mod results;
pub mod side;
pub mod state;
pub mod weights;

pub use file::{SessionError, load, load_side_file, parse, save, save_with_ladder, to_ron};
pub use job::{Job, Lost, Polled, Reporter, Waker};
pub use state::{FORMAT_VERSION, State};

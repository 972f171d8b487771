//! The session layer, between the library and the GUI: what a session saves
//! and its files, the GUI's background jobs and its one Vulkan context.
//!
//! - [`state`]: the serde [`State`] (what is saved; nothing live); [`config`] the configs it names.
//! - [`results`]: ladder results as saved: the input they ran on and the ladder's own types.
//! - [`file`]: the RON session file, its format version and loader, its errors.
//! - [`side`]: the side file of compared tensors, through `checkpoint`'s safetensors code.
//! - [`job`]: [`Job`], the one background job type (thread, progress, cancel, result, waker).
//! - [`gpu`]: the shared, lazily opened Vulkan context.
//!
//! Phase 2 of issue 15 (the GUI jobs not yet converted; `ui/ladder_run.rs`
//! runs in a [`Job`] already):
//! - `ui/speed.rs`: `SpeedRun` holds a `Job<Report, Result<(), String>>`;
//!   `stop` is [`Job::cancel`], the loop tests [`Reporter::cancelled`] instead
//!   of its `AtomicBool`, `send` is [`Reporter::progress`] (false: stop);
//!   the GPU engine is built on [`gpu::shared`].
//! - `ui/worker.rs`: a trace is a `Job<&'static str, Result<Box<Computed>, String>>`
//!   (progress: the stage); submitting drops (cancels) the previous one, so
//!   only the latest request finishes; the GPU trace uses [`gpu::engine`].
//! - `ui/diagnose.rs` `TrainLogView`: a `Job<(), Result<TrainLog, String>>`.
//! - Then `Waker::boxed` goes.

pub mod config;
pub mod file;
pub mod gpu;
pub mod job;
pub mod results;
pub mod side;
pub mod state;

pub use file::{SessionError, load, load_side_file, parse, save, save_with_ladder, to_ron};
pub use job::{Job, Lost, Polled, Reporter, Waker};
pub use state::{FORMAT_VERSION, State};

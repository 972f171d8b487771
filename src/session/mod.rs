//! The session layer, between the library and the GUI: what a session saves
//! and its files, the GUI's background jobs and its one Vulkan context.
//!
//! - [`state`]: the serde [`State`] (what is saved; nothing live); [`config`] the configs it names.
//! - [`results`]: ladder results as saved (mirrors, until the ladder's types deserialize).
//! - [`file`]: the RON session file, its format version and loader, its errors.
//! - [`side`]: the side file of compared tensors, through `checkpoint`'s safetensors code.
//! - [`job`]: [`Job`], the one background job type (thread, progress, cancel, result, waker).
//! - [`gpu`]: the shared, lazily opened Vulkan context.
//!
//! Phase 2 of issue 15 (the GUI job not yet converted; the speed run, the
//! trace worker and the training-log reader are [`Job`]s already):
//! - `ui/ladder_run.rs`: `LadderView` holds a `Job<Report, ()>`; the thread
//!   body is `run(&job, &rungs, None, &|rep| { r.progress(rep); })`, `poll`
//!   applies `polled.progress` and ends on `polled.done` (no `Report::Done`);
//!   `run` takes its context from [`gpu::engine`] instead of `Context::new`.
//! - Then `Waker::boxed`, `ui::worker::params` and the `ui::state` /
//!   `ui::saved` re-exports go, and the `Saved*` mirrors of [`results`] give
//!   way to the ladder's own serde types.

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

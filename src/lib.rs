//! dualscope: a visual debugger for a GPU training engine of the dual-stream
//! language model in docs/model.md.
//!
//! Data flows one way: `dataset → model → {cpu, vk} → engine → {ladder, train}
//! → session → {ui, cli}`; a module imports only what stands to its left.
//! `checkpoint` is the file format of `model`. `docs/architecture.md` is the map.

pub mod memory;
pub mod rng;
pub mod tensor;

pub mod dataset;
pub mod model;

pub mod checkpoint;

pub mod step;

pub mod cpu;
pub mod vk;

pub mod engine;

pub mod capture;

pub mod ladder;
pub mod train;

pub mod triage;

pub mod mutate;

pub mod session;

pub mod cli;

pub mod ui;

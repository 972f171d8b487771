//! dualscope: a visual debugger for a GPU training engine of the dual-stream
//! language model in MODEL.md.
//!
//! Data flows one way: `dataset → model → {cpu, vk} → ladder → session → ui`;
//! a module imports only what stands to its left. `checkpoint` is the file
//! format of `model`; `cli` is a front end, like the UI.

pub mod rng;
pub mod tensor;

pub mod dataset;
pub mod model;

pub mod checkpoint;

pub mod cpu;
pub mod vk;

pub mod ladder;
pub mod session;

pub mod cli;

pub mod ui;

//! dualscope: a visual debugger for a GPU training engine of the dual-stream
//! language model in MODEL.md.
//!
//! Data flows one way: `dataset → model → {cpu, vk} → ladder → session → ui`;
//! a module imports only what stands to its left.

pub mod rng;
pub mod tensor;

pub mod dataset;
pub mod model;

pub mod checkpoint;

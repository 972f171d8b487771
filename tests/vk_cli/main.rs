//! `dualscope gpu-info`, `dualscope ladder`, and `grads`, `step` and `train`
//! with `--engine gpu` against `--engine cpu`, end to end: files, output and exit codes.
//!
//! One test binary, its tests by concern: the device, the ladder and its
//! diagnostics ([`ladder`]), the GPU engine's commands against the CPU's
//! ([`engines`]), and `bench`, the mixed step and the engine's switches
//! ([`bench`]).

#[path = "../common/mod.rs"]
mod common;

mod bench;
mod engines;
mod ladder;

//! The CPU reference's functions that the layers above the engine call
//! directly: a traced forward and backward (every named intermediate, for the
//! Sequence view and the ladder) and one batch's gradients in f32 or f64.
//! Training steps go through [`super::Engine`].

pub use crate::cpu::{
    CpuError, Trace, activation_bytes, backward, forward_with, grads, grads_with, traced, traced_rounded,
};

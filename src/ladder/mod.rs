//! The ladder of docs/model.md: each rung runs one stage on the CPU reference and on
//! the Vulkan engine from the same inputs and compares them under a numerical
//! contract. Rung 1 (`gemm`) checks the matrix products alone (`gemm.rs`);
//! rungs 2–11 and the end-to-end gate run the stages of the training step
//! (`model.rs`, `end_to_end.rs`). `rung.rs` says what each rung is; `run.rs`
//! runs a list of them in order for the CLI, the GUI and bisect.

// `!(err <= tol)` is deliberate throughout: a NaN error must fail the check.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod audit;
mod bisect;
pub mod carry;
mod case;
mod compare;
mod coverage;
mod end_to_end;
mod gemm;
pub mod headroom;
pub mod inputs;
mod model;
pub mod precision_bisect;
mod repeat;
mod result;
pub mod run;
mod rung;
mod serde_compat;
mod setup;
mod stress;
pub mod suite;
mod tolerance;

use crate::engine::gpu::VkError;

pub use bisect::{BisectReport, Probe, bisect, doubling};
pub use compare::{Comparison, WorstElement, compare};
pub use end_to_end::{Contributor, EndToEnd};
pub use gemm::{
    GemmCase, RANGE_SCALE, bf16_tolerance, f16_tolerance, f32_tolerance, gemm_cases, gemm_cases_for, round_bf16,
};
pub use headroom::{Headroom, TensorHeadroom};
pub use model::{ModelLadder, RungTensor, scale_precision};
pub use precision_bisect::{MapProbe, Outcome, PrecisionBisectReport, PrecisionBisectSpec, precision_bisect};
pub use repeat::{RepeatReport, RunDiff, Side, TensorRepeat, diff_runs, repeat};
pub use result::{CaseResult, Counts, KernelName, RungResult, Status};
pub use run::{Corrupt, Corruption, Event, LadderReport, LadderSpec, OnError, RungError, Summary, run};
pub use rung::Rung;
pub use setup::{MIXED_SCALE, Mode, OPTIM_SCALE, Setup, backward_scale, default_batch, step_scale};
pub use tolerance::{
    LOSS_TOLERANCE, MIXED_PRODUCT_BOUND, NORM_TOLERANCE, loss_tolerance, loss_tolerance_for, norm_tolerance,
    norm_tolerance_for,
};

/// The precision the GPU side runs in (the CPU reference is f32 and f64):
/// f32, or the mixed-precision step with f16 or bfloat16 products.
use crate::step::{MapStage, Precision, PrecisionMap, StageKind};

const fn ids<const N: usize>(rungs: [Rung; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = rungs[i].id();
        i += 1;
    }
    out
}

/// Every rung of docs/model.md, in order, by id ([`Rung::ALL`]).
pub const ALL_RUNGS: [&str; 11] = ids(Rung::ALL);

/// The rungs this build implements, by id.
pub const IMPLEMENTED: [&str; 11] = ALL_RUNGS;

#[derive(Debug, thiserror::Error)]
pub enum LadderError {
    #[error("unknown rung {0:?}: the rungs are {all}; implemented so far: {done}", all = ALL_RUNGS.join(", "), done = IMPLEMENTED.join(", "))]
    Unknown(String),
    #[error("rung {0:?} is not implemented yet; implemented so far: {done}", done = IMPLEMENTED.join(", "))]
    NotImplemented(String),
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Vk(#[from] VkError),
}

/// The rungs `ids` name, in their order; an error for the first id that names
/// no rung or one this build does not implement.
pub fn parse_rungs<S: AsRef<str>>(ids: &[S]) -> Result<Vec<Rung>, LadderError> {
    ids.iter()
        .map(|id| {
            let r = Rung::parse(id.as_ref())?;
            if r.is_implemented() { Ok(r) } else { Err(LadderError::NotImplemented(id.as_ref().to_string())) }
        })
        .collect()
}

/// Checks that every id names an implemented rung.
pub fn check_rungs(ids: &[String]) -> Result<(), LadderError> {
    parse_rungs(ids).map(|_| ())
}

/// Runs rung 1 (`gemm`) for a config with inputs drawn from a seed, its
/// products on the kernel the choice picks (a planted GEMM fault replaces the
/// kernel).
pub use gemm::run as run_gemm;

//! The ladder of MODEL.md: each rung runs one stage on the CPU reference and on
//! the Vulkan engine from the same inputs and compares them under a numerical
//! contract. Rung 1 (`gemm`) checks the matrix products alone (`gemm.rs`);
//! rungs 2–11 and the end-to-end gate run the stages of the training step
//! (`model.rs`).

// `!(err <= tol)` is deliberate throughout: a NaN error must fail the check.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod audit;
mod bisect;
mod compare;
mod gemm;
mod model;

use serde::Serialize;

use crate::model::Config;
use crate::vk::{Context, VkError};

pub use bisect::{BisectReport, Probe, bisect, doubling};
pub use compare::{Comparison, compare};
pub use gemm::{
    GemmCase, RANGE_SCALE, bf16_tolerance, f16_tolerance, f32_tolerance, gemm_cases, gemm_cases_for, round_bf16,
};
pub use model::{
    Contributor, EndToEnd, LOSS_TOLERANCE, MIXED_PRODUCT_BOUND, MIXED_SCALE, Mode, ModelLadder, NORM_TOLERANCE,
    OPTIM_SCALE, RungTensor, Setup, backward_scale, default_batch, loss_tolerance, mixed_tolerance, norm_tolerance,
    outputs, product_depth, step_scale, tolerance, tolerance_in,
};

/// Every rung of MODEL.md, in order.
pub const ALL_RUNGS: [&str; 11] = [
    "gemm",
    "embed_fwd",
    "gru_fwd",
    "attn_fwd",
    "head_fwd",
    "loss",
    "head_bwd",
    "attn_bwd",
    "gru_bwd",
    "embed_bwd",
    "optim",
];

/// The rungs this build implements.
pub const IMPLEMENTED: [&str; 11] = ALL_RUNGS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// The precision the GPU side runs in (the CPU reference is f32 and f64):
/// f32, or the mixed-precision step with f16 or bfloat16 products.
pub use crate::vk::ops::Precision;

/// One comparison inside a rung (for `gemm`: one matrix product).
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    pub name: String,
    /// What was computed, e.g. `m=1024 n=384 k=64 tb`.
    pub params: String,
    pub status: Status,
    /// ‖gpu − ref‖ / ‖ref‖ in f64: the contract's measure. The reference is
    /// the f64 product for `gemm` and the f32 CPU engine for rungs 2–11.
    pub rel_l2: f64,
    /// The f32 CPU engine against the f64 CPU reference: what f32 arithmetic
    /// costs anyway.
    pub rel_l2_cpu_f32: f64,
    /// The GPU against the f64 CPU reference (rungs 2–11; for `gemm`,
    /// `rel_l2` is already against f64).
    pub rel_l2_gpu_f64: Option<f64>,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    pub tolerance: f64,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    /// Why the case did not pass, if it did not.
    pub notes: Vec<String>,
}

/// A rung's verdict: the worst of its cases, with their details.
#[derive(Clone, Debug, Serialize)]
pub struct RungResult {
    pub id: String,
    pub status: Status,
    pub precision: Precision,
    /// The kernel that computed the rung's matrix products (`GemmPath::name`).
    pub gemm_path: Option<&'static str>,
    /// The largest relative L2 error over the cases.
    pub rel_l2: f64,
    pub max_abs_err: f64,
    /// Flat index of the largest absolute error, in the case `max_abs_case`.
    pub max_abs_index: usize,
    pub max_abs_case: String,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    /// The tolerance of the case with the largest error relative to its own.
    pub tolerance: f64,
    /// Device time of all cases (timestamp queries); `None` without timestamps.
    pub gpu_ms: Option<f64>,
    /// Time of the f32 CPU engine on the same cases.
    pub cpu_ms: f64,
    pub cases: Vec<CaseResult>,
}

impl RungResult {
    pub fn from_cases(id: &str, precision: Precision, cases: Vec<CaseResult>) -> RungResult {
        let status = cases.iter().map(|c| c.status).max().unwrap_or(Status::Pass);
        let worst_rel = cases.iter().max_by(|a, b| (a.rel_l2 / a.tolerance).total_cmp(&(b.rel_l2 / b.tolerance)));
        let worst_abs = cases.iter().max_by(|a, b| a.max_abs_err.total_cmp(&b.max_abs_err));
        let gpu: Vec<f64> = cases.iter().filter_map(|c| c.gpu_ms).collect();
        RungResult {
            id: id.to_string(),
            status,
            precision,
            gemm_path: None,
            rel_l2: cases.iter().map(|c| c.rel_l2).fold(0.0, f64::max),
            max_abs_err: worst_abs.map_or(0.0, |c| c.max_abs_err),
            max_abs_index: worst_abs.map_or(0, |c| c.max_abs_index),
            max_abs_case: worst_abs.map_or(String::new(), |c| c.name.clone()),
            non_finite_cpu: cases.iter().map(|c| c.non_finite_cpu).sum(),
            non_finite_gpu: cases.iter().map(|c| c.non_finite_gpu).sum(),
            sentinel_ok: cases.iter().all(|c| c.sentinel_ok),
            tolerance: worst_rel.map_or(0.0, |c| c.tolerance),
            gpu_ms: (gpu.len() == cases.len() && !gpu.is_empty()).then(|| gpu.iter().sum()),
            cpu_ms: cases.iter().map(|c| c.cpu_ms).sum(),
            cases,
        }
    }
}

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

/// Checks that every id names an implemented rung.
pub fn check_rungs(ids: &[String]) -> Result<(), LadderError> {
    for id in ids {
        if !ALL_RUNGS.contains(&id.as_str()) {
            return Err(LadderError::Unknown(id.clone()));
        }
        if !IMPLEMENTED.contains(&id.as_str()) {
            return Err(LadderError::NotImplemented(id.clone()));
        }
    }
    Ok(())
}

/// Runs rung 1 (`gemm`) for `cfg` with inputs drawn from `seed`; rungs 2–11
/// run through a [`ModelLadder`].
pub fn run_rung(
    ctx: &Context,
    id: &str,
    cfg: &Config,
    precision: Precision,
    seed: u64,
    gemm_path: crate::vk::ops::GemmChoice,
) -> Result<RungResult, LadderError> {
    run_rung_with_fault(ctx, id, cfg, precision, seed, gemm_path, None)
}

/// [`run_rung`] with a planted fault switched on (the GEMM faults affect rung 1).
pub fn run_rung_with_fault(
    ctx: &Context,
    id: &str,
    cfg: &Config,
    precision: Precision,
    seed: u64,
    gemm_path: crate::vk::ops::GemmChoice,
    fault: Option<crate::vk::engine::Fault>,
) -> Result<RungResult, LadderError> {
    check_rungs(&[id.to_string()])?;
    match id {
        "gemm" => gemm::run(ctx, cfg, precision, seed, gemm_path, fault),
        other => Err(LadderError::NotImplemented(format!("{other} (it runs through ModelLadder)"))),
    }
}

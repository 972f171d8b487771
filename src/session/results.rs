//! Ladder results as a session keeps them: serde mirrors of the ladder's
//! `RungResult`, `CaseResult` and `EndToEnd`, which only serialise today.
//! `From` conversions go both ways; the session tests check that a round trip
//! through RON keeps every field.
//!
//! Phase 2 of issue 15: once the ladder's types derive `Deserialize`, the
//! `Saved*` mirrors go and [`SavedLadder`] holds the ladder's own types; their
//! RON must read the same (same field and variant names), so old sessions load.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::config::ConfigName;
use crate::ladder::{CaseResult, Contributor, EndToEnd, Precision, RungResult, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SavedStatus {
    Pass,
    Warn,
    Fail,
}

impl From<Status> for SavedStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Pass => SavedStatus::Pass,
            Status::Warn => SavedStatus::Warn,
            Status::Fail => SavedStatus::Fail,
        }
    }
}

impl From<SavedStatus> for Status {
    fn from(s: SavedStatus) -> Self {
        match s {
            SavedStatus::Pass => Status::Pass,
            SavedStatus::Warn => Status::Warn,
            SavedStatus::Fail => Status::Fail,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SavedPrecision {
    F32,
    F16,
    Bf16,
}

impl From<Precision> for SavedPrecision {
    fn from(p: Precision) -> Self {
        match p {
            Precision::F32 => SavedPrecision::F32,
            Precision::F16 => SavedPrecision::F16,
            Precision::Bf16 => SavedPrecision::Bf16,
        }
    }
}

impl From<SavedPrecision> for Precision {
    fn from(p: SavedPrecision) -> Self {
        match p {
            SavedPrecision::F32 => Precision::F32,
            SavedPrecision::F16 => Precision::F16,
            SavedPrecision::Bf16 => Precision::Bf16,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedCase {
    pub name: String,
    pub params: String,
    pub status: SavedStatus,
    pub rel_l2: f64,
    pub rel_l2_cpu_f32: f64,
    pub rel_l2_gpu_f64: Option<f64>,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    pub tolerance: f64,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedRung {
    pub id: String,
    pub status: SavedStatus,
    pub precision: SavedPrecision,
    pub rel_l2: f64,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub max_abs_case: String,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    pub tolerance: f64,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub cases: Vec<SavedCase>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedContributor {
    pub tensor: String,
    pub share: f64,
    pub rel_l2: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedEndToEnd {
    pub status: SavedStatus,
    pub loss_cpu: f64,
    pub loss_gpu: f64,
    pub loss_rel_err: f64,
    pub loss_tolerance: f64,
    pub grad_norm_cpu: f64,
    pub grad_norm_gpu: f64,
    pub grad_norm_rel_diff: f64,
    pub grad_norm_tolerance: f64,
    pub grads_rel_l2: f64,
    pub top_contributors: Vec<SavedContributor>,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub notes: Vec<String>,
}

/// What the ladder ran on, so that a loaded result is not mistaken for one of
/// the sequence on screen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LadderInput {
    pub config: ConfigName,
    pub seed: u64,
    pub dataset_hash: Option<String>,
    pub offset: usize,
    pub len: usize,
    /// The checkpoint the parameters came from (`None`: initialised from `seed`).
    pub checkpoint: Option<std::path::PathBuf>,
    /// A fault deliberately injected before the run (example sessions), if any.
    pub fault: Option<String>,
}

impl LadderInput {
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} · seed {} · tokens {}..{}",
            self.config.label(),
            self.seed,
            self.offset,
            self.offset + self.len
        );
        if let Some(f) = &self.fault {
            s += &format!(" · injected fault: {f}");
        }
        s
    }
}

/// A ladder run as a session saves it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedLadder {
    pub input: LadderInput,
    /// Every rung run, by id: its result or why it could not run.
    pub rungs: BTreeMap<String, Result<SavedRung, String>>,
    pub end_to_end: Option<Result<SavedEndToEnd, String>>,
}

impl From<&CaseResult> for SavedCase {
    fn from(c: &CaseResult) -> Self {
        SavedCase {
            name: c.name.clone(),
            params: c.params.clone(),
            status: c.status.into(),
            rel_l2: c.rel_l2,
            rel_l2_cpu_f32: c.rel_l2_cpu_f32,
            rel_l2_gpu_f64: c.rel_l2_gpu_f64,
            max_abs_err: c.max_abs_err,
            max_abs_index: c.max_abs_index,
            non_finite_cpu: c.non_finite_cpu,
            non_finite_gpu: c.non_finite_gpu,
            sentinel_ok: c.sentinel_ok,
            tolerance: c.tolerance,
            gpu_ms: c.gpu_ms,
            cpu_ms: c.cpu_ms,
            notes: c.notes.clone(),
        }
    }
}

impl From<&SavedCase> for CaseResult {
    fn from(c: &SavedCase) -> Self {
        CaseResult {
            name: c.name.clone(),
            params: c.params.clone(),
            status: c.status.into(),
            rel_l2: c.rel_l2,
            rel_l2_cpu_f32: c.rel_l2_cpu_f32,
            rel_l2_gpu_f64: c.rel_l2_gpu_f64,
            max_abs_err: c.max_abs_err,
            max_abs_index: c.max_abs_index,
            non_finite_cpu: c.non_finite_cpu,
            non_finite_gpu: c.non_finite_gpu,
            sentinel_ok: c.sentinel_ok,
            tolerance: c.tolerance,
            gpu_ms: c.gpu_ms,
            cpu_ms: c.cpu_ms,
            notes: c.notes.clone(),
        }
    }
}

impl From<&RungResult> for SavedRung {
    fn from(r: &RungResult) -> Self {
        SavedRung {
            id: r.id.clone(),
            status: r.status.into(),
            precision: r.precision.into(),
            rel_l2: r.rel_l2,
            max_abs_err: r.max_abs_err,
            max_abs_index: r.max_abs_index,
            max_abs_case: r.max_abs_case.clone(),
            non_finite_cpu: r.non_finite_cpu,
            non_finite_gpu: r.non_finite_gpu,
            sentinel_ok: r.sentinel_ok,
            tolerance: r.tolerance,
            gpu_ms: r.gpu_ms,
            cpu_ms: r.cpu_ms,
            cases: r.cases.iter().map(SavedCase::from).collect(),
        }
    }
}

impl From<&SavedRung> for RungResult {
    fn from(r: &SavedRung) -> Self {
        RungResult {
            id: r.id.clone(),
            status: r.status.into(),
            precision: r.precision.into(),
            // Saved sessions do not record the kernel.
            gemm_path: None,
            rel_l2: r.rel_l2,
            max_abs_err: r.max_abs_err,
            max_abs_index: r.max_abs_index,
            max_abs_case: r.max_abs_case.clone(),
            non_finite_cpu: r.non_finite_cpu,
            non_finite_gpu: r.non_finite_gpu,
            sentinel_ok: r.sentinel_ok,
            tolerance: r.tolerance,
            gpu_ms: r.gpu_ms,
            cpu_ms: r.cpu_ms,
            cases: r.cases.iter().map(CaseResult::from).collect(),
        }
    }
}

impl From<&EndToEnd> for SavedEndToEnd {
    fn from(e: &EndToEnd) -> Self {
        SavedEndToEnd {
            status: e.status.into(),
            loss_cpu: e.loss_cpu,
            loss_gpu: e.loss_gpu,
            loss_rel_err: e.loss_rel_err,
            loss_tolerance: e.loss_tolerance,
            grad_norm_cpu: e.grad_norm_cpu,
            grad_norm_gpu: e.grad_norm_gpu,
            grad_norm_rel_diff: e.grad_norm_rel_diff,
            grad_norm_tolerance: e.grad_norm_tolerance,
            grads_rel_l2: e.grads_rel_l2,
            top_contributors: e
                .top_contributors
                .iter()
                .map(|c| SavedContributor { tensor: c.tensor.clone(), share: c.share, rel_l2: c.rel_l2 })
                .collect(),
            gpu_ms: e.gpu_ms,
            cpu_ms: e.cpu_ms,
            notes: e.notes.clone(),
        }
    }
}

impl From<&SavedEndToEnd> for EndToEnd {
    fn from(e: &SavedEndToEnd) -> Self {
        EndToEnd {
            status: e.status.into(),
            loss_cpu: e.loss_cpu,
            loss_gpu: e.loss_gpu,
            loss_rel_err: e.loss_rel_err,
            loss_tolerance: e.loss_tolerance,
            grad_norm_cpu: e.grad_norm_cpu,
            grad_norm_gpu: e.grad_norm_gpu,
            grad_norm_rel_diff: e.grad_norm_rel_diff,
            grad_norm_tolerance: e.grad_norm_tolerance,
            grads_rel_l2: e.grads_rel_l2,
            top_contributors: e
                .top_contributors
                .iter()
                .map(|c| Contributor { tensor: c.tensor.clone(), share: c.share, rel_l2: c.rel_l2 })
                .collect(),
            gpu_ms: e.gpu_ms,
            cpu_ms: e.cpu_ms,
            notes: e.notes.clone(),
        }
    }
}

//! The ladder's result types: a case, a rung's verdict, and the status they
//! carry. They serialise to the CLI's JSON and round-trip through a session's
//! RON (see `serde_compat.rs` for the spellings older sessions use).

use serde::{Deserialize, Serialize};

use super::{Precision, Rung};

/// A verdict: `"pass"`, `"warn"`, `"not_run"`, `"fail"` in JSON and new
/// sessions; the aliases read the spelling of sessions saved before (`Pass`,
/// ...).
///
/// The order is the severity the worst-of rules use (a rung is its worst
/// case, a run its worst rung): `Pass < Warn < NotRun < Fail`. A rung with a
/// case that did not run is therefore not a pass, while a failure anywhere
/// still outranks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[serde(alias = "Pass")]
    Pass,
    #[serde(alias = "Warn")]
    Warn,
    /// Nothing was computed: the device lacks the kernel or feature the case
    /// needs (e.g. a cooperative-matrix product on a device without them).
    #[serde(rename = "not_run", alias = "NotRun")]
    NotRun,
    #[serde(alias = "Fail")]
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::NotRun => "not_run",
            Status::Fail => "fail",
        }
    }
}

/// How many of something (rungs, cases) ended in each status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub pass: usize,
    pub warn: usize,
    pub fail: usize,
    pub not_run: usize,
}

impl Counts {
    pub fn of(statuses: impl IntoIterator<Item = Status>) -> Counts {
        let mut c = Counts::default();
        for s in statuses {
            match s {
                Status::Pass => c.pass += 1,
                Status::Warn => c.warn += 1,
                Status::NotRun => c.not_run += 1,
                Status::Fail => c.fail += 1,
            }
        }
        c
    }

    /// `9 pass, 0 warn, 0 fail, 2 not run`.
    pub fn line(&self) -> String {
        format!("{} pass, {} warn, {} fail, {} not run", self.pass, self.warn, self.fail, self.not_run)
    }
}

/// One comparison inside a rung (for `gemm`: one matrix product).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The tensor's f16 headroom on both sides (rungs 2–11, docs/headroom.md);
    /// absent for `gemm`'s products and in reports written before it.
    #[serde(default)]
    pub headroom: Option<super::headroom::TensorHeadroom>,
    /// The element furthest outside its envelope against f64 (rungs 2–11,
    /// `compare::worst_element`); absent for `gemm` and in older reports.
    #[serde(default)]
    pub worst_element: Option<super::WorstElement>,
}

/// A GEMM kernel's name (`GemmPath::name`): borrowed from this build's table,
/// or owned when read from a report of another build that names a kernel this
/// one does not know.
pub type KernelName = std::borrow::Cow<'static, str>;

/// A rung's verdict: the worst of its cases, with their details.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RungResult {
    /// The rung; JSON and RON spell its id ([`Rung::id`]).
    pub id: Rung,
    pub status: Status,
    #[serde(with = "super::serde_compat::precision")]
    pub precision: Precision,
    /// The kernel that computed the rung's matrix products (`GemmPath::name`);
    /// absent in sessions saved before it was recorded.
    #[serde(default)]
    pub gemm_path: Option<KernelName>,
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
    /// The verdict of `rung` from its cases: the worst status, the largest
    /// errors, the summed times (`gemm_path` unset).
    pub fn new(rung: Rung, precision: Precision, cases: Vec<CaseResult>) -> RungResult {
        let status = cases.iter().map(|c| c.status).max().unwrap_or(Status::Pass);
        let worst_rel = cases.iter().max_by(|a, b| (a.rel_l2 / a.tolerance).total_cmp(&(b.rel_l2 / b.tolerance)));
        let worst_abs = cases.iter().max_by(|a, b| a.max_abs_err.total_cmp(&b.max_abs_err));
        let gpu: Vec<f64> = cases.iter().filter_map(|c| c.gpu_ms).collect();
        RungResult {
            id: rung,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;
    use crate::ladder::{Contributor, EndToEnd};

    /// Values whose figures are exact binary fractions (65504 / 2^11 the
    /// largest, a quarter subnormal, half zeros), which RON's text reads back equal.
    const HEADROOM: [f32; 8] = [31.984375, 0.0, 2e-6, 1.0, 0.5, 0.0, 0.0, 0.0];

    fn rung() -> RungResult {
        let case = CaseResult {
            name: "gru.l0.h".into(),
            params: "6 values".into(),
            status: Status::Warn,
            rel_l2: 1.5e-6,
            rel_l2_cpu_f32: 2e-7,
            rel_l2_gpu_f64: Some(3e-6),
            max_abs_err: 1e-7,
            max_abs_index: 4,
            non_finite_cpu: 0,
            non_finite_gpu: 1,
            sentinel_ok: true,
            tolerance: 2e-5,
            gpu_ms: None,
            cpu_ms: 0.25,
            notes: vec!["a note".into()],
            headroom: Some(crate::ladder::headroom::TensorHeadroom::of(&HEADROOM, &HEADROOM, 2.0)),
            worst_element: Some(crate::ladder::WorstElement { index: 3, err: 0.25, cpu_err: 0.125, excess: 0.5 }),
        };
        let mut r = RungResult::new(Rung::GruFwd, Precision::Bf16, vec![case]);
        r.gemm_path = Some(crate::engine::gpu::GemmPath::TiledBf16In.name().into());
        r.gpu_ms = Some(1.25);
        r
    }

    fn end_to_end() -> EndToEnd {
        EndToEnd {
            status: Status::Fail,
            loss_cpu: 5.25,
            loss_gpu: 5.5,
            loss_rel_err: 0.05,
            loss_tolerance: 1e-5,
            grad_norm_cpu: 0.5,
            grad_norm_gpu: 0.25,
            grad_norm_rel_diff: 0.5,
            grad_norm_tolerance: 1e-4,
            grads_rel_l2: 0.75,
            top_contributors: vec![Contributor { tensor: "head.bias".into(), share: 1.0, rel_l2: 0.5 }],
            gpu_ms: None,
            cpu_ms: 1.0,
            notes: vec!["loss differs".into()],
        }
    }

    /// `NotRun` is spelt `not_run` (and read as `NotRun` too), the old
    /// spellings still read, and the order keeps a failure above it and a
    /// pass below.
    #[test]
    fn not_run_is_spelt_and_ordered() {
        assert_eq!(serde_json::to_string(&Status::NotRun).unwrap(), "\"not_run\"");
        for (text, s) in
            [("not_run", Status::NotRun), ("NotRun", Status::NotRun), ("Pass", Status::Pass), ("fail", Status::Fail)]
        {
            assert_eq!(serde_json::from_str::<Status>(&format!("\"{text}\"")).unwrap(), s, "{text}");
            assert_eq!(ron::from_str::<Status>(text).unwrap(), s, "{text}");
        }
        assert!(Status::Pass < Status::Warn && Status::Warn < Status::NotRun && Status::NotRun < Status::Fail);
        let c = Counts::of([Status::Pass, Status::NotRun, Status::Pass, Status::Fail]);
        assert_eq!(c.line(), "2 pass, 0 warn, 1 fail, 1 not run");
    }

    /// Every field survives RON (sessions) and JSON (reports).
    #[test]
    fn results_round_trip_through_ron_and_json() {
        let r = rung();
        let (text, json) = (ron::to_string(&r).unwrap(), serde_json::to_string(&r).unwrap());
        assert_eq!(ron::from_str::<RungResult>(&text).unwrap(), r);
        assert_eq!(serde_json::from_str::<RungResult>(&json).unwrap(), r);
        let e = end_to_end();
        let text = ron::to_string(&e).unwrap();
        assert_eq!(ron::from_str::<EndToEnd>(&text).unwrap(), e);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!((json["id"].as_str(), json["status"].as_str()), (Some("gru_fwd"), Some("warn")));
        assert_eq!((json["precision"].as_str(), json["gemm_path"].as_str()), (Some("bf16"), Some("tiled bf16-in")));
        assert_eq!(json["cases"][0]["status"].as_str(), Some("warn"));
    }

    /// The example session's ladder, in the spelling the GUI's mirror types
    /// wrote (`Pass`, `F32`, no `gemm_path`), reads as the ladder's own types.
    #[test]
    fn old_sessions_read_as_results() {
        #[derive(Deserialize)]
        struct Session {
            ladder: Option<Ladder>,
        }
        #[derive(Deserialize)]
        struct Ladder {
            rungs: BTreeMap<String, Result<RungResult, String>>,
            end_to_end: Option<Result<EndToEnd, String>>,
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/sessions/example-failing.ron");
        let s: Session = ron::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let l = s.ladder.expect("the example has ladder results");
        assert!(!l.rungs.is_empty());
        for (id, r) in &l.rungs {
            let r = r.as_ref().unwrap();
            assert_eq!(r.id.id(), id);
            assert_eq!((r.precision, r.gemm_path.as_deref()), (Precision::F32, None));
            assert!(Rung::parse(id).is_ok());
        }
        assert_eq!(l.rungs["attn_bwd"].as_ref().unwrap().status, Status::Pass);
        assert_eq!(l.end_to_end.unwrap().unwrap().status, Status::Fail);
    }
}

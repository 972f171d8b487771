//! Drift: the GPU engine and the CPU reference trained in lockstep from the
//! same start on the same batches, with a float64 CPU run beside them, and
//! the first step at which the GPU parts from the f32 CPU run by more than
//! rounding explains.
//!
//! Per step and parameter tensor, the *divergence* is
//! `‖θ_gpu − θ_cpu32‖ / ‖θ_cpu32‖` and the *reference*
//! `‖θ_cpu32 − θ_cpu64‖ / ‖θ_cpu64‖`: the reference is what f32 rounding alone
//! does to a run that follows docs/model.md exactly. The [`Envelope`] (see
//! docs/triage.md, "Drift") bounds the divergence by `K` times the reference
//! (with a floor of a few ulps), scaled for a mixed-precision step by its
//! unit roundoff. The loop is [`run`] (in `drift_run.rs`).

use crate::capture::float;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::TriageError;
use crate::model::{Config, Params};
use crate::step::Fault;
use crate::step::StepOptions;
use crate::step::{GemmChoice, Precision};

pub use super::drift_run::{Observer, run};
pub use crate::train::batch_seed;

/// The version of `drift.json` this code writes.
pub const DRIFT_FORMAT: u32 = 1;
/// The report's file under `--out`.
pub const REPORT_FILE: &str = "drift.json";
/// How many times the rounding reference the GPU may drift: its summation
/// orders differ from the CPU's (tiled products, tree reductions), so its
/// rounding is of the same order but not the same.
pub const K: f64 = 16.0;
/// The unit roundoff of f32 (half an ulp at 1): the reference's own rounding.
pub const F32_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;
/// The floor of the reference, per step of history, in f32 unit roundoffs:
/// one ulp (two unit roundoffs, 2^-23) per element (see [`Envelope::floor`]).
pub const FLOOR_ROUNDOFFS: f64 = 2.0;

/// A persistent engine fault planted from one step on (`--inject
/// persistent[=FAULT]@STEP`): the GPU computes steps `step..` with `fault`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planted {
    pub fault: Fault,
    pub step: u64,
}

/// The fault `persistent@STEP` plants (`train --inject`'s default).
pub const DEFAULT_FAULT: Fault = crate::train::inject::DEFAULT_PERSISTENT;

impl Planted {
    /// Parses `persistent[=FAULT]@STEP` (the value of `--inject`) with
    /// `train --inject`'s parser, refusing its other kinds: drift compares
    /// engines, and only a persistent fault is part of one.
    pub fn parse(s: &str) -> Result<Planted, String> {
        let mut map = crate::train::Injections::new();
        crate::train::inject::parse_into(&mut map, &[s.to_string()])?;
        match map.pop_first() {
            Some((step, crate::train::Inject::Persistent(fault))) => Ok(Planted { fault, step }),
            Some((_, other)) => Err(format!(
                "--inject {s}: drift plants only persistent[=FAULT] (an engine fault), not {}",
                other.name()
            )),
            None => Err(format!("--inject {s}: expected persistent[=FAULT]@STEP")),
        }
    }

    /// `persistent=reset_before_matmul` (how a capture names it).
    pub fn name(&self) -> String {
        format!("persistent={}", self.fault.name())
    }
}

/// What to run: the model and its start, the batches, the GPU step, and
/// what to do with the first step outside the envelope.
#[derive(Clone, Debug)]
pub struct DriftPlan {
    pub config: Config,
    /// The weights all three runs start from (fresh optimizer state).
    pub start: Params<f32>,
    /// Steps `1..=steps`.
    pub steps: u64,
    /// Rows per batch and positions per row.
    pub rows: usize,
    pub t: usize,
    /// The seed of the batches (`train`'s formula).
    pub seed: u64,
    /// The GPU step's precision; the CPU runs are f32 and f64.
    pub precision: Precision,
    pub gemm: GemmChoice,
    pub optim: StepOptions,
    pub planted: Option<Planted>,
    /// Stop after the first step outside the envelope.
    pub stop_at_first: bool,
    /// Where `drift.json` and the capture go.
    pub out: Option<PathBuf>,
}

impl DriftPlan {
    /// The checks that need nothing but the plan: sizes at least 1, and a
    /// report that fits in memory (checked before anything is allocated).
    pub fn check(&self) -> Result<(), TriageError> {
        if self.steps == 0 {
            return Err(TriageError::Usage("--steps must be at least 1".into()));
        }
        if self.rows == 0 {
            return Err(TriageError::Usage("--batch must be at least 1".into()));
        }
        if self.t == 0 {
            return Err(TriageError::Usage("--seq-len must be at least 1".into()));
        }
        let n = crate::model::param_specs(&self.config).len() as u64;
        let per_step = (std::mem::size_of::<DriftStep>() as u64).saturating_add(n.saturating_mul(3 * 8 + 64));
        let bytes = crate::memory::bytes_of(&[self.steps, per_step]);
        crate::memory::check_alloc(&format!("--steps {}", self.steps), bytes)
            .map_err(|e| TriageError::Usage(e.to_string()))?;
        if let Some(p) = self.planted
            && p.step > self.steps
        {
            return Err(TriageError::Usage(format!(
                "--inject {}@{}: past the last step ({})",
                p.name(),
                p.step,
                self.steps
            )));
        }
        Ok(())
    }
}

/// The unit roundoff of the GPU step's products.
pub fn unit_roundoff(p: Precision) -> f64 {
    match p {
        Precision::F32 => F32_ROUNDOFF,
        Precision::F16 => 1.0 / (1u64 << 11) as f64,
        Precision::Bf16 => 1.0 / (1u64 << 8) as f64,
    }
}

/// What rounding explains: `K × max(reference, floor(step)) × ratio`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub k: f64,
    /// The unit roundoff of the GPU's products over f32's (1, 2^13 for f16,
    /// 2^16 for bf16).
    pub ratio: f64,
    /// [`FLOOR_ROUNDOFFS`] × the f32 unit roundoff.
    pub floor_per_step: f64,
}

impl Envelope {
    pub fn new(p: Precision) -> Envelope {
        Envelope { k: K, ratio: unit_roundoff(p) / F32_ROUNDOFF, floor_per_step: FLOOR_ROUNDOFFS * F32_ROUNDOFF }
    }

    /// The least reference after `step` steps: one f32 ulp of relative
    /// error per element and step (an ulp is at most 2^-23 of the value, so
    /// an element-wise error of one ulp is at most 2^-23 of the norm,
    /// whatever the number of elements), the steps' independent roundings
    /// adding up as a random walk (`√step`).
    pub fn floor(&self, step: u64) -> f64 {
        self.floor_per_step * (step.max(1) as f64).sqrt()
    }

    /// The largest divergence rounding explains at `step` for `reference`.
    pub fn bound(&self, reference: f64, step: u64) -> f64 {
        self.k * reference.max(self.floor(step)) * self.ratio
    }
}

/// A parameter tensor: its name and size, in canonical order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    pub n_elements: usize,
}

/// One step: the three runs' losses, and per tensor (the order of
/// [`DriftReport::tensors`]) the divergence, the reference and the envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftStep {
    pub step: u64,
    #[serde(with = "float")]
    pub loss_gpu: f64,
    #[serde(with = "float")]
    pub loss_cpu32: f64,
    #[serde(with = "float")]
    pub loss_cpu64: f64,
    /// Why the GPU's guard skipped the step, if it did.
    pub gpu_skipped: Option<String>,
    #[serde(with = "float::list")]
    pub divergence: Vec<f64>,
    #[serde(with = "float::list")]
    pub reference: Vec<f64>,
    #[serde(with = "float::list")]
    pub envelope: Vec<f64>,
    /// The tensor nearest to (or furthest past) its envelope: the largest
    /// divergence / envelope.
    pub worst: usize,
    /// Whether some tensor's divergence is outside its envelope.
    pub outside: bool,
}

impl DriftStep {
    /// Whether tensor `i` is outside its envelope: above it, or not
    /// comparable with it (a NaN divergence or envelope).
    pub fn is_outside(&self, i: usize) -> bool {
        self.divergence[i].partial_cmp(&self.envelope[i]).is_none_or(|o| o == std::cmp::Ordering::Greater)
    }

    /// Divergence over envelope of tensor `i` (∞ for a non-finite divergence).
    pub fn ratio(&self, i: usize) -> f64 {
        let (d, e) = (self.divergence[i], self.envelope[i]);
        if d.is_finite() && e.is_finite() { d / e } else { f64::INFINITY }
    }
}

/// The first step outside the envelope, and the tensor furthest past it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outside {
    pub step: u64,
    pub tensor: String,
    #[serde(with = "float")]
    pub divergence: f64,
    #[serde(with = "float")]
    pub envelope: f64,
    /// Every tensor outside at that step.
    pub tensors: Vec<String>,
}

/// Everything a drift run found: what `--json` prints, `drift.json` holds
/// and the GUI plots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftReport {
    pub format_version: u32,
    pub config: Config,
    pub dataset: String,
    pub precision: Precision,
    /// The GPU's product kernel (`GemmPath::name`).
    pub gemm_path: String,
    pub seed: u64,
    pub rows: usize,
    pub t: usize,
    /// Steps asked for; `steps.len()` ran.
    pub steps_asked: u64,
    pub optim: StepOptions,
    pub envelope: Envelope,
    /// `persistent=FAULT` and its first step, if one was planted.
    pub planted: Option<String>,
    pub planted_step: Option<u64>,
    pub tensors: Vec<TensorInfo>,
    pub steps: Vec<DriftStep>,
    pub first_outside: Option<Outside>,
    /// The capture of the first step outside (`--out`).
    pub capture: Option<PathBuf>,
    /// The engine's notes (a recurrence fallback).
    pub notes: Vec<String>,
}

impl DriftReport {
    /// The closing line: `first step outside the rounding envelope: 37
    /// (gru.weight_hh_l0: 3.1e-3 > 4.0e-5)` or `none in N steps`.
    pub fn summary_line(&self) -> String {
        match &self.first_outside {
            Some(o) => format!(
                "first step outside the rounding envelope: {} ({}: {:.1e} > {:.1e})",
                o.step, o.tensor, o.divergence, o.envelope
            ),
            None => format!("first step outside the rounding envelope: none in {} steps", self.steps.len()),
        }
    }
}

/// `‖a − b‖ / ‖b‖` in float64; 0 when both are equal (a zero tensor
/// included), ∞ when `b` is zero and `a` is not, NaN when `a` is not finite.
pub fn rel_diff<A: crate::tensor::Real, B: crate::tensor::Real>(a: &[A], b: &[B]) -> f64 {
    let (mut d, mut n) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.f64(), y.f64());
        d += (x - y) * (x - y);
        n += y * y;
    }
    if d.is_nan() || n.is_nan() {
        return f64::NAN;
    }
    match (d, n) {
        (0.0, _) => 0.0,
        (_, 0.0) => f64::INFINITY,
        _ => (d / n).sqrt(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_parses_and_names_what_is_wrong() {
        assert_eq!(Planted::parse("persistent@6").unwrap(), Planted { fault: DEFAULT_FAULT, step: 6 });
        assert_eq!(
            Planted::parse("persistent=mask_dropped@12").unwrap(),
            Planted { fault: Fault::MaskDropped, step: 12 }
        );
        for (bad, says) in [
            ("persistent", "KIND@STEP"),
            ("persistent@x", "'x'"),
            ("persistent@0", "from 1"),
            ("persistent=nope@3", "'nope'"),
            ("nan@3", "only persistent[=FAULT]"),
        ] {
            let e = Planted::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--inject {bad}:")) && e.contains(says), "{bad}: {e}");
        }
    }

    /// The envelope's figures: K, the mixed ratios, the floor's growth.
    #[test]
    fn the_envelope_scales_with_precision_and_has_a_floor() {
        let e = Envelope::new(Precision::F32);
        assert_eq!(e.bound(1e-6, 1), 16e-6);
        assert_eq!(e.bound(0.0, 1), 16.0 * 2.0 * F32_ROUNDOFF);
        assert_eq!(e.floor(4), 2.0 * e.floor(1));
        assert_eq!(Envelope::new(Precision::F16).ratio, 8192.0);
        assert_eq!(Envelope::new(Precision::Bf16).ratio, 65536.0);
    }

    #[test]
    fn relative_differences() {
        assert_eq!(rel_diff(&[1.0f32, 2.0], &[1.0f64, 2.0]), 0.0);
        assert_eq!(rel_diff(&[0.0f32], &[0.0f32]), 0.0);
        assert_eq!(rel_diff(&[1.0f32], &[0.0f32]), f64::INFINITY);
        assert!(rel_diff(&[f32::NAN], &[1.0f32]).is_nan());
        assert!((rel_diff(&[3.0f32, 4.0], &[3.0f32, 0.0]) - 4.0 / 3.0).abs() < 1e-12);
    }

    /// Non-finite values survive the JSON round trip.
    #[test]
    fn non_finite_numbers_round_trip() {
        let s = DriftStep {
            step: 3,
            loss_gpu: f64::NAN,
            loss_cpu32: 5.5,
            loss_cpu64: 5.5,
            gpu_skipped: None,
            divergence: vec![f64::INFINITY, 1e-7],
            reference: vec![f64::NEG_INFINITY, 0.0],
            envelope: vec![1.0, 2.0],
            worst: 0,
            outside: true,
        };
        let text = serde_json::to_string(&s).unwrap();
        let back: DriftStep = serde_json::from_str(&text).unwrap();
        assert!(back.loss_gpu.is_nan() && back.divergence[0] == f64::INFINITY && back.reference[0] < 0.0);
        assert_eq!(back.divergence[1], 1e-7);
        assert!(serde_json::from_str::<DriftStep>(&text.replace("\"NaN\"", "\"nope\"")).is_err());
    }
}

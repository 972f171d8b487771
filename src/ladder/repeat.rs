//! Determinism: the same ladder run N times from the same inputs, every
//! compared tensor of runs 2..N set against run 1's, on the GPU and on the CPU
//! (`docs/determinism.md` says which kernels are deterministic and why).
//!
//! Two values are identical when their bit patterns are: a NaN is identical to
//! a NaN with the same bits (the same computation gave the same NaN), `-0.0`
//! differs from `+0.0` (their distance is 0 but the bits show a different
//! order of operations).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Event, LadderError, LadderReport, LadderSpec, RungTensor, Status, run};
use crate::engine::gpu::Context;

/// One run's values of a tensor against run 1's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunDiff {
    /// Elements whose bit patterns differ (positions past the shorter one's
    /// end count too).
    pub differing: usize,
    /// The first differing element.
    pub first_index: Option<usize>,
    /// The largest |other − first| over the differing elements where both are
    /// finite, and where it is.
    pub max_abs_diff: f64,
    pub max_abs_index: Option<usize>,
    /// The largest distance in units in the last place (adjacent f32s are 1
    /// apart; `-0.0` and `+0.0` are 0 apart), where both are finite.
    pub max_ulp: u64,
    /// ‖other − first‖ / ‖first‖ over the elements where both are finite (the
    /// absolute norm where ‖first‖ = 0).
    pub rel_l2: f64,
    /// Differing elements where either value is not finite (no distance).
    pub non_finite: usize,
}

impl RunDiff {
    pub fn identical(&self) -> bool {
        self.differing == 0
    }

    /// The worst of two runs' differences: the larger counts and distances,
    /// the first differing index of the earlier run that differs.
    fn worst(self, o: RunDiff) -> RunDiff {
        let (max_abs_diff, max_abs_index) = if o.max_abs_diff > self.max_abs_diff {
            (o.max_abs_diff, o.max_abs_index)
        } else {
            (self.max_abs_diff, self.max_abs_index)
        };
        RunDiff {
            differing: self.differing.max(o.differing),
            first_index: self.first_index.or(o.first_index),
            max_abs_diff,
            max_abs_index,
            max_ulp: self.max_ulp.max(o.max_ulp),
            rel_l2: self.rel_l2.max(o.rel_l2),
            non_finite: self.non_finite.max(o.non_finite),
        }
    }
}

/// An f32's bits as an integer that orders like the value (so that the
/// difference of two is their distance in ULPs; both zeros map to 2^31).
fn ordered(x: f32) -> i64 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 { 0x8000_0000 - (b & 0x7fff_ffff) as i64 } else { b as i64 + 0x8000_0000 }
}

/// `other` (a later run) against `first` (run 1), element by element.
pub fn diff_runs(first: &[f32], other: &[f32]) -> RunDiff {
    let mut d = RunDiff { differing: first.len().abs_diff(other.len()), ..RunDiff::default() };
    if d.differing > 0 {
        d.first_index = Some(first.len().min(other.len()));
    }
    let (mut diff2, mut norm2) = (0.0f64, 0.0f64);
    for (i, (&a, &b)) in first.iter().zip(other).enumerate() {
        if a.is_finite() {
            norm2 += (a as f64).powi(2);
        }
        if a.to_bits() == b.to_bits() {
            continue;
        }
        d.differing += 1;
        if d.first_index.is_none_or(|f| i < f) {
            d.first_index = Some(i);
        }
        if !a.is_finite() || !b.is_finite() {
            d.non_finite += 1;
            continue;
        }
        let abs = (b as f64 - a as f64).abs();
        diff2 += abs * abs;
        if d.max_abs_index.is_none() || abs > d.max_abs_diff {
            d.max_abs_diff = abs;
            d.max_abs_index = Some(i);
        }
        d.max_ulp = d.max_ulp.max(ordered(a).abs_diff(ordered(b)));
    }
    d.rel_l2 = if norm2 > 0.0 { (diff2 / norm2).sqrt() } else { diff2.sqrt() };
    d
}

/// Which side computed a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The Vulkan engine.
    Gpu,
    /// The f32 CPU reference.
    Cpu,
}

/// One tensor of one rung on one side over the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorRepeat {
    /// The rung's id (`gemm` for the products, whose tensors are its cases).
    pub rung: super::Rung,
    pub tensor: String,
    pub side: Side,
    pub len: usize,
    /// Every run gave run 1's bits.
    pub bit_identical: bool,
    /// How many of runs 2..N differ from run 1.
    pub runs_differing: usize,
    /// The worst run against run 1.
    #[serde(flatten)]
    pub diff: RunDiff,
}

/// What `--repeat N` reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepeatReport {
    pub runs: usize,
    /// Every tensor of every run is bit-identical to run 1's, on both sides.
    pub bit_identical: bool,
    /// The GPU's and the CPU's tensors that are not.
    pub gpu_differing: usize,
    pub cpu_differing: usize,
    /// The end-to-end gate's GPU loss and gradient norm are the same bits in
    /// every run (`None` where the gate did not run).
    pub end_to_end_identical: Option<bool>,
    /// Each run's verdict, in order.
    pub statuses: Vec<Status>,
    /// Per rung and tensor, the GPU's then the CPU's, in ladder order.
    pub tensors: Vec<TensorRepeat>,
}

/// One tensor of run 1: its name, the GPU's and the CPU's values (the f64
/// column is not compared, so not kept).
type Kept = (String, Vec<f32>, Vec<f32>);

/// Run 1's tensors and what the later runs did to them.
struct Tally {
    first: Vec<(super::Rung, Vec<Kept>)>,
    out: Vec<TensorRepeat>,
}

impl Tally {
    /// Records a rung's tensors of run `k` (0-based): run 0 keeps them, later
    /// runs are compared with them and dropped.
    fn add(&mut self, k: usize, rung: super::Rung, tensors: &[RungTensor]) {
        if k == 0 {
            for t in tensors {
                for side in [Side::Gpu, Side::Cpu] {
                    let len = if side == Side::Gpu { t.gpu.len() } else { t.cpu.len() };
                    self.out.push(TensorRepeat {
                        rung,
                        tensor: t.name.clone(),
                        side,
                        len,
                        bit_identical: true,
                        runs_differing: 0,
                        diff: RunDiff::default(),
                    });
                }
            }
            self.first.push((rung, tensors.iter().map(|t| (t.name.clone(), t.gpu.clone(), t.cpu.clone())).collect()));
            return;
        }
        let Some((_, first)) = self.first.iter().find(|(r, _)| *r == rung) else { return };
        for t in tensors {
            let Some((_, gpu, cpu)) = first.iter().find(|f| f.0 == t.name) else { continue };
            for (side, a, b) in [(Side::Gpu, gpu, &t.gpu), (Side::Cpu, cpu, &t.cpu)] {
                let d = diff_runs(a, b);
                let entry = self.out.iter_mut().find(|e| e.rung == rung && e.tensor == t.name && e.side == side);
                if let Some(e) = entry
                    && !d.identical()
                {
                    e.bit_identical = false;
                    e.runs_differing += 1;
                    e.diff = e.diff.worst(d);
                }
            }
        }
    }
}

/// Runs `spec` `runs` times (at least once) and compares every rung's
/// tensors (the `gemm` rung's products too) with run 1's. Returns run 1's
/// report, with the worst verdict of all runs, and the comparison;
/// `on_event` gets every run's events with the run's index (0-based).
pub fn repeat(
    ctx: &Arc<Context>,
    spec: LadderSpec,
    runs: usize,
    mut on_event: impl FnMut(usize, Event<'_>),
) -> Result<(LadderReport, RepeatReport), LadderError> {
    let runs = runs.max(1);
    let spec = LadderSpec { gemm_tensors: true, ..spec };
    let mut tally = Tally { first: Vec::new(), out: Vec::new() };
    let mut reports: Vec<LadderReport> = Vec::new();
    for k in 0..runs {
        let r = run(ctx, spec.clone(), |e| {
            if let Event::Finished(rung, _, tensors) = &e {
                tally.add(k, *rung, tensors);
            }
            on_event(k, e);
        })?;
        reports.push(r);
    }
    let statuses: Vec<Status> = reports.iter().map(|r| r.status).collect();
    let e2e_bits = |r: &LadderReport| r.end_to_end.as_ref().map(|e| (e.loss_gpu.to_bits(), e.grad_norm_gpu.to_bits()));
    let end_to_end_identical = e2e_bits(&reports[0]).map(|b| reports.iter().all(|r| e2e_bits(r) == Some(b)));
    let mut out = tally.out;
    // The GPU's entries of a rung first, then the CPU's: the table reads side by side.
    out.sort_by_key(|t| (t.rung, t.side == Side::Cpu));
    let differing = |side: Side| out.iter().filter(|t| t.side == side && !t.bit_identical).count();
    let (gpu_differing, cpu_differing) = (differing(Side::Gpu), differing(Side::Cpu));
    let mut first = reports.swap_remove(0);
    first.status = statuses.iter().copied().max().unwrap_or(first.status);
    let report = RepeatReport {
        runs,
        bit_identical: gpu_differing == 0 && cpu_differing == 0 && end_to_end_identical != Some(false),
        gpu_differing,
        cpu_differing,
        end_to_end_identical,
        statuses,
        tensors: out,
    };
    Ok((first, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One element off by a few ULPs: counted once, at its index, with its
    /// distance in value and in ULPs.
    #[test]
    fn one_differing_element_is_found() {
        let a = [1.0f32, -2.0, 3.5, 0.25, 7.0];
        let mut b = a;
        b[3] = f32::from_bits(a[3].to_bits() + 3);
        let d = diff_runs(&a, &b);
        assert_eq!((d.differing, d.first_index, d.max_abs_index), (1, Some(3), Some(3)));
        assert_eq!(d.max_abs_diff, (b[3] - a[3]) as f64);
        assert_eq!(d.max_ulp, 3);
        assert!(d.rel_l2 > 0.0 && d.non_finite == 0);
        assert!(diff_runs(&a, &a).identical());
    }

    /// NaNs in the same positions with the same bits are identical; another
    /// NaN payload, or a NaN where run 1 had a number, differs without a distance.
    #[test]
    fn same_nans_are_identical_other_nans_are_not() {
        let a = [f32::NAN, 1.0, f32::INFINITY, -0.0];
        let d = diff_runs(&a, &a);
        assert!(d.identical(), "{d:?}");
        let other_nan = f32::from_bits(f32::NAN.to_bits() | 1);
        let d = diff_runs(&a, &[other_nan, f32::NAN, f32::INFINITY, -0.0]);
        assert_eq!((d.differing, d.non_finite, d.first_index), (2, 2, Some(0)));
        assert_eq!((d.max_abs_diff, d.max_abs_index, d.max_ulp), (0.0, None, 0));
    }

    /// Signed zeros differ by their bits, not in value; lengths that differ
    /// count the missing elements.
    #[test]
    fn signed_zeros_and_lengths() {
        let d = diff_runs(&[0.0], &[-0.0]);
        assert_eq!((d.differing, d.max_abs_diff, d.max_ulp), (1, 0.0, 0));
        let d = diff_runs(&[1.0, 2.0, 3.0], &[1.0]);
        assert_eq!((d.differing, d.first_index), (2, Some(1)));
        assert_eq!(ordered(f32::from_bits(1)) - ordered(-f32::from_bits(1)), 2);
    }

    #[test]
    fn the_worst_run_keeps_the_largest_distances() {
        let a = [1.0f32, 2.0, 3.0];
        let d1 = diff_runs(&a, &[1.0, 2.5, 3.0]);
        let d2 = diff_runs(&a, &[1.5, 2.0, 4.0]);
        let w = d1.worst(d2);
        assert_eq!((w.differing, w.first_index, w.max_abs_index), (2, Some(1), Some(2)));
        assert_eq!(w.max_abs_diff, 1.0);
    }
}

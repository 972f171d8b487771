//! One compared tensor's verdict: the contract against the f32 CPU engine,
//! and the f64 column that tells which side is off.

use super::compare::{compare, worst_element};
use super::{CaseResult, Status};

/// A GPU error this many times the f32 CPU engine's (both against f64), though
/// within the contract, is a warning: the kernel loses accuracy.
const WARN_RATIO: f64 = 16.0;
/// ... unless it is below this, where both sides are at rounding level.
const WARN_FLOOR: f64 = 1e-6;

/// One tensor's comparison: the contract against the f32 CPU engine, the
/// f64 column for both sides.
///
/// The per-element check: in f32, no element may be off from f64 by more than
/// the tolerance (in units of the tensor's RMS) plus 16 times the f32 CPU
/// engine's own error there (`compare::worst_element`). The relative L2
/// dilutes one wrong element by the square root of the tensor's size; this
/// does not. It is judged only where `elements` says so (the f32 step's
/// rungs in isolated mode); elsewhere (chained mode, the mixed step, the
/// attention stress case, whose scores are extreme on purpose) it is
/// measured and shown.
///
/// The warning: in f32, the GPU is off from f64 by more than [`WARN_RATIO`]
/// times the f32 CPU engine; in the mixed step (where the GPU is expected to be
/// ~2^13 times further off than f32 arithmetic), the GPU is off from f64 by
/// more than its tolerance although it is within it of the f32 CPU (the f32
/// CPU itself is far from exact there: an ill-conditioned tensor).
pub(super) fn case(
    name: &str,
    got: &[f32],
    want32: &[f32],
    want64: &[f64],
    tol: f64,
    mixed: bool,
    elements: bool,
) -> CaseResult {
    let wide: Vec<f64> = want32.iter().map(|&x| x as f64).collect();
    let mut notes = Vec::new();
    if got.len() != want32.len() {
        notes.push(format!("the GPU gave {} values, the CPU {}", got.len(), want32.len()));
    }
    let c = compare(got, &wide);
    let gpu64 = if want64.len() == got.len() { compare(got, want64).rel_l2 } else { f64::NAN };
    let cpu64 = if want64.len() == want32.len() { compare(want32, want64).rel_l2 } else { f64::NAN };
    let mut status = Status::Pass;
    if !notes.is_empty() {
        status = Status::Fail;
    }
    if c.new_non_finite > 0 {
        notes.push(format!("{} values are non-finite on the GPU only", c.new_non_finite));
        status = Status::Fail;
    }
    if !(c.rel_l2 <= tol) {
        notes.push(format!("rel L2 {:.3e} against the f32 CPU is over the tolerance {tol:.1e}", c.rel_l2));
        status = Status::Fail;
    }
    let worst = worst_element(got, want32, want64, tol);
    if let Some(w) = worst.filter(|w| elements && w.excess > 1.0) {
        notes.push(format!(
            "element {} is off from f64 by {:.2e} of the tensor's RMS, outside its envelope {:.1e} + 16 × the f32 CPU's {:.2e}",
            w.index, w.err, tol, w.cpu_err
        ));
        status = Status::Fail;
    }
    if status == Status::Pass && mixed && gpu64 > tol {
        notes.push(format!(
            "against f64 the GPU is off by {gpu64:.2e}, over the tolerance {tol:.1e} (the f32 CPU: {cpu64:.2e})"
        ));
        status = Status::Warn;
    } else if status == Status::Pass && !mixed && gpu64 > WARN_FLOOR && gpu64 > WARN_RATIO * cpu64 {
        notes.push(format!(
            "against f64 the GPU is off by {gpu64:.2e}, {:.0}× the f32 CPU's {cpu64:.2e}",
            gpu64 / cpu64.max(f64::MIN_POSITIVE)
        ));
        status = Status::Warn;
    }
    CaseResult {
        name: name.to_string(),
        params: format!("{} values", got.len()),
        status,
        rel_l2: c.rel_l2,
        rel_l2_cpu_f32: cpu64,
        rel_l2_gpu_f64: Some(gpu64),
        max_abs_err: c.max_abs_err,
        max_abs_index: c.max_abs_index,
        non_finite_cpu: c.non_finite_want,
        non_finite_gpu: c.non_finite_got,
        sentinel_ok: true,
        tolerance: tol,
        gpu_ms: None,
        cpu_ms: 0.0,
        notes,
        headroom: None,
        worst_element: worst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wrong_element_fails_the_f32_case_and_is_shown_elsewhere() {
        let want64: Vec<f64> = (0..50_000).map(|i| ((i as f64) * 0.11).cos()).collect();
        let want32: Vec<f32> = want64.iter().map(|&x| x as f32).collect();
        let mut got = want32.clone();
        got[123] *= 1.01;
        let f32_case = case("t", &got, &want32, &want64, 1e-4, false, true);
        assert!(f32_case.rel_l2 < 1e-4, "the L2 alone passes it: {}", f32_case.rel_l2);
        assert_eq!(f32_case.status, Status::Fail);
        assert!(f32_case.notes.iter().any(|n| n.starts_with("element 123 ")), "{:?}", f32_case.notes);
        assert_eq!(f32_case.worst_element.unwrap().index, 123);
        let shown = case("t", &got, &want32, &want64, 1e-4, false, false);
        assert_ne!(shown.status, Status::Fail, "measured, not judged: {:?}", shown.notes);
        assert!(!shown.notes.iter().any(|n| n.starts_with("element")));
        assert!(shown.worst_element.unwrap().excess > 1.0);
        assert_eq!(case("t", &want32, &want32, &want64, 1e-4, false, true).status, Status::Pass);
    }
}

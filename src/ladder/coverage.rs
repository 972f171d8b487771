//! Coverage: what the ladder cannot run on this device, and the results that
//! say so. A rung or case that did not run is [`Status::NotRun`], never a
//! pass: it counts in the summary, in the JSON and in the exit code (the CLI
//! fails such a run unless `--allow-not-run`).

use super::gemm::{case_params, gemm_cases_for, tolerance};
use super::{CaseResult, Precision, Rung, RungResult, Setup, Status};
use crate::engine::gpu::Context;
use crate::engine::gpu::GemmPath;
use crate::step::GemmChoice;
use crate::vk::gemm::{self};

/// The products' kernel that `choice` forces and why this device (or build)
/// cannot run it: a cooperative-matrix kernel where there are none. `None`
/// when the kernel can run, and for the choices that fall back (`auto`) or
/// are contradictions of the arguments (`path_for` reports those).
pub(super) fn unavailable_kernel(
    ctx: &Context,
    precision: Precision,
    choice: GemmChoice,
) -> Option<(GemmPath, String)> {
    let path = match (precision, choice) {
        (Precision::F16, GemmChoice::CoopMat) => GemmPath::CoopMatF16Big,
        (Precision::F16, GemmChoice::CoopMat64) => GemmPath::CoopMatF16,
        _ => return None,
    };
    gemm::coopmat_unavailable(ctx, path).map(|why| (path, why))
}

/// A case that did not run: no errors measured, the reason in its notes.
fn not_run_case(name: &str, params: String, tolerance: f64, why: &str) -> CaseResult {
    CaseResult {
        name: name.to_string(),
        params,
        status: Status::NotRun,
        rel_l2: 0.0,
        rel_l2_cpu_f32: 0.0,
        rel_l2_gpu_f64: None,
        max_abs_err: 0.0,
        max_abs_index: 0,
        non_finite_cpu: 0,
        non_finite_gpu: 0,
        sentinel_ok: true,
        tolerance,
        gpu_ms: None,
        cpu_ms: 0.0,
        notes: vec![format!("not run: {why}")],
        headroom: None,
        worst_element: None,
    }
}

/// `rung` on `path` as not run: one not-run case per product (`gemm`) or
/// compared tensor (rungs 2–11), each with the tolerance it would have had.
pub(super) fn not_run(rung: Rung, setup: &Setup, path: GemmPath, why: &str) -> RungResult {
    let (precision, cfg) = (setup.precision, &setup.cfg);
    let cases = match rung {
        Rung::Gemm => gemm_cases_for(cfg, precision)
            .iter()
            .map(|c| not_run_case(&c.name, case_params(c), tolerance(precision, c.shape.k), why))
            .collect(),
        _ => rung
            .outputs(cfg)
            .iter()
            .map(|n| not_run_case(n, "not run".into(), rung.tolerance_in(precision, setup.mode, cfg, n), why))
            .collect(),
    };
    let mut r = RungResult::new(rung, precision, cases);
    r.gemm_path = Some(path.name().into());
    r
}

//! Rung 1 of the ladder (`gemm`) on the Vulkan device.

mod vk_support;

use dualscope::ladder::{self, Precision, Status};
use dualscope::model::Config;
use vk_support::{assert_clean, context};

#[test]
fn gemm_rung_passes_on_the_tiny_config() {
    let Some(ctx) = context("gemm_rung_passes_on_the_tiny_config") else { return };
    let r = ladder::run_rung(&ctx, "gemm", &Config::tiny(), Precision::F32, 1).unwrap();
    for c in &r.cases {
        eprintln!(
            "{:?} {} {}: rel_l2 {:.2e} (cpu f32 {:.2e}) {:?}",
            c.status, c.name, c.params, c.rel_l2, c.rel_l2_cpu_f32, c.notes
        );
    }
    assert_eq!(r.id, "gemm");
    assert_eq!(
        r.status,
        Status::Pass,
        "{:#?}",
        r.cases.iter().filter(|c| c.status != Status::Pass).collect::<Vec<_>>()
    );
    assert!(r.sentinel_ok);
    assert_eq!((r.non_finite_cpu, r.non_finite_gpu), (0, 0));
    assert!(r.rel_l2 > 0.0 && r.rel_l2 <= r.tolerance, "{} vs {}", r.rel_l2, r.tolerance);
    assert!(r.cases.len() >= 30);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["status"], "pass");
    for key in [
        "rel_l2",
        "max_abs_err",
        "max_abs_index",
        "non_finite_cpu",
        "non_finite_gpu",
        "sentinel_ok",
        "tolerance",
        "gpu_ms",
        "cpu_ms",
        "cases",
    ] {
        assert!(json.get(key).is_some(), "RungResult JSON lacks {key}");
    }
    assert_clean(&ctx, "gemm_rung_passes_on_the_tiny_config");
}

#[test]
fn unknown_and_unimplemented_rungs_are_errors() {
    let e = ladder::check_rungs(&["gru_fwd".to_string()]).unwrap_err().to_string();
    assert!(e.contains("not implemented") && e.contains("gemm"), "{e}");
    let e = ladder::check_rungs(&["nope".to_string()]).unwrap_err().to_string();
    assert!(e.contains("unknown rung") && e.contains("embed_fwd"), "{e}");
}

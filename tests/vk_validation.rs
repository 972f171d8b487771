//! The validation modes (`DUALSCOPE_VK_VALIDATION`): the tiny ladder runs with
//! zero errors under synchronization validation and under GPU-assisted
//! validation (out-of-bounds accesses inside the shaders), and says what it
//! validated; an unknown mode is refused.

mod common;

use common::{dualscope, text};

/// Runs the tiny ladder in `mode` and checks its validation summary.
fn tiny_ladder_is_clean(test: &str, mode: &str, label: &str) {
    if common::context(test).is_none() {
        return;
    }
    let out = dualscope(&["ladder", "--config", "tiny", "--json"], &[("DUALSCOPE_VK_VALIDATION", mode)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let val = &v["validation"];
    assert_eq!(val["on"], true, "{val}");
    assert_eq!(val["mode"], mode, "{val}");
    assert_eq!(val["errors"], 0, "{err}");
    let kernels = val["kernels"].as_array().expect("the kernels it built");
    assert!(kernels.len() >= 10, "every stage's kernels are listed: {val}");
    assert!(kernels.iter().any(|k| k == "embed_bwd") && kernels.iter().any(|k| k == "adamw"), "{val}");
    let line = format!("dualscope: validation {label} (layer ");
    assert!(err.contains(&line) && err.contains(": 0 error(s)"), "the closing line says what ran: {err}");
}

#[test]
fn the_tiny_ladder_is_clean_under_synchronization_validation() {
    tiny_ladder_is_clean(common::test_name!(), "sync", "core+synchronization");
}

#[test]
fn the_tiny_ladder_is_clean_under_gpu_assisted_validation() {
    tiny_ladder_is_clean(common::test_name!(), "gpu", "core+gpu-assisted");
}

#[test]
fn an_unknown_validation_mode_is_refused() {
    if common::context(common::test_name!()).is_none() {
        return;
    }
    let out = dualscope(&["ladder", "--config", "tiny"], &[("DUALSCOPE_VK_VALIDATION", "everything")]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("DUALSCOPE_VK_VALIDATION=\"everything\"") && err.contains("core, sync or gpu"), "{err}");
}

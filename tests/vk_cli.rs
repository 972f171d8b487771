//! `dualscope gpu-info` and `dualscope ladder` end to end: output and exit codes.

mod vk_support;

use std::process::{Command, Output};

fn dualscope(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dualscope"));
    cmd.args(args).env("DUALSCOPE_VK_VALIDATION", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("runs the binary")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn gpu_info_prints_the_device_or_a_clear_error() {
    let Some(ctx) = vk_support::context("gpu_info_prints_the_device_or_a_clear_error") else {
        let out = dualscope(&["gpu-info"], &[]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("no Vulkan"), "{}", text(&out.stderr));
        return;
    };
    let out = dualscope(&["gpu-info", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["name"], ctx.report().name.as_str());
    assert_eq!(v["validation"], true);
    let out = dualscope(&["gpu-info"], &[]);
    assert!(text(&out.stdout).contains("subgroup"), "{}", text(&out.stdout));
}

#[test]
fn no_vulkan_driver_is_exit_2_with_a_clear_message() {
    let out = dualscope(
        &["gpu-info"],
        &[("VK_DRIVER_FILES", "/nonexistent/icd.json"), ("VK_ICD_FILENAMES", "/nonexistent/icd.json")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("no Vulkan"), "{err}");
    let out = dualscope(&["gpu-info", "--device", "99"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn ladder_gemm_passes_and_reports_json() {
    if vk_support::context("ladder_gemm_passes_and_reports_json").is_none() {
        return;
    }
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny", "--precision", "f32", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rung = &v["rungs"][0];
    assert_eq!(rung["id"], "gemm");
    assert_eq!(rung["status"], "pass");
    for key in ["rel_l2", "max_abs_err", "tolerance", "sentinel_ok", "cases"] {
        assert!(rung.get(key).is_some(), "{key} missing in {rung}");
    }
    assert_eq!(v["validation"]["errors"], 0);
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("gemm") && text(&out.stdout).contains("pass"));
}

#[test]
fn ladder_usage_errors_are_exit_2() {
    let missing = std::env::temp_dir().join("dualscope-no-such-file.txt");
    let missing = missing.to_str().unwrap();
    for args in [
        &["ladder", "--rungs", "nope"][..],
        &["ladder", "--precision", "f64"],
        &["ladder", "--mode", "sideways"],
        &["ladder", "--offset", "5"],
        &["ladder", "--rungs", "gru_fwd", "--precision", "f16"],
    ] {
        let out = dualscope(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
    // A missing data file and a window past its end: one clear line, exit non-zero.
    for args in
        [&["ladder", "--config", "tiny", "--data", missing][..], &["ladder", "--config", "tiny", "--len", "2000000000"]]
    {
        let out = dualscope(args, &[]);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(text(&out.stderr).trim().lines().count(), 1, "{args:?}: {}", text(&out.stderr));
    }
    // f32 has no cooperative-matrix kernel: forcing one is an engine error.
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny", "--gemm-path", "coopmat"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The whole ladder from the command line: every rung and the end-to-end gate
/// pass in both modes, the JSON has the fields the issue names, and --out
/// writes the same report.
#[test]
fn ladder_runs_every_rung_and_the_end_to_end_gate() {
    if vk_support::context("ladder_runs_every_rung_and_the_end_to_end_gate").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    for mode in ["isolated", "chained"] {
        let args = ["ladder", "--config", "tiny", "--mode", mode, "--json", "--out", report.to_str().unwrap()];
        let out = dualscope(&args, &[]);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}\n{}", text(&out.stdout), text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        let ids: Vec<&str> = v["rungs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, dualscope::ladder::ALL_RUNGS.to_vec());
        for r in v["rungs"].as_array().unwrap() {
            assert_eq!(r["status"], "pass", "{mode}: {r}");
            for key in ["rel_l2", "max_abs_err", "max_abs_index", "tolerance", "non_finite_cpu", "non_finite_gpu"] {
                assert!(r.get(key).is_some(), "{key} missing in {r}");
            }
        }
        // The f64 column on the model rungs.
        assert!(v["rungs"][2]["cases"][0]["rel_l2_gpu_f64"].as_f64().is_some());
        let e = &v["end_to_end"];
        assert_eq!(e["status"], "pass", "{e}");
        assert!(e["loss_rel_err"].as_f64().unwrap() <= 1e-5);
        assert_eq!(v["mode"], mode);
        assert_eq!(v["validation"]["errors"], 0);
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(saved["rungs"], v["rungs"]);
    }
    // One long row of the text.
    let data = dir.path().join("text.txt");
    std::fs::write(&data, "the quick brown fox jumps over the lazy dog. ".repeat(20)).unwrap();
    let args = ["ladder", "--config", "tiny", "--data", data.to_str().unwrap(), "--offset", "3", "--len", "300"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("one row of 300 positions at offset 3"), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("end-to-end pass"));
}

#[test]
fn a_missing_validation_layer_is_reported_not_fatal() {
    if vk_support::context("a_missing_validation_layer_is_reported_not_fatal").is_none() {
        return;
    }
    let out = dualscope(&["gpu-info", "--json"], &[("VK_LAYER_PATH", "/nonexistent"), ("VK_ADD_LAYER_PATH", "")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["validation"], false);
    assert!(text(&out.stderr).contains("continuing without it"), "{}", text(&out.stderr));
}

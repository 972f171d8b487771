//! `gpu-info` and the ladder from the command line: the device or a clear
//! error, the rungs and the end-to-end gate, usage errors, a missing
//! validation layer, the planted faults, `bisect`, `audit`, and the
//! pipelines' driver statistics.

use crate::common::{self, dualscope, text};

#[test]
fn gpu_info_prints_the_device_or_a_clear_error() {
    let Some(ctx) = common::context("gpu_info_prints_the_device_or_a_clear_error") else {
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
    common::skip_without_vulkan!();
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
        &["ladder", "--len", "9", "--batch", "2"],
        &["ladder", "--carry-check", "2", "--seq-len", "9"],
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
    for (args, flag) in [(&["--batch", "0"], "--batch"), (&["--seq-len", "0"], "--seq-len")] {
        let out = dualscope(&[&["ladder", "--config", "tiny"][..], args].concat(), &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&format!("{flag} must be at least 1")), "{}", text(&out.stderr));
    }
    // A batch too large for this machine is refused before it is cut, naming the flags.
    let out = dualscope(&["ladder", "--config", "tiny", "--batch", "100000", "--seq-len", "100000"], &[]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("--batch 100000 --seq-len 100000"), "{}", text(&out.stderr));
    // f32 has no cooperative-matrix kernel: forcing one is an engine error.
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny", "--gemm-path", "coopmat"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The whole ladder from the command line: every rung and the end-to-end gate
/// pass in both modes, the JSON has the fields the issue names, and --out
/// writes the same report.
#[test]
fn ladder_runs_every_rung_and_the_end_to_end_gate() {
    common::skip_without_vulkan!();
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
    // Another batch shape than the config's, as `bench` and `train` take it.
    let args = ["ladder", "--config", "tiny", "--batch", "3", "--seq-len", "11", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!((v["batch"]["rows"].as_u64(), v["batch"]["seq_len"].as_u64()), (Some(3), Some(11)), "{}", v["batch"]);
    assert_eq!(v["end_to_end"]["status"], "pass");
}

#[test]
fn a_missing_validation_layer_is_reported_not_fatal() {
    common::skip_without_vulkan!();
    let out = dualscope(&["gpu-info", "--json"], &[("VK_LAYER_PATH", "/nonexistent"), ("VK_ADD_LAYER_PATH", "")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["validation"], false);
    assert!(text(&out.stderr).contains("continuing without it"), "{}", text(&out.stderr));
}

#[test]
fn faults_are_listed_and_caught_from_the_command_line() {
    let out = dualscope(&["faults", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON list");
    let list = v.as_array().unwrap();
    let (ladder, train): (Vec<_>, Vec<_>) = list.iter().partition(|f| f["scope"] == "ladder");
    assert_eq!(ladder.len(), 9);
    for f in ladder {
        assert!(f["name"].is_string() && f["expected_rung"].is_string() && f["description"].is_string(), "{f}");
        assert!(dualscope::ladder::ALL_RUNGS.contains(&f["expected_rung"].as_str().unwrap()));
    }
    // The training events of `train --inject`, after the ladder's faults.
    let names: Vec<&str> = train.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nan", "spike", "transient", "persistent", "f16_overflow"]);
    assert!(train.iter().all(|f| f["scope"] == "train" && f["description"].is_string()), "{train:?}");
    let verdicts: Vec<&str> = train.iter().map(|f| f["expected_verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["transient", "transient", "transient", "engine", "precision"]);
    let out = dualscope(&["ladder", "--fault", "nope"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("window_off_by_one"));
    common::skip_without_vulkan!();
    let args = ["ladder", "--config", "tiny", "--rungs", "attn_fwd", "--fault", "window_off_by_one", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fault"], "window_off_by_one");
    assert_eq!(v["rungs"][0]["status"], "fail");
}

/// The window's off-by-one shows only once a query's window is full (T ≥ W):
/// the bisect finds exactly that length and the first wrong position W-1.
#[test]
fn bisect_finds_the_smallest_failing_length() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("bisect.json");
    let args = ["bisect", "--config", "tiny", "--fault", "window_off_by_one", "--max-len", "20", "--json", "--out"];
    let mut args: Vec<&str> = args.to_vec();
    args.push(report.to_str().unwrap());
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = dualscope::model::Config::tiny().window as u64;
    assert_eq!(v["smallest_failing"], w, "{v}");
    assert_eq!(v["last_good"], w - 1);
    assert_eq!(v["failure"]["rung"], "attn_fwd");
    assert_eq!(v["failure"]["position"], w - 1);
    assert!(v["failure"]["token"].is_u64());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&report).unwrap()).unwrap(), v);
    // Without the fault nothing fails: exit 0.
    let out = dualscope(&["bisect", "--config", "tiny", "--max-len", "20", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["smallest_failing"].is_null());
}

#[test]
fn audit_classifies_per_token_contributions() {
    common::skip_without_vulkan!();
    let out = dualscope(&["audit", "--config", "tiny", "--len", "30", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 7 + 4 * dualscope::model::Config::tiny().layers);
    assert!(tensors.iter().all(|t| t["verdict"] == "noise"), "{v}");
    // The window fault changes attention: the context-stream weights see a real error.
    let args = ["audit", "--config", "tiny", "--len", "30", "--fault", "window_off_by_one", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let q = v["tensors"].as_array().unwrap().iter().find(|t| t["tensor"] == "ctx.q.weight").unwrap();
    assert_eq!(q["verdict"], "real_error", "{q}");
    let bias = v["tensors"].as_array().unwrap().iter().find(|t| t["tensor"] == "head.bias").unwrap();
    assert_ne!(bias["verdict"], "real_error");
}

/// `DUALSCOPE_PIPELINE_STATS=1` (a `lab` build): each kernel's driver
/// statistics on stderr as it is built, where the device has
/// `VK_KHR_pipeline_executable_properties` (as `gpu-info` reports); elsewhere
/// (lavapipe) one line saying so, and the run goes on as without it.
#[cfg(feature = "lab")]
#[test]
fn pipeline_stats_are_printed_or_the_device_is_named() {
    common::skip_without_vulkan!();
    let info = dualscope(&["gpu-info", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).expect("one JSON object");
    let has = v["features"]["pipeline_stats"].as_bool().expect("features.pipeline_stats");
    let args = ["ladder", "--rungs", "gemm", "--config", "tiny", "--precision", "f32", "--json"];
    let out = dualscope(&args, &[("DUALSCOPE_PIPELINE_STATS", "1")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    if has {
        assert!(err.lines().any(|l| l.starts_with("dualscope: pipeline gemm")), "{err}");
    } else {
        let name = v["name"].as_str().unwrap();
        assert!(err.contains(&format!("{name} has no VK_KHR_pipeline_executable_properties")), "{err}");
    }
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the ladder's report");
    assert_eq!(r["rungs"][0]["status"], "pass");
    assert_eq!(r["validation"]["errors"], 0);
}

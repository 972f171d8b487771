//! `bench` on both engines, the mixed-precision step from the command line
//! (ladder, bench, train), and the engine's switches refused when mistyped.

use crate::common::{self, dualscope, text};

/// Both engines on the same batch in one run: medians, device time, the
/// per-kernel breakdown and the ratio (timed, never asserted on speed).
#[test]
fn bench_runs_both_engines_and_reports_the_ratio() {
    common::skip_without_vulkan!();
    let out =
        dualscope(&["bench", "--engine", "both", "--config", "tiny", "--steps", "3", "--warmup", "1", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let engines = v["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    let (cpu, gpu) = (&engines[0], &engines[1]);
    assert_eq!((cpu["engine"].as_str(), gpu["engine"].as_str()), (Some("cpu"), Some("gpu")));
    let ratio = cpu["median_ms"].as_f64().unwrap() / gpu["median_ms"].as_f64().unwrap();
    assert!((v["speedup"].as_f64().unwrap() - ratio).abs() <= 1e-9 * ratio);
    // The same first loss on both engines (same batch, same parameters).
    let (lc, lg) = (cpu["first_loss"].as_f64().unwrap(), gpu["first_loss"].as_f64().unwrap());
    assert!((lc - lg).abs() <= 1e-5 * lc, "{lc} vs {lg}");
    let kernels = gpu["kernels_ms"].as_array().unwrap();
    assert!(kernels.iter().any(|k| k["kernel"].as_str().unwrap().starts_with("gru fwd")), "{kernels:?}");
    assert_eq!(gpu["breakdown_ms"].as_array().unwrap().len(), 10, "one entry per stage");
}

/// The mixed-precision step from the command line: the whole ladder in
/// `--precision f16` (model rungs included) passes and reports its kernel;
/// `bench --precision mixed` reports the mode it timed; `train --engine gpu
/// --precision f16` trains with the dynamic loss scale and says so; the CPU
/// engine refuses a mixed precision.
#[test]
fn the_mixed_step_runs_from_the_command_line() {
    let (_, ctx) = common::vulkan!();
    let path =
        if dualscope::vk::gemm::coopmat_f16_unavailable(&ctx).is_none() { "coopmat f16 128x128" } else { "tiled f16" };
    let out = dualscope(&["ladder", "--config", "tiny", "--precision", "f16", "--mode", "chained", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["precision"].as_str(), v["gemm_path"].as_str()), (Some("f16"), Some(path)));
    for r in v["rungs"].as_array().unwrap() {
        assert_eq!((r["status"].as_str(), r["gemm_path"].as_str()), (Some("pass"), Some(path)), "{r}");
    }
    assert_eq!(v["end_to_end"]["status"], "pass");

    let args = ["bench", "--engine", "gpu", "--config", "tiny", "--steps", "2", "--warmup", "1", "--json"];
    let out = dualscope(&[&args[..], &["--precision", "mixed"]].concat(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = &v["engines"][0];
    assert_eq!((gpu["precision"].as_str(), gpu["gemm_path"].as_str()), (Some("f16"), Some(path)), "{gpu}");
    assert!(gpu["first_loss"].as_f64().unwrap().is_finite());

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("text.txt");
    std::fs::write(&data, "the quick brown fox jumps over the lazy dog. ".repeat(40)).unwrap();
    let train = |engine: &str| {
        let args = ["train", "--data", data.to_str().unwrap(), "--config", "tiny", "--batch", "2", "--seq-len", "16"];
        let more = ["--steps", "4", "--engine", engine, "--precision", "f16", "--json"];
        dualscope(&[&args[..], &more].concat(), &[])
    };
    let out = train("gpu");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["precision"].as_str(), v["gemm_path"].as_str()), (Some("f16"), Some(path)));
    assert_eq!(v["skipped"], 0);
    assert!(v["log"].as_array().unwrap().iter().all(|e| e["scale"].as_f64() == Some(65536.0)), "{}", v["log"]);
    let out = train("cpu");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// A switch set to a value it does not take is one line naming it and exit
/// 2 when the device is opened, not a switch silently left at its default;
/// in a `lab` build the lab's switches too.
#[test]
fn a_mistyped_switch_is_refused_naming_it() {
    let (_, ctx) = common::vulkan!();
    drop(ctx);
    let args = ["bench", "--engine", "gpu", "--config", "tiny", "--steps", "1", "--warmup", "0"];
    let mut bad = vec![("DUALSCOPE_RECURRENCE", "fast"), ("DUALSCOPE_POISON", "yes"), ("DUALSCOPE_ATTN", "old")];
    if cfg!(feature = "lab") {
        bad.extend([("DUALSCOPE_WAVE", "off"), ("DUALSCOPE_SPLIT_MIN_SLICE", "8"), ("DUALSCOPE_BARRIER_PROBE", "all")]);
    }
    for (name, value) in bad {
        let out = dualscope(&args, &[(name, value)]);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains(name) && err.contains(value) && err.lines().count() == 1, "{err}");
    }
}

/// Without the `lab` feature nothing reads the lab's switches: set, even to
/// values they do not take, the run goes on as without them (no host
/// profile on stderr, no probes in the report).
#[cfg(not(feature = "lab"))]
#[test]
fn the_labs_switches_are_not_read_without_the_feature() {
    let (_, ctx) = common::vulkan!();
    drop(ctx);
    let args = ["bench", "--engine", "gpu", "--config", "tiny", "--steps", "1", "--warmup", "0", "--json"];
    let env = [
        ("DUALSCOPE_WAVE", "off"),
        ("DUALSCOPE_BARRIER_PROBE", "all"),
        ("DUALSCOPE_HOST_PROFILE", "1"),
        ("DUALSCOPE_GRID_PROBE", "1"),
        ("DUALSCOPE_PIPELINE_STATS", "1"),
    ];
    let out = dualscope(&args, &env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        !err.contains("host:") && !err.contains("PIPELINE_STATS") && !err.contains("dualscope: pipeline "),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let r = &v["engines"][0]["recurrence"];
    assert!(r.is_object() && r.get("fwd_step_probe").is_none() && r.get("wg_probe").is_none(), "{r}");
}

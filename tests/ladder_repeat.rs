//! `dualscope ladder --repeat N` (determinism, docs/determinism.md) and the
//! rungs and cases that did not run (coverage): what the JSON, the summary and
//! the exit code say.

mod common;

use common::{dualscope, text};

/// Three runs of the whole tiny ladder on this device: every tensor of every
/// rung (the `gemm` rung's products included) is bit-identical to run 1's on
/// the GPU and on the CPU, as docs/determinism.md says of every kernel, and
/// the JSON carries the comparison's fields.
#[test]
fn three_runs_of_the_tiny_ladder_are_bit_identical() {
    common::skip_without_vulkan!();
    let args = ["ladder", "--config", "tiny", "--repeat", "3", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rep = &v["repeat"];
    assert_eq!(rep["runs"], 3);
    assert_eq!(rep["statuses"].as_array().unwrap().len(), 3);
    assert_eq!(rep["end_to_end_identical"], true);
    let tensors = rep["tensors"].as_array().unwrap();
    // Every rung reports its tensors, on both sides.
    for id in dualscope::ladder::ALL_RUNGS {
        for side in ["gpu", "cpu"] {
            assert!(tensors.iter().any(|t| t["rung"] == id && t["side"] == side), "{id} {side} missing");
        }
    }
    assert!(tensors.iter().any(|t| t["rung"] == "gemm" && t["tensor"].as_str().unwrap().contains("m=")));
    for t in tensors {
        for key in [
            "rung",
            "tensor",
            "side",
            "len",
            "bit_identical",
            "runs_differing",
            "differing",
            "first_index",
            "max_abs_diff",
            "max_ulp",
            "rel_l2",
        ] {
            assert!(t.get(key).is_some(), "{key} missing in {t}");
        }
        assert!(t["len"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["bit_identical"], true, "{t}");
        assert_eq!((t["differing"].as_u64(), t["max_abs_diff"].as_f64()), (Some(0), Some(0.0)), "{t}");
    }
    assert_eq!((rep["bit_identical"].as_bool(), rep["gpu_differing"].as_u64()), (Some(true), Some(0)));
    assert_eq!(rep["cpu_differing"], 0);
    // The ladder's own report is still there, and the human table names the verdict.
    assert_eq!(v["status"], "pass");
    assert_eq!(v["rungs"].as_array().unwrap().len(), 11);
    let out = dualscope(&["ladder", "--config", "tiny", "--rungs", "gemm,loss", "--repeat", "2"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let human = text(&out.stdout);
    assert!(human.contains("determinism over 2 runs: every tensor bit-identical"), "{human}");
    assert!(human.lines().any(|l| l.contains("loss.dlogits") && l.contains("yes")), "{human}");
}

/// `--repeat` takes a count from 1 to 1000.
#[test]
fn repeat_needs_a_positive_count() {
    for n in ["0", "1001", "many"] {
        let out = dualscope(&["ladder", "--config", "tiny", "--repeat", n], &[]);
        assert_eq!(out.status.code(), Some(2), "{n}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--repeat"), "{n}: {}", text(&out.stderr));
    }
}

/// Forcing a cooperative-matrix kernel in f16: where the device has none (as
/// lavapipe), every rung asked for and the gate are reported as not run — in
/// each rung's cases, the JSON's summary, the human summary line — the run's
/// status is `not_run` and it exits 1, or 0 with `--allow-not-run`; nothing
/// is reported as a pass. Where the device has them, they run and pass.
#[test]
fn forced_coopmat_without_cooperative_matrices_is_not_run() {
    let (_, ctx) = common::vulkan!();
    let missing = dualscope::vk::gemm::coopmat_f16_unavailable(&ctx);
    let base = ["ladder", "--config", "tiny", "--precision", "f16", "--rungs", "gemm,loss", "--gemm-path"];
    let out = dualscope(&[&base[..], &["coopmat", "--json"]].concat(), &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let s = &v["summary"];
    let Some(why) = missing else {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!((s["rungs"]["pass"].as_u64(), s["rungs"]["not_run"].as_u64()), (Some(2), Some(0)), "{s}");
        return;
    };
    eprintln!("this device has no cooperative matrices ({why}): checking they are reported as not run");
    assert_eq!(out.status.code(), Some(1), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(v["status"], "not_run");
    assert_eq!(v["gemm_path"], "coopmat f16 128x128");
    let rungs = v["rungs"].as_array().unwrap();
    assert_eq!(rungs.len(), 2);
    let mut cases = 0;
    for r in rungs {
        assert_eq!(r["status"], "not_run", "{r}");
        for c in r["cases"].as_array().unwrap() {
            assert_eq!(c["status"], "not_run", "{c}");
            assert!(c["notes"][0].as_str().unwrap().contains("cooperative"), "{c}");
            cases += 1;
        }
    }
    let gemm_cases = rungs[0]["cases"].as_array().unwrap().len();
    assert!(gemm_cases > 20, "the gemm rung lists the products it would have run: {gemm_cases}");
    assert_eq!(s["rungs"], serde_json::json!({"pass": 0, "warn": 0, "fail": 0, "not_run": 2}));
    assert_eq!((s["cases"]["not_run"].as_u64(), s["cases"]["pass"].as_u64()), (Some(cases), Some(0)), "{s}");
    assert_eq!(s["end_to_end"], "not_run");
    assert!(v["end_to_end"].is_null() && v["end_to_end_not_run"].as_str().unwrap().contains("cooperative"));

    // The human output says it in the summary line; --allow-not-run exits 0.
    let out = dualscope(&[&base[..], &["coopmat64", "--allow-not-run"]].concat(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let human = text(&out.stdout);
    assert!(human.contains("summary: rungs 0 pass, 0 warn, 0 fail, 2 not run;"), "{human}");
    assert!(human.contains("end-to-end not_run") && human.contains("status not_run"), "{human}");
    assert!(human.lines().any(|l| l.starts_with("gemm") && l.contains("not run") && l.contains("coopmat")), "{human}");
    assert!(!human.contains(" pass "), "{human}");
}

/// A run where everything ran says so in the same summary: no not-run count.
#[test]
fn a_complete_run_counts_nothing_as_not_run() {
    common::skip_without_vulkan!();
    let out = dualscope(&["ladder", "--config", "tiny", "--rungs", "gemm,embed_fwd", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["rungs"], serde_json::json!({"pass": 2, "warn": 0, "fail": 0, "not_run": 0}));
    assert_eq!(
        (v["summary"]["cases"]["not_run"].as_u64(), v["summary"]["end_to_end"].as_str()),
        (Some(0), Some("pass"))
    );
    assert_eq!(v["status"], "pass");
}

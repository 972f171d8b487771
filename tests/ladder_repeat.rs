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

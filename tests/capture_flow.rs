//! The whole path a user takes, end to end through the binary: a training run
//! on the Vulkan engine (lavapipe here) with planted events leaves captures,
//! and `replay` on each says what happened, with the exit code the verdict
//! calls for. Skipped without Vulkan.

mod common;

use common::{docs_jsonl, dualscope, ok_json, s, skip_without_vulkan, train_tiny};

#[test]
fn planted_events_in_a_run_replay_to_their_verdicts() {
    skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 24, |i| {
        format!("doc {i}: {}", "a cat sat on a mat and looked at it. ".repeat(i % 4 + 1))
    });
    let out = dir.path().join("run");
    let mut args = train_tiny(&data, &["--batch", "3", "--seq-len", "24", "--steps", "30", "--engine", "gpu"]);
    args.extend(["--precision", "f16", "--out", s(&out), "--json", "--capture-at", "26"]);
    args.extend(["--inject", "nan@22", "--inject", "transient@24", "--inject", "f16_overflow@25"]);
    args.extend(["--inject", "persistent@28"]);
    let o = dualscope(&args, &[]);
    let v = ok_json(&o);
    let steps: Vec<u64> = v["captures"].as_array().unwrap().iter().map(|c| c["step"].as_u64().unwrap()).collect();
    for want in [22, 24, 25, 26, 28] {
        assert!(steps.contains(&want), "a capture of step {want}: {steps:?}");
    }
    // Each planted situation replays to its verdict; exit 0 only for clean or data.
    for (step, verdict, code) in
        [(22, "transient", 1), (24, "transient", 1), (25, "precision", 1), (26, "clean", 0), (28, "engine", 1)]
    {
        let c = out.join(format!("captures/step_{step:06}"));
        let o = dualscope(&["replay", s(&c), "--json", "--no-ladder"], &[]);
        let r: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("step {step}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(r["verdict"], verdict, "step {step}: {}", r["reason"]);
        assert_eq!(o.status.code(), Some(code), "step {step}");
    }
}

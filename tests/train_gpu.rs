//! `dualscope train --engine gpu`: the controller's paths and a real resume
//! on the Vulkan engine, against the CPU reference (skipped without Vulkan).

mod common;

use std::path::Path;

use common::{docs_jsonl, l2_parts, ok_json, run, s, train_tiny};
use dualscope::checkpoint::load_train_checkpoint;

fn train(args: &[&str]) -> serde_json::Value {
    ok_json(&run(args))
}

fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    let (d, n) = l2_parts(a, b);
    d / n.max(1e-30)
}

#[test]
fn gpu_training_follows_the_controller_and_resumes() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 20, |i| format!("doc {i}: {}", "the cat sat on the mat ".repeat(i % 5 + 1)));
    let run = |engine: &str, out: &Path, steps: &str| {
        train(&train_tiny(
            &data,
            &[
                "--batch",
                "3",
                "--seq-len",
                "24",
                "--steps",
                steps,
                "--engine",
                engine,
                "--out",
                s(out),
                "--checkpoint-every",
                "4",
                "--loss-scale",
                "dynamic",
                "--inject-nan-at",
                "5,6,7",
                "--inject-spike-at",
                "11",
                "--gn-warmup",
                "3",
                "--gn-spike-z",
                "6",
                "--lr-cooldown",
                "3",
                "--json",
            ],
        ))
    };
    let (g, c) = (dir.path().join("gpu"), dir.path().join("cpu"));
    let gv = run("gpu", &g, "14");
    let cv = run("cpu", &c, "14");
    let kinds = |v: &serde_json::Value| {
        let acts = v["actions"].as_array().unwrap().iter();
        acts.map(|a| format!("{}:{}", a["step"].as_u64().unwrap(), a["action"].as_str().unwrap())).collect::<Vec<_>>()
    };
    assert_eq!(kinds(&gv), kinds(&cv), "the same actions on both engines");
    let k = kinds(&gv);
    assert!(k.contains(&"7:rollback".to_string()) && k.contains(&"11:skip".to_string()), "{k:?}");
    assert_eq!(k.iter().filter(|x| x.ends_with(":scale_backoff")).count(), 3, "{k:?}");
    for (x, y) in gv["log"].as_array().unwrap().iter().zip(cv["log"].as_array().unwrap()) {
        let (a, b) = (x["loss"].as_f64().unwrap(), y["loss"].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-3 * b.abs(), "step {}: gpu {a} cpu {b}", x["step"]);
        for k in ["skipped", "optim_step", "scale", "lr"] {
            assert_eq!(x[k], y[k], "{k} at step {}", x["step"]);
        }
    }
    // Stop the GPU run at 9 and resume it to 14: weights and moments follow the uninterrupted run.
    let g2 = dir.path().join("gpu2");
    run("gpu", &g2, "9");
    let rest = train(&[
        "train",
        "--resume",
        s(&g2),
        "--data",
        s(&data),
        "--steps",
        "14",
        "--engine",
        "gpu",
        "--checkpoint-every",
        "4",
        "--inject-spike-at",
        "11",
        "--json",
    ]);
    assert_eq!(rest["first_step"], 10);
    let (a, b) = (
        load_train_checkpoint(&g.join("train_state.safetensors")).unwrap(),
        load_train_checkpoint(&g2.join("train_state.safetensors")).unwrap(),
    );
    for (what, x, y) in [("params", &a.params, &b.params), ("m", &a.m, &b.m), ("v", &a.v, &b.v)] {
        for (i, (tx, ty)) in x.tensors().into_iter().zip(y.tensors()).enumerate() {
            let r = max_rel(&ty.data, &tx.data);
            assert!(r <= 1e-5, "{what}[{i}] resumed vs uninterrupted: rel {r:.2e}");
        }
    }
    let st: serde_json::Value = serde_json::from_str(&b.state).unwrap();
    assert_eq!(st["step"], 14);
}

//! `dualscope train --engine gpu`: the controller's paths and a real resume
//! on the Vulkan engine, against the CPU reference (skipped without Vulkan).

mod common;

use std::path::Path;

use common::{docs_jsonl, l2_parts, ok_json, run, s, train_tiny};
use dualscope::capture;
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

/// The GPU-only planted events: `f16_overflow` on the f16 step is skipped by
/// the engine's guard, which backs the raised scale off, and the scale is put
/// back after it; `transient` is skipped by the guard (its square overflows
/// the device's f32 norm); `persistent` changes the loss from its step on and
/// not before.
#[test]
fn gpu_planted_events_act_at_their_step() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 20, |i| format!("doc {i}: {}", "the cat sat on the mat ".repeat(i % 5 + 1)));
    let run = |extra: &[&str]| {
        let mut args = train_tiny(&data, &["--batch", "3", "--seq-len", "24", "--steps", "6", "--engine", "gpu"]);
        args.extend_from_slice(extra);
        args.push("--json");
        train(&args)
    };
    let log = |v: &serde_json::Value| v["log"].as_array().unwrap().clone();

    // With captures on, the state is read back between the gradients and the
    // optimizer of steps 2 (requested) and 4; the run is the same as without.
    let f16_out = dir.path().join("f16");
    let v = run(&["--precision", "f16", "--inject", "f16_overflow@4", "--out", s(&f16_out), "--capture-at", "2"]);
    let plain = run(&["--precision", "f16", "--inject", "f16_overflow@4"]);
    for (a, b) in log(&v).iter().zip(&log(&plain)) {
        assert_eq!(
            (&a["loss"], &a["grad_norm"], &a["scale"]),
            (&b["loss"], &b["grad_norm"], &b["scale"]),
            "step {}",
            a["step"]
        );
    }
    let steps: Vec<u64> = v["captures"].as_array().unwrap().iter().map(|c| c["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [2, 4]);
    let acts: Vec<String> =
        v["actions"].as_array().unwrap().iter().map(|a| format!("{}:{}", a["step"], a["action"])).collect();
    // An overflow the dynamic scale backs off from is the scaler's to handle:
    // no learning-rate cut by default (docs/training.md, "Calibration").
    assert_eq!(acts, ["4:\"skip\"", "4:\"scale_backoff\""]);
    let l = log(&v);
    let scales: Vec<f64> = l.iter().map(|e| e["scale"].as_f64().unwrap()).collect();
    assert_eq!(scales, [65536.0, 65536.0, 65536.0, 65536.0 * 16_777_216.0, 65536.0, 65536.0], "put back after step 4");
    assert_eq!(l[3]["skipped"], "gradient norm is not finite");
    assert_eq!((l[2]["optim_step"].as_u64(), l[3]["optim_step"].as_u64()), (Some(3), Some(3)), "not applied");
    assert!(l.iter().enumerate().all(|(i, e)| i == 3 || e["skipped"].is_null()), "{l:?}");
    let backoff = v["actions"].as_array().unwrap().iter().find(|a| a["action"] == "scale_backoff").unwrap().clone();
    assert_eq!(backoff["scale"].as_f64(), Some(65536.0), "{backoff}");

    let v = run(&["--no-controller", "--inject", "transient@3"]);
    let l = log(&v);
    assert_eq!(l[2]["skipped"], "gradient norm is not finite");
    assert!(l.iter().enumerate().all(|(i, e)| i == 2 || e["skipped"].is_null()), "{l:?}");

    let losses = |v: &serde_json::Value| log(v).iter().map(|e| e["loss"].as_f64().unwrap()).collect::<Vec<_>>();
    let clean = losses(&run(&["--no-controller"]));
    let faulty = losses(&run(&["--no-controller", "--inject", "persistent@4"]));
    assert_eq!(clean[..3], faulty[..3], "before the fault");
    for k in 3..6 {
        assert!((clean[k] - faulty[k]).abs() > 1e-6 * clean[k].abs(), "step {}: {} vs {}", k + 1, clean[k], faulty[k]);
    }
    // A named fault, and the controller's two-phase step under it.
    let named = losses(&run(&["--inject", "persistent=window_off_by_one@2"]));
    assert_eq!(named[0], clean[0]);
    assert!((named[1] - clean[1]).abs() > 1e-6 * clean[1].abs(), "{named:?} vs {clean:?}");
}

/// Captures on the GPU without the controller (the one-submit step): a
/// planted fault's capture names it, and a step the guard skipped changes
/// nothing but the loss scale, so its capture (the raised scale of an
/// f16 overflow) holds the very weights, moments and step counter the run
/// ends with.
#[test]
fn gpu_captures_hold_the_state_before_the_step() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 20, |i| format!("doc {i}: {}", "the cat sat on the mat ".repeat(i % 5 + 1)));
    let out = dir.path().join("run");
    let v = train(&train_tiny(
        &data,
        &[
            "--batch",
            "3",
            "--seq-len",
            "24",
            "--steps",
            "3",
            "--engine",
            "gpu",
            "--precision",
            "f16",
            "--no-controller",
            "--inject",
            "persistent@2,f16_overflow@3",
            "--checkpoint-every",
            "1",
            "--out",
            s(&out),
            "--json",
        ],
    ));
    let steps: Vec<u64> = v["captures"].as_array().unwrap().iter().map(|c| c["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [2, 3]);
    let c2 = capture::load(&out.join("captures/step_000002")).unwrap();
    assert_eq!(
        (c2.meta.triggers.clone(), c2.meta.planted.clone()),
        (vec!["planted".to_string()], Some("persistent=reset_before_matmul".to_string()))
    );
    assert_eq!((c2.meta.engine.as_str(), c2.meta.precision), ("gpu", dualscope::step::Precision::F16));
    assert_eq!(c2.state.optim.step, 1);
    let c3 = capture::load(&out.join("captures/step_000003")).unwrap();
    assert_eq!(c3.meta.triggers, ["skip", "scale_backoff", "planted"]);
    assert_eq!(
        c3.meta.planted.as_deref(),
        Some("persistent=reset_before_matmul"),
        "the fault in force takes precedence"
    );
    assert_eq!(c3.state.scale.scale, 65536.0 * 16_777_216.0, "the scale step 3 ran with");
    let end = load_train_checkpoint(&out.join("train_state.safetensors")).unwrap();
    assert_eq!((&c3.state.params, &c3.state.optim.m, &c3.state.optim.v), (&end.params, &end.m, &end.v));
    let st: serde_json::Value = serde_json::from_str(&end.state).unwrap();
    assert_eq!((st["optim_step"].as_u64(), c3.state.optim.step), (Some(2), 2));
    assert_eq!(st["loss_scale"]["scale"].as_f64(), Some(65536.0), "put back after the overflow");
}

/// `train --precision-map` records the whole map in each capture, and
/// `replay` runs the captured step with it (the map shows in its report).
#[test]
fn a_captured_step_keeps_its_precision_map() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 20, |i| format!("doc {i}: {}", "the cat sat on the mat ".repeat(i % 5 + 1)));
    let out = dir.path().join("run");
    let args = ["--batch", "2", "--seq-len", "16", "--steps", "2", "--engine", "gpu", "--precision", "f16"];
    let more = ["--precision-map", "head=f32,attn.bwd=f32", "--capture-at", "2", "--out", s(&out), "--json"];
    let v = train(&train_tiny(&data, &[&args[..], &more[..]].concat()));
    assert_eq!(v["captures"].as_array().unwrap().len(), 1, "{v}");
    let cap = out.join("captures/step_000002");
    let c = capture::load(&cap).unwrap();
    let map = c.meta.precision_map.clone().expect("the capture records the map");
    assert!(map.contains("head=f32") && map.contains("attn.bwd=f32") && map.contains("head.bwd=f16"), "{map}");
    let r = ok_json(&run(&["replay", s(&cap), "--no-ladder", "--json"]));
    assert_eq!(r["precision_map"].as_str(), Some(map.as_str()), "{r}");
}

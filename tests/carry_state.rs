//! The state carried through time (docs/carry-state.md): chunked passes equal
//! one whole pass through the engine type, `train --carry-state` trains and
//! resumes exactly on both engines, `ladder --carry-check` passes, and what
//! is not supported (captures) is refused with one clear line.

mod common;

use std::path::Path;

use common::{fails, ok_json, run, s, train_tiny};
use dualscope::checkpoint::load_params;
use dualscope::cpu::{Carry, LossScale, StepOptions};
use dualscope::dataset::Batch;
use dualscope::engine::{Engine, TrainState};
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;

/// A text of a few kilobytes with structure a tiny model can learn.
fn text_file(dir: &Path) -> std::path::PathBuf {
    let mut t = String::new();
    for i in 0..400 {
        t += &format!("line {i}: the quick brown fox jumps over the lazy dog {}\n", i % 7);
    }
    let p = dir.join("text.txt");
    std::fs::write(&p, t).unwrap();
    p
}

fn jsonl(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Three chunks of T = 7 (no tile divides it), W = 4, through
/// `Engine::set_carry`: each chunk's loss is the whole pass's over its
/// positions, and dropping the carried prefix (h0 kept) moves it.
#[test]
fn chunked_equals_whole_through_the_engine() {
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let (k, t) = (3, 7);
    let params = Params::<f32>::init(&cfg, 5);
    let mut rng = Rng::new(6);
    let row: Vec<u8> = (0..k * t + 1).map(|_| rng.below(256) as u8).collect();
    let whole = dualscope::cpu::forward(&cfg, &params.cast::<f64>(), &Batch::from_rows(&[&row]).unwrap()).unwrap();
    let state = TrainState::fresh(&cfg, params, LossScale::fixed());
    let mut e = Engine::cpu(&cfg, state, &StepOptions::default());
    let mut cur = Carry::zeros(&cfg, 1);
    for c in 0..k {
        let chunk = Batch::from_rows(&[&row[c * t..c * t + t + 1]]).unwrap();
        let want = whole.token_loss[c * t..(c + 1) * t].iter().sum::<f64>() / t as f64;
        e.set_carry(Some(cur.clone())).unwrap();
        let got = e.grads(&chunk).unwrap().loss;
        assert!((got - want).abs() <= 1e-5 * want, "chunk {c}: {got} vs the whole pass's {want}");
        let next = e.final_state().expect("carrying").clone();
        assert_eq!(next.prefix_len, (cfg.window - 1).min((c + 1) * t));
        if c > 0 {
            // The same h0 without the prefix: the first W − 1 positions lose their keys.
            e.set_carry(Some(Carry { prefix: vec![], prefix_len: 0, ..cur.clone() })).unwrap();
            let dropped = e.grads(&chunk).unwrap().loss;
            assert!((dropped - want).abs() > 1e-4 * want, "chunk {c}: the prefix changed nothing");
        }
        cur = next;
    }
    // A state for another batch shape is one clear error at the step.
    e.set_carry(Some(Carry::zeros(&cfg, 2))).unwrap();
    let err = e.grads(&Batch::from_rows(&[&row[..t + 1]]).unwrap()).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("2 rows") && err.contains("1 rows"), "{err}");
}

/// `train --carry-state` on the CPU: finite losses that fall, other batches
/// than random windows, the carried state beside the run state.
#[test]
fn train_carry_state_runs_and_learns() {
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let out = d.path().join("run");
    let args = ["--batch", "3", "--seq-len", "20", "--steps", "30", "--carry-state", "--carry-windows", "4"];
    let mut a = train_tiny(&data, &args);
    a.extend(["--out", s(&out), "--json", "--lr", "1e-2"]);
    let v = ok_json(&run(&a));
    let losses: Vec<f64> = v["log"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect();
    assert_eq!(losses.len(), 30);
    assert!(losses.iter().all(|l| l.is_finite() && *l > 0.0), "{losses:?}");
    let (first, last) = (losses[..5].iter().sum::<f64>() / 5.0, losses[25..].iter().sum::<f64>() / 5.0);
    assert!(last < first, "the loss falls: first five {first}, last five {last}");
    // Step 30 is the second window of an episode (30 = 7·4 + 2): a state is kept.
    assert!(out.join("carry_state.safetensors").exists());
    let plain = train_tiny(&data, &["--batch", "3", "--seq-len", "20", "--steps", "30", "--json", "--lr", "1e-2"]);
    let w = ok_json(&run(&plain));
    assert_ne!(v["log"][1]["loss"], w["log"][1]["loss"], "carried runs read other batches than random windows");
}

/// Stopping in the middle of an episode and resuming gives the very weights
/// and losses of the uninterrupted run (the carried state comes back).
#[test]
fn resuming_a_carried_run_continues_exactly() {
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let common = ["--batch", "2", "--seq-len", "16", "--carry-state", "--carry-windows", "4", "--json"];
    let train_to = |out: &Path, steps: &str| {
        let mut args = train_tiny(&data, &common);
        args.extend(["--out", s(out), "--steps", steps, "--checkpoint-every", "3"]);
        ok_json(&run(&args))
    };
    train_to(&a, "14");
    train_to(&b, "6");
    let o = run(&[
        "train",
        "--resume",
        s(&b),
        "--data",
        s(&data),
        "--steps",
        "14",
        "--checkpoint-every",
        "3",
        "--carry-state",
        "--carry-windows",
        "4",
        "--json",
    ]);
    let rest = ok_json(&o);
    assert_eq!(rest["first_step"].as_u64(), Some(7));
    let (la, lb) = (jsonl(&a.join("log.jsonl")), jsonl(&b.join("log.jsonl")));
    assert_eq!(lb.len(), 14);
    for (x, y) in la.iter().zip(&lb) {
        assert_eq!(x["loss"], y["loss"], "step {}: {x} vs {y}", x["step"]);
    }
    assert!(load_params(&a.join("last.safetensors")).unwrap() == load_params(&b.join("last.safetensors")).unwrap());
    // Resumed the other way, the run is refused with one line.
    let o = run(&["train", "--resume", s(&b), "--data", s(&data), "--steps", "20"]);
    let err = fails(&o, 2);
    assert!(err.contains("--carry-state --carry-windows 4"), "{err}");
}

/// What a carried run cannot do is refused with one line, exit 2.
#[test]
fn unsupported_combinations_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let out = d.path().join("o");
    let cap = run(&train_tiny(&data, &["--steps", "2", "--carry-state", "--capture-at", "1", "--out", s(&out)]));
    assert!(fails(&cap, 2).contains("--capture-at with --carry-state"));
    let long = run(&train_tiny(&data, &["--steps", "2", "--carry-state", "--carry-windows", "100000"]));
    assert!(fails(&long, 2).contains("--carry-windows 100000"));
}

/// `ladder --carry-check 3` at tiny passes on the CPU and (where a device
/// opens) on the GPU, which then leaves nothing as not run.
#[test]
fn ladder_carry_check() {
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let args = ["ladder", "--config", "tiny", "--data", s(&data), "--carry-check", "3", "--len", "7", "--json"];
    let mut allow = args.to_vec();
    allow.push("--allow-not-run");
    let v = ok_json(&run(&allow));
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["per_chunk"].as_array().unwrap().len(), 3);
    assert!(v["per_chunk"][2]["from_zero_head"]["rel_l2"].as_f64().unwrap() > 1e-3);
    if common::vk::context("ladder_carry_check").is_some() {
        assert!(v["not_run"].as_array().unwrap().is_empty(), "{v}");
        let gpu = &v["gpu"]["per_chunk"];
        assert_eq!(gpu.as_array().unwrap().len(), 3);
        assert!(gpu[2]["logits"]["rel_l2"].as_f64().unwrap() < 1e-5, "{v}");
        assert_eq!(run(&args).status.code(), Some(0));
    } else {
        assert!(!v["not_run"].as_array().unwrap().is_empty());
        assert_eq!(run(&args).status.code(), Some(1));
    }
}

/// The GPU engine carries the state as the CPU does: K = 3 chunks of T = 7,
/// W = 4 (so the prefix reaches the first three positions of chunks 2 and 3),
/// each chunk's loss equal to the whole pass's over its positions, the state
/// after each chunk and the last chunk's gradients (from a non-zero state)
/// equal to the CPU's within the ladder's f32 tolerances.
#[test]
fn gpu_carries_the_state_as_the_cpu() {
    let Some(ctx) = common::vk::context("gpu_carries_the_state_as_the_cpu") else { return };
    let ctx = std::sync::Arc::new(ctx);
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let (k, t) = (3, 7);
    let params = Params::<f32>::init(&cfg, 5);
    let mut rng = Rng::new(6);
    let row: Vec<u8> = (0..k * t + 1).map(|_| rng.below(256) as u8).collect();
    let whole = dualscope::cpu::forward(&cfg, &params.cast::<f64>(), &Batch::from_rows(&[&row]).unwrap()).unwrap();
    let state = TrainState::fresh(&cfg, params.clone(), LossScale::fixed());
    let opts = StepOptions::default();
    let mut gpu = Engine::vulkan(&ctx, &cfg, &state, &opts, &Default::default()).unwrap();
    let mut cur = Carry::zeros(&cfg, 1);
    let rel = |a: &[f32], b: &[f32]| {
        let d: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum::<f64>().sqrt();
        let n: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum::<f64>().sqrt();
        d / n.max(1e-30)
    };
    for c in 0..k {
        let chunk = Batch::from_rows(&[&row[c * t..c * t + t + 1]]).unwrap();
        let want = whole.token_loss[c * t..(c + 1) * t].iter().sum::<f64>() / t as f64;
        gpu.set_carry(Some(cur.clone())).unwrap();
        let g = gpu.grads(&chunk).unwrap();
        assert!((g.loss - want).abs() <= 1e-5 * want, "chunk {c}: gpu {} vs the whole pass's {want}", g.loss);
        let (cpu, next) = dualscope::cpu::grads_with(&cfg, &params, &chunk, None, Some(&cur)).unwrap();
        let gnext = gpu.final_state().expect("carrying").clone();
        assert_eq!(gnext.prefix_len, next.prefix_len);
        for l in 0..cfg.layers {
            assert!(rel(&gnext.h0[l], &next.h0[l]) < 2e-5, "chunk {c}: h0 of layer {l}");
        }
        assert!(rel(&gnext.prefix, &next.prefix) < 2e-5, "chunk {c}: prefix");
        if c + 1 == k {
            for ((name, a), b) in g.grads.named(&cfg).into_iter().zip(cpu.grads.tensors()) {
                let r = rel(&a.data, &b.data);
                assert!(r < 1e-4, "last chunk: {name} relative L2 {r:.3e}");
            }
        }
        cur = next;
    }
    common::vk::assert_clean(&ctx, "gpu_carries_the_state_as_the_cpu");
}

/// `train --carry-state --engine gpu` gives the CPU's losses (f32, the same
/// batches and states) within the f32 contract over a few steps.
#[test]
fn gpu_train_carry_state_matches_the_cpu() {
    if common::vk::context("gpu_train_carry_state_matches_the_cpu").is_none() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let args = ["--batch", "2", "--seq-len", "9", "--steps", "8", "--carry-state", "--carry-windows", "3", "--json"];
    let losses = |engine: &str| -> Vec<f64> {
        let mut a = train_tiny(&data, &args);
        a.extend(["--engine", engine]);
        let v = ok_json(&run(&a));
        v["log"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect()
    };
    let (cpu, gpu) = (losses("cpu"), losses("gpu"));
    assert_eq!(cpu.len(), 8);
    for (i, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        assert!((c - g).abs() <= 1e-4 * c, "step {}: cpu {c} vs gpu {g}", i + 1);
    }
}

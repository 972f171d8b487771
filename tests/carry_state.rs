//! The state carried through time (docs/carry-state.md): chunked passes equal
//! one whole pass through the engine type, `train --carry-state` trains and
//! resumes exactly on both engines, `ladder --carry-check` passes, and a
//! carried step's capture holds its state and replays to the recorded step.

mod common;

use std::path::Path;

use common::{fails, ok_json, run, s, train_tiny};
use dualscope::checkpoint::load_params;
use dualscope::dataset::Batch;
use dualscope::engine::{Engine, TrainState};
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::{Carry, LossScale, StepOptions};

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
    let _ = &out;
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

/// A step of `train --carry-state` with a state carried into it is captured
/// with that state (`carry.safetensors`); the capture's CPU f32 step from it
/// gives the recorded loss bit for bit, and `replay` (where a device opens)
/// reproduces the recorded step (verdict clean). Without the file the
/// capture is refused with one line naming it.
#[test]
fn a_carried_step_is_captured_and_replays() {
    let d = tempfile::tempdir().unwrap();
    let data = text_file(d.path());
    let out = d.path().join("run");
    // Step 6 is the second window of the second episode (K = 4): a state is carried into it.
    let args = ["--batch", "2", "--seq-len", "12", "--steps", "7", "--carry-state", "--carry-windows", "4"];
    let mut a = train_tiny(&data, &args);
    a.extend(["--out", s(&out), "--json", "--capture-at", "6"]);
    let v = ok_json(&run(&a));
    let cap_dir = out.join("captures/step_000006");
    let c = dualscope::capture::load(&cap_dir).unwrap();
    assert!(c.meta.carry && c.meta.carry_windows == Some(4), "{:?}", c.meta);
    let k = c.carry.clone().expect("the carried state");
    assert!(!k.is_empty() && k.prefix_len == c.config.window - 1, "a non-zero state with a full prefix");
    assert_eq!(c.meta.carry_prefix_len, Some(k.prefix_len));
    assert_eq!(c.meta.batch.origins.len(), 2);
    // The step from the captured state is the recorded one, bit for bit.
    let rec = c.meta.recorded.as_ref().unwrap();
    assert_eq!(rec.loss, v["log"][5]["loss"].as_f64().unwrap());
    let (g, _) =
        dualscope::cpu::grads_with(&c.config, &c.state.params, &c.batch, c.meta.optim.token_cap, Some(&k)).unwrap();
    assert_eq!(g.loss.to_bits(), rec.loss.to_bits(), "replayed {} vs recorded {}", g.loss, rec.loss);
    // From zero it is another step: the state matters.
    let zero = dualscope::cpu::grads::<f32>(&c.config, &c.state.params, &c.batch, c.meta.optim.token_cap).unwrap();
    assert_ne!(zero.loss, rec.loss);
    if common::vk::context("a_carried_step_is_captured_and_replays").is_some() {
        let o = common::dualscope(&["replay", s(&cap_dir), "--json", "--no-ladder"], &[]);
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(r["verdict"], "clean", "{}", r["reason"]);
        assert_eq!(o.status.code(), Some(0));
        let cpu = r["runs"].as_array().unwrap().iter().find(|x| x["name"] == "cpu f32").unwrap();
        assert_eq!(cpu["loss"].as_f64().unwrap().to_bits(), rec.loss.to_bits(), "{cpu}");
        assert!(r["evidence"].as_array().unwrap().iter().any(|e| e.as_str().unwrap().starts_with("carried state")));
        // Captured on the GPU engine, the replay agrees within the contract.
        let gout = d.path().join("gpu");
        let mut a = train_tiny(&data, &args);
        a.extend(["--out", s(&gout), "--json", "--capture-at", "6", "--engine", "gpu"]);
        ok_json(&run(&a));
        let o = common::dualscope(&["replay", s(&gout.join("captures/step_000006")), "--json", "--no-ladder"], &[]);
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(r["verdict"], "clean", "{}", r["reason"]);
    }
    std::fs::remove_file(cap_dir.join("carry.safetensors")).unwrap();
    let err = fails(&run(&["replay", s(&cap_dir)]), 1);
    assert!(err.contains("carry.safetensors") && err.contains("missing"), "{err}");
}

/// Why a row cannot start its next document alone while the other rows keep
/// their state (docs/carry-state.md, "Walking documents end to end"): with
/// a batch-wide prefix length, zeroing one row's `h0` and prefix blocks is a
/// fresh row for the recurrence but not for attention — the zeroed prefix
/// positions still take softmax weight (their keys are `W_k · 0 = 0`, score
/// 0), so that row's first `W − 1` positions differ from a fresh row's, and
/// only those. The other row is untouched.
#[test]
fn zeroing_one_row_of_a_batch_wide_prefix_is_not_a_fresh_row() {
    let mut cfg = Config::tiny();
    cfg.window = 4;
    let t = 9;
    let p = Params::<f32>::init(&cfg, 11).cast::<f64>();
    let mut rng = Rng::new(12);
    let rows: Vec<Vec<u8>> = (0..2).map(|_| (0..2 * t + 1).map(|_| rng.below(256) as u8).collect()).collect();
    let first = Batch::from_rows(&[&rows[0][..t + 1], &rows[1][..t + 1]]).unwrap();
    let f = dualscope::cpu::forward(&cfg, &p, &first).unwrap();
    let carried = Carry::after(&cfg, &f, None);
    assert_eq!(carried.prefix_len, cfg.window - 1);
    // Row 1 "starts a new document": its h0 and prefix blocks zeroed.
    let (bh, h) = (2 * cfg.hidden, cfg.hidden);
    let mut reset = carried.clone();
    for l in reset.h0.iter_mut() {
        l[h..2 * h].iter_mut().for_each(|x| *x = 0.0);
    }
    for j in 0..reset.prefix_len {
        reset.prefix[j * bh + h..j * bh + 2 * h].iter_mut().for_each(|x| *x = 0.0);
    }
    let second = Batch::from_rows(&[&rows[0][t..], &rows[1][t..]]).unwrap();
    let kept = dualscope::cpu::forward_with(&cfg, &p, &second, Some(&carried)).unwrap();
    let got = dualscope::cpu::forward_with(&cfg, &p, &second, Some(&reset)).unwrap();
    let fresh = dualscope::cpu::forward(&cfg, &p, &Batch::from_rows(&[&rows[1][t..]]).unwrap()).unwrap();
    let v = cfg.vocab;
    for pos in 0..t {
        let at = |b: usize, bb: usize| (pos * bb + b) * v;
        let d = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert_eq!(&got.logits[at(0, 2)..at(0, 2) + v], &kept.logits[at(0, 2)..at(0, 2) + v], "row 0 moved");
        let off = d(&got.logits[at(1, 2)..at(1, 2) + v], &fresh.logits[at(0, 1)..at(0, 1) + v]);
        if pos + 1 < cfg.window {
            assert!(off > 1e-6, "position {pos}: the zeroed prefix acted as no prefix ({off:.2e})");
        } else {
            assert!(off < 1e-12, "position {pos}: beyond the window the row is fresh ({off:.2e})");
        }
    }
}

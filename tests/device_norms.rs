//! The controller's inputs on the device (src/vk/engine/norms.rs): each
//! tensor's gradient sum of squares and non-finite count against the host's
//! `norms_of` of the same gradients, and (in a `lab` build) `train`'s
//! default (split) step against the host-norms path it replaced
//! (`DUALSCOPE_HOST_NORMS=1`).

mod common;

use common::{dualscope, ok_json, random_batch};
use dualscope::engine::{self, TrainState, VulkanOptions, norms_of};
use dualscope::model::{Config, Params};
use dualscope::rng::Rng;
use dualscope::step::{GemmChoice, Precision};
use dualscope::step::{LossScale, StepOptions};
use dualscope::vk::engine::{Engine, FlatBuf, NORM_CHUNK};

/// Widths that divide no tile, with tensors of several norm chunks
/// (`head.tok.weight` 256 × 45 and `gru.weight_hh_*` 135 × 45 are over 4096 values).
fn cfg() -> Config {
    Config { vocab: 256, d_embed: 7, hidden: 45, layers: 2, attn_dim: 6, heads: 3, window: 4, batch: 3, seq_len: 11 }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// The device's sums of squares match `norms_of` of the gradients read back,
/// for a step's gradients and for uploaded ones of wide dynamic range with a
/// NaN and infinities planted (the counts exact, the sums non-finite alike).
#[test]
fn device_norms_match_the_host_norms_of_the_same_gradients() {
    let (test, ctx) = common::vulkan!();
    let cfg = cfg();
    let layout = dualscope::vk::engine::ParamLayout::new(&cfg);
    assert!(layout.entries.iter().filter(|e| e.len > NORM_CHUNK).count() >= 3, "several multi-chunk tensors");
    let params = Params::init(&cfg, 7);
    let mut e =
        Engine::with_precision(&ctx, &cfg, &params, &StepOptions::default(), Precision::F32, GemmChoice::Auto).unwrap();
    let batch = random_batch(3, &[11, 7, 9]);
    let g = e.grads(&batch).unwrap();
    let names: Vec<String> = layout.entries.iter().map(|e| e.name.clone()).collect();
    let check = |grads: &Params<f32>, e: &Engine, what: &str| {
        let host = norms_of(&cfg, grads, 1.0);
        let dev = e.grad_norms_now().unwrap();
        assert_eq!(dev.sumsq.len(), names.len());
        for (i, ((name, want), flat)) in host.tensors.iter().zip(grads.tensors()).enumerate() {
            assert_eq!(name, &names[i]);
            let bad = flat.data.iter().filter(|x| !x.is_finite()).count() as u64;
            assert_eq!(dev.nonfinite[i], bad, "{what}: {name}'s non-finite count");
            let got = dev.sumsq[i].sqrt();
            if want.is_finite() {
                assert!(
                    rel(got, *want) <= 1e-6,
                    "{what}: {name}: device {got:e} host {want:e} (rel {:.2e})",
                    rel(got, *want)
                );
            } else {
                assert_eq!((got.is_nan(), got.is_infinite()), (want.is_nan(), want.is_infinite()), "{what}: {name}");
            }
        }
    };
    check(&g.grads, &e, "a step's gradients");
    // Uploaded gradients: magnitudes over 2^±20, then a NaN and two infinities.
    let mut rng = Rng::new(11);
    let mut flat: Vec<f32> = (0..layout.total)
        .map(|_| {
            let u = (rng.next_u64() % 1_000_000) as f32 / 1e6 - 0.5;
            u * 2f32.powi((rng.next_u64() % 41) as i32 - 20)
        })
        .collect();
    e.write_flat(FlatBuf::Grads, &flat).unwrap();
    check(&layout.unflatten(&cfg, &flat), &e, "wide-range gradients");
    let head = layout.get("head.tok.weight").unwrap();
    let whh = layout.get("gru.weight_hh_l1").unwrap();
    flat[head.offset + 5000] = f32::NAN;
    flat[whh.offset + 17] = f32::INFINITY;
    flat[whh.offset + whh.len - 1] = f32::NEG_INFINITY;
    e.write_flat(FlatBuf::Grads, &flat).unwrap();
    let planted = layout.unflatten(&cfg, &flat);
    check(&planted, &e, "planted non-finite values");
    let dev = e.grad_norms_now().unwrap();
    let at = |name: &str| layout.entries.iter().position(|e| e.name == name).unwrap();
    assert!(dev.sumsq[at("head.tok.weight")].is_nan() && dev.nonfinite[at("head.tok.weight")] == 1);
    assert!(dev.sumsq[at("gru.weight_hh_l1")] == f64::INFINITY && dev.nonfinite[at("gru.weight_hh_l1")] == 2);
    assert_eq!(dev.nonfinite.iter().sum::<u64>(), 3);
    common::assert_clean(&ctx, test);
}

/// A step the controller skips (compute, no apply) leaves the weights, the
/// moments and the step counter on the device as they were, and the split
/// step's norms are those of the host path's gradients at the same state.
#[test]
fn a_skipped_split_step_leaves_the_device_state_unchanged() {
    let (test, ctx) = common::vulkan!();
    let cfg = cfg();
    let params = Params::init(&cfg, 5);
    let state = TrainState::fresh(&cfg, params, LossScale::dynamic());
    let vk = VulkanOptions { precision: Precision::F32, ..VulkanOptions::default() };
    let mut eng = engine::Engine::vulkan(&ctx, &cfg, &state, &StepOptions::default(), &vk).unwrap();
    let batch = random_batch(9, &[11, 10, 6]);
    let first = eng.compute(&batch, None).unwrap();
    assert!(first.on_device(), "the split step (no gradient read back)");
    let report = eng.apply(first).unwrap();
    assert!(report.optim.skipped.is_none());
    let before = eng.snapshot().unwrap();
    let p = eng.compute(&batch, None).unwrap();
    let (loss, norms) = (p.loss, p.norms.clone());
    drop(p);
    let after = eng.snapshot().unwrap();
    assert_eq!(before, after, "a computed step that is not applied changes nothing");
    assert_eq!(eng.optim_step().unwrap(), 1);
    // The host path's gradients of the same state: norms within 1e-6.
    let g = eng.grads(&batch).unwrap();
    assert_eq!(g.loss, loss, "the same forward");
    let host = norms_of(&cfg, &g.grads, 1.0);
    assert!(rel(norms.global, host.global) <= 1e-6, "{} vs {}", norms.global, host.global);
    for ((n, a), (_, b)) in norms.tensors.iter().zip(&host.tensors) {
        assert!(rel(*a, *b) <= 1e-6, "{n}: split {a:e} host {b:e}");
    }
    common::assert_clean(&ctx, test);
}

/// `train --engine gpu` with the controller on: the split step (the default)
/// and the host-norms path give the same losses bit for bit, gradient norms
/// within 1e-6, the same controller actions and the same final weights.
#[cfg(feature = "lab")]
#[test]
fn train_split_step_matches_the_host_norms_path() {
    use common::{docs_jsonl, s, train_tiny};
    use dualscope::checkpoint::load_train_checkpoint;
    use std::path::Path;
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 20, |i| format!("doc {i}: {}", "a quick brown fox ".repeat(i % 4 + 1)));
    let run = |out: &Path, env: &[(&str, &str)]| {
        let args = train_tiny(
            &data,
            &[
                "--batch",
                "3",
                "--seq-len",
                "21",
                "--steps",
                "12",
                "--engine",
                "gpu",
                "--out",
                s(out),
                "--loss-scale",
                "dynamic",
                "--inject-spike-at",
                "9",
                "--gn-warmup",
                "3",
                "--gn-spike-z",
                "6",
                "--json",
            ],
        );
        ok_json(&dualscope(&args, env))
    };
    let (a, b) = (dir.path().join("split"), dir.path().join("host"));
    let split = run(&a, &[]);
    let host = run(&b, &[("DUALSCOPE_HOST_NORMS", "1")]);
    let (ls, lh) = (split["log"].as_array().unwrap(), host["log"].as_array().unwrap());
    assert_eq!(ls.len(), 12);
    assert_eq!(ls.len(), lh.len());
    for (x, y) in ls.iter().zip(lh) {
        let step = &x["step"];
        assert_eq!(x["loss"].as_f64().map(f64::to_bits), y["loss"].as_f64().map(f64::to_bits), "loss at {step}");
        let (g, h) = (x["grad_norm"].as_f64().unwrap(), y["grad_norm"].as_f64().unwrap());
        assert!(rel(g, h) <= 1e-6, "grad norm at {step}: split {g} host {h}");
        for k in ["skipped", "clipped", "optim_step", "scale", "lr", "actions"] {
            assert_eq!(x[k], y[k], "{k} at step {step}");
        }
    }
    assert!(ls.iter().any(|x| !x["actions"].as_array().unwrap().is_empty()), "the controller acted");
    let (ca, cb) = (
        load_train_checkpoint(&a.join("train_state.safetensors")).unwrap(),
        load_train_checkpoint(&b.join("train_state.safetensors")).unwrap(),
    );
    assert_eq!((&ca.params, &ca.m, &ca.v), (&cb.params, &cb.m, &cb.v), "the same weights and moments bit for bit");
}

/// `bench --controller` times `train`'s default step beside the bare and the
/// replayed one (timed, never asserted on speed); the CPU engine refuses it.
#[test]
fn bench_reports_the_controllers_path() {
    common::skip_without_vulkan!();
    let args = ["bench", "--engine", "gpu", "--config", "tiny", "--steps", "3", "--warmup", "1", "--json"];
    let v = ok_json(&dualscope(&[&args[..], &["--controller"]].concat(), &[]));
    let gpu = &v["engines"][0];
    for k in ["median_ms", "replay_median_ms", "controller_median_ms"] {
        assert!(gpu[k].as_f64().is_some_and(|ms| ms > 0.0), "{k}: {gpu}");
    }
    let plain = ok_json(&dualscope(&args, &[]));
    assert!(plain["engines"][0]["controller_median_ms"].is_null(), "only when asked for");
    let cpu = ["bench", "--engine", "cpu", "--config", "tiny", "--steps", "1", "--controller"];
    let err = common::fails(&dualscope(&cpu, &[]), 2);
    assert!(err.contains("--controller"), "{err}");
}

//! `grads`, `step` and `train` with `--engine gpu` against `--engine cpu`:
//! the same reports, tensors and log lines within their tolerances, training
//! that resumes, and the GPU's usage and device errors.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{self, docs_jsonl, dualscope, fails_cleanly, rel_l2, s, text};
use dualscope::checkpoint::{load_params, load_tensors};
use dualscope::model::Config;

/// A temporary directory with a `tiny` checkpoint and two rows of different lengths.
struct Files {
    dir: tempfile::TempDir,
    ckpt: PathBuf,
    data: Vec<PathBuf>,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("model.safetensors");
        let out = dualscope(&["init", "--config", "tiny", "--seed", "3", "--out", s(&ckpt)], &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let a = dir.path().join("a.txt");
        std::fs::write(&a, b"The quick brown fox jumps over the lazy dog. The dog sleeps.").unwrap();
        let b = dir.path().join("b.bin");
        std::fs::write(&b, [0u8, 255, 7, 128, 10, 13, 0xC3, 0x28, 1, 2, 3]).unwrap();
        Files { dir, ckpt, data: vec![a, b] }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `cmd --checkpoint CKPT --data … --engine ENGINE --out OUT` and `extra`.
    fn run(&self, cmd: &str, engine: &str, out: &Path, extra: &[&str]) -> Output {
        let mut args = vec![cmd, "--checkpoint", s(&self.ckpt)];
        for d in &self.data {
            args.extend(["--data", s(d)]);
        }
        args.extend(["--engine", engine, "--out", s(out)]);
        args.extend(extra);
        dualscope(&args, &[])
    }
}

fn json_of(out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Asserts that both files hold the same tensors, each within `tol` relative
/// L2; returns the largest error.
fn same_tensors(gpu: &Path, cpu: &Path, tol: f64) -> f64 {
    let (g, gmeta) = load_tensors(gpu).unwrap();
    let (c, cmeta) = load_tensors(cpu).unwrap();
    assert_eq!(g.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>());
    assert_eq!(gmeta.get("config"), cmeta.get("config"));
    assert_eq!(gmeta.get("kind"), cmeta.get("kind"));
    let mut worst: f64 = 0.0;
    for (name, ct) in &c {
        let gt = &g[name];
        assert_eq!(gt.shape, ct.shape, "{name}");
        let r = rel_l2(&gt.data, &ct.data);
        assert!(r <= tol, "{name}: relative L2 {r:.3e} > {tol:.0e}");
        worst = worst.max(r);
    }
    eprintln!("{}: worst tensor relative L2 {worst:.2e}", gpu.display());
    worst
}

/// The human-readable output with every number replaced by `#`: the same
/// lines in the same form from both engines.
fn shape_of(stdout: &[u8]) -> String {
    let t = text(stdout);
    let mut out = String::new();
    let mut in_num = false;
    for ch in t.chars() {
        let num = ch.is_ascii_digit() || (in_num && ch == '.');
        if num && !in_num {
            out.push('#');
        } else if !num {
            out.push(ch);
        }
        in_num = num;
    }
    out
}

fn keys(v: &serde_json::Value) -> Vec<&String> {
    v.as_object().unwrap().keys().collect()
}

/// Runs `cmd` with `extra` and `--json` on the GPU and on the CPU (into
/// `g{i}.safetensors` and `c{i}.safetensors`); both report the same keys, the
/// loss within 1e-5 and the gradient norm within 1e-4. Returns the two
/// reports and the two output paths.
fn on_gpu_and_cpu(
    fx: &Files,
    cmd: &str,
    i: usize,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value, PathBuf, PathBuf) {
    let (g_out, c_out) = (fx.path(&format!("g{i}.safetensors")), fx.path(&format!("c{i}.safetensors")));
    let g = json_of(&fx.run(cmd, "gpu", &g_out, &[extra, &["--json"]].concat()));
    let c = json_of(&fx.run(cmd, "cpu", &c_out, &[extra, &["--json"]].concat()));
    assert_eq!(keys(&g), keys(&c));
    assert!(rel(f(&g, "loss"), f(&c, "loss")) <= 1e-5, "{cmd} loss: gpu {g} cpu {c}");
    assert!(rel(f(&g, "grad_norm"), f(&c, "grad_norm")) <= 1e-4, "{cmd} grad_norm: gpu {g} cpu {c}");
    (g, c, g_out, c_out)
}

#[test]
fn grads_on_the_gpu_match_the_cpu() {
    common::skip_without_vulkan!();
    let fx = Files::new();
    for (i, cap) in [None, Some("0.01")].into_iter().enumerate() {
        let extra: Vec<&str> = cap.map(|c| vec!["--token-cap", c]).unwrap_or_default();
        let (g, c, g_out, c_out) = on_gpu_and_cpu(&fx, "grads", i, &extra);
        for k in ["n_targets", "rows", "capped_tokens", "precision"] {
            assert_eq!(g[k], c[k], "{k}");
        }
        if cap.is_some() {
            assert!(c["capped_tokens"].as_u64().unwrap() > 0, "the cap bites: {c}");
        }
        same_tensors(&g_out, &c_out, 1e-4);
        eprintln!(
            "grads {cap:?}: loss rel {:.2e}, grad_norm rel {:.2e}",
            rel(f(&g, "loss"), f(&c, "loss")),
            rel(f(&g, "grad_norm"), f(&c, "grad_norm"))
        );
        // The metadata's loss is the engine's own.
        let (_, meta) = load_tensors(&g_out).unwrap();
        let meta_loss: f64 = meta["loss"].parse().unwrap();
        assert!(rel(meta_loss, f(&g, "loss")) <= 1e-7, "{meta_loss} vs {g}");
    }
    // The human-readable lines: the same lines, the loss line within 1e-5.
    let (g_out, c_out) = (fx.path("gh.safetensors"), fx.path("ch.safetensors"));
    let (g, c) = (fx.run("grads", "gpu", &g_out, &[]), fx.run("grads", "cpu", &c_out, &[]));
    assert!(g.status.success() && c.status.success(), "{}{}", text(&g.stderr), text(&c.stderr));
    assert_eq!(shape_of(&g.stdout).replace("gh.", "ch."), shape_of(&c.stdout));
    let loss = |o: &Output| -> f64 {
        let t = text(&o.stdout);
        let line = t.lines().find(|l| l.starts_with("loss")).expect("a loss line").to_string();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(rel(loss(&g), loss(&c)) <= 1e-5, "{} vs {}", text(&g.stdout), text(&c.stdout));
}

#[test]
fn a_step_on_the_gpu_matches_the_cpu() {
    common::skip_without_vulkan!();
    let fx = Files::new();
    // A small clip so that the step clips; and one with the per-token guard.
    for (i, extra) in
        [&["--lr", "0.01", "--clip", "0.1"][..], &["--token-cap", "0.01", "--wd", "0.1"]].iter().enumerate()
    {
        let (g, c, g_out, c_out) = on_gpu_and_cpu(&fx, "step", i, extra);
        for k in ["skipped", "skip_reason", "clipped", "capped_tokens"] {
            assert_eq!(g[k], c[k], "{k}: gpu {g} cpu {c}");
        }
        assert_eq!(g["skipped"], false);
        if i == 0 {
            assert_eq!(g["clipped"], true);
        }
        same_tensors(&g_out, &c_out, 1e-5);
        let (cfg, _) = load_params(&g_out).unwrap();
        assert_eq!(cfg, Config::tiny());
    }
}

/// Runs `train` on `engine` with `extra` and returns its JSON.
fn train(data: &Path, engine: &str, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["train", "--data", s(data), "--config", "tiny", "--batch", "4", "--seq-len", "24"];
    args.extend(["--engine", engine, "--out", s(out), "--json"]);
    args.extend(extra);
    json_of(&dualscope(&args, &[]))
}

fn losses(v: &serde_json::Value) -> Vec<f64> {
    v["log"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect()
}

/// Without the controller `train` replays one recorded step batch after
/// batch (`Engine::train_step` with `Replay::Yes`): on documents of different lengths (the
/// target count changes from batch to batch, and with it the shape now and
/// then) the GPU's losses follow the CPU's step by step, and the parameters
/// at the end agree.
#[test]
fn training_without_the_controller_replays_and_follows_the_cpu() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let data = docs_jsonl(dir.path(), 16, |i| "the cat sat on the mat. ".repeat(4)[..10 + 3 * i].to_string());
    let steps = ["--steps", "12", "--lr", "0.01", "--no-controller"];
    let (g_dir, c_dir) = (dir.path().join("gpu"), dir.path().join("cpu"));
    let g = train(&data, "gpu", &g_dir, &steps);
    let c = train(&data, "cpu", &c_dir, &steps);
    assert_eq!(g["steps"].as_u64(), Some(12));
    let (gl, cl) = (losses(&g), losses(&c));
    assert_eq!(gl.len(), 12);
    for (i, (x, y)) in gl.iter().zip(&cl).enumerate() {
        assert!(rel(*x, *y) <= 1e-4, "step {}: gpu {x} cpu {y}", i + 1);
    }
    same_tensors(&g_dir.join("last.safetensors"), &c_dir.join("last.safetensors"), 1e-3);
}

#[test]
fn training_on_the_gpu_follows_the_cpu_and_resumes() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    // A few hundred bytes of repetitive text: the loss falls fast.
    let words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it"];
    let body: Vec<&str> = (0..90).map(|i| words[(i * 7 + i / 3) % words.len()]).collect();
    let data = dir.path().join("text.txt");
    std::fs::write(&data, body.join(" ")).unwrap();
    let (g_dir, c_dir) = (dir.path().join("gpu"), dir.path().join("cpu"));
    let steps = ["--steps", "36", "--save-every", "12", "--lr", "0.01"];
    let g = train(&data, "gpu", &g_dir, &steps);
    let c = train(&data, "cpu", &c_dir, &steps);
    assert_eq!(keys(&g), keys(&c));
    assert_eq!((g["steps"].as_u64(), g["skipped"].as_u64()), (Some(36), Some(0)));
    let (gl, cl) = (losses(&g), losses(&c));
    let worst = gl.iter().zip(&cl).map(|(x, y)| rel(*x, *y)).fold(0.0, f64::max);
    eprintln!("train: loss {:.4} -> {:.4}, worst per-step loss rel {worst:.2e}", gl[0], gl[gl.len() - 1]);
    for (i, (x, y)) in gl.iter().zip(&cl).enumerate() {
        assert!(rel(*x, *y) <= 1e-3, "step {}: gpu {x} cpu {y}", i + 1);
    }
    let (first, last) = (f(&g, "mean_loss_first10"), f(&g, "mean_loss_last10"));
    assert!(last < first - 0.5, "the loss falls: {first} -> {last}");
    assert!(rel(last, f(&c, "mean_loss_last10")) <= 1e-3);
    for e in g["log"].as_array().unwrap() {
        assert_eq!(e["skipped"], serde_json::Value::Null, "{e}");
    }
    // The same files: checkpoints every 12 steps, the last one, the log.
    for name in ["step_000012.safetensors", "step_000024.safetensors", "step_000036.safetensors", "last.safetensors"] {
        let (cfg, _) = load_params(&g_dir.join(name)).unwrap();
        assert_eq!(cfg, Config::tiny());
        same_tensors(&g_dir.join(name), &c_dir.join(name), 1e-3);
    }
    let log = std::fs::read_to_string(g_dir.join("log.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 36);
    // Resume from the GPU's checkpoint (parameters; the optimizer restarts, as on the CPU).
    let last = g_dir.join("last.safetensors");
    let more = ["--checkpoint", s(&last), "--steps", "12", "--seed", "1", "--lr", "0.01"];
    let g2 = train(&data, "gpu", &dir.path().join("gpu2"), &more);
    let c2 = train(&data, "cpu", &dir.path().join("cpu2"), &more);
    assert_eq!(g2["skipped"].as_u64(), Some(0));
    assert!(f(&g2, "first_loss") < first - 0.5, "resumed from the trained weights: {g2}");
    for (x, y) in losses(&g2).iter().zip(&losses(&c2)) {
        assert!(rel(*x, *y) <= 1e-3, "resumed: gpu {x} cpu {y}");
    }
    // The human-readable log lines have the same form on both engines.
    let human = |engine: &str| {
        let args =
            ["train", "--data", s(&data), "--config", "tiny", "--steps", "4", "--batch", "2", "--log-every", "2"];
        let out = dualscope(&[&args[..], &["--engine", engine]].concat(), &[]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        shape_of(&out.stdout)
    };
    assert_eq!(human("gpu"), human("cpu"));
}

#[test]
fn gpu_with_f64_is_a_usage_error() {
    let fx = Files::new();
    let out = fx.path("g.safetensors");
    let o = fx.run("grads", "gpu", &out, &["--precision", "f64"]);
    let err = fails_cleanly(&o, 2, &out);
    assert!(err.contains("float32 only"), "{err}");
}

#[test]
fn no_vulkan_is_exit_2_for_grads_step_and_train() {
    let fx = Files::new();
    // Validation off: with it on, the layer also logs the loader's complaint.
    let env = [
        ("VK_DRIVER_FILES", "/nonexistent/icd.json"),
        ("VK_ICD_FILENAMES", "/nonexistent/icd.json"),
        ("DUALSCOPE_VK_VALIDATION", "0"),
    ];
    let out = fx.path("out.safetensors");
    for cmd in ["grads", "step"] {
        let mut args = vec![cmd, "--checkpoint", s(&fx.ckpt), "--data", s(&fx.data[0])];
        args.extend(["--engine", "gpu", "--out", s(&out)]);
        let err = fails_cleanly(&dualscope(&args, &env), 2, &out);
        assert!(err.contains("no Vulkan"), "{cmd}: {err}");
    }
    let run_dir = fx.path("run");
    let args = ["train", "--data", s(&fx.data[0]), "--config", "tiny", "--steps", "2", "--batch", "1"];
    let o = dualscope(&[&args[..], &["--seq-len", "8", "--engine", "gpu", "--out", s(&run_dir)]].concat(), &env);
    let err = fails_cleanly(&o, 2, &run_dir);
    assert!(err.contains("no Vulkan"), "train: {err}");
}

#[test]
fn a_batch_past_the_device_limits_is_a_clear_error() {
    let (_, ctx) = common::vulkan!();
    // One row whose logits (T × 256 floats) exceed one storage binding.
    let range = ctx.report().max_storage_buffer_range as usize;
    let len = range / (256 * 4) + 2;
    if len > 1 << 20 {
        eprintln!("SKIPPED a_batch_past_the_device_limits_is_a_clear_error: the binding limit is {range} bytes");
        return;
    }
    drop(ctx);
    let fx = Files::new();
    let big = fx.path("big.bin");
    std::fs::write(&big, (0..len).map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let out = fx.path("g.safetensors");
    let args = ["grads", "--checkpoint", s(&fx.ckpt), "--data", s(&big), "--engine", "gpu", "--out", s(&out)];
    let err = fails_cleanly(&dualscope(&args, &[]), 1, &out);
    assert!(err.contains("--engine gpu") && err.contains("maxStorageBufferRange"), "{err}");
}

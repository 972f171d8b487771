//! `dualscope gpu-info`, `dualscope ladder`, and `grads`, `step` and `train`
//! with `--engine gpu` against `--engine cpu`, end to end: files, output and exit codes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{docs_jsonl, dualscope, fails_cleanly, rel_l2, s, text};
use dualscope::checkpoint::{load_params, load_tensors};
use dualscope::model::Config;

#[test]
fn gpu_info_prints_the_device_or_a_clear_error() {
    let Some(ctx) = common::context("gpu_info_prints_the_device_or_a_clear_error") else {
        let out = dualscope(&["gpu-info"], &[]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("no Vulkan"), "{}", text(&out.stderr));
        return;
    };
    let out = dualscope(&["gpu-info", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["name"], ctx.report().name.as_str());
    assert_eq!(v["validation"], true);
    let out = dualscope(&["gpu-info"], &[]);
    assert!(text(&out.stdout).contains("subgroup"), "{}", text(&out.stdout));
}

#[test]
fn no_vulkan_driver_is_exit_2_with_a_clear_message() {
    let out = dualscope(
        &["gpu-info"],
        &[("VK_DRIVER_FILES", "/nonexistent/icd.json"), ("VK_ICD_FILENAMES", "/nonexistent/icd.json")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("no Vulkan"), "{err}");
    let out = dualscope(&["gpu-info", "--device", "99"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn ladder_gemm_passes_and_reports_json() {
    common::skip_without_vulkan!();
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny", "--precision", "f32", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let rung = &v["rungs"][0];
    assert_eq!(rung["id"], "gemm");
    assert_eq!(rung["status"], "pass");
    for key in ["rel_l2", "max_abs_err", "tolerance", "sentinel_ok", "cases"] {
        assert!(rung.get(key).is_some(), "{key} missing in {rung}");
    }
    assert_eq!(v["validation"]["errors"], 0);
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("gemm") && text(&out.stdout).contains("pass"));
}

#[test]
fn ladder_usage_errors_are_exit_2() {
    let missing = std::env::temp_dir().join("dualscope-no-such-file.txt");
    let missing = missing.to_str().unwrap();
    for args in [
        &["ladder", "--rungs", "nope"][..],
        &["ladder", "--precision", "f64"],
        &["ladder", "--mode", "sideways"],
        &["ladder", "--offset", "5"],
        &["ladder", "--len", "9", "--batch", "2"],
        &["ladder", "--carry-check", "2", "--seq-len", "9"],
    ] {
        let out = dualscope(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
    // A missing data file and a window past its end: one clear line, exit non-zero.
    for args in
        [&["ladder", "--config", "tiny", "--data", missing][..], &["ladder", "--config", "tiny", "--len", "2000000000"]]
    {
        let out = dualscope(args, &[]);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(text(&out.stderr).trim().lines().count(), 1, "{args:?}: {}", text(&out.stderr));
    }
    for (args, flag) in [(&["--batch", "0"], "--batch"), (&["--seq-len", "0"], "--seq-len")] {
        let out = dualscope(&[&["ladder", "--config", "tiny"][..], args].concat(), &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&format!("{flag} must be at least 1")), "{}", text(&out.stderr));
    }
    // A batch too large for this machine is refused before it is cut, naming the flags.
    let out = dualscope(&["ladder", "--config", "tiny", "--batch", "100000", "--seq-len", "100000"], &[]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("--batch 100000 --seq-len 100000"), "{}", text(&out.stderr));
    // f32 has no cooperative-matrix kernel: forcing one is an engine error.
    let out = dualscope(&["ladder", "--rungs", "gemm", "--config", "tiny", "--gemm-path", "coopmat"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// The whole ladder from the command line: every rung and the end-to-end gate
/// pass in both modes, the JSON has the fields the issue names, and --out
/// writes the same report.
#[test]
fn ladder_runs_every_rung_and_the_end_to_end_gate() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    for mode in ["isolated", "chained"] {
        let args = ["ladder", "--config", "tiny", "--mode", mode, "--json", "--out", report.to_str().unwrap()];
        let out = dualscope(&args, &[]);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}\n{}", text(&out.stdout), text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        let ids: Vec<&str> = v["rungs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, dualscope::ladder::ALL_RUNGS.to_vec());
        for r in v["rungs"].as_array().unwrap() {
            assert_eq!(r["status"], "pass", "{mode}: {r}");
            for key in ["rel_l2", "max_abs_err", "max_abs_index", "tolerance", "non_finite_cpu", "non_finite_gpu"] {
                assert!(r.get(key).is_some(), "{key} missing in {r}");
            }
        }
        // The f64 column on the model rungs.
        assert!(v["rungs"][2]["cases"][0]["rel_l2_gpu_f64"].as_f64().is_some());
        let e = &v["end_to_end"];
        assert_eq!(e["status"], "pass", "{e}");
        assert!(e["loss_rel_err"].as_f64().unwrap() <= 1e-5);
        assert_eq!(v["mode"], mode);
        assert_eq!(v["validation"]["errors"], 0);
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        assert_eq!(saved["rungs"], v["rungs"]);
    }
    // One long row of the text.
    let data = dir.path().join("text.txt");
    std::fs::write(&data, "the quick brown fox jumps over the lazy dog. ".repeat(20)).unwrap();
    let args = ["ladder", "--config", "tiny", "--data", data.to_str().unwrap(), "--offset", "3", "--len", "300"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("one row of 300 positions at offset 3"), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("end-to-end pass"));
    // Another batch shape than the config's, as `bench` and `train` take it.
    let args = ["ladder", "--config", "tiny", "--batch", "3", "--seq-len", "11", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!((v["batch"]["rows"].as_u64(), v["batch"]["seq_len"].as_u64()), (Some(3), Some(11)), "{}", v["batch"]);
    assert_eq!(v["end_to_end"]["status"], "pass");
}

#[test]
fn a_missing_validation_layer_is_reported_not_fatal() {
    common::skip_without_vulkan!();
    let out = dualscope(&["gpu-info", "--json"], &[("VK_LAYER_PATH", "/nonexistent"), ("VK_ADD_LAYER_PATH", "")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["validation"], false);
    assert!(text(&out.stderr).contains("continuing without it"), "{}", text(&out.stderr));
}

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

#[test]
fn faults_are_listed_and_caught_from_the_command_line() {
    let out = dualscope(&["faults", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON list");
    let list = v.as_array().unwrap();
    let (ladder, train): (Vec<_>, Vec<_>) = list.iter().partition(|f| f["scope"] == "ladder");
    assert_eq!(ladder.len(), 9);
    for f in ladder {
        assert!(f["name"].is_string() && f["expected_rung"].is_string() && f["description"].is_string(), "{f}");
        assert!(dualscope::ladder::ALL_RUNGS.contains(&f["expected_rung"].as_str().unwrap()));
    }
    // The training events of `train --inject`, after the ladder's faults.
    let names: Vec<&str> = train.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nan", "spike", "transient", "persistent", "f16_overflow"]);
    assert!(train.iter().all(|f| f["scope"] == "train" && f["description"].is_string()), "{train:?}");
    let verdicts: Vec<&str> = train.iter().map(|f| f["expected_verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["transient", "transient", "transient", "engine", "precision"]);
    let out = dualscope(&["ladder", "--fault", "nope"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("window_off_by_one"));
    common::skip_without_vulkan!();
    let args = ["ladder", "--config", "tiny", "--rungs", "attn_fwd", "--fault", "window_off_by_one", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fault"], "window_off_by_one");
    assert_eq!(v["rungs"][0]["status"], "fail");
}

/// The window's off-by-one shows only once a query's window is full (T ≥ W):
/// the bisect finds exactly that length and the first wrong position W-1.
#[test]
fn bisect_finds_the_smallest_failing_length() {
    common::skip_without_vulkan!();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("bisect.json");
    let args = ["bisect", "--config", "tiny", "--fault", "window_off_by_one", "--max-len", "20", "--json", "--out"];
    let mut args: Vec<&str> = args.to_vec();
    args.push(report.to_str().unwrap());
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = dualscope::model::Config::tiny().window as u64;
    assert_eq!(v["smallest_failing"], w, "{v}");
    assert_eq!(v["last_good"], w - 1);
    assert_eq!(v["failure"]["rung"], "attn_fwd");
    assert_eq!(v["failure"]["position"], w - 1);
    assert!(v["failure"]["token"].is_u64());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&report).unwrap()).unwrap(), v);
    // Without the fault nothing fails: exit 0.
    let out = dualscope(&["bisect", "--config", "tiny", "--max-len", "20", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["smallest_failing"].is_null());
}

#[test]
fn audit_classifies_per_token_contributions() {
    common::skip_without_vulkan!();
    let out = dualscope(&["audit", "--config", "tiny", "--len", "30", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 7 + 4 * dualscope::model::Config::tiny().layers);
    assert!(tensors.iter().all(|t| t["verdict"] == "noise"), "{v}");
    // The window fault changes attention: the context-stream weights see a real error.
    let args = ["audit", "--config", "tiny", "--len", "30", "--fault", "window_off_by_one", "--json"];
    let out = dualscope(&args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let q = v["tensors"].as_array().unwrap().iter().find(|t| t["tensor"] == "ctx.q.weight").unwrap();
    assert_eq!(q["verdict"], "real_error", "{q}");
    let bias = v["tensors"].as_array().unwrap().iter().find(|t| t["tensor"] == "head.bias").unwrap();
    assert_ne!(bias["verdict"], "real_error");
}

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

/// `DUALSCOPE_PIPELINE_STATS=1` (a `lab` build): each kernel's driver
/// statistics on stderr as it is built, where the device has
/// `VK_KHR_pipeline_executable_properties` (as `gpu-info` reports); elsewhere
/// (lavapipe) one line saying so, and the run goes on as without it.
#[cfg(feature = "lab")]
#[test]
fn pipeline_stats_are_printed_or_the_device_is_named() {
    common::skip_without_vulkan!();
    let info = dualscope(&["gpu-info", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).expect("one JSON object");
    let has = v["features"]["pipeline_stats"].as_bool().expect("features.pipeline_stats");
    let args = ["ladder", "--rungs", "gemm", "--config", "tiny", "--precision", "f32", "--json"];
    let out = dualscope(&args, &[("DUALSCOPE_PIPELINE_STATS", "1")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    if has {
        assert!(err.lines().any(|l| l.starts_with("dualscope: pipeline gemm")), "{err}");
    } else {
        let name = v["name"].as_str().unwrap();
        assert!(err.contains(&format!("{name} has no VK_KHR_pipeline_executable_properties")), "{err}");
    }
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the ladder's report");
    assert_eq!(r["rungs"][0]["status"], "pass");
    assert_eq!(r["validation"]["errors"], 0);
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

//! The command line as a user runs it: real files, real exit codes, and the
//! bad-input contract (one line on stderr, non-zero exit, no output file).

mod common;

use std::path::{Path, PathBuf};

use common::{Dir, fails_cleanly, run, s, train_tiny};
use dualscope::checkpoint::{Metadata, load_params, load_tensors, save_tensors};
use dualscope::model::{Config, Params, param_specs};
use dualscope::tensor::Tensor;

/// Runs `grads --checkpoint CK --data A --data B` and then `rest`.
fn grads_of(ck: &Path, a: &Path, b: &Path, rest: &[&str]) -> std::process::Output {
    run(&[&["grads", "--checkpoint", s(ck), "--data", s(a), "--data", s(b)][..], rest].concat())
}

#[test]
fn grads_of_rows_of_different_lengths() {
    let d = Dir::new();
    let ck = d.ckpt("tiny");
    let a = d.file("a.txt", b"The quick brown fox jumps over the lazy dog.");
    let b = d.file("b.bin", &[0u8, 255, 7, 128, 10, 13, 0xC3, 0x28]);
    let out = d.path("g.safetensors");
    let o = grads_of(&ck, &a, &b, &["--engine", "cpu", "--out", s(&out), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object on stdout");
    let loss = v["loss"].as_f64().unwrap();
    assert!(loss > 4.0 && loss < 7.0, "about ln 256 at init: {loss}");
    assert!(v["grad_norm"].as_f64().unwrap() > 0.0);
    assert_eq!(v["n_targets"].as_u64(), Some(43 + 7));
    let (tensors, meta) = load_tensors(&out).unwrap();
    let cfg = Config::tiny();
    for (name, shape) in param_specs(&cfg) {
        assert_eq!(tensors[&name].shape, shape, "{name}");
    }
    assert_eq!(meta.get("kind").map(String::as_str), Some("gradients"));
    // The norm printed is the norm of the file's gradients.
    let norm: f64 =
        tensors.values().map(|t| t.data.iter().map(|&x| (x as f64).powi(2)).sum::<f64>()).sum::<f64>().sqrt();
    assert!((norm - v["grad_norm"].as_f64().unwrap()).abs() < 1e-5 * norm);

    // float64 arithmetic agrees with float32 closely.
    let out64 = d.path("g64.safetensors");
    let o = grads_of(&ck, &a, &b, &["--out", s(&out64), "--precision", "f64", "--json"]);
    let v64: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!((v64["loss"].as_f64().unwrap() - loss).abs() < 1e-5);
}

#[test]
fn step_changes_weights_and_reports() {
    let d = Dir::new();
    let ck = d.ckpt("tiny");
    let a = d.file("a.txt", b"abcabcabcabcabcabc");
    let out = d.path("next.safetensors");
    let o = run(&["step", "--checkpoint", s(&ck), "--data", s(&a), "--out", s(&out), "--lr", "0.01", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["skipped"], false);
    let (_, p0) = load_params(&ck).unwrap();
    let (_, p1) = load_params(&out).unwrap();
    assert_ne!(p0, p1);
    // A first Adam step moves every weight with a non-zero gradient by about lr.
    let moved = p0.head_bias.data.iter().zip(&p1.head_bias.data).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(moved > 0.009 && moved < 0.0101, "{moved}");
}

#[test]
fn train_on_jsonl_writes_checkpoint_and_log() {
    let d = Dir::new();
    let docs: String =
        (0..30).map(|i| format!("{{\"text\": \"document {i}: {}\"}}\n", "lorem ipsum ".repeat(i % 7 + 1))).collect();
    let data = d.file("docs.jsonl", docs.as_bytes());
    let out = d.path("run");
    let o = run(&train_tiny(
        &data,
        &[
            "--steps",
            "6",
            "--batch",
            "3",
            "--seq-len",
            "20",
            "--engine",
            "cpu",
            "--out",
            s(&out),
            "--save-every",
            "3",
            "--json",
        ],
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"], 6);
    assert_eq!(v["log"].as_array().unwrap().len(), 6);
    assert!(out.join("last.safetensors").exists() && out.join("step_000003.safetensors").exists());
    let log = std::fs::read_to_string(out.join("log.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 6);
    load_params(&out.join("last.safetensors")).unwrap();
}

#[test]
fn bad_data_files() {
    let d = Dir::new();
    let ck = d.ckpt("tiny");
    let out = d.path("g.safetensors");
    let cases: Vec<(PathBuf, &str)> = vec![
        (d.file("empty", b""), "is empty"),
        (d.file("one", b"x"), "at least 2 bytes"),
        (d.0.path().to_path_buf(), "directory"),
        (d.path("missing.txt"), "no such file"),
    ];
    for (data, want) in cases {
        let o = run(&["grads", "--checkpoint", s(&ck), "--data", s(&data), "--out", s(&out)]);
        let err = fails_cleanly(&o, 1, &out);
        assert!(err.contains(want), "{want}: {err}");
        assert!(err.contains(s(&data)), "names the file: {err}");
    }
}

#[test]
fn a_huge_row_is_refused_before_it_is_read() {
    let d = Dir::new();
    let ck = d.ckpt("tiny");
    let huge = d.path("huge.bin");
    // Sparse: 64 GiB of zeros that take no disk space.
    std::fs::File::create(&huge).unwrap().set_len(64 << 30).unwrap();
    let out = d.path("g.safetensors");
    let t0 = std::time::Instant::now();
    let o = run(&["grads", "--checkpoint", s(&ck), "--data", s(&huge), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.contains("too long") && err.contains("huge.bin"), "{err}");
    assert!(t0.elapsed().as_secs() < 10, "refused without reading the file");
}

fn write_params_with(d: &Dir, name: &str, edit: impl FnOnce(&mut Vec<(String, Tensor<f32>)>)) -> PathBuf {
    let cfg = Config::tiny();
    let p = Params::<f32>::init(&cfg, 1);
    let mut list: Vec<(String, Tensor<f32>)> = p.named(&cfg).into_iter().map(|(n, t)| (n, t.clone())).collect();
    edit(&mut list);
    let path = d.path(name);
    let mut meta = Metadata::new();
    meta.insert("config".into(), cfg.to_json());
    let refs: Vec<(String, &Tensor<f32>)> = list.iter().map(|(n, t)| (n.clone(), t)).collect();
    save_tensors(&path, &refs, &meta).unwrap();
    path
}

/// A safetensors file with one F64 tensor, written byte by byte.
fn f64_checkpoint(d: &Dir) -> PathBuf {
    let good = write_params_with(d, "good.safetensors", |_| {});
    let (tensors, _) = load_tensors(&good).unwrap();
    let mut header = serde_json::Map::new();
    let mut body: Vec<u8> = Vec::new();
    for (name, t) in &tensors {
        let (dtype, bytes): (&str, Vec<u8>) = if name == "head.bias" {
            ("F64", t.data.iter().flat_map(|&x| (x as f64).to_le_bytes()).collect())
        } else {
            ("F32", t.data.iter().flat_map(|&x| x.to_le_bytes()).collect())
        };
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": t.shape, "data_offsets": [body.len(), body.len() + bytes.len()]}),
        );
        body.extend(bytes);
    }
    header.insert("__metadata__".into(), serde_json::json!({"config": Config::tiny().to_json()}));
    let h = serde_json::Value::Object(header).to_string();
    let mut file = (h.len() as u64).to_le_bytes().to_vec();
    file.extend(h.as_bytes());
    file.extend(body);
    d.file("f64.safetensors", &file)
}

#[test]
fn bad_checkpoints() {
    let d = Dir::new();
    let data = d.file("a.txt", b"some text to train on");
    let good = d.ckpt("tiny");
    let bytes = std::fs::read(&good).unwrap();
    let truncated = d.file("truncated.safetensors", &bytes[..bytes.len() / 2]);
    let wrong_shape = write_params_with(&d, "shape.safetensors", |l| {
        l[1].1 = Tensor::zeros(&[15, 7]);
    });
    let missing = write_params_with(&d, "missing.safetensors", |l| {
        l.retain(|(n, _)| n != "ctx.k.weight");
    });
    let f64_file = f64_checkpoint(&d);
    let cases: Vec<(PathBuf, &str)> = vec![
        (truncated, "truncated"),
        (wrong_shape, "gru.weight_ih_l0"),
        (missing, "ctx.k.weight"),
        (f64_file, "F64"),
        (d.path("nope.safetensors"), "no such file"),
    ];
    for (ck, want) in cases {
        for cmd in ["grads", "step"] {
            let out = d.path("out.safetensors");
            let o = run(&[cmd, "--checkpoint", s(&ck), "--data", s(&data), "--out", s(&out)]);
            let err = fails_cleanly(&o, 1, &out);
            assert!(err.contains(want), "{cmd} {want}: {err}");
        }
    }
}

#[test]
fn bad_config_and_usage() {
    let d = Dir::new();
    let mut cfg = serde_json::to_value(Config::small()).unwrap();
    cfg["heads"] = 3.into();
    let bad = d.file("cfg.json", cfg.to_string().as_bytes());
    let out = d.path("m.safetensors");
    let err = fails_cleanly(&run(&["init", "--config", s(&bad), "--out", s(&out)]), 1, &out);
    assert!(err.contains("attn_dim (64) is not divisible by heads (3)"), "{err}");
    let err = fails_cleanly(&run(&["init", "--config", "huge", "--out", s(&out)]), 1, &out);
    assert!(err.contains("huge"), "{err}");

    let ck = d.ckpt("tiny");
    let data = d.file("a.txt", b"abcdef");
    // The Vulkan engine is float32 only (checked before any device is opened).
    let o = run(&[
        "grads",
        "--checkpoint",
        s(&ck),
        "--data",
        s(&data),
        "--engine",
        "gpu",
        "--precision",
        "f64",
        "--out",
        s(&out),
    ]);
    let err = fails_cleanly(&o, 2, &out);
    assert!(err.contains("float32 only"), "{err}");
    let o = run(&["bench", "--engine", "fast", "--config", "tiny"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["step", "--checkpoint", s(&ck), "--data", s(&data), "--out", s(&out), "--lr", "nan"]);
    fails_cleanly(&o, 2, &out);
}

#[test]
fn bench_reports_a_median() {
    let o = run(&["bench", "--config", "tiny", "--steps", "3", "--warmup", "1", "--json", "--breakdown"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cpu = &v["engines"][0];
    assert_eq!(cpu["engine"], "cpu");
    assert!(cpu["median_ms"].as_f64().unwrap() > 0.0);
    assert!(!cpu["breakdown_ms"].as_array().unwrap().is_empty());
    assert!(v["speedup"].is_null(), "one engine, no ratio");
}

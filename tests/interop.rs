//! Files from elsewhere and files that changed: a checkpoint written by PyTorch
//! (`scripts/export_pytorch.py`, config without batch/seq_len) loads and gives
//! PyTorch's loss; a checkpoint with non-finite weights, or with bytes changed
//! after writing, is refused with a line that says so.

mod common;

use std::path::{Path, PathBuf};

use common::{Dir, fails, fails_cleanly, ok_json, run, s, text, train_tiny};
use dualscope::checkpoint::{CHECKSUM_KEY, load_params, load_tensors, save_tensors};
use dualscope::model::param_specs;
use dualscope::tensor::Tensor;

/// `tests/fixtures/NAME`.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// What `export_pytorch.py write` recorded next to the fixture.
fn record() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("pytorch_tiny.json")).unwrap()).unwrap()
}

/// The fixture's row files, as `--data` arguments.
fn row_args(rec: &serde_json::Value) -> Vec<String> {
    let files = rec["data"].as_array().unwrap().iter().map(|f| fixture(f.as_str().unwrap()));
    files.flat_map(|p| ["--data".to_string(), p.to_str().unwrap().to_string()]).collect()
}

/// A file's header (JSON) and data bytes.
fn split(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (serde_json::from_slice(&bytes[8..8 + n]).unwrap(), bytes[8 + n..].to_vec())
}

/// A safetensors file of `header` and `data`.
fn join(header: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let h = header.to_string();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

/// `grads --json` of `ckpt` on the fixture's rows, writing `out`, with `extra` flags.
fn grads(ckpt: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let rec = record();
    let rows = row_args(&rec);
    let mut args = vec!["grads", "--checkpoint", s(ckpt), "--out", s(out), "--json"];
    args.extend(rows.iter().map(String::as_str));
    args.extend_from_slice(extra);
    run(&args)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

#[test]
fn the_pytorch_checkpoint_loads_without_batch_and_seq_len() {
    let path = fixture("pytorch_tiny.safetensors");
    let (header, _) = split(&std::fs::read(&path).unwrap());
    let meta = header["__metadata__"].as_object().unwrap();
    let cfg_json: serde_json::Value = serde_json::from_str(meta["config"].as_str().unwrap()).unwrap();
    // The fixture is what an outside exporter writes: no benchmark shape, no checksum, no format.
    assert!(cfg_json.get("batch").is_none() && cfg_json.get("seq_len").is_none(), "{cfg_json}");
    assert!(!meta.contains_key(CHECKSUM_KEY) && !meta.contains_key("format"), "{meta:?}");
    let (cfg, params) = load_params(&path).unwrap();
    assert_eq!((cfg.d_embed, cfg.hidden, cfg.layers, cfg.attn_dim, cfg.heads, cfg.window), (4, 4, 2, 4, 2, 3));
    assert_eq!((cfg.batch, cfg.seq_len), (8, 128), "no preset has this model: small's shape");
    let names: Vec<String> = param_specs(&cfg).into_iter().map(|(n, _)| n).collect();
    let (tensors, _) = load_tensors(&path).unwrap();
    assert_eq!(tensors.keys().cloned().collect::<std::collections::BTreeSet<_>>(), names.iter().cloned().collect());
    assert_eq!(params.embed.data, tensors["embed.weight"].data);
}

/// dualscope's loss on the rows PyTorch's loss was recorded on: float32 to
/// 1e-5 relative, float64 (the same float32 weights cast up) to 1e-10.
#[test]
fn grads_on_the_pytorch_checkpoint_gives_the_pytorch_loss() {
    let rec = record();
    let dir = Dir::new();
    let ckpt = fixture("pytorch_tiny.safetensors");
    let v = ok_json(&grads(&ckpt, &dir.path("g32.safetensors"), &[]));
    let (loss, want) = (v["loss"].as_f64().unwrap(), rec["loss_f32"].as_f64().unwrap());
    assert!(rel(loss, want) <= 1e-5, "float32: dualscope {loss}, PyTorch {want}");
    assert_eq!(v["n_targets"], rec["n_targets"]);
    assert_eq!(v["rows"], 2);
    let v = ok_json(&grads(&ckpt, &dir.path("g64.safetensors"), &["--precision", "f64"]));
    let (loss, want) = (v["loss"].as_f64().unwrap(), rec["loss_f64"].as_f64().unwrap());
    assert!(rel(loss, want) <= 1e-10, "float64: dualscope {loss}, PyTorch {want}");
}

#[test]
fn a_config_without_a_model_field_is_refused_naming_it() {
    let dir = Dir::new();
    let (mut header, data) = split(&std::fs::read(fixture("pytorch_tiny.safetensors")).unwrap());
    let mut cfg: serde_json::Value = serde_json::from_str(header["__metadata__"]["config"].as_str().unwrap()).unwrap();
    cfg.as_object_mut().unwrap().remove("hidden");
    header["__metadata__"]["config"] = cfg.to_string().into();
    let ckpt = dir.file("nohidden.safetensors", &join(&header, &data));
    let out = dir.path("g.safetensors");
    let err = fails_cleanly(&grads(&ckpt, &out, &[]), 1, &out);
    assert!(
        err.contains(s(&ckpt)) && err.contains("invalid config metadata: bad JSON: missing field `hidden`"),
        "{err}"
    );
}

/// `init`'s tiny checkpoint in `dir` with NaN at three places of
/// gru.weight_ih_l0 (the first at index 17) and an infinity in head.bias.
fn nan_checkpoint(dir: &Dir) -> PathBuf {
    let good = dir.ckpt("tiny");
    let (mut tensors, meta) = load_tensors(&good).unwrap();
    let w = tensors.get_mut("gru.weight_ih_l0").unwrap();
    for i in [17, 20, 29] {
        w.data[i] = f32::NAN;
    }
    tensors.get_mut("head.bias").unwrap().data[0] = f32::INFINITY;
    let bad = dir.path("nan.safetensors");
    let named: Vec<(String, &Tensor<f32>)> = tensors.iter().map(|(k, v)| (k.clone(), v)).collect();
    save_tensors(&bad, &named, &meta).unwrap();
    bad
}

const NAN_MESSAGE: &str =
    "parameter gru.weight_ih_l0 has 3 non-finite values (first at index 17), and 1 more parameter has some";

#[test]
fn grads_and_step_refuse_non_finite_weights_unless_allowed() {
    let dir = Dir::new();
    let bad = nan_checkpoint(&dir);
    let data = dir.file("row.txt", b"some bytes to read");
    let out = dir.path("out.safetensors");
    for cmd in ["grads", "step"] {
        let o = run(&[cmd, "--checkpoint", s(&bad), "--data", s(&data), "--out", s(&out), "--json"]);
        let err = fails_cleanly(&o, 1, &out);
        assert!(err.starts_with(&format!("error: {}: {NAN_MESSAGE}", bad.display())), "{cmd}: {err}");
        assert!(err.contains("--allow-non-finite"), "{err}");
    }
    // Allowed for debugging: the loss is NaN (JSON null), and the file is written.
    let o =
        run(&["grads", "--checkpoint", s(&bad), "--data", s(&data), "--out", s(&out), "--json", "--allow-non-finite"]);
    let v = ok_json(&o);
    assert!(v["loss"].is_null(), "{v}");
    assert!(out.exists());
    let o =
        run(&["step", "--checkpoint", s(&bad), "--data", s(&data), "--out", s(&out), "--json", "--allow-non-finite"]);
    assert_eq!(ok_json(&o)["skipped"], true);
}

#[test]
fn train_refuses_non_finite_weights_unless_allowed() {
    let dir = Dir::new();
    let bad = nan_checkpoint(&dir);
    let data = dir.file("data.txt", &b"training bytes, over and over. ".repeat(20));
    let out = dir.path("run");
    let args = |extra: &[&'static str]| {
        let mut a = vec!["train", "--data", s(&data), "--checkpoint", s(&bad), "--steps", "2", "--batch", "2"];
        a.extend(["--seq-len", "8", "--out", s(&out), "--json"]);
        a.extend_from_slice(extra);
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()
    };
    let o = run(&args(&[]).iter().map(String::as_str).collect::<Vec<_>>());
    let err = fails(&o, 1);
    assert!(err.contains(&format!("{}: {NAN_MESSAGE}", bad.display())), "{err}");
    let o = run(&args(&["--allow-non-finite", "--no-controller"]).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn ladder_bisect_and_audit_refuse_non_finite_weights() {
    let dir = Dir::new();
    let bad = nan_checkpoint(&dir);
    // The checkpoint is read before any GPU work: no Vulkan needed to see the refusal.
    for cmd in ["ladder", "bisect", "audit"] {
        let err = fails(&run(&[cmd, "--checkpoint", s(&bad)]), 1);
        assert!(err.contains(NAN_MESSAGE), "{cmd}: {err}");
    }
}

#[test]
fn a_flipped_byte_is_refused_naming_the_file() {
    let dir = Dir::new();
    let good = dir.ckpt("tiny");
    let bytes = std::fs::read(&good).unwrap();
    let (header, _) = split(&bytes);
    assert!(header["__metadata__"][CHECKSUM_KEY].as_str().unwrap().starts_with("crc32:"));
    let mut flipped = bytes.clone();
    let at = flipped.len() - 10;
    flipped[at] ^= 0x01;
    let bad = dir.file("flipped.safetensors", &flipped);
    let data = dir.file("row.txt", b"some bytes to read");
    let out = dir.path("g.safetensors");
    let o = run(&["grads", "--checkpoint", s(&bad), "--data", s(&data), "--out", s(&out)]);
    let err = fails_cleanly(&o, 1, &out);
    assert!(err.starts_with(&format!("error: {}: checksum mismatch", bad.display())), "{err}");

    // A resumable run whose train_state.safetensors changed on disk.
    let text_file = dir.file("data.txt", &b"training bytes, over and over. ".repeat(20));
    let run_dir = dir.path("run");
    let o = run(&train_tiny(&text_file, &["--steps", "2", "--batch", "2", "--seq-len", "8", "--out", s(&run_dir)]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let state = run_dir.join("train_state.safetensors");
    let mut bytes = std::fs::read(&state).unwrap();
    let at = bytes.len() / 2 + 7;
    bytes[at] ^= 0x40;
    std::fs::write(&state, &bytes).unwrap();
    let o = run(&["train", "--resume", s(&run_dir), "--data", s(&text_file), "--steps", "4"]);
    let err = fails(&o, 1);
    assert!(err.contains(&format!("{}: checksum mismatch", state.display())), "{err}");
}

#[test]
fn a_checkpoint_without_a_checksum_still_loads() {
    let dir = Dir::new();
    let good = dir.ckpt("tiny");
    let (mut header, data) = split(&std::fs::read(&good).unwrap());
    header["__metadata__"].as_object_mut().unwrap().remove(CHECKSUM_KEY);
    let old = dir.file("old.safetensors", &join(&header, &data));
    let row = dir.file("row.txt", b"some bytes to read");
    let grads_of = |ckpt: &Path, out: &str| {
        let o = run(&["grads", "--checkpoint", s(ckpt), "--data", s(&row), "--out", s(&dir.path(out)), "--json"]);
        ok_json(&o)["loss"].as_f64().unwrap()
    };
    assert_eq!(grads_of(&old, "a.safetensors"), grads_of(&good, "b.safetensors"));
}

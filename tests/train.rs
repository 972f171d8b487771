//! `dualscope train` on real, messy data: variable-length documents, binary
//! bytes, very long rows; the risk controller's skip / back-off / lr / rollback
//! paths driven end to end by the `--inject-*` testing aids; resumable
//! checkpoints, including after a SIGKILL.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bin, fails, ok_json, run, s, train_tiny};
use dualscope::capture;
use dualscope::checkpoint::{load_params, load_train_checkpoint};
use dualscope::model::Config;

/// Prose, code, and bytes of every value (a binary blob), in one file.
fn mixed_file(dir: &Path) -> PathBuf {
    let mut bytes = Vec::new();
    for i in 0..40 {
        bytes.extend(format!("Paragraph {i}: the cat sat on the mat, and the dog ran to it. ").as_bytes());
        bytes.extend(format!("fn f{i}(x: u32) -> u32 {{ x.wrapping_mul({i}) ^ 0x5f }}\n").as_bytes());
    }
    let mut x: u32 = 12345;
    for _ in 0..6000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    bytes.extend(0u8..=255);
    let p = dir.join("mixed.bin");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A temporary directory holding [`mixed_file`], and the path of a run
/// directory `run` in it (not created).
fn mixed_run() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let data = mixed_file(d.path());
    let out = d.path().join("run");
    (d, data, out)
}

/// JSON lines of very different lengths: one byte, escapes and non-ASCII
/// text, and one document far longer than a row.
fn docs_file(dir: &Path) -> PathBuf {
    let mut lines = vec![
        serde_json::json!({"text": "x"}).to_string(),
        serde_json::json!({"text": "tab\tnewline\nquote\" unicode é ß 日本 \u{1F600}"}).to_string(),
        serde_json::json!({"text": "fn main() { println!(\"hi\"); }", "lang": "rust"}).to_string(),
        String::new(),
        serde_json::json!({"text": "word ".repeat(20_000)}).to_string(),
    ];
    for i in 0..30 {
        lines.push(serde_json::json!({"text": format!("doc {i} {}", "ab ".repeat(i * 3))}).to_string());
    }
    let p = dir.join("docs.jsonl");
    std::fs::write(&p, lines.join("\n")).unwrap();
    p
}

fn train_args<'a>(data: &'a Path, out: &'a Path, steps: &'a str) -> Vec<&'a str> {
    train_tiny(data, &["--batch", "4", "--seq-len", "48", "--steps", steps, "--out", s(out), "--json"])
}

fn jsonl(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn actions(v: &serde_json::Value) -> Vec<(u64, String)> {
    v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["step"].as_u64().unwrap(), a["action"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn messy_data_trains_cleanly() {
    let d = tempfile::tempdir().unwrap();
    for data in [mixed_file(d.path()), docs_file(d.path())] {
        let out = d.path().join(format!("run-{}", data.file_name().unwrap().to_string_lossy()));
        let v = ok_json(&run(&train_args(&data, &out, "60")));
        assert_eq!(v["steps"], 60);
        assert_eq!(v["skipped"], 0, "{}", v["actions"]);
        assert!(v["mean_loss_last10"].as_f64().unwrap() < v["mean_loss_first10"].as_f64().unwrap() - 0.2, "{v}");
        let log = jsonl(&out.join("log.jsonl"));
        assert_eq!(log.iter().map(|e| e["step"].as_u64().unwrap()).collect::<Vec<_>>(), (1..=60).collect::<Vec<_>>());
        assert!(log.iter().all(|e| e["loss"].as_f64().unwrap().is_finite() && e["capped_tokens"].is_u64()));
        // The controller log holds exactly the actions the run reported.
        assert_eq!(jsonl(&out.join("controller.jsonl")).len(), v["actions"].as_array().unwrap().len());
        let ck = load_train_checkpoint(&out.join("train_state.safetensors")).unwrap();
        assert_eq!(ck.config, Config::tiny());
        load_params(&out.join("last.safetensors")).unwrap();
    }
}

#[test]
fn the_token_cap_count_is_logged_per_step() {
    let (_d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "5");
    args.extend(["--token-cap", "1e-4"]);
    let v = ok_json(&run(&args));
    let capped: Vec<u64> = v["log"].as_array().unwrap().iter().map(|e| e["capped_tokens"].as_u64().unwrap()).collect();
    assert!(capped.iter().all(|&c| c > 0), "a tiny cap caps positions every step: {capped:?}");
    let o = run(&train_tiny(
        &data,
        &["--batch", "2", "--seq-len", "16", "--steps", "2", "--token-cap", "1e-4", "--log-every", "1"],
    ));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.lines().filter(|l| l.contains("  capped ")).count() == 2, "{text}");
}

/// NaN gradients at 23, 24, 25 (the engine's guard skips them, the dynamic
/// scale backs off, the rate is cut — asked for with `--lr-cut-on-overflow`,
/// the default leaves overflows to the scale —, and the third in a row rolls back to the
/// checkpoint of step 20); a finite outlier at 40 that only the controller
/// catches; the rate restored after the cool-down.
#[test]
fn the_controller_skips_backs_off_cuts_and_rolls_back() {
    let (d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "50");
    args.extend(["--checkpoint-every", "10", "--loss-scale", "dynamic", "--lr-cooldown", "4"]);
    args.extend([
        "--inject-nan-at",
        "23,24,25",
        "--inject-spike-at",
        "40",
        "--gn-spike-z",
        "6",
        "--lr-cut-on-overflow",
    ]);
    let v = ok_json(&run(&args));
    let acts = actions(&v);
    let at = |k: u64| acts.iter().filter(|(s, _)| *s == k).map(|(_, a)| a.as_str()).collect::<Vec<_>>();
    assert_eq!(at(23), ["skip", "scale_backoff", "lr_cut"], "{acts:?}");
    assert_eq!(at(24), ["skip", "scale_backoff", "lr_cut"]);
    assert_eq!(at(25), ["skip", "scale_backoff", "lr_cut", "rollback"]);
    assert_eq!(at(29), ["lr_restore"]);
    assert_eq!(at(40), ["skip", "lr_cut"]);
    assert_eq!(at(44), ["lr_restore"]);
    assert_eq!(acts.len(), 14, "nothing else: {acts:?}");
    let log = v["log"].as_array().unwrap();
    let e = |k: usize| &log[k - 1];
    assert_eq!(e(23)["skipped"], "gradient norm is not finite");
    assert!(e(40)["skipped"].as_str().unwrap().starts_with("outlier"), "{}", e(40));
    assert_eq!((e(23)["scale"].as_f64(), e(25)["scale"].as_f64()), (Some(65536.0), Some(16384.0)));
    assert_eq!(e(26)["scale"].as_f64(), Some(8192.0), "the backed-off scale survives the rollback");
    // 22 good steps, then the rollback undoes 21 and 22.
    assert_eq!(e(22)["optim_step"], 22);
    assert_eq!(e(25)["optim_step"], 20);
    assert_eq!(e(50)["optim_step"], 20 + 25 - 1);
    assert_eq!((e(24)["lr"].as_f64(), e(26)["lr"].as_f64()), (Some(1.5e-3), Some(3e-3 / 8.0)));
    assert_eq!(e(29)["lr"].as_f64(), Some(3e-3));
    let rb = &v["actions"].as_array().unwrap().iter().find(|a| a["action"] == "rollback").unwrap().clone();
    assert_eq!(rb["to_step"], 20);
    let c = &v["controller"];
    assert_eq!((c["skips"].as_u64(), c["engine_skips"].as_u64(), c["rollbacks"].as_u64()), (Some(4), Some(3), Some(1)));
    assert_eq!(jsonl(&out.join("controller.jsonl")).len(), 14);
    let ck = load_train_checkpoint(&out.join("train_state.safetensors")).unwrap();
    assert!(ck.params.tensors().iter().all(|t| t.data.iter().all(|x| x.is_finite())));
    // Without the controller only the engine acts: skips, no rollback, and the
    // outlier goes through (clipped).
    let out2 = d.path().join("plain");
    let mut args = train_args(&data, &out2, "50");
    args.extend(["--no-controller", "--inject-nan-at", "23,24,25", "--inject-spike-at", "40"]);
    let v = ok_json(&run(&args));
    let kinds: Vec<String> = actions(&v).into_iter().map(|(_, a)| a).collect();
    assert_eq!(kinds, ["skip", "skip", "skip"]);
    assert_eq!(v["log"][39]["clipped"], true);
}

/// `--inject KIND@STEP` on the CPU: each planted event makes the guard or the
/// controller act at its step and nowhere else; the transient bit flip is a
/// huge finite gradient (clipped and applied without the controller).
#[test]
fn planted_events_act_at_their_step() {
    let (d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "30");
    args.extend(["--inject", "nan@5,spike@24", "--inject", "transient@27", "--gn-spike-z", "6"]);
    let v = ok_json(&run(&args));
    let acts = actions(&v);
    let steps: Vec<u64> = acts.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [5, 5, 24, 24, 27, 27], "{acts:?}");
    assert!(acts.chunks(2).all(|c| c[0].1 == "skip" && c[1].1 == "lr_cut"), "{acts:?}");
    let log = v["log"].as_array().unwrap();
    let e = |k: usize| &log[k - 1];
    assert_eq!(e(5)["skipped"], "gradient norm is not finite");
    for k in [24, 27] {
        assert!(e(k)["skipped"].as_str().unwrap().starts_with("outlier"), "{}", e(k));
    }
    assert!(e(27)["skipped"].as_str().unwrap().contains("gru.weight_hh_l0"), "the flipped tensor: {}", e(27));
    assert_eq!(v["controller"]["engine_skips"], 1);
    // Without the controller only the NaN is skipped; the flipped bit makes a
    // finite norm some 2^128 times the others, clipped.
    let out2 = d.path().join("plain");
    let mut args = train_args(&data, &out2, "8");
    args.extend(["--no-controller", "--inject", "transient@3", "--inject-nan-at", "6"]);
    let v = ok_json(&run(&args));
    assert_eq!(actions(&v), [(6, "skip".to_string())]);
    let log = v["log"].as_array().unwrap();
    let norm = log[2]["grad_norm"].as_f64().unwrap();
    assert!(norm.is_finite() && norm > 1e25 * log[1]["grad_norm"].as_f64().unwrap(), "{norm}");
    assert_eq!(log[2]["clipped"], true);
}

/// Bad `--inject` values and events the engine cannot take: one line naming
/// the argument, exit 2, before anything is written.
#[test]
fn bad_planted_events_are_usage_errors() {
    let (_d, data, out) = mixed_run();
    for (inject, want) in [
        ("bogus@3", "--inject bogus@3: unknown kind 'bogus' (nan, spike, transient, persistent[=FAULT], f16_overflow)"),
        ("nan@", "--inject nan@: step '' is not a whole number"),
        ("persistent=nope@2", "--inject persistent=nope@2: unknown engine fault 'nope'"),
        ("persistent@4", "--inject persistent@4: engine faults are planted in the GPU engine; use --engine gpu"),
        ("f16_overflow@4", "--inject f16_overflow@4: needs --precision f16"),
        ("nan@4,spike@4", "--inject: two planted events at step 4 (nan and spike)"),
    ] {
        let mut args = train_args(&data, &out, "5");
        args.extend(["--inject", inject]);
        let err = fails(&run(&args), 2);
        assert!(err.contains(want), "{inject}: {err}");
        assert!(!out.exists(), "{inject}: --out was created");
    }
    let mut args = train_args(&data, &out, "5");
    args.extend(["--inject", "transient@4", "--inject-nan-at", "4"]);
    assert!(fails(&run(&args), 2).contains("two planted events at step 4 (transient and nan)"));
}

/// A planted event's capture has every field, the state before the step
/// (a skip leaves the weights as they were), and loads back; a requested
/// capture of an applied step holds the weights of the step before it.
#[test]
fn planted_and_requested_steps_leave_captures_with_every_field() {
    let (_d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "10");
    args.extend(["--inject", "nan@5", "--capture-at", "8", "--save-every", "1", "--seed", "3"]);
    let v = ok_json(&run(&args));
    let steps: Vec<u64> = v["captures"].as_array().unwrap().iter().map(|c| c["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [5, 8], "{}", v["captures"]);
    let caps = out.join("captures");
    let ds = dualscope::dataset::Dataset::open(&data).unwrap();
    let params = |k: u64| load_params(&out.join(format!("step_{k:06}.safetensors"))).unwrap().1;

    let c = capture::load(&caps.join("step_000005")).unwrap();
    let m = &c.meta;
    assert_eq!((m.step, m.optim_step, c.state.optim.step), (5, 4, 4));
    assert_eq!(m.triggers, ["skip", "lr_cut", "planted"]);
    assert_eq!(m.reasons.len(), 3);
    assert!(m.reasons[0].contains("SKIP: gradient norm is not finite") && m.reasons[2] == "planted: nan at step 5");
    assert_eq!(m.planted.as_deref(), Some("nan"));
    assert_eq!((m.engine.as_str(), m.gemm_path.as_str(), m.seed), ("cpu", "cpu", 3));
    assert_eq!((m.optim.lr, m.optim.token_cap), (3e-3, None));
    assert_eq!(m.loss_scale, dualscope::step::LossScale::fixed());
    assert_eq!(m.dataset.content_hash, ds.content_hash());
    assert_eq!(m.dataset.path.as_deref(), Some(std::fs::canonicalize(&data).unwrap().to_str().unwrap()));
    assert_eq!((c.batch.rows, c.batch.t, m.batch.origins.len()), (4, 48, 4));
    c.verify_dataset(&ds, "mixed.bin").unwrap();
    let rec = m.recorded.as_ref().unwrap();
    assert!(rec.grad_norm.is_nan() && rec.loss.is_finite(), "{rec:?}");
    assert_eq!(rec.skipped.as_deref(), Some("gradient norm is not finite"));
    assert_eq!(rec.tensor_norms.len(), c.state.params.tensors().len());
    assert_eq!(m.norm_levels.iter().map(|l| l.n).max(), Some(4), "four applied steps of history");
    assert!(m.lead_up.is_empty() && c.lead_up.is_empty(), "only a rollback holds the lead-up");
    assert_eq!(c.config, Config::tiny());
    assert_eq!(c.state.params, params(4), "the weights before step 5");
    assert_eq!(c.state.params, params(5), "a skipped step leaves them");

    let c = capture::load(&caps.join("step_000008")).unwrap();
    assert_eq!(
        (c.meta.triggers.clone(), c.meta.reasons.clone()),
        (vec!["requested".to_string()], vec!["requested (--capture-at)".to_string()])
    );
    assert_eq!(c.meta.planted, None);
    assert_eq!(c.state.optim.step, 6);
    assert_eq!(c.meta.optim.lr, 1.5e-3, "the step's learning rate (cut at 5)");
    assert_eq!(c.state.params, params(7), "the weights before step 8");
    assert_ne!(c.state.params, params(8), "step 8 was applied");
    assert!(c.meta.recorded.as_ref().unwrap().skipped.is_none());
    // The printed lines name each capture and why.
    let o = run(&train_tiny(
        &data,
        &[
            "--batch",
            "2",
            "--seq-len",
            "16",
            "--steps",
            "4",
            "--inject",
            "spike@2",
            "--out",
            s(&out.with_file_name("printed")),
        ],
    ));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("captures/step_000002 (planted: spike at step 2)"), "{text}");
    assert!(text.contains("1 capture(s) in "), "{text}");
}

/// Without the controller the step is one submit, and a step only the guard
/// skipped is captured after it ran: docs/model.md step 4 leaves weights, moments
/// and step counter as they were, and the capture gets the loss scale from
/// before the step. Weights with a NaN (on purpose) make every step such a skip.
#[test]
fn a_step_only_the_guard_skipped_is_captured_with_the_state_before_it() {
    let (d, data, out) = mixed_run();
    let cfg = Config::tiny();
    let mut p = dualscope::model::Params::<f32>::init(&cfg, 4);
    p.head_bias.data[0] = f32::NAN;
    let ck = d.path().join("nan.safetensors");
    dualscope::checkpoint::save_params(&ck, &cfg, &p).unwrap();
    let mut args = train_args(&data, &out, "3");
    args.extend(["--checkpoint", s(&ck), "--allow-non-finite", "--no-controller", "--loss-scale", "dynamic"]);
    let v = ok_json(&run(&args));
    assert_eq!(v["skipped"], 3);
    for k in 1..=3u64 {
        let c = capture::load(&out.join(format!("captures/step_{k:06}"))).unwrap();
        assert_eq!(c.meta.triggers, ["skip", "scale_backoff"], "step {k}");
        assert_eq!(c.state.scale.scale, 65536.0 / f64::powi(2.0, k as i32 - 1), "the scale before step {k}");
        assert_eq!(c.meta.recorded.as_ref().unwrap().scale_after, c.state.scale.scale / 2.0);
        assert_eq!(c.state.optim.step, 0);
        let same = c
            .state
            .params
            .tensors()
            .iter()
            .zip(p.tensors())
            .all(|(a, b)| a.data.iter().zip(&b.data).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert!(same, "step {k}: the weights of the checkpoint, bit for bit");
        assert!(c.state.optim.m.tensors().iter().all(|t| t.data.iter().all(|&x| x == 0.0)));
    }
}

/// `--max-captures N` keeps the first capture and the N−1 most recent; 0
/// writes none; `--capture-at` needs `--out`.
#[test]
fn max_captures_keeps_the_first_and_the_most_recent() {
    let (d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "14");
    args.extend(["--inject-nan-at", "2,5,8,11,14", "--max-captures", "3"]);
    let v = ok_json(&run(&args));
    let steps: Vec<u64> = v["captures"].as_array().unwrap().iter().map(|c| c["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [2, 11, 14]);
    let on_disk: Vec<u64> = capture::list(&out.join("captures")).unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(on_disk, steps);
    let none = d.path().join("none");
    let mut args = train_args(&data, &none, "6");
    args.extend(["--inject-nan-at", "2", "--max-captures", "0"]);
    let v = ok_json(&run(&args));
    assert_eq!(v["captures"], serde_json::json!([]));
    assert!(!none.join("captures").exists());
    let o = run(&train_tiny(&data, &["--steps", "3", "--capture-at", "2"]));
    assert!(fails(&o, 2).contains("--capture-at without --out"));
    // A ring that cannot fit is refused before anything is written.
    let big = d.path().join("big");
    let mut args = train_args(&data, &big, "3");
    args.extend(["--capture-before", "100000000000000"]);
    assert!(fails(&run(&args), 1).contains("--capture-before 100000000000000: needs"));
    assert!(!big.exists());
}

/// A rollback's capture holds the batches of the steps before it (the ring
/// of `--capture-before`), each as the step saw it.
#[test]
fn a_rollback_capture_holds_the_lead_up() {
    let (_d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "13");
    args.extend([
        "--inject-nan-at",
        "10,11,12",
        "--checkpoint-every",
        "5",
        "--capture-before",
        "4",
        "--capture-at",
        "8",
    ]);
    let v = ok_json(&run(&args));
    assert!(actions(&v).contains(&(12, "rollback".to_string())), "{}", v["actions"]);
    let caps = out.join("captures");
    let c = capture::load(&caps.join("step_000012")).unwrap();
    assert!(c.meta.triggers.contains(&"rollback".to_string()), "{:?}", c.meta.triggers);
    assert!(
        c.meta.reasons.iter().any(|r| r.contains("ROLLBACK") && r.contains("back to the checkpoint of step 5")),
        "{:?}",
        c.meta.reasons
    );
    let lead: Vec<(u64, bool)> = c.meta.lead_up.iter().map(|l| (l.step, l.applied)).collect();
    assert_eq!(lead, [(8, true), (9, true), (10, false), (11, false)]);
    assert_eq!(c.lead_up.len(), 4);
    // Each lead-up batch is that step's batch: the captures of 8 and 10 hold the same.
    for (i, k) in [(0, 8), (2, 10)] {
        let other = capture::load(&caps.join(format!("step_{k:06}"))).unwrap();
        assert_eq!(c.lead_up[i], other.batch, "step {k}");
        assert_eq!(c.meta.lead_up[i].origins, other.meta.batch.origins);
        assert!(other.meta.lead_up.is_empty());
    }
    assert!(c.meta.lead_up[2].grad_norm.is_nan());
}

#[test]
fn too_many_rollbacks_fail_the_run() {
    let (_d, data, out) = mixed_run();
    let mut args = train_args(&data, &out, "30");
    args.extend(["--rollback-after", "2", "--max-rollbacks", "1", "--inject-nan-at", "5,6,7,8"]);
    let err = fails(&run(&args), 1);
    assert!(err.contains("diverged") && err.contains("--max-rollbacks 1"), "{err}");
    // The controller log shows how it got there, and the checkpoint is the good one.
    let kinds: Vec<String> =
        jsonl(&out.join("controller.jsonl")).iter().map(|a| a["action"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "rollback").count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| *k == "skip").count(), 4, "{kinds:?}");
    load_train_checkpoint(&out.join("train_state.safetensors")).unwrap();
}

/// Stopping and resuming gives the very weights of an uninterrupted run,
/// through a rollback and with the lowered rate in flight.
#[test]
fn resume_continues_exactly() {
    let d = tempfile::tempdir().unwrap();
    let data = docs_file(d.path());
    let extra = ["--checkpoint-every", "10", "--inject-nan-at", "13,14,15", "--loss-scale", "dynamic"];
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let mut args = train_args(&data, &a, "40");
    args.extend(extra);
    let whole = ok_json(&run(&args));
    let mut args = train_args(&data, &b, "27");
    args.extend(extra);
    ok_json(&run(&args));
    let o =
        run(&["train", "--resume", s(&b), "--data", s(&data), "--steps", "40", "--checkpoint-every", "10", "--json"]);
    let rest = ok_json(&o);
    assert_eq!((rest["first_step"].as_u64(), rest["steps"].as_u64()), (Some(28), Some(13)));
    // (Compared as tensors: the header's metadata order is not fixed.)
    let same = load_params(&a.join("last.safetensors")).unwrap() == load_params(&b.join("last.safetensors")).unwrap();
    assert!(same, "the resumed run ends on the very weights of the uninterrupted one");
    let (ca, cb) = (
        load_train_checkpoint(&a.join("train_state.safetensors")).unwrap(),
        load_train_checkpoint(&b.join("train_state.safetensors")).unwrap(),
    );
    assert!(ca.m == cb.m && ca.v == cb.v, "and the very optimizer moments");
    let (la, lb) = (jsonl(&a.join("log.jsonl")), jsonl(&b.join("log.jsonl")));
    assert_eq!(lb.len(), 40);
    for (x, y) in la.iter().zip(&lb) {
        for k in ["step", "loss", "grad_norm", "lr", "scale", "optim_step", "skipped"] {
            assert_eq!(x[k], y[k], "{k}: {x} vs {y}");
        }
    }
    assert_eq!(whole["log"][39]["loss"], rest["log"][12]["loss"]);
    assert_eq!(jsonl(&a.join("controller.jsonl")).len(), jsonl(&b.join("controller.jsonl")).len());
}

#[test]
fn bad_resumes_fail_cleanly() {
    let (d, data, out) = mixed_run();
    ok_json(&run(&train_args(&data, &out, "4")));
    let other = d.path().join("other.txt");
    std::fs::write(&other, "some other text").unwrap();
    let resume = |extra: &[&str]| {
        let mut a = vec!["train", "--resume", s(&out), "--steps", "8"];
        a.extend(extra);
        run(&a)
    };
    let err = fails(&resume(&["--data", s(&other)]), 2);
    assert!(err.contains("content hash"), "{err}");
    let err = fails(&resume(&["--data", s(&data), "--config", "small"]), 2);
    assert!(err.contains("--resume keeps"), "{err}");
    let err = fails(&resume(&["--data", s(&data), "--seq-len", "10"]), 2);
    assert!(err.contains("--seq-len 10") && err.contains("has 48"), "{err}");
    let err = fails(&run(&["train", "--resume", s(&out), "--data", s(&data), "--steps", "4"]), 2);
    assert!(err.contains("already at step 4"), "{err}");
    let err = fails(&run(&train_args(&data, &out, "4")), 2);
    assert!(err.contains("--resume"), "a fresh run does not overwrite a run: {err}");
    let missing = d.path().join("nope");
    let err = fails(&run(&["train", "--resume", s(&missing), "--data", s(&data)]), 1);
    assert!(err.contains("no such file"), "{err}");
    let err = fails(&run(&["train", "--resume", s(&out.join("last.safetensors")), "--data", s(&data)]), 1);
    assert!(err.contains("dualscope-train-v1"), "a parameter file is not a training checkpoint: {err}");
    let cut = d.path().join("cut.safetensors");
    let bytes = std::fs::read(out.join("train_state.safetensors")).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = fails(&run(&["train", "--resume", s(&cut), "--data", s(&data), "--steps", "9"]), 1);
    assert!(err.contains("truncated"), "{err}");
    for (flag, value) in
        [("--gn-ema", "1.5"), ("--lr-backoff", "0"), ("--gn-spike-z", "11"), ("--checkpoint-every", "0")]
    {
        let mut a = train_args(&data, &missing, "4");
        a.extend([flag, value]);
        let err = fails(&run(&a), 2);
        assert!(err.contains(flag), "{flag}: {err}");
        assert!(!missing.exists(), "{flag}: nothing written");
    }
}

/// The step of the training checkpoint in `dir`, if one loads.
fn checkpoint_step(dir: &Path) -> Option<u64> {
    let ck = load_train_checkpoint(&dir.join("train_state.safetensors")).ok()?;
    serde_json::from_str::<serde_json::Value>(&ck.state).ok()?["step"].as_u64()
}

/// SIGKILL in the middle of a run, twice: each time the checkpoint left
/// behind loads, and the run resumes from it and finishes with a complete log.
#[test]
fn a_killed_run_resumes_from_its_last_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let data = docs_file(d.path());
    let out = d.path().join("run");
    let mut killed_at = Vec::new();
    for round in 0..2 {
        let mut args = vec!["train", "--data", s(&data), "--steps", "100000", "--checkpoint-every", "3"];
        if round == 0 {
            args.extend(["--config", "tiny", "--batch", "3", "--seq-len", "40", "--out", s(&out)]);
        } else {
            args =
                vec!["train", "--resume", s(&out), "--data", s(&data), "--steps", "100000", "--checkpoint-every", "3"];
        }
        let before = checkpoint_step(&out).unwrap_or(0);
        let mut child = bin().args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let t0 = Instant::now();
        while checkpoint_step(&out).is_none_or(|k| k < before + 6) {
            assert!(t0.elapsed() < Duration::from_secs(120), "no checkpoint appeared");
            assert!(child.try_wait().unwrap().is_none(), "the run ended early");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let k = checkpoint_step(&out).expect("the checkpoint left behind loads");
        assert!(k >= before + 6);
        killed_at.push(k);
    }
    let k = killed_at[1];
    let target = (k + 5).to_string();
    let o = run(&["train", "--resume", s(&out), "--data", s(&data), "--steps", &target, "--json"]);
    let v = ok_json(&o);
    assert_eq!(v["first_step"].as_u64(), Some(k + 1), "resumed at the checkpoint: {killed_at:?}");
    assert_eq!(checkpoint_step(&out), Some(k + 5));
    let steps: Vec<u64> = jsonl(&out.join("log.jsonl")).iter().map(|e| e["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, (1..=k + 5).collect::<Vec<_>>(), "one log line per step, none twice");
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

//! `dualscope scan`: a planted outlier window ranks first (CPU; GPU on
//! lavapipe at small shapes), an interrupted scan resumes to the same
//! ranking, two shards merged equal the whole scan, the captures load and
//! hold their window, and bad input is refused naming the flag.

mod common;

use std::path::Path;

use common::*;
use dualscope::capture;
use dualscope::dataset::Dataset;
use serde_json::Value;

/// Ordinary text of `n` bytes with `run` bytes of 0xFF at `at` (when `run > 0`).
fn planted(n: usize, at: usize, run: usize) -> Vec<u8> {
    let words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "more"];
    let mut x = 12345u64;
    let mut t = Vec::new();
    while t.len() < n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        t.extend_from_slice(words[(x >> 33) as usize % words.len()].as_bytes());
        t.push(b' ');
    }
    t.truncate(n);
    t[at..at + run].fill(0xFF);
    t
}

/// `scan --json` and its report.
fn scan_json(args: &[&str]) -> Value {
    let mut all = vec!["scan", "--json"];
    all.extend_from_slice(args);
    ok_json(&run(&all))["report"].clone()
}

/// The ranking's window indices.
fn windows(report: &Value) -> Vec<u64> {
    report["ranking"].as_array().unwrap().iter().map(|e| e["window"].as_u64().unwrap()).collect()
}

/// The rank-1 window's byte range in the file.
fn first_range(report: &Value) -> (usize, usize) {
    let o = &report["ranking"][0]["origin"];
    let off = o["offset"].as_u64().unwrap() as usize;
    (off, off + o["len"].as_u64().unwrap() as usize)
}

/// A window of 0xFF repeated among ordinary text has the largest per-token
/// gradient norm: rank 1, inside the planted run, on the CPU reference.
#[test]
fn a_planted_outlier_window_ranks_first_on_the_cpu() {
    let d = Dir::new();
    // 100 full windows of T = 64 (the last one whole too).
    let data = d.file("planted.txt", &planted(64 * 100 + 1, 3000, 300));
    let r = scan_json(&["--data", s(&data), "--config", "small", "--seq-len", "64", "--batch", "8", "--top", "8"]);
    assert_eq!(r["done"], 100);
    let (a, b) = first_range(&r);
    assert!(a >= 3000 && b <= 3300, "rank 1 is bytes {a}..{b}, not inside the planted run 3000..3300: {r}");
    // The clean file's riskiest window is far below the planted one.
    let clean = d.file("clean.txt", &planted(64 * 100 + 1, 0, 0));
    let c = scan_json(&["--data", s(&clean), "--config", "small", "--seq-len", "64", "--batch", "8", "--top", "1"]);
    let (hi, lo) = (
        r["ranking"][0]["metrics"]["max_grad"].as_f64().unwrap(),
        c["ranking"][0]["metrics"]["max_grad"].as_f64().unwrap(),
    );
    assert!(hi > 1.5 * lo, "planted {hi} vs clean {lo}");
}

/// The same on the Vulkan engine, at a size lavapipe runs in seconds; its
/// ranking equals the CPU's.
#[test]
fn a_planted_outlier_window_ranks_first_on_the_gpu() {
    skip_without_vulkan!();
    let d = Dir::new();
    let data = d.file("planted.txt", &planted(32 * 24 + 1, 400, 200));
    let args = |engine: &'static str| {
        vec![
            "scan",
            "--json",
            "--data",
            s(&data),
            "--config",
            "small",
            "--seq-len",
            "32",
            "--batch",
            "8",
            "--top",
            "4",
            "--engine",
            engine,
        ]
    };
    let gpu = ok_json(&dualscope(&args("gpu"), &[]))["report"].clone();
    let (a, b) = first_range(&gpu);
    assert!(a >= 400 && b <= 600, "rank 1 is bytes {a}..{b}, not inside the planted run 400..600: {gpu}");
    let cpu = ok_json(&run(&args("cpu")))["report"].clone();
    assert_eq!(windows(&gpu), windows(&cpu));
    for (g, c) in gpu["ranking"].as_array().unwrap().iter().zip(cpu["ranking"].as_array().unwrap()) {
        for m in ["loss", "max_grad", "max_logit"] {
            let (g, c) = (g["metrics"][m].as_f64().unwrap(), c["metrics"][m].as_f64().unwrap());
            assert!((g - c).abs() <= 1e-3 * c.abs(), "{m}: GPU {g}, CPU {c}");
        }
    }
}

fn tiny_args<'a>(data: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec!["--data", s(data), "--config", "tiny", "--seq-len", "16", "--batch", "4", "--top", "6", "--out", s(out)]
}

/// A scan stopped after 12 of its windows and run again gives the ranking of
/// one uninterrupted scan, figure for figure.
#[test]
fn an_interrupted_scan_resumes_to_the_same_ranking() {
    let d = Dir::new();
    let data = d.file("text.txt", &planted(16 * 40 + 5, 200, 40));
    let (whole, parts) = (d.path("whole"), d.path("parts"));
    let w = scan_json(&tiny_args(&data, &whole));
    let mut first = tiny_args(&data, &parts);
    first.extend(["--max-windows", "12"]);
    let p1 = scan_json(&first);
    assert_eq!((p1["done"].as_u64(), p1["complete"].as_bool()), (Some(12), Some(false)));
    assert!(!parts.join("captures").exists(), "an unfinished scan wrote captures");
    let p2 = scan_json(&tiny_args(&data, &parts));
    assert_eq!(p2["complete"], true);
    assert_eq!(p2["done"], w["done"]);
    assert_eq!(p2["ranking"], w["ranking"]);
    assert_eq!(p2["tokens"], w["tokens"]);
    assert_eq!(
        (p1["this_run"].as_u64(), p2["this_run"].as_u64()),
        (Some(12), Some(29)),
        "the second run did not continue"
    );
    // The state on disk is the finished scan.
    let st: Value = serde_json::from_slice(&std::fs::read(parts.join("scan_state.json")).unwrap()).unwrap();
    assert_eq!(st["done"], 41);
}

/// Shards 0/2 and 1/2, merged, rank as the unsharded scan does.
#[test]
fn two_shards_merged_equal_the_whole_scan() {
    let d = Dir::new();
    let data = d.file("text.txt", &planted(16 * 40 + 5, 300, 40));
    let whole = scan_json(&tiny_args(&data, &d.path("whole")));
    for i in 0..2 {
        let out = d.path(&format!("s{i}"));
        let mut a = tiny_args(&data, &out);
        let shard = format!("{i}/2");
        a.extend(["--shard", &shard]);
        let r = ok_json(&run(&[&["scan", "--json"], &a[..]].concat()))["report"].clone();
        assert!(r["windows"].as_u64().unwrap() > 0);
    }
    let (s0, s1, m) = (d.path("s0"), d.path("s1"), d.path("merged"));
    let merged = scan_json(&["--merge", s(&s0), s(&s1), "--out", s(&m)]);
    assert_eq!(windows(&merged), windows(&whole));
    assert_eq!(merged["done"], whole["done"]);
    for (a, b) in merged["ranking"].as_array().unwrap().iter().zip(whole["ranking"].as_array().unwrap()) {
        let (a, b) = (a["metrics"]["max_grad"].as_f64().unwrap(), b["metrics"]["max_grad"].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-5 * b, "{a} vs {b}");
    }
    assert_eq!(capture::list(&m.join("captures")).unwrap().len(), 6);
    // Merging a shard with itself is refused.
    let o = run(&["scan", "--merge", s(&s0), s(&s0), "--out", s(&d.path("again"))]);
    assert!(fails(&o, 1).contains("overlaps"));
}

/// Each capture loads, is a scan capture with its reason, holds exactly the
/// window `row_at(origin)` cuts, and its dominant position is the scan's.
#[test]
fn the_captures_load_and_hold_their_window() {
    let d = Dir::new();
    let docs = docs_jsonl(d.0.path(), 9, |i| planted(30 + 11 * i, 0, 0).into_iter().map(|b| b as char).collect());
    let out = d.path("out");
    let r = scan_json(&tiny_args(&docs, &out));
    let ds = Dataset::open(&docs).unwrap();
    let ranking = r["ranking"].as_array().unwrap();
    assert_eq!(ranking.len(), 6);
    for (i, e) in ranking.iter().enumerate() {
        let w = e["window"].as_u64().unwrap();
        let c = capture::load(&out.join("captures").join(capture::dir_name(w))).unwrap();
        let origin = c.origin(0).unwrap();
        assert_eq!(c.batch.row(0), ds.row_at(&origin).unwrap().as_slice());
        assert_eq!(origin.document as u64, e["origin"]["document"].as_u64().unwrap());
        assert_eq!(c.meta.triggers, ["scan"]);
        let want = format!("scan: rank {} by grad: ‖∂loss/∂e_t‖ ", i + 1);
        assert!(c.meta.reasons[0].starts_with(&want), "{:?}", c.meta.reasons);
        assert!(c.meta.recorded.is_none() && c.meta.optim_step == 0 && c.state.scale.scale == 1.0);
        assert!(c.state.optim.m.tensors().iter().all(|t| t.data.iter().all(|&x| x == 0.0)));
        c.verify_dataset(&ds, "docs.jsonl").unwrap();
        let (top, _) = capture::dominant_positions(&c.config, &c.state.params, &c.batch, &[origin], 1).unwrap();
        let g = e["metrics"]["max_grad"].as_f64().unwrap();
        assert!((top[0].norm - g).abs() <= 1e-5 * g, "capture {} vs scan {g}", top[0].norm);
    }
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("scan.json")).unwrap()).unwrap();
    assert_eq!(summary["ranking"], r["ranking"]);
}

/// Empty and 1-byte files are refused naming --data; a binary file scans;
/// zero sizes and a bad shard are usage errors naming the flag; an --out
/// that is a file, or holds another scan, is refused naming it.
#[test]
fn bad_input_is_refused_naming_it() {
    let d = Dir::new();
    let empty = d.file("empty.bin", b"");
    let e = fails(&run(&["scan", "--data", s(&empty), "--config", "tiny"]), 1);
    assert!(e.contains("--data") && e.contains("empty"), "{e}");
    let one = d.file("one.bin", b"x");
    let e = fails(&run(&["scan", "--data", s(&one), "--config", "tiny"]), 1);
    assert!(e.contains("--data") && e.contains("at least 2"), "{e}");
    let binary: Vec<u8> = (0..700u32).map(|i| (i * 97 % 256) as u8).collect();
    let bin = d.file("blob.bin", &binary);
    let r = scan_json(&["--data", s(&bin), "--config", "tiny", "--seq-len", "32", "--top", "3"]);
    assert_eq!((r["done"].as_u64(), r["ranking"].as_array().unwrap().len()), (Some(22), 3));
    for (flag, value) in [("--seq-len", "0"), ("--top", "0"), ("--batch", "0"), ("--shard", "3/2")] {
        let e = fails(&run(&["scan", "--data", s(&bin), "--config", "tiny", flag, value]), 2);
        assert!(e.contains(&format!("{flag} {value}")), "{e}");
    }
    let e = fails(&run(&["scan", "--data", s(&bin), "--config", "tiny", "--out", s(&one)]), 2);
    assert!(e.contains("--out") && e.contains("one.bin"), "{e}");
    assert_eq!(std::fs::read(&one).unwrap(), b"x");
    let out = d.path("out");
    scan_json(&tiny_args(&bin, &out));
    let before = std::fs::read(out.join("scan_state.json")).unwrap();
    let mut other = tiny_args(&bin, &out);
    other[5] = "8";
    let e = fails(&run(&[&["scan"], &other[..]].concat()), 1);
    assert!(e.contains("--out") && e.contains("another scan") && e.contains("--seq-len"), "{e}");
    assert_eq!(std::fs::read(out.join("scan_state.json")).unwrap(), before, "the other scan's state was touched");
}

/// `--rank loss|logit|headroom` order the windows by that figure (headroom
/// smallest first), each ranking the file's extreme window first.
#[test]
fn other_ranks_order_by_their_figure() {
    let d = Dir::new();
    let data = d.file("text.txt", &planted(16 * 30 + 1, 100, 30));
    let mut all_loss = Vec::new();
    for (rank, field, sign) in [("loss", "loss", 1.0), ("logit", "max_logit", 1.0), ("headroom", "headroom", -1.0)] {
        let r = scan_json(&[
            "--data",
            s(&data),
            "--config",
            "tiny",
            "--seq-len",
            "16",
            "--batch",
            "4",
            "--top",
            "30",
            "--rank",
            rank,
        ]);
        let v: Vec<f64> =
            r["ranking"].as_array().unwrap().iter().map(|e| sign * e["metrics"][field].as_f64().unwrap()).collect();
        assert_eq!(v.len(), 30);
        assert!(v.windows(2).all(|w| w[0] >= w[1]), "--rank {rank}: {v:?}");
        if rank == "loss" {
            all_loss = v;
        }
    }
    // With K = 3 the heap keeps exactly the three largest of all 30.
    let r = scan_json(&[
        "--data",
        s(&data),
        "--config",
        "tiny",
        "--seq-len",
        "16",
        "--batch",
        "4",
        "--top",
        "3",
        "--rank",
        "loss",
    ]);
    let top3: Vec<f64> =
        r["ranking"].as_array().unwrap().iter().map(|e| e["metrics"]["loss"].as_f64().unwrap()).collect();
    assert_eq!(top3, all_loss[..3]);
}

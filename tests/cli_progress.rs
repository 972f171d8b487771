//! The long commands' progress bar (src/cli/progress.rs): drawn on a terminal
//! (a pseudo-terminal from `script(1)`), never when stderr is a pipe or with
//! `--json`, and `--quiet` on every long command turns it off with the
//! progress lines.

mod common;

use std::process::{Command, Output};

use common::{Dir, run, s, text, train_tiny};

/// The commands that draw a bar and take `--quiet`.
const LONG: [&str; 10] =
    ["ladder", "bisect", "audit", "train", "drift", "scan", "growth", "replay", "precision-bisect", "bench"];

/// What the bar writes to redraw its line.
const CLEAR: &str = "\r\x1b[2K";

/// A text file of `n` bytes with some structure (a repeated sentence).
fn corpus(n: usize) -> Vec<u8> {
    b"the quick brown fox jumps over the lazy dog; ".iter().copied().cycle().take(n).collect()
}

/// Runs the binary with `args` inside `script(1)`, so that its stdout and
/// stderr are a terminal; returns the exit code and everything it wrote.
fn on_a_terminal(args: &[&str]) -> Option<(Option<i32>, String)> {
    if Command::new("script").arg("--version").output().is_err() {
        println!("SKIPPED: no script(1) to give the binary a terminal");
        return None;
    }
    let line =
        std::iter::once(env!("CARGO_BIN_EXE_dualscope")).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("RAYON_NUM_THREADS", "2")
        .env("COLUMNS", "100")
        .output()
        .expect("script runs");
    Some((o.status.code(), text(&o.stdout)))
}

fn no_bar(o: &Output) {
    let err = text(&o.stderr);
    assert!(!err.contains('\r') && !err.contains("\x1b["), "a bar on a piped stderr: {err:?}");
}

#[test]
fn every_long_command_takes_quiet() {
    for cmd in LONG {
        let o = run(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd} --help: {}", text(&o.stderr));
        assert!(text(&o.stdout).contains("--quiet"), "{cmd} --help lists no --quiet");
    }
}

#[test]
fn train_with_stderr_a_pipe_draws_no_bar_and_quiet_drops_the_step_lines() {
    let d = Dir::new();
    let data = d.file("data.txt", &corpus(4000));
    let o = run(&train_tiny(&data, &["--steps", "12", "--log-every", "4"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    no_bar(&o);
    let out = text(&o.stdout);
    assert!(out.lines().any(|l| l.starts_with("step ")), "{out}");
    assert!(out.contains("trained steps 1..12"), "{out}");

    let q = run(&train_tiny(&data, &["--steps", "12", "--log-every", "4", "--quiet"]));
    assert!(q.status.success(), "{}", text(&q.stderr));
    no_bar(&q);
    let out = text(&q.stdout);
    assert!(!out.lines().any(|l| l.starts_with("step ")), "--quiet printed step lines: {out}");
    assert!(out.contains("trained steps 1..12"), "--quiet dropped the result: {out}");
}

#[test]
fn scan_with_stderr_a_pipe_draws_no_bar() {
    let d = Dir::new();
    let data = d.file("data.txt", &corpus(3000));
    for quiet in [false, true] {
        let mut args = vec!["scan", "--data", s(&data), "--config", "tiny", "--seq-len", "16", "--batch", "4"];
        if quiet {
            args.push("--quiet");
        }
        let o = run(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        no_bar(&o);
        assert!(text(&o.stdout).contains("windows of"), "{}", text(&o.stdout));
    }
}

#[test]
fn train_on_a_terminal_draws_a_bar_that_quiet_and_json_take_away() {
    let d = Dir::new();
    let data = d.file("data.txt", &corpus(4000));
    let Some((code, all)) = on_a_terminal(&train_tiny(&data, &["--steps", "30"])) else { return };
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains(CLEAR) && all.contains("training ["), "no bar on a terminal: {all:?}");
    assert!(all.contains("/30"), "the bar counts the steps: {all:?}");
    for flag in ["--quiet", "--json"] {
        let (code, all) = on_a_terminal(&train_tiny(&data, &["--steps", "30", flag])).unwrap();
        assert_eq!(code, Some(0), "{all}");
        assert!(!all.contains(CLEAR) && !all.contains("training ["), "a bar with {flag}: {all:?}");
    }
}

#[test]
fn ladder_on_a_terminal_counts_its_rungs() {
    let args = ["ladder", "--config", "tiny", "--rungs", "gemm,embed_fwd,loss"];
    let Some((code, all)) = on_a_terminal(&args) else { return };
    if code == Some(2) {
        println!("SKIPPED: no Vulkan device: {all}");
        return;
    }
    assert!(all.contains(CLEAR) && all.contains("ladder ["), "no bar on a terminal: {all:?}");
    assert!(all.contains("/4"), "three rungs and the end-to-end gate: {all:?}");
    let (_, quiet) = on_a_terminal(&[&args[..], &["--quiet"]].concat()).unwrap();
    assert!(!quiet.contains(CLEAR) && !quiet.contains("ladder ["), "a bar with --quiet: {quiet:?}");
    // Piped: no bar, the table as before.
    let o = run(&args);
    no_bar(&o);
}

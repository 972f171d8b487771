//! The `dualscope` binary as the tests run it, and the bad-input contract
//! its failures keep (exit code, one `error:` line on stderr, nothing written).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary with two rayon threads (the CPU tests' default).
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dualscope"));
    c.env("RAYON_NUM_THREADS", "2");
    c
}

/// Runs the binary ([`bin`]) with `args` and waits for it.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

/// Runs the binary with validation on (`DUALSCOPE_VK_VALIDATION=1`), the
/// environment `env` added and rayon's default threads: the Vulkan CLI tests.
pub fn dualscope(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dualscope"));
    cmd.args(args).env("DUALSCOPE_VK_VALIDATION", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("runs the binary")
}

/// `train --data DATA --config tiny` and then `rest`: the arguments of a
/// training run on the tiny config.
pub fn train_tiny<'a>(data: &'a Path, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["train", "--data", s(data), "--config", "tiny"];
    args.extend_from_slice(rest);
    args
}

/// A path as the `&str` an argument list takes.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Output bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts success and returns the one JSON object on stdout.
pub fn ok_json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("one JSON object on stdout")
}

/// Asserts a clean failure: exit `code`, one `error:` line on stderr and no
/// panic; returns that line.
pub fn fails(o: &Output, code: i32) -> String {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line on stderr, got: {err}");
    assert!(err.starts_with("error: ") && !err.contains("panicked"), "{err}");
    err
}

/// [`fails`], and `written` was not written, nor any temporary file left
/// beside it.
pub fn fails_cleanly(o: &Output, code: i32, written: &Path) -> String {
    let err = fails(o, code);
    assert!(!written.exists(), "{} was written", written.display());
    let tmp: Vec<_> = std::fs::read_dir(written.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    err
}

/// A temporary directory for a test's inputs and outputs, removed when dropped.
pub struct Dir(pub tempfile::TempDir);

impl Dir {
    pub fn new() -> Self {
        Dir(tempfile::tempdir().unwrap())
    }
    /// Writes `bytes` to `name` in the directory; returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
    /// The path of `name` in the directory (not created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    /// A checkpoint of config `cfg` from `init --seed 3`, as `model.safetensors`.
    pub fn ckpt(&self, cfg: &str) -> PathBuf {
        let p = self.path("model.safetensors");
        let o = run(&["init", "--config", cfg, "--seed", "3", "--out", s(&p)]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        p
    }
}

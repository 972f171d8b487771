//! A mutation campaign: the clean ladder's baseline, then each mutant built
//! and run through the ladder in a child process with a timeout, and its
//! outcome classified.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Mutant;
use super::folder::{self, Built};
use crate::engine::gpu::ShaderDir;

/// How to run the ladder on a shader folder.
#[derive(Clone, Debug)]
pub struct Runner {
    /// The `dualscope` binary to run (this one).
    pub exe: PathBuf,
    /// One ladder run per entry, each its extra arguments (`--config tiny`);
    /// a mutant is killed when any of them fails.
    pub suites: Vec<Vec<String>>,
    /// A run longer than this is stopped: the mutant's outcome is a timeout.
    pub timeout: Duration,
}

/// The clean folder's ladder: every suite's digests (the tensors whose bits
/// were the same in two clean runs) and the kernels the runs created.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Baseline {
    pub digests: Vec<BTreeMap<String, String>>,
    pub kernels: Vec<String>,
    /// The tensors whose bits differed between the two clean runs (left out
    /// of the equivalence test).
    pub unstable: Vec<String>,
    pub seconds: f64,
}

/// What became of one mutant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Outcome {
    /// A suite failed: the rungs (and the gate) that failed, by suite.
    Killed { failed: Vec<String> },
    /// A run passed its timeout (a hang or a lost device): counted as killed.
    Timeout { suite: usize },
    /// A run ended without a report (a crash, a lost device, an engine
    /// error): counted as killed; the last line of its stderr.
    Crashed { suite: usize, message: String },
    /// Every suite passed and every compared tensor is bit-identical to the
    /// clean run's: a coverage gap, or a mutant equivalent on these inputs.
    Equivalent,
    /// Every suite passed although these tensors changed: a comparator gap.
    Missed { changed: Vec<String> },
    /// The mutant does not compile.
    Stillborn { message: String },
    /// The modules the runs use are the clean ones byte for byte (the
    /// change is outside the variants the runs build): not run.
    SameSpirv,
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Killed { .. } => "killed",
            Outcome::Timeout { .. } => "timeout",
            Outcome::Crashed { .. } => "crashed",
            Outcome::Equivalent => "equivalent",
            Outcome::Missed { .. } => "missed",
            Outcome::Stillborn { .. } => "stillborn",
            Outcome::SameSpirv => "same_spirv",
        }
    }

    /// Detected: the ladder (or the tool around it) noticed the mutant.
    pub fn detected(&self) -> bool {
        matches!(self, Outcome::Killed { .. } | Outcome::Timeout { .. } | Outcome::Crashed { .. })
    }

    /// Counts towards the score: detected, or missed.
    pub fn scored(&self) -> bool {
        self.detected() || matches!(self, Outcome::Missed { .. })
    }
}

/// One mutant's result, as stored under `--out DIR/results/`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantResult {
    pub mutant: Mutant,
    pub outcome: Outcome,
    pub diff: String,
    pub seconds: f64,
}

/// One ladder run's verdict.
enum Run {
    Report(serde_json::Value),
    Timeout,
    Crashed(String),
}

impl Runner {
    /// Runs suite `i` on the folder `shaders`, its output kept under `log` as
    /// `suite-I.{json,err}`, stopped after `timeout`.
    fn run(&self, i: usize, shaders: &Path, log: &Path, timeout: Duration) -> Result<Run, String> {
        std::fs::create_dir_all(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let out_path = log.join(format!("suite-{i}.json"));
        let err_path = log.join(format!("suite-{i}.err"));
        let file = |p: &Path| std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()));
        let mut child = std::process::Command::new(&self.exe)
            .arg("--shaders")
            .arg(shaders)
            .args(["ladder", "--json", "--quiet", "--digests"])
            .args(&self.suites[i])
            .stdin(std::process::Stdio::null())
            .stdout(file(&out_path)?)
            .stderr(file(&err_path)?)
            .spawn()
            .map_err(|e| format!("{}: {e}", self.exe.display()))?;
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Run::Timeout);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = std::fs::read_to_string(&out_path).unwrap_or_default();
        match (status.code(), serde_json::from_str::<serde_json::Value>(&text)) {
            (Some(0 | 1), Ok(v)) if v.get("status").is_some() => Ok(Run::Report(v)),
            _ => {
                let err = std::fs::read_to_string(&err_path).unwrap_or_default();
                let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no message)");
                Ok(Run::Crashed(format!("{status}: {}", last.trim())))
            }
        }
    }

    /// The clean ladder, each suite twice: it must pass (else no mutant's
    /// result means anything), and its digests are what a mutant is held to.
    pub fn baseline(&self, shaders: &Path, work: &Path) -> Result<Baseline, String> {
        let start = Instant::now();
        let (mut digests, mut unstable, mut kernels) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..self.suites.len() {
            let mut twice = Vec::new();
            for k in 0..2 {
                // The clean runs set the mutants' timeout: they have none themselves.
                let log = work.join("baseline").join(k.to_string());
                let v = match self.run(i, shaders, &log, Duration::from_secs(86_400))? {
                    Run::Report(v) => v,
                    Run::Timeout => return Err(format!("the clean ladder (suite {i}) passed the timeout")),
                    Run::Crashed(m) => return Err(format!("the clean ladder (suite {i}) did not run: {m}")),
                };
                if v["status"] == "fail" {
                    return Err(format!("the clean ladder fails (suite {i}: {})", suite_line(&self.suites[i])));
                }
                kernels
                    .extend(v["kernels"].as_array().into_iter().flatten().filter_map(|k| k.as_str().map(String::from)));
                twice.push(digest_map(&v));
            }
            let (a, b) = (&twice[0], &twice[1]);
            unstable.extend(a.iter().filter(|(k, d)| b.get(*k) != Some(d)).map(|(k, _)| format!("{i}:{k}")));
            digests.push(a.iter().filter(|(k, d)| b.get(*k) == Some(d)).map(|(k, d)| (k.clone(), d.clone())).collect());
        }
        kernels.sort();
        kernels.dedup();
        Ok(Baseline { digests, kernels, unstable, seconds: start.elapsed().as_secs_f64() })
    }

    /// Builds and runs one mutant of the clean folder `clean`.
    pub fn mutant(&self, clean: &ShaderDir, base: &Baseline, m: &Mutant, work: &Path) -> Result<MutantResult, String> {
        let start = Instant::now();
        let source = std::fs::read_to_string(clean.root().join(&m.kernel))
            .map_err(|e| format!("{}: {e}", clean.root().join(&m.kernel).display()))?;
        let diff = m.diff(&source);
        let dir = folder::mutant_dir(work, &m.id);
        let shaders = dir.join("shaders");
        folder::write_mutated(clean.root(), &shaders, m)?;
        let mutated = ShaderDir::open(&shaders)?;
        let outcome = match folder::build_mutant(clean, &mutated, m, &base.kernels) {
            Built::Stillborn(message) => Outcome::Stillborn { message },
            Built::SameSpirv => Outcome::SameSpirv,
            Built::Changed(_) => self.judge(base, &shaders, &dir)?,
        };
        Ok(MutantResult { mutant: m.clone(), outcome, diff, seconds: start.elapsed().as_secs_f64() })
    }

    /// Every suite on a mutated folder, stopping at the first that kills it.
    fn judge(&self, base: &Baseline, shaders: &Path, dir: &Path) -> Result<Outcome, String> {
        let mut changed = Vec::new();
        for i in 0..self.suites.len() {
            let v = match self.run(i, shaders, dir, self.timeout)? {
                Run::Report(v) => v,
                Run::Timeout => return Ok(Outcome::Timeout { suite: i }),
                Run::Crashed(message) => return Ok(Outcome::Crashed { suite: i, message }),
            };
            if v["status"] == "fail" {
                return Ok(Outcome::Killed { failed: failed_parts(&v, i) });
            }
            let got = digest_map(&v);
            for (k, d) in &base.digests[i] {
                if got.get(k) != Some(d) {
                    changed.push(if self.suites.len() > 1 { format!("{i}:{k}") } else { k.clone() });
                }
            }
        }
        Ok(if changed.is_empty() { Outcome::Equivalent } else { Outcome::Missed { changed } })
    }
}

fn digest_map(v: &serde_json::Value) -> BTreeMap<String, String> {
    let Some(d) = v["digests"].as_object() else { return BTreeMap::new() };
    d.iter().filter_map(|(k, x)| Some((k.clone(), x.as_str()?.to_string()))).collect()
}

/// The failing rungs of a ladder report (`0:attn_fwd`, `0:end_to_end`; in a
/// `--suite full` report with the run's name, `0:ragged/attn_bwd`).
fn failed_parts(v: &serde_json::Value, suite: usize) -> Vec<String> {
    let mut out = Vec::new();
    let reports: Vec<(String, &serde_json::Value)> = match v["runs"].as_array() {
        Some(runs) => runs.iter().map(|r| (format!("{}/", r["name"].as_str().unwrap_or("?")), &r["report"])).collect(),
        None => vec![(String::new(), v)],
    };
    for (prefix, r) in reports {
        for rung in r["rungs"].as_array().into_iter().flatten().filter(|r| r["status"] == "fail") {
            out.push(format!("{suite}:{prefix}{}", rung["id"].as_str().unwrap_or("?")));
        }
        if r["end_to_end"]["status"] == "fail" {
            out.push(format!("{suite}:{prefix}end_to_end"));
        }
    }
    if out.is_empty() {
        out.push(format!("{suite}:status"));
    }
    out
}

/// A suite's arguments as one line (`(default)` for none).
pub fn suite_line(args: &[String]) -> String {
    if args.is_empty() { "(default)".into() } else { args.join(" ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failing_rungs_are_named_in_both_reports() {
        let quick = json!({"status": "fail", "rungs": [{"id": "gemm", "status": "fail"}, {"id": "loss", "status": "pass"}],
            "end_to_end": {"status": "fail"}});
        assert_eq!(failed_parts(&quick, 0), ["0:gemm", "0:end_to_end"]);
        let full = json!({"status": "fail", "runs": [{"name": "asked", "report": {"rungs": [{"id": "gemm", "status": "pass"}]}},
            {"name": "ragged", "report": {"rungs": [{"id": "attn_bwd", "status": "fail"}]}}]});
        assert_eq!(failed_parts(&full, 1), ["1:ragged/attn_bwd"]);
        assert_eq!(failed_parts(&json!({"status": "fail"}), 0), ["0:status"]);
    }
}

//! The diagnostics views' background work: the length bisect, the CPU/GPU
//! norm audit (both on the sequence's row, with a planted engine fault or
//! none, as [`Job`]s on the shared GPU context) and reading a training run's
//! `log.jsonl` (a [`Job`] too). The UI polls for the results.

use crate::ui::error::{UiError, UiResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::ladder::audit::AuditReport;
use crate::ladder::{BisectReport, Probe};
use crate::session::gpu;
use crate::session::job::{Job, Waker};
use crate::session::state::ConfigName;
use crate::step::Fault as EngineFault;

/// The catalogue's faults as the GUI offers them: `None` is "none".
pub fn fault_label(f: Option<EngineFault>) -> &'static str {
    f.map_or("none", |f| f.name())
}

/// `s` in the glyphs the default font surely has (ASCII and `·`).
pub fn ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if c.is_ascii() || c == '·' => out.push(c),
            '×' => out.push('x'),
            '≥' => out.push_str(">="),
            '≤' => out.push_str("<="),
            '⊙' => out.push('*'),
            '−' => out.push('-'),
            '→' => out.push_str("->"),
            '‖' => out.push('|'),
            'Δ' | 'δ' => out.push('d'),
            '≈' => out.push('~'),
            _ => out.push('?'),
        }
    }
    out
}

/// A fault's description, in the glyphs the default font has.
pub fn fault_description(f: EngineFault) -> String {
    ascii(f.description())
}

/// What a bisect or an audit runs on: the model and one row of tokens.
#[derive(Clone)]
pub struct RowJob {
    pub config: ConfigName,
    pub seed: u64,
    pub weights: crate::session::weights::Weights,
    pub tokens: Vec<u8>,
    pub fault: Option<EngineFault>,
    /// An open capture: its configuration and weights instead of the preset's.
    pub capture: Option<Arc<crate::capture::Capture>>,
}

impl RowJob {
    /// The model the row runs through: the capture's, or the preset's.
    pub(crate) fn model(&self) -> UiResult<(crate::model::Config, crate::model::Params<f32>)> {
        match &self.capture {
            Some(c) => Ok((c.config.clone(), c.state.params.clone())),
            None => Ok((self.config.config(), self.weights.params(self.config, self.seed)?)),
        }
    }
}

/// A bisect: its probes so far; the report once it ended.
type BisectJob = Job<Probe, UiResult<BisectReport>>;

/// A bisect in flight: the probes so far.
#[derive(Default)]
pub struct BisectRun {
    pub probes: Vec<Probe>,
    pub started: Option<Instant>,
    pub fault: Option<EngineFault>,
    job: Option<BisectJob>,
}

impl BisectRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Bisects positions up to `max_len` on `job.tokens` (`max_len + 1` of them).
    pub fn start(&mut self, job: RowJob, max_len: usize, wake: Waker) -> UiResult<()> {
        if self.is_busy() {
            return Err(UiError::refused("a bisect is already running"));
        }
        self.probes.clear();
        self.fault = job.fault;
        let running = Job::spawn("bisect", wake, move |r| {
            let ctx = gpu::engine()?;
            let (cfg, params) = job.model()?;
            crate::ladder::bisect(&ctx, &cfg, &params, &job.tokens, max_len, job.fault, |p| {
                r.progress(p.clone());
            })
            .map_err(UiError::from)
        })
        .map_err(|e| UiError::refused(format!("cannot start the bisect thread: {e}")))?;
        self.started = Some(running.started());
        self.job = Some(running);
        Ok(())
    }

    /// Takes the probes that arrived; the result once the bisect ended.
    pub fn poll(&mut self) -> Option<UiResult<BisectReport>> {
        let polled = self.job.as_mut()?.poll();
        self.probes.extend(polled.progress);
        let done = polled.done?;
        self.job = None;
        Some(done.map_err(UiError::from).and_then(|r| r))
    }
}

/// The audit: its last result and the view's selection.
#[derive(Default)]
pub struct AuditRun {
    pub report: Option<Arc<AuditReport>>,
    /// The tensor whose per-token plot shows.
    pub selected: usize,
    /// The position picked in the plot.
    pub position: Option<usize>,
    pub started: Option<Instant>,
    job: Option<Job<(), UiResult<AuditReport>>>,
}

/// The loss scale the audit's GPU backward runs at (its contributions are unscaled after).
pub const AUDIT_LOSS_SCALE: f64 = 1024.0;

impl AuditRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    pub fn start(&mut self, job: RowJob, wake: Waker) -> UiResult<()> {
        if self.is_busy() {
            return Err(UiError::refused("an audit is already running"));
        }
        let running = Job::spawn("audit", wake, move |_| {
            let ctx = gpu::engine()?;
            let (cfg, params) = job.model()?;
            crate::ladder::audit::audit(&ctx, &cfg, &params, &job.tokens, AUDIT_LOSS_SCALE, job.fault)
                .map_err(UiError::from)
        })
        .map_err(|e| UiError::refused(format!("cannot start the audit thread: {e}")))?;
        self.started = Some(running.started());
        self.job = Some(running);
        Ok(())
    }

    /// The result once the audit ended (also kept in `report` when it succeeded).
    pub fn poll(&mut self) -> Option<UiResult<()>> {
        let done = self.job.as_mut()?.poll().done?;
        self.job = None;
        let r = match done.map_err(UiError::from).and_then(|r| r) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        self.selected = self.selected.min(r.tensors.len().saturating_sub(1));
        self.position = None;
        self.report = Some(Arc::new(r));
        Some(Ok(()))
    }
}

pub use crate::train::log::{LogAction, LogStep, TrainLog};
use crate::triage::drift::DriftReport;

/// Reads `path` (a `log.jsonl`, or the `--out` directory holding one) with
/// the action reasons in the glyphs the default font has.
pub fn read_train_log(path: &Path) -> UiResult<TrainLog> {
    let mut log = crate::train::read_train_log(path)?;
    log.actions.iter_mut().for_each(|a| a.reason = ascii(&a.reason));
    Ok(log)
}

/// What the view read on its job: a training log or a drift report, with
/// the steps that have a capture.
enum Read {
    Log(TrainLog),
    Drift(Box<DriftReport>, PathBuf),
}
type ReadLog = (Read, UiResult<BTreeMap<u64, PathBuf>>);

/// The `drift.json` that `path` names (the file, or a `drift --out DIR`
/// directory without a training log), if it names one.
pub fn drift_file(path: &Path) -> Option<PathBuf> {
    let file = crate::triage::drift::REPORT_FILE;
    if path.is_dir() {
        let f = path.join(file);
        (f.is_file() && !path.join(crate::train::log::LOG_FILE).exists()).then_some(f)
    } else {
        path.file_name().is_some_and(|n| n == file).then(|| path.to_path_buf())
    }
}

/// Reads a `drift.json` (at most 256 MiB: a report of a few million steps).
pub fn read_drift(path: &Path) -> UiResult<DriftReport> {
    let (mut f, len) = crate::dataset::open_input_file(path, 256 << 20)
        .map_err(|e| UiError::refused(format!("{}: {e}", crate::dataset::show_path(path))))?;
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut f, &mut bytes)
        .map_err(|e| UiError::refused(format!("{}: {e}", crate::dataset::show_path(path))))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| UiError::refused(format!("{}: not a drift report: {e}", crate::dataset::show_path(path))))
}

/// The training-curves view's log (or a drift run's report), read as a [`Job`].
#[derive(Default)]
pub struct TrainLogView {
    pub log: Option<Arc<TrainLog>>,
    /// A `dualscope drift` report shown instead of a log, and its file.
    pub drift: Option<(Arc<DriftReport>, PathBuf)>,
    /// The run's captures by step (`OUT/captures/step_NNNNNN`), or why they
    /// could not be listed.
    pub captures: BTreeMap<u64, PathBuf>,
    pub captures_error: Option<String>,
    job: Option<Job<(), UiResult<ReadLog>>>,
}

impl TrainLogView {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    pub fn load(&mut self, path: PathBuf, wake: Waker) -> UiResult<()> {
        let job = Job::spawn("train-log", wake, move |_| {
            if let Some(f) = drift_file(&path) {
                let r = read_drift(&f)?;
                let captures = crate::ui::capture_view::log_captures(&f);
                return Ok((Read::Drift(Box::new(r), f), captures));
            }
            let log = read_train_log(&path)?;
            let captures = crate::ui::capture_view::log_captures(&log.path);
            Ok((Read::Log(log), captures))
        })
        .map_err(|e| UiError::refused(format!("cannot start reading the log: {e}")))?;
        self.job = Some(job);
        Ok(())
    }

    /// The path read and a line saying what it held, once the job is done.
    pub fn poll(&mut self) -> Option<UiResult<(PathBuf, String)>> {
        let done = self.job.as_mut()?.poll().done?;
        self.job = None;
        match done {
            Ok(Ok((read, captures))) => {
                (self.captures, self.captures_error) = match captures {
                    Ok(c) => (c, None),
                    Err(e) => (BTreeMap::new(), Some(e.to_string())),
                };
                Some(Ok(match read {
                    Read::Log(l) => {
                        let said = format!("Read {} training steps from {}", l.steps.len(), l.path.display());
                        let path = l.path.clone();
                        (self.log, self.drift) = (Some(Arc::new(l)), None);
                        (path, said)
                    }
                    Read::Drift(r, f) => {
                        let said = format!(
                            "Read a drift run of {} steps from {}: {}",
                            r.steps.len(),
                            f.display(),
                            r.summary_line()
                        );
                        (self.log, self.drift) = (None, Some((Arc::new(*r), f.clone())));
                        (f, said)
                    }
                }))
            }
            Ok(Err(e)) => Some(Err(e)),
            Err(_) => Some(Err(UiError::refused("the log reader ended without a result"))),
        }
    }
}

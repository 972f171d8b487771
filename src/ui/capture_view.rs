//! A capture opened in the GUI: the capture read from its folder, its batch's
//! rows as the dataset the GUI shows, and the positions that dominate its
//! gradient, and its replay. Reading and the gradient run on a [`Job`] (a
//! capture holds a whole training state, and `dominant_positions` is a
//! forward and backward pass), and so does the replay, so the UI never
//! waits for them.

use crate::ui::error::{UiError, UiResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::capture::{self, Capture, TokenGrad};
use crate::dataset::{Dataset, one_line};
use crate::session::job::{Job, Waker};
use crate::session::state::ConfigName;
use crate::step::Fault as EngineFault;
use crate::triage::replay::{ReplayOptions, ReplayReport, replay};

/// How many dominant positions the capture panel lists.
pub const TOP_K: usize = 10;

/// A capture ready to show.
pub struct OpenCapture {
    /// The capture's folder.
    pub path: PathBuf,
    pub capture: Arc<Capture>,
    /// The batch's rows one after another (no padding): the dataset the GUI
    /// shows while the capture is open.
    pub rows: Arc<Dataset>,
    /// Where each row starts in `rows`.
    pub row_offsets: Vec<usize>,
    /// The [`TOP_K`] positions with the largest `‖∂loss/∂e_t‖`, largest
    /// first, or why they could not be computed.
    pub dominant: UiResult<Vec<TokenGrad>>,
    /// Each row's share of `Σ_t ‖∂loss/∂e_t‖²` (empty when `dominant` failed).
    pub shares: Vec<f64>,
}

impl OpenCapture {
    /// The `(offset, len)` of row `row` in [`Self::rows`].
    pub fn row_window(&self, row: usize) -> Option<(usize, usize)> {
        let off = *self.row_offsets.get(row)?;
        Some((off, self.capture.batch.lens[row]))
    }

    /// The row whose window is `(offset, len)`, if one is.
    pub fn row_at(&self, offset: usize, len: usize) -> Option<usize> {
        (0..self.row_offsets.len()).find(|&r| self.row_window(r) == Some((offset, len)))
    }

    /// The first dominant position: where the stepper opens.
    pub fn top(&self) -> Option<&TokenGrad> {
        self.dominant.as_ref().ok()?.first()
    }

    /// The engine fault planted for the whole run (`persistent=NAME`), if the
    /// capture names one the catalogue knows.
    pub fn planted_fault(&self) -> Option<EngineFault> {
        planted_fault(self.capture.meta.planted.as_deref()?)
    }

    /// The GUI's preset with exactly the capture's configuration, if one is.
    pub fn preset(&self) -> Option<ConfigName> {
        ConfigName::ALL.into_iter().find(|n| n.config() == self.capture.config)
    }

    /// One line for the ladder's input: which capture, how big a batch.
    pub fn describe(&self) -> String {
        let b = &self.capture.batch;
        format!("capture {} ({} rows x {} positions)", capture::dir_name(self.capture.meta.step), b.rows, b.t)
    }
}

/// `persistent=NAME` → the engine fault `NAME`, `persistent` alone → the
/// default one `train --inject` plants (a trailing `@STEP` is ignored); other
/// planted events (a NaN in a gradient, a transient fault) are not part of
/// the engine for a ladder.
pub fn planted_fault(planted: &str) -> Option<EngineFault> {
    let p = planted.split('@').next().unwrap_or(planted).trim();
    if p == "persistent" {
        return Some(crate::train::inject::DEFAULT_PERSISTENT);
    }
    EngineFault::parse(p.strip_prefix("persistent=")?)
}

/// Reads the capture at `path` (its folder, or its `capture.json`) and
/// computes its dominant positions; the error is one line.
pub fn prepare(path: &Path) -> UiResult<OpenCapture> {
    let dir =
        if path.file_name().is_some_and(|n| n == capture::META_FILE) { path.parent().unwrap_or(path) } else { path };
    let c = capture::load(dir).map_err(|e| one_line(&format!("cannot open the capture: {e}")))?;
    let mut bytes = Vec::new();
    let mut row_offsets = Vec::with_capacity(c.batch.rows);
    for b in 0..c.batch.rows {
        row_offsets.push(bytes.len());
        bytes.extend_from_slice(c.batch.row(b));
    }
    let name = format!("capture {} rows", capture::dir_name(c.meta.step));
    let rows = Dataset::from_bytes(&name, bytes)
        .map_err(|e| one_line(&format!("cannot open the capture {}: its rows: {e}", dir.display())))?;
    let (dominant, shares) =
        // From the carried state a carried step started from, as replay runs it.
        match capture::dominant_positions_with(&c.config, &c.state.params, &c.batch, &c.meta.batch.origins, TOP_K, c.carry.as_ref()) {
            Ok((d, s)) => (Ok(d), s),
            Err(e) => (Err(one_line(&e.to_string())), Vec::new()),
        };
    Ok(OpenCapture {
        path: dir.to_path_buf(),
        capture: Arc::new(c),
        rows: Arc::new(rows),
        row_offsets,
        dominant: dominant.map_err(UiError::from),
        shares,
    })
}

/// Where the stepper goes once a capture is open: to its dominant position,
/// or back to where a session had it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Opened now: the stepper moves to the dominant position, the ladder's
    /// old results go.
    Fresh,
    /// Reopened by a session: its sequence and cursor, and its ladder results, stay.
    Session { offset: usize, len: usize, cursor: usize },
}

type LoadJob = Job<(), UiResult<OpenCapture>>;

/// A replay of the open capture: its stage as it goes, its report once done.
type ReplayJob = Job<String, UiResult<ReplayReport>>;

/// The replay of the open capture (`triage::replay`), run as a [`Job`] on
/// the shared GPU context.
#[derive(Default)]
pub struct ReplayRun {
    /// The capture folder the report or the error is of.
    pub of: Option<PathBuf>,
    pub result: Option<UiResult<ReplayReport>>,
    /// What runs now.
    pub stage: Option<String>,
    job: Option<ReplayJob>,
}

impl ReplayRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Replays `open`'s capture (the ladder runs too on an *engine* verdict).
    pub fn start(&mut self, open: &OpenCapture, wake: Waker) -> UiResult<()> {
        if self.is_busy() {
            return Err(UiError::refused("a replay is already running"));
        }
        let capture = open.capture.clone();
        let job = Job::spawn("replay", wake, move |r| {
            let ctx = crate::session::gpu::engine()?;
            let opts = ReplayOptions { context: Some(ctx), ..ReplayOptions::default() };
            replay(&capture, &opts, &mut |stage| _ = r.progress(stage.to_string()))
                .map_err(|e| UiError::refused(one_line(&format!("the replay failed: {e}"))))
        })
        .map_err(|e| UiError::refused(format!("cannot start the replay: {e}")))?;
        (self.of, self.result, self.stage, self.job) = (Some(open.path.clone()), None, None, Some(job));
        Ok(())
    }

    /// Takes the stages that arrived; the result once the replay ended.
    pub fn poll(&mut self) -> Option<&UiResult<ReplayReport>> {
        let polled = self.job.as_mut()?.poll();
        if let Some(s) = polled.progress.into_iter().last() {
            self.stage = Some(s);
        }
        let done = polled.done?;
        self.job = None;
        self.stage = None;
        self.result = Some(done.map_err(|e| UiError::refused(format!("the replay failed: {e}"))).and_then(|r| r));
        self.result.as_ref()
    }

    /// The report or error of the capture at `path`, if one was replayed.
    pub fn of(&self, path: &Path) -> Option<&UiResult<ReplayReport>> {
        self.result.as_ref().filter(|_| self.of.as_deref() == Some(path))
    }
}

/// The open capture, and the one being read.
#[derive(Default)]
pub struct CaptureRun {
    pub open: Option<Arc<OpenCapture>>,
    pub replay: ReplayRun,
    job: Option<(Opening, LoadJob)>,
}

impl CaptureRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Starts reading `path` (replacing a read in flight).
    pub fn load(&mut self, path: PathBuf, opening: Opening, wake: Waker) -> UiResult<()> {
        let job = Job::spawn("capture", wake, move |_| prepare(&path))
            .map_err(|e| UiError::refused(format!("cannot start reading the capture: {e}")))?;
        self.job = Some((opening, job));
        Ok(())
    }

    /// The read's result once it ended (the app applies a success).
    pub fn poll(&mut self) -> Option<(Opening, UiResult<OpenCapture>)> {
        let (opening, job) = self.job.as_mut()?;
        let done = job.poll().done?;
        let opening = *opening;
        self.job = None;
        Some((opening, done.map_err(|e| UiError::refused(format!("cannot open the capture: {e}"))).and_then(|r| r)))
    }
}

/// The captures of a training run: the `step_NNNNNN` folders of the
/// `captures/` folder next to its log (`log` is the `log.jsonl` or the run's
/// directory), by step. No such folder: none.
pub fn log_captures(log: &Path) -> UiResult<BTreeMap<u64, PathBuf>> {
    let dir = if log.is_dir() { log } else { log.parent().unwrap_or(Path::new(".")) };
    let list = capture::list(&dir.join(capture::CAPTURES_DIR)).map_err(|e| one_line(&e.to_string()))?;
    Ok(list.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step folders of `captures/` next to the log, by step; neither a
    /// half-written capture nor anything else in the folder.
    #[test]
    fn log_captures_lists_the_step_folders_next_to_the_log() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log.jsonl");
        std::fs::write(&log, "").unwrap();
        assert!(log_captures(&log).unwrap().is_empty(), "no captures folder: none");
        let caps = d.path().join(capture::CAPTURES_DIR);
        for name in ["step_000120", "step_000003", ".tmp.step_000004.1.0", "step_abc"] {
            std::fs::create_dir_all(caps.join(name)).unwrap();
        }
        std::fs::write(caps.join("step_000050"), "a file, not a capture").unwrap();
        let want: BTreeMap<u64, PathBuf> = [(3, caps.join("step_000003")), (120, caps.join("step_000120"))].into();
        assert_eq!(log_captures(&log).unwrap(), want);
        assert_eq!(log_captures(d.path()).unwrap(), want, "the run's directory works too");
    }

    #[test]
    fn only_persistent_faults_are_planted_in_the_ladder() {
        assert_eq!(planted_fault("persistent=reset_before_matmul"), Some(EngineFault::ResetBeforeMatmul));
        assert_eq!(planted_fault("transient=reset_before_matmul"), None);
        assert_eq!(planted_fault("persistent=no_such_fault"), None);
        assert_eq!(planted_fault("nan_grad"), None);
        assert_eq!(planted_fault("persistent=mask_dropped@9"), Some(EngineFault::MaskDropped));
        assert_eq!(planted_fault("persistent"), Some(crate::train::inject::DEFAULT_PERSISTENT));
    }
}

//! The long runs the app starts and polls: the worker's trace of the
//! sequence, the ladder, the bisect and the audit (and reading a training log).

use crate::ui::error::UiResult;
use std::sync::Arc;
use std::time::Instant;

use super::{App, Running, waker};
use crate::session::results::{LadderInput, Planted};
use crate::session::state::FaultTool;
use crate::ui::diagnose::RowJob;
use crate::ui::ladder_run::LadderJob;
use crate::ui::panels::status::Level;
use crate::ui::worker::{Job as TraceJob, Report};

impl App {
    pub(super) fn poll_worker(&mut self) {
        for report in self.worker.poll() {
            match report {
                Report::Progress { generation, stage } => {
                    if let Some(r) = self.running.as_mut().filter(|r| r.generation == generation) {
                        r.stage = stage;
                    }
                }
                Report::Done { generation, result } => {
                    if self.running.as_ref().is_none_or(|r| r.generation != generation) {
                        continue; // superseded
                    }
                    self.running = None;
                    match result {
                        Ok(c) => {
                            self.state.cursor = self.state.cursor.min(c.t.saturating_sub(1));
                            self.state.head = self.state.head.min(c.cfg.heads.saturating_sub(1));
                            if self.message.as_ref().is_none_or(|m| m.level == Level::Info) {
                                let text = format!("Computed {} positions in {:.2} s", c.t, c.elapsed.as_secs_f32());
                                self.say(Level::Info, text);
                            }
                            self.computed = Some(Arc::from(c));
                        }
                        Err(e) => self.say(Level::Error, format!("cannot compute the trace: {e}")),
                    }
                }
            }
        }
    }

    /// Submits the current settings to the worker.
    pub(super) fn run(&mut self) {
        self.generation += 1;
        self.running = Some(Running { generation: self.generation, stage: "queued", started: Instant::now() });
        self.worker.submit(TraceJob {
            generation: self.generation,
            dataset: self.dataset.clone(),
            config: self.state.config,
            seed: self.state.seed,
            offset: self.state.offset,
            len: self.state.len,
            weights: self.weights(),
            gpu: self.state.gpu_trace,
            token_cap: self.state.token_cap,
            capture: self.capture.open.as_ref().map(|o| o.capture.clone()),
        });
    }

    /// Starts the ladder on the sequence shown.
    pub(super) fn run_ladder(&mut self) {
        if self.ladder.is_busy() {
            return;
        }
        let capture = self.capture.open.clone();
        // With a capture open the ladder runs on its batch, not on the row shown.
        let tokens = match (&capture, self.dataset.window(self.state.offset, self.state.len)) {
            (Some(_), _) => Vec::new(),
            (None, Ok(t)) => t,
            (None, Err(e)) => return self.say(Level::Error, format!("cannot run the ladder: {e}")),
        };
        let engine_fault = self.state.fault(FaultTool::Ladder);
        let input = LadderInput {
            capture: capture.as_ref().map(|c| c.describe()),
            config: self.state.config,
            seed: self.state.seed,
            dataset_hash: Some(self.dataset.content_hash()),
            offset: self.state.offset,
            len: self.state.len,
            checkpoint: self.state.checkpoint.clone(),
            fault: engine_fault.map(Planted::Engine),
        };
        let job = LadderJob {
            input,
            tokens,
            engine_fault,
            precision: self.state.precision,
            precision_map: self.state.precision_map.clone(),
            token_cap: self.state.token_cap,
            capture: capture.map(|c| c.capture.clone()),
            weights: self.weights(),
        };
        self.ladder.start(crate::ladder::Rung::ALL.to_vec(), job, waker(&self.ctx_slot));
        match engine_fault {
            Some(f) => self.say(Level::Info, format!("Running the ladder with the fault {} planted…", f.name())),
            None => self.say(Level::Info, "Running the ladder…"),
        }
    }

    /// The sequence's row from its offset, `len` tokens, for a bisect or an audit.
    fn row_job(&self, len: usize, tool: FaultTool) -> UiResult<RowJob> {
        let tokens = self.dataset.window(self.state.offset, len)?;
        Ok(RowJob {
            config: self.state.config,
            seed: self.state.seed,
            weights: self.weights(),
            tokens,
            fault: self.state.fault(tool),
            capture: self.capture.open.as_ref().map(|o| o.capture.clone()),
        })
    }

    pub(super) fn run_bisect(&mut self) {
        if self.bisect.is_busy() {
            return;
        }
        let max_len = self.state.bisect_max_len.max(1);
        let started = self
            .row_job(max_len + 1, FaultTool::Bisect)
            .and_then(|job| self.bisect.start(job, max_len, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, format!("Bisecting lengths up to {max_len}…")),
            Err(e) => self.say(Level::Error, format!("cannot run the bisect: {e}")),
        }
    }

    /// A precision bisect on the sequence's row (the ladder's fault planted).
    pub(super) fn run_precision_bisect(&mut self) {
        if self.precision_bisect.is_busy() {
            return;
        }
        let started = self
            .row_job(self.state.len, FaultTool::Ladder)
            .and_then(|job| self.precision_bisect.start(job, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, "Bisecting the stages' precisions…"),
            Err(e) => self.say(Level::Error, format!("cannot run the precision bisect: {e}")),
        }
    }

    pub(super) fn run_audit(&mut self) {
        if self.audit.is_busy() {
            return;
        }
        let started =
            self.row_job(self.state.len, FaultTool::Audit).and_then(|job| self.audit.start(job, waker(&self.ctx_slot)));
        match started {
            Ok(()) => self.say(Level::Info, "Auditing the CPU and GPU gradient contributions…"),
            Err(e) => self.say(Level::Error, format!("cannot run the audit: {e}")),
        }
    }

    pub(super) fn poll_diagnostics(&mut self) {
        match self.bisect.poll() {
            Some(Ok(r)) => {
                let text = match (r.smallest_failing, &r.failure) {
                    (Some(l), Some(f)) => format!(
                        "Bisect: smallest failing length {l} (rung {}, position {})",
                        f.rung.as_deref().unwrap_or("-"),
                        f.position.map_or("-".into(), |p| p.to_string())
                    ),
                    _ => "Bisect: every length passed".to_string(),
                };
                let level = if r.smallest_failing.is_some() { Level::Result } else { Level::Info };
                self.say(level, text);
                self.state.bisect = Some(r);
            }
            Some(Err(e)) => self.say(Level::Error, format!("the bisect failed: {e}")),
            None => {}
        }
        match self.precision_bisect.poll() {
            Some(Ok(())) => {
                let r = self.precision_bisect.report.as_ref().expect("kept on success");
                let keep = if r.keep_f32.is_empty() { "nothing".to_string() } else { r.keep_f32.join(", ") };
                let level = if r.keep_f32.is_empty() { Level::Info } else { Level::Result };
                self.say(level, format!("Precision bisect: {:?}; keep in f32: {keep}", r.outcome));
            }
            Some(Err(e)) => self.say(Level::Error, format!("the precision bisect failed: {e}")),
            None => {}
        }
        match self.audit.poll() {
            Some(Ok(())) => {
                let r = self.audit.report.as_deref().expect("kept on success");
                let off = r.tensors.iter().filter(|t| t.verdict != crate::ladder::audit::Verdict::Noise).count();
                let level = if off > 0 { Level::Result } else { Level::Info };
                self.say(level, format!("Audit: {} tensors, {off} outside the f32 envelope", r.tensors.len()));
            }
            Some(Err(e)) => self.say(Level::Error, format!("the audit failed: {e}")),
            None => {}
        }
        match self.train_log.poll() {
            Some(Ok((path, said))) => {
                self.state.train_log = Some(path);
                self.say(Level::Info, said);
            }
            Some(Err(e)) => self.say(Level::Error, format!("cannot load the training log: {e}")),
            None => {}
        }
        match self.mutation.poll() {
            Some(Ok(said)) => self.say(Level::Info, said),
            Some(Err(e)) => self.say(Level::Error, format!("cannot load the campaign: {e}")),
            None => {}
        }
    }
}

impl crate::ui::ladder_run::LadderView {
    /// The status bar's line once the ladder finished: a failing rung is a
    /// result (the ladder doing its job), a rung that could not run an error.
    pub fn verdict(&self) -> (Level, String) {
        use crate::ladder::{ALL_RUNGS, Status};
        let first = ALL_RUNGS.iter().enumerate().find_map(|(i, id)| match self.results.get(*id) {
            Some(Err(e)) => Some((i, *id, Err(e.as_str()))),
            Some(Ok(r)) if r.status == Status::Fail => Some((i, *id, Ok(()))),
            _ => None,
        });
        let failed = ALL_RUNGS
            .iter()
            .filter(|id| self.results.get(**id).is_some_and(|r| r.as_ref().is_ok_and(|r| r.status == Status::Fail)))
            .count();
        match first {
            Some((i, id, Ok(()))) => {
                let more = if failed > 1 { format!(" ({failed} rungs failed)") } else { String::new() };
                (Level::Result, format!("Ladder: rung {} {id} failed first{more}", i + 1))
            }
            Some((i, id, Err(e))) => (Level::Error, format!("Ladder: rung {} {id} could not run: {e}", i + 1)),
            None => match &self.end_to_end {
                Some(Ok(e)) if e.status == Status::Fail => {
                    (Level::Result, "Ladder: every rung passed; the end-to-end step failed".to_string())
                }
                Some(Err(e)) => (Level::Error, format!("Ladder: the end-to-end step could not run: {e}")),
                _ => {
                    let not_run =
                        self.results.values().filter(|r| r.as_ref().is_ok_and(|r| r.status == Status::NotRun)).count();
                    let tail =
                        if not_run > 0 { format!(" ({not_run} could not run on this device)") } else { String::new() };
                    (Level::Info, format!("Ladder finished: every implemented rung passed{tail}"))
                }
            },
        }
    }
}

//! A precision bisect in the GUI (`ladder::precision_bisect` on a `Job`): the
//! probes as they arrive, the report once it ended.

use crate::ui::error::{UiError, UiResult};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use crate::ladder::{MapProbe, Mode, PrecisionBisectReport, PrecisionBisectSpec, Setup};
use crate::session::gpu;
use crate::session::job::{Job, Waker};
use crate::step::Precision;
use crate::ui::diagnose::RowJob;

/// A precision bisect: its probes so far, the last report.
#[derive(Default)]
pub struct PrecisionBisectRun {
    pub probes: Vec<MapProbe>,
    pub report: Option<PrecisionBisectReport>,
    pub started: Option<Instant>,
    job: Option<Job<MapProbe, UiResult<PrecisionBisectReport>>>,
}

impl PrecisionBisectRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Bisects the stages' precisions on `job`'s row (rungs 2-11 isolated and the gate).
    pub fn start(&mut self, job: RowJob, wake: Waker) -> UiResult<()> {
        if self.is_busy() {
            return Err(UiError::refused("a precision bisect is already running"));
        }
        self.probes.clear();
        let running = Job::spawn("precision-bisect", wake, move |r| {
            let ctx = gpu::engine()?;
            let (cfg, params) = job.model()?;
            let batch = crate::dataset::Batch::from_rows(&[&job.tokens])?;
            let opts = job.capture.as_ref().map_or_else(Default::default, |c| c.meta.optim);
            let batch = job.capture.as_ref().map_or(batch, |c| c.batch.clone());
            let setup = Setup { cfg, params, batch, opts, mode: Mode::Isolated, precision: Precision::F16 };
            // An open capture's step ran at its own loss scale: the probes too.
            let loss_scale = job.capture.as_ref().map(|c| c.meta.loss_scale.scale);
            let gemm_choice = crate::step::GemmChoice::Auto;
            let spec = PrecisionBisectSpec { setup, gemm_choice, fault: job.fault, loss_scale };
            let cancel = AtomicBool::new(false);
            crate::ladder::precision_bisect(&ctx, &spec, &cancel, |p| {
                r.progress(p.clone());
            })
            .map_err(UiError::from)
        })
        .map_err(|e| UiError::refused(format!("cannot start the precision bisect thread: {e}")))?;
        self.started = Some(running.started());
        self.job = Some(running);
        Ok(())
    }

    /// Takes the probes that arrived; the result once the bisect ended.
    pub fn poll(&mut self) -> Option<UiResult<()>> {
        let polled = self.job.as_mut()?.poll();
        self.probes.extend(polled.progress);
        let done = polled.done?;
        self.job = None;
        match done.map_err(UiError::from).and_then(|r| r) {
            Ok(r) => {
                self.report = Some(r);
                Some(Ok(()))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

//! Ladder runs for the GUI: each run has a thread of its own that opens the
//! Vulkan device, runs the asked rungs one by one on the CPU reference and the
//! GPU, and reports each rung as it finishes. The UI polls the reports.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

use crate::ladder::{self, Precision, RungResult};
use crate::model::Config;
use crate::vk::{Context, ContextOptions, ops::GemmChoice};

enum Report {
    Started(&'static str),
    Finished(&'static str, Result<RungResult, String>),
    Done,
}

/// What the ladder panel shows: the last result of every rung run so far.
#[derive(Default)]
pub struct LadderView {
    pub results: BTreeMap<&'static str, Result<RungResult, String>>,
    pub running: Option<&'static str>,
    pub started: Option<Instant>,
    rx: Option<Receiver<Report>>,
}

impl LadderView {
    pub fn is_busy(&self) -> bool {
        self.rx.is_some()
    }

    /// Starts a run of `rungs` (implemented ones; others are skipped) on the
    /// shapes of `cfg`. `wake` is called after each report.
    pub fn start(&mut self, rungs: Vec<&'static str>, cfg: Config, wake: Box<dyn Fn() + Send>) {
        if self.is_busy() {
            return;
        }
        let (tx, rx) = channel();
        self.rx = Some(rx);
        self.started = Some(Instant::now());
        let spawned = std::thread::Builder::new().name("dualscope-ladder".into()).spawn(move || {
            let send = |r: Report| {
                let _ = tx.send(r);
                wake();
            };
            let ctx = Context::new(&ContextOptions::default());
            for id in rungs.into_iter().filter(|id| ladder::IMPLEMENTED.contains(id)) {
                send(Report::Started(id));
                let result = match &ctx {
                    Ok(ctx) => {
                        ladder::run_rung(ctx, id, &cfg, Precision::F32, 1, GemmChoice::Auto).map_err(|e| e.to_string())
                    }
                    Err(e) => Err(format!("no GPU engine: {e}")),
                };
                send(Report::Finished(id, result));
            }
            send(Report::Done);
        });
        if let Err(e) = spawned {
            self.rx = None;
            for id in ladder::IMPLEMENTED {
                self.results.insert(id, Err(format!("cannot start the ladder thread: {e}")));
            }
        }
    }

    /// Applies the reports that have arrived; true when the run ended.
    pub fn poll(&mut self) -> bool {
        let Some(rx) = &self.rx else { return false };
        let mut ended = false;
        for r in rx.try_iter() {
            match r {
                Report::Started(id) => self.running = Some(id),
                Report::Finished(id, result) => {
                    self.results.insert(id, result);
                    self.running = None;
                }
                Report::Done => ended = true,
            }
        }
        if ended {
            self.rx = None;
            self.running = None;
        }
        ended
    }
}

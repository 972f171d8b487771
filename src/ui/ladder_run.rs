//! Ladder runs for the GUI: each run has a thread of its own that opens the
//! Vulkan device, runs the asked rungs one by one on the CPU reference and the
//! GPU, and reports each rung as it finishes. The UI polls the reports.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

use std::sync::Arc;

use crate::ladder::{self, EndToEnd, ModelLadder, Precision, RungResult};
use crate::model::{Config, Params};
use crate::vk::{Context, ContextOptions, ops::GemmChoice};

enum Report {
    Started(&'static str),
    Finished(&'static str, Result<RungResult, String>),
    EndToEnd(Result<EndToEnd, String>),
    Done,
}

/// The model rungs' inputs: a seeded init and the config's batch of random
/// windows from the embedded dataset.
fn setup(cfg: &Config) -> Result<ladder::Setup, String> {
    let ds = crate::dataset::synthetic::default_dataset();
    let batch = ds.random_windows(1, cfg.batch, cfg.seq_len + 1).map_err(|e| e.to_string())?;
    Ok(ladder::Setup {
        cfg: cfg.clone(),
        params: Params::init(cfg, 1),
        batch,
        opts: crate::cpu::StepOptions::default(),
        mode: ladder::Mode::Isolated,
        precision: Precision::F32,
    })
}

/// What the ladder panel shows: the last result of every rung run so far.
#[derive(Default)]
pub struct LadderView {
    pub results: BTreeMap<&'static str, Result<RungResult, String>>,
    pub running: Option<&'static str>,
    pub end_to_end: Option<Result<EndToEnd, String>>,
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
            let ctx = Context::new(&ContextOptions::default()).map(Arc::new).map_err(|e| format!("no GPU engine: {e}"));
            let mut model: Option<Result<ModelLadder, String>> = None;
            for id in rungs {
                send(Report::Started(id));
                let result = match (&ctx, id) {
                    (Err(e), _) => Err(e.clone()),
                    (Ok(ctx), "gemm") => {
                        ladder::run_rung(ctx, id, &cfg, Precision::F32, 1, GemmChoice::Auto).map_err(|e| e.to_string())
                    }
                    (Ok(ctx), _) => {
                        let m = model.get_or_insert_with(|| {
                            ModelLadder::new(ctx, setup(&cfg)?).map_err(|e| format!("the model ladder: {e}"))
                        });
                        match m {
                            Ok(m) => m.run_rung(id).map_err(|e| e.to_string()),
                            Err(e) => Err(e.clone()),
                        }
                    }
                };
                send(Report::Finished(id, result));
            }
            if let Some(m) = model.as_mut() {
                send(Report::EndToEnd(match m {
                    Ok(m) => m.end_to_end().map_err(|e| e.to_string()),
                    Err(e) => Err(e.clone()),
                }));
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
                Report::EndToEnd(r) => self.end_to_end = Some(r),
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

//! Ladder runs for the GUI: each run has a thread of its own that opens the
//! Vulkan device, runs the asked rungs one by one on the CPU reference and the
//! GPU, and reports each rung as it finishes, with every tensor it compared
//! (for the inspector). The UI polls the reports.
//!
//! The ladder runs on the sequence the GUI shows: its tokens as one row, the
//! model initialised from the GUI's seed and config.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Instant;

use super::inspect::InspectedTensor;
use super::saved::{LadderInput, RungTensors, SavedLadder, SavedRung};
use crate::dataset::Batch;
use crate::ladder::{self, EndToEnd, ModelLadder, Precision, RungResult};
use crate::vk::engine::Fault as EngineFault;
use crate::vk::{Context, ContextOptions, ops::GemmChoice};

/// How a planted engine fault is named in [`LadderInput::fault`].
pub const ENGINE_FAULT_PREFIX: &str = "engine fault ";

pub enum Report {
    Started(&'static str),
    Finished(&'static str, Result<RungResult, String>, Vec<InspectedTensor>),
    EndToEnd(Result<EndToEnd, String>),
    Done,
}

/// Changes a tensor's values in place.
pub type Corrupt = Box<dyn Fn(&mut [f32]) + Send>;

/// A corrupted weight: a fault injected into the GPU's copy of a tensor
/// before the rungs run (the example sessions use one; the GUI itself never
/// does). Not to be confused with the engine's fault catalogue
/// ([`EngineFault`]), which the GUI plants through [`LadderJob::engine_fault`].
pub struct Fault {
    /// A device tensor name, e.g. `param.gru.weight_hh_l1`.
    pub tensor: String,
    /// Says what was done, saved with the results.
    pub describe: String,
    pub corrupt: Corrupt,
}

/// What a run needs: what it runs on, and the row's tokens.
#[derive(Clone)]
pub struct LadderJob {
    pub input: LadderInput,
    pub tokens: Vec<u8>,
    /// A bug from the engine's fault catalogue switched on for every rung.
    pub engine_fault: Option<EngineFault>,
    /// The ladder's precision: f32, or the mixed-precision step (f16/bf16
    /// products, f32 accumulation) for every rung.
    pub precision: Precision,
    /// The per-token guard's cap for rungs 2-11.
    pub token_cap: Option<f64>,
}

fn setup(job: &LadderJob) -> Result<ladder::Setup, String> {
    let cfg = job.input.config.config();
    let batch = Batch::from_rows(&[&job.tokens]).map_err(|e| e.to_string())?;
    let params = super::worker::params(job.input.config, job.input.seed, job.input.checkpoint.as_deref())?;
    Ok(ladder::Setup {
        cfg: cfg.clone(),
        params,
        batch,
        opts: crate::cpu::StepOptions { token_cap: job.token_cap, ..Default::default() },
        mode: ladder::Mode::Isolated,
        precision: job.precision,
    })
}

/// The tensors a rung compared, with their statistics (built here, off the UI thread).
fn inspected(m: &mut ModelLadder, id: &str) -> Vec<InspectedTensor> {
    m.take_tensors(id).into_iter().map(|t| InspectedTensor::new(t.name, t.shape, t.cpu, t.gpu, t.f64)).collect()
}

/// Runs `rungs` and the end-to-end gate, reporting as it goes. Blocking: the
/// GUI calls it on a thread of its own; the example-session generator directly.
pub fn run(job: &LadderJob, rungs: &[&'static str], fault: Option<&Fault>, send: &dyn Fn(Report)) {
    let cfg = job.input.config.config();
    let ctx = Context::new(&ContextOptions::default()).map(Arc::new).map_err(|e| format!("no GPU engine: {e}"));
    let mut model: Option<Result<ModelLadder, String>> = None;
    for &id in rungs {
        send(Report::Started(id));
        let (result, tensors) = match (&ctx, id) {
            (Err(e), _) => (Err(e.clone()), Vec::new()),
            (Ok(ctx), "gemm") => (
                ladder::run_rung_with_fault(ctx, id, &cfg, job.precision, 1, GemmChoice::Auto, job.engine_fault)
                    .map_err(|e| e.to_string()),
                Vec::new(),
            ),
            (Ok(ctx), _) => {
                let m = model.get_or_insert_with(|| {
                    let mut m = ModelLadder::new(ctx, setup(job)?).map_err(|e| format!("the model ladder: {e}"))?;
                    if job.engine_fault.is_some() {
                        m.set_fault(job.engine_fault);
                    }
                    if let Some(f) = fault {
                        inject(&mut m, f)?;
                    }
                    Ok(m)
                });
                match m {
                    Ok(m) => {
                        let r = m.run_rung(id).map_err(|e| e.to_string());
                        let t = inspected(m, id);
                        (r, t)
                    }
                    Err(e) => (Err(e.clone()), Vec::new()),
                }
            }
        };
        send(Report::Finished(id, result, tensors));
    }
    if let Some(m) = model.as_mut() {
        send(Report::EndToEnd(match m {
            Ok(m) => m.end_to_end().map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        }));
    }
    send(Report::Done);
}

fn inject(m: &mut ModelLadder, f: &Fault) -> Result<(), String> {
    let e = m.engine();
    let mut v = e.read_named(&[&f.tensor]).map_err(|e| e.to_string())?.pop().unwrap_or_default();
    (f.corrupt)(&mut v);
    e.write_named(&f.tensor, &v).map_err(|e| format!("injecting the fault into {}: {e}", f.tensor))
}

/// What the ladder panel shows: the last result of every rung run so far.
#[derive(Default)]
pub struct LadderView {
    pub results: BTreeMap<String, Result<RungResult, String>>,
    /// Every tensor each rung compared.
    pub tensors: RungTensors,
    pub running: Option<&'static str>,
    pub end_to_end: Option<Result<EndToEnd, String>>,
    /// What the results were computed on (`None` before any run).
    pub input: Option<LadderInput>,
    pub started: Option<Instant>,
    rx: Option<Receiver<Report>>,
}

impl LadderView {
    pub fn is_busy(&self) -> bool {
        self.rx.is_some()
    }

    /// Starts a run of `rungs` on `job`. `wake` is called after each report.
    pub fn start(&mut self, rungs: Vec<&'static str>, job: LadderJob, wake: Box<dyn Fn() + Send>) {
        if self.is_busy() {
            return;
        }
        let (tx, rx) = channel();
        self.rx = Some(rx);
        self.started = Some(Instant::now());
        self.results.clear();
        self.tensors.clear();
        self.end_to_end = None;
        self.input = Some(job.input.clone());
        let spawned = std::thread::Builder::new().name("dualscope-ladder".into()).spawn(move || {
            let send = |r: Report| {
                let _ = tx.send(r);
                wake();
            };
            run(&job, &rungs, None, &send);
        });
        if let Err(e) = spawned {
            self.rx = None;
            for id in ladder::IMPLEMENTED {
                self.results.insert(id.to_string(), Err(format!("cannot start the ladder thread: {e}")));
            }
        }
    }

    /// Applies one report.
    pub fn apply(&mut self, r: Report) -> bool {
        match r {
            Report::Started(id) => self.running = Some(id),
            Report::Finished(id, result, tensors) => {
                self.results.insert(id.to_string(), result);
                if !tensors.is_empty() {
                    self.tensors.insert(id.to_string(), Arc::new(tensors));
                }
                self.running = None;
            }
            Report::EndToEnd(r) => self.end_to_end = Some(r),
            Report::Done => return true,
        }
        false
    }

    /// Applies the reports that have arrived; true when the run ended.
    pub fn poll(&mut self) -> bool {
        let Some(rx) = self.rx.take() else { return false };
        let mut ended = false;
        for r in rx.try_iter() {
            ended |= self.apply(r);
        }
        if ended {
            self.running = None;
        } else {
            self.rx = Some(rx);
        }
        ended
    }

    /// The results as a session saves them (`None` when nothing ran).
    pub fn to_saved(&self) -> Option<SavedLadder> {
        let input = self.input.clone()?;
        Some(SavedLadder {
            input,
            rungs: self
                .results
                .iter()
                .map(|(k, r)| (k.clone(), r.as_ref().map(SavedRung::from).map_err(|e| e.clone())))
                .collect(),
            end_to_end: self.end_to_end.as_ref().map(|r| r.as_ref().map(Into::into).map_err(|e| e.clone())),
        })
    }

    /// Shows saved results (and their tensors, where the side file had them).
    pub fn restore(&mut self, saved: SavedLadder, tensors: RungTensors) {
        self.rx = None;
        self.running = None;
        self.started = None;
        self.results =
            saved.rungs.iter().map(|(k, r)| (k.clone(), r.as_ref().map(Into::into).map_err(|e| e.clone()))).collect();
        self.end_to_end = saved.end_to_end.as_ref().map(|r| r.as_ref().map(Into::into).map_err(|e| e.clone()));
        self.input = Some(saved.input);
        self.tensors = tensors;
    }

    /// The engine fault the results were computed with, if any.
    pub fn planted(&self) -> Option<EngineFault> {
        let f = self.input.as_ref()?.fault.as_deref()?;
        EngineFault::parse(f.strip_prefix(ENGINE_FAULT_PREFIX)?)
    }

    /// The first rung, in ladder order, that failed or could not run.
    pub fn first_failed(&self) -> Option<&'static str> {
        ladder::ALL_RUNGS.iter().copied().find(|id| {
            self.results.get(*id).is_some_and(|r| r.as_ref().map_or(true, |r| r.status == ladder::Status::Fail))
        })
    }

    /// Forgets every result (a session without ladder results).
    pub fn clear(&mut self) {
        if !self.is_busy() {
            *self = LadderView::default();
        }
    }
}

//! Ladder runs for the GUI: a [`Job`] runs the asked rungs through the
//! library's runner ([`ladder::run()`]) on the shared Vulkan context, and
//! reports each rung as it finishes, with every tensor it compared (for the
//! inspector). The UI polls the reports.
//!
//! The ladder runs on the sequence the GUI shows: its tokens as one row, the
//! model initialised from the GUI's seed and config; or, with a capture open,
//! on the capture's whole batch and weights.

use crate::ui::error::UiResult;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::inspect::InspectedTensor;
use super::session::RungTensors;
use crate::capture::Capture;
use crate::dataset::Batch;
use crate::ladder::{self, Corruption, EndToEnd, Event, LadderSpec, OnError, Rung, RungResult};
use crate::session::gpu;
use crate::session::job::{Job, Waker};
use crate::session::results::{LadderInput, SavedLadder};
use crate::step::Fault as EngineFault;
use crate::step::Precision;

pub enum Report {
    Started(&'static str),
    Finished(&'static str, Result<RungResult, String>, Vec<InspectedTensor>),
    EndToEnd(Result<EndToEnd, String>),
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
    /// Each stage's precision for rungs 2-11 (None: the precision's step);
    /// ignored where its layers are not the model's.
    pub precision_map: Option<crate::step::PrecisionMap>,
    /// The per-token guard's cap for rungs 2-11.
    pub token_cap: Option<f64>,
    /// An open capture: the ladder runs on its whole batch and its weights
    /// (with its step's optimizer options) instead of `tokens` and the seed's model.
    pub capture: Option<Arc<Capture>>,
    /// The parameters of the preset (without a capture).
    pub weights: crate::session::weights::Weights,
}

/// The configuration the run checks: the capture's, or the chosen preset.
fn config(job: &LadderJob) -> crate::model::Config {
    job.capture.as_ref().map_or_else(|| job.input.config.config(), |c| c.config.clone())
}

fn setup(job: &LadderJob) -> UiResult<ladder::Setup> {
    if let Some(c) = &job.capture {
        return Ok(ladder::Setup {
            cfg: c.config.clone(),
            params: c.state.params.clone(),
            batch: c.batch.clone(),
            opts: crate::step::StepOptions { token_cap: job.token_cap, ..c.meta.optim },
            mode: ladder::Mode::Isolated,
            precision: job.precision,
        });
    }
    let cfg = job.input.config.config();
    let batch = Batch::from_rows(&[&job.tokens])?;
    let params = job.weights.params(job.input.config, job.input.seed)?;
    Ok(ladder::Setup {
        cfg: cfg.clone(),
        params,
        batch,
        opts: crate::step::StepOptions { token_cap: job.token_cap, ..Default::default() },
        mode: ladder::Mode::Isolated,
        precision: job.precision,
    })
}

/// The tensors a rung compared, with their statistics (built here, off the UI thread).
fn inspected(tensors: Vec<ladder::RungTensor>) -> Vec<InspectedTensor> {
    tensors.into_iter().map(|t| InspectedTensor::new(t.name, t.shape, t.cpu, t.gpu, t.f64)).collect()
}

/// Runs `rungs` and the end-to-end gate through [`ladder::run()`], reporting as
/// it goes; a rung that cannot run is reported with why. Blocking: the GUI
/// calls it in a [`Job`]; the example-session generator directly, with a
/// corrupted weight (the GUI itself never corrupts one).
pub fn run(job: &LadderJob, rungs: &[Rung], corruption: Option<Corruption>, send: &mut dyn FnMut(Report)) {
    let ctx = match gpu::engine() {
        Ok(ctx) => ctx,
        Err(e) => {
            for &r in rungs {
                send(Report::Started(r.id()));
                send(Report::Finished(r.id(), Err(e.clone()), Vec::new()));
            }
            return;
        }
    };
    let setup = match setup(job) {
        Ok(s) => s,
        Err(e) => return without_setup(&ctx, job, rungs, &e.to_string(), send),
    };
    let layers = setup.cfg.layers;
    let spec = LadderSpec {
        fault: job.engine_fault,
        precision_map: job.precision_map.clone().filter(|m| m.layers() == layers),
        corruption,
        on_error: OnError::Record,
        ..LadderSpec::new(rungs.to_vec(), setup)
    };
    // With `OnError::Record` every rung's error is an event; the run itself
    // cannot fail.
    let _ = ladder::run(&ctx, spec, |ev| match ev {
        Event::Started(r) => send(Report::Started(r.id())),
        Event::Finished(r, res, tensors) => {
            send(Report::Finished(r.id(), res.cloned().map_err(str::to_string), inspected(tensors)))
        }
        Event::EndToEnd(res) => send(Report::EndToEnd(res.cloned().map_err(str::to_string))),
    });
}

/// When the model's inputs cannot be built: `gemm` still runs (it needs only
/// the config); every model rung and the gate report why.
fn without_setup(
    ctx: &Arc<crate::engine::gpu::Context>,
    job: &LadderJob,
    rungs: &[Rung],
    why: &str,
    send: &mut dyn FnMut(Report),
) {
    let cfg = config(job);
    for &r in rungs {
        send(Report::Started(r.id()));
        let result = match r {
            Rung::Gemm => {
                ladder::run_gemm(ctx, &cfg, job.precision, 1, crate::step::GemmChoice::Auto, job.engine_fault)
                    .map_err(|e| e.to_string())
            }
            _ => Err(why.to_string()),
        };
        send(Report::Finished(r.id(), result, Vec::new()));
    }
    if rungs.iter().any(|r| *r != Rung::Gemm) {
        send(Report::EndToEnd(Err(why.to_string())));
    }
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
    job: Option<Job<Report, ()>>,
}

impl LadderView {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Starts a run of `rungs` on `job`. `wake` is called after each report.
    pub fn start(&mut self, rungs: Vec<Rung>, job: LadderJob, wake: Waker) {
        if self.is_busy() {
            return;
        }
        self.started = Some(Instant::now());
        self.results.clear();
        self.tensors.clear();
        self.end_to_end = None;
        self.input = Some(job.input.clone());
        match Job::spawn("ladder", wake, move |r| run(&job, &rungs, None, &mut |rep| _ = r.progress(rep))) {
            Ok(j) => self.job = Some(j),
            Err(e) => {
                for id in ladder::IMPLEMENTED {
                    self.results.insert(id.to_string(), Err(format!("cannot start the ladder thread: {e}")));
                }
            }
        }
    }

    /// Applies one report.
    pub fn apply(&mut self, r: Report) {
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
        }
    }

    /// Applies the reports that have arrived; true when the run ended.
    pub fn poll(&mut self) -> bool {
        let Some(job) = self.job.as_mut() else { return false };
        let polled = job.poll();
        for r in polled.progress {
            self.apply(r);
        }
        let ended = polled.done.is_some();
        if ended {
            self.job = None;
            self.running = None;
        }
        ended
    }

    /// The results as a session saves them (`None` when nothing ran).
    pub fn to_saved(&self) -> Option<SavedLadder> {
        let input = self.input.clone()?;
        Some(SavedLadder { input, rungs: self.results.clone(), end_to_end: self.end_to_end.clone() })
    }

    /// Shows saved results (and their tensors, where the side file had them).
    pub fn restore(&mut self, saved: SavedLadder, tensors: RungTensors) {
        self.job = None;
        self.running = None;
        self.started = None;
        self.results = saved.rungs;
        self.end_to_end = saved.end_to_end;
        self.input = Some(saved.input);
        self.tensors = tensors;
    }

    /// The engine fault the results were computed with, if any.
    pub fn planted(&self) -> Option<EngineFault> {
        self.input.as_ref()?.fault.as_ref()?.engine()
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

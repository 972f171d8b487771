//! One ladder run, as the CLI, the GUI and bisect do it: the rungs in the
//! order asked, rung 1 (`gemm`) on its own, rungs 2–11 through one
//! [`ModelLadder`] built before the first rung, then the end-to-end gate; the
//! Vulkan validation errors count against the run.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::result::{Counts, KernelName};
use super::{EndToEnd, LadderError, ModelLadder, PrecisionMap, Rung, RungResult, RungTensor, Setup, Status};
use crate::engine::gpu::Context;
use crate::step::Fault;
use crate::step::GemmChoice;

/// Changes a tensor's values in place.
pub type Corrupt = Arc<dyn Fn(&mut [f32]) + Send + Sync>;

/// Changes the GPU's copy of a tensor before the model rungs run: a bug
/// planted by hand (the GUI's example sessions), apart from the engine's
/// fault catalogue ([`Fault`]).
#[derive(Clone)]
pub struct Corruption {
    /// A device tensor name, e.g. `param.gru.weight_hh_l1`.
    pub tensor: String,
    pub corrupt: Corrupt,
}

/// What to do when a rung cannot run (an engine error, not a failed check).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnError {
    /// Return the error at once (the CLI).
    #[default]
    Stop,
    /// Record it as the rung's outcome and go on with the next (the GUI).
    Record,
}

/// What one run does.
#[derive(Clone)]
pub struct LadderSpec {
    /// The rungs, in the order they run.
    pub rungs: Vec<Rung>,
    /// What rungs 2–11 run on; its config and precision are also `gemm`'s.
    pub setup: Setup,
    /// The seed of the `gemm` rung's operands.
    pub gemm_seed: u64,
    /// The kernel every rung's products run on.
    pub gemm_choice: GemmChoice,
    /// A bug of the fault catalogue planted for every rung.
    pub fault: Option<Fault>,
    /// The GPU engine fills every buffer a step writes with NaN before each
    /// run (`--poison`), so that reading an unwritten value fails a rung.
    pub poison: bool,
    pub corruption: Option<Corruption>,
    /// Whether the end-to-end gate follows the model rungs (when any ran).
    pub end_to_end: bool,
    /// Stop after the first rung that fails (bisect's probes).
    pub stop_at_failure: bool,
    pub on_error: OnError,
    /// Whether the `gemm` rung's event carries its products' values (for
    /// `repeat`; the GUI's inspector does not keep them).
    pub gemm_tensors: bool,
    /// The loss scale of the GPU's backward and of the f16 headroom figures
    /// (`--loss-scale`; `None`: the precision's, see `ModelLadder::set_loss_scale`).
    pub loss_scale: Option<f64>,
    /// Each stage's precision for rungs 2–11 and the gate (None: the
    /// setup's precision, today's step); `--precision-map`.
    pub precision_map: Option<PrecisionMap>,
}

impl LadderSpec {
    /// `rungs` on `setup` as the CLI runs them: the automatic kernel, no
    /// fault, the end-to-end gate, errors stop the run.
    pub fn new(rungs: Vec<Rung>, setup: Setup) -> LadderSpec {
        LadderSpec {
            rungs,
            setup,
            gemm_seed: 1,
            gemm_choice: GemmChoice::Auto,
            fault: None,
            poison: false,
            corruption: None,
            end_to_end: true,
            stop_at_failure: false,
            on_error: OnError::Stop,
            gemm_tensors: false,
            loss_scale: None,
            precision_map: None,
        }
    }
}

/// What a run reports as it goes.
pub enum Event<'a> {
    Started(Rung),
    /// A rung's result, or why it could not run ([`OnError::Record`]), with
    /// the tensors it compared (for `gemm` only with [`LadderSpec::gemm_tensors`]).
    Finished(Rung, Result<&'a RungResult, &'a str>, Vec<RungTensor>),
    EndToEnd(Result<&'a EndToEnd, &'a str>),
}

/// A rung that could not run, and why ([`OnError::Record`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RungError {
    pub rung: Rung,
    pub error: String,
}

/// A run's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LadderReport {
    /// The rungs that ran, in order.
    pub rungs: Vec<RungResult>,
    /// The rungs that could not run.
    pub errors: Vec<RungError>,
    pub end_to_end: Option<EndToEnd>,
    /// Why the end-to-end gate could not run.
    pub end_to_end_error: Option<String>,
    /// Why the end-to-end gate did not run although asked for (this device
    /// lacks the kernel, see [`Status::NotRun`]); absent in older reports.
    #[serde(default)]
    pub end_to_end_not_run: Option<String>,
    /// The kernel the step's products ran on (the model rungs'), else the
    /// `gemm` rung's.
    #[serde(default)]
    pub gemm_path: Option<KernelName>,
    pub validation_errors: u64,
    /// What each stage of the model rungs ran in: the map given, or the
    /// precision's step on this device; absent where no model rung ran.
    #[serde(default)]
    pub precision_map: Option<PrecisionMap>,
    /// `fail` when a rung or the gate failed or could not run (an error), or
    /// the validation layers reported errors; else `not_run` when a rung, a
    /// case or the gate did not run here; else `pass`.
    pub status: Status,
}

/// A run's counts: the rungs and the cases by status, the rungs that could
/// not run (errors), and the gate's status (`not_run` when it did not run,
/// `fail` when it could not; `None` when it was not asked for).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub rungs: Counts,
    pub cases: Counts,
    pub errors: usize,
    pub end_to_end: Option<Status>,
}

impl LadderReport {
    pub fn summary(&self) -> Summary {
        let end_to_end = match (&self.end_to_end, &self.end_to_end_error, &self.end_to_end_not_run) {
            (Some(e), _, _) => Some(e.status),
            (None, Some(_), _) => Some(Status::Fail),
            (None, None, Some(_)) => Some(Status::NotRun),
            (None, None, None) => None,
        };
        Summary {
            rungs: Counts::of(self.rungs.iter().map(|r| r.status)),
            cases: Counts::of(self.rungs.iter().flat_map(|r| r.cases.iter().map(|c| c.status))),
            errors: self.errors.len(),
            end_to_end,
        }
    }
}

/// `spec` where its products' kernel cannot run on this device: every rung
/// reported as not run (with the cases it would have compared), and the gate
/// as not run; nothing is computed.
fn not_run(
    spec: &LadderSpec,
    path: crate::engine::gpu::GemmPath,
    why: &str,
    on_event: &mut impl FnMut(Event<'_>),
) -> LadderReport {
    let mut rungs = Vec::new();
    for &rung in &spec.rungs {
        on_event(Event::Started(rung));
        let r = super::coverage::not_run(rung, &spec.setup, path, why);
        on_event(Event::Finished(rung, Ok(&r), Vec::new()));
        rungs.push(r);
    }
    let gate = spec.end_to_end && spec.rungs.iter().any(|r| *r != Rung::Gemm);
    LadderReport {
        rungs,
        errors: Vec::new(),
        end_to_end: None,
        end_to_end_error: None,
        end_to_end_not_run: gate.then(|| why.to_string()),
        gemm_path: Some(path.name().into()),
        validation_errors: 0,
        precision_map: spec.precision_map.clone(),
        status: Status::NotRun,
    }
}

/// The model ladder of `spec`, the fault planted and the corruption made.
/// The error says what went wrong in the GUI's words ([`OnError::Record`]).
fn model_ladder(ctx: &Arc<Context>, spec: &LadderSpec) -> Result<ModelLadder, (LadderError, String)> {
    let map = spec.precision_map.clone();
    let mut m = ModelLadder::with_map(ctx, spec.setup.clone(), spec.gemm_choice, map).map_err(|e| {
        let why = format!("the model ladder: {e}");
        (e, why)
    })?;
    m.set_fault(spec.fault);
    m.set_loss_scale(spec.loss_scale).map_err(|e| {
        let why = e.to_string();
        (e, why)
    })?;
    m.engine_mut().set_poison(spec.poison);
    if let Some(c) = &spec.corruption {
        let e = m.engine();
        let read = e.read_named(&[&c.tensor]).map_err(|e| {
            let why = e.to_string();
            (LadderError::Vk(e), why)
        });
        let mut v = read?.pop().unwrap_or_default();
        (c.corrupt)(&mut v);
        e.write_named(&c.tensor, &v).map_err(|e| {
            let why = format!("injecting the fault into {}: {e}", c.tensor);
            (LadderError::Input(why.clone()), why)
        })?;
    }
    Ok(m)
}

/// Runs `spec` on `ctx`, calling `on_event` as each rung starts and ends.
pub fn run(
    ctx: &Arc<Context>,
    spec: LadderSpec,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<LadderReport, LadderError> {
    if let Some((path, why)) = super::coverage::unavailable_kernel(ctx, spec.setup.precision, spec.gemm_choice) {
        let mut report = not_run(&spec, path, &why, &mut on_event);
        report.validation_errors = ctx.validation_errors();
        if report.validation_errors > 0 {
            report.status = Status::Fail;
        }
        return Ok(report);
    }
    let record = spec.on_error == OnError::Record;
    // Built before the first rung, so that the CLI's errors come before any work.
    let mut model = if spec.rungs.iter().any(|r| *r != Rung::Gemm) {
        match model_ladder(ctx, &spec) {
            Ok(m) => Some(Ok(m)),
            Err((_, why)) if record => Some(Err(why)),
            Err((e, _)) => return Err(e),
        }
    } else {
        None
    };
    let mut rungs = Vec::new();
    let mut errors = Vec::new();
    for &rung in &spec.rungs {
        on_event(Event::Started(rung));
        let (result, tensors) = match (rung, model.as_mut()) {
            (Rung::Gemm, _) => {
                let s = &spec.setup;
                match super::gemm::run_kept(
                    ctx,
                    &s.cfg,
                    s.precision,
                    spec.gemm_seed,
                    spec.gemm_choice,
                    spec.fault,
                    spec.gemm_tensors,
                ) {
                    Ok((r, t)) => (Ok(r), t),
                    Err(e) => (Err(e), Vec::new()),
                }
            }
            (_, Some(Ok(m))) => {
                let r = m.run(rung);
                (r, m.take_rung_tensors(rung))
            }
            (_, Some(Err(why))) => {
                let error = why.clone();
                on_event(Event::Finished(rung, Err(&error), Vec::new()));
                errors.push(RungError { rung, error });
                continue;
            }
            (_, None) => unreachable!("a model rung builds the model ladder"),
        };
        match result {
            Ok(r) => {
                on_event(Event::Finished(rung, Ok(&r), tensors));
                let failed = r.status == Status::Fail;
                rungs.push(r);
                if failed && spec.stop_at_failure {
                    break;
                }
            }
            Err(e) if record => {
                let error = e.to_string();
                on_event(Event::Finished(rung, Err(&error), tensors));
                errors.push(RungError { rung, error });
            }
            Err(e) => return Err(e),
        }
    }
    let stopped = spec.stop_at_failure && rungs.iter().any(|r| r.status == Status::Fail);
    let (mut end_to_end, mut end_to_end_error) = (None, None);
    match model.as_mut() {
        Some(_) if !spec.end_to_end || stopped => {}
        Some(Ok(m)) => match m.end_to_end() {
            Ok(e) => {
                on_event(Event::EndToEnd(Ok(&e)));
                end_to_end = Some(e);
            }
            Err(e) if record => {
                let why = e.to_string();
                on_event(Event::EndToEnd(Err(&why)));
                end_to_end_error = Some(why);
            }
            Err(e) => return Err(e),
        },
        Some(Err(why)) => {
            on_event(Event::EndToEnd(Err(why)));
            end_to_end_error = Some(why.clone());
        }
        None => {}
    }
    let gemm_path = match &model {
        Some(Ok(m)) => Some(m.engine().gemm_path_now().name().into()),
        _ => rungs.iter().find_map(|r| r.gemm_path.clone()),
    };
    let precision_map = match &model {
        Some(Ok(m)) => Some(m.engine().precision_map()),
        _ => spec.precision_map.clone(),
    };
    let validation_errors = ctx.validation_errors();
    let failed = rungs.iter().any(|r| r.status == Status::Fail)
        || end_to_end.as_ref().is_some_and(|e| e.status == Status::Fail)
        || !errors.is_empty()
        || end_to_end_error.is_some()
        || validation_errors > 0;
    let not_run = rungs.iter().any(|r| r.status == Status::NotRun);
    Ok(LadderReport {
        rungs,
        errors,
        end_to_end,
        end_to_end_error,
        end_to_end_not_run: None,
        gemm_path,
        validation_errors,
        precision_map,
        status: if failed {
            Status::Fail
        } else if not_run {
            Status::NotRun
        } else {
            Status::Pass
        },
    })
}

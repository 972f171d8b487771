//! `replay`: runs a captured step again and says what made it go wrong.
//!
//! The step's loss and gradients (no optimizer) are computed from the
//! capture's weights and batch: twice on the GPU in the captured precision at
//! the captured loss scale, twice on the GPU in f32 (the same pair when the
//! capture is f32), on the CPU in f32 and in f64. A persistent engine fault
//! the run had planted (`meta.planted` = `persistent[=NAME]`) is planted in
//! the GPU engine again: it is part of the engine under test; the other
//! planted events (nan, spike, transient, f16_overflow) were events of the
//! run and are not (f16_overflow's effect is already in the captured loss
//! scale). A step of `train --carry-state` starts every run (both engines,
//! every precision) from the captured carried state. The rules of [`classify`] then pick the verdict; an *engine*
//! verdict runs the ladder on the same weights and batch.

// `!(err <= tol)` is deliberate: a NaN error must fail the check.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::TriageError;
use super::replay_runs::{self as runs};
pub use super::replay_runs::{Contract, F16_MAX, RunResult, StageFinding, TensorCheck, grad_tolerance, show_scale};
pub use super::verdict::{Facts, Verdict, classify};
use crate::capture::{Capture, META_FILE, Recorded, TokenGrad, dominant_positions_with, z_score};
use crate::dataset::{Dataset, DatasetError, show_path};
use crate::engine::EngineError;
use crate::engine::gpu::Context;
use crate::ladder::{self, LadderReport, Status};
use crate::step::Fault;
use crate::step::GemmChoice;
use crate::step::LossScale;
use crate::step::Precision;
use crate::train::ControllerConfig;

/// How a replay runs.
#[derive(Clone)]
pub struct ReplayOptions {
    /// How many dominant positions the report lists.
    pub top_k: usize,
    /// Whether an *engine* verdict runs the ladder on the capture.
    pub ladder: bool,
    /// The Vulkan context to run on (the GUI's shared one); `None` opens
    /// `device` (after the capture's dataset is checked).
    pub context: Option<Arc<Context>>,
    /// The device index to open without `context` (`None`: `DUALSCOPE_VK_DEVICE`, else the best).
    pub device: Option<usize>,
    /// Stages to run in another precision than the captured step's
    /// (`STAGE=f16|f32,…` over its default map, docs/precision.md): the
    /// captured-precision runs take it and are judged by its contract.
    pub precision_map: Option<String>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { top_k: 10, ladder: true, context: None, device: None, precision_map: None }
    }
}

/// One running level of the controller against the replayed norm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZScore {
    /// `global` or a parameter tensor.
    pub name: String,
    /// The f64 reference's norm.
    pub norm: f64,
    /// Deviations above the level (`capture::z_score` with the controller's
    /// `min_std`); `None` without history.
    pub z: Option<f64>,
    pub ln_mean: f64,
    pub ln_std: f64,
    pub n: u64,
}

/// The ladder's answer for an *engine* verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LadderFinding {
    /// The first failing rung's id (`end_to_end` when only the gate failed;
    /// `None` when nothing failed).
    pub first_failing: Option<String>,
    /// Its worst tensor (largest error relative to its tolerance).
    pub tensor: Option<String>,
    pub rel_l2: Option<f64>,
    pub tolerance: Option<f64>,
    pub report: LadderReport,
}

/// Everything a replay found; the `--json` output and what the GUI shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub step: u64,
    pub verdict: Verdict,
    /// The rule that matched (1–6, see [`classify`]).
    pub rule: u8,
    /// The verdict's reason, one line.
    pub reason: String,
    pub precision: Precision,
    /// The captured loss scale the captured-precision runs used.
    pub loss_scale: f64,
    /// The GPU kernel of the captured-precision runs.
    pub gemm_path: String,
    pub device: String,
    /// The planted event of the capture, as recorded.
    pub planted: Option<String>,
    /// The engine fault planted in the GPU engine for the replay.
    pub fault: Option<String>,
    /// GPU captured precision ×2, GPU f32 ×2 (when the capture is mixed),
    /// CPU f32, CPU f64.
    pub runs: Vec<RunResult>,
    pub recorded: Option<Recorded>,
    /// Largest first.
    pub z_scores: Vec<ZScore>,
    /// The top-k positions of `capture::dominant_positions`, largest first.
    pub dominant: Vec<TokenGrad>,
    /// Each row's share of `Σ_t ‖∂loss/∂e_t‖²`.
    pub row_shares: Vec<f64>,
    /// *precision*: the first stage that overflowed.
    pub stage: Option<StageFinding>,
    /// *engine*: the ladder on this batch and these weights.
    pub ladder: Option<LadderFinding>,
    /// What was found about the capture's dataset.
    pub dataset: String,
    /// One-line facts with numbers.
    pub evidence: Vec<String>,
    /// The precision map the captured-precision runs took (`--precision-map`), if one was given.
    #[serde(default)]
    pub precision_map: Option<String>,
}

impl ReplayReport {
    /// `verdict: data — both engines agree …`.
    pub fn verdict_line(&self) -> String {
        format!("verdict: {} — {}", self.verdict, self.reason)
    }

    pub fn exit_code(&self) -> i32 {
        self.verdict.exit_code()
    }
}

/// The engine fault `planted` names: `persistent=NAME`, or `persistent`
/// alone for the default (`reset_before_matmul`); other events plant none.
pub fn engine_fault(planted: Option<&str>) -> Result<Option<Fault>, TriageError> {
    let Some(p) = planted else { return Ok(None) };
    let p = p.split('@').next().unwrap_or(p).trim();
    if p == "persistent" {
        return Ok(Some(Fault::ResetBeforeMatmul));
    }
    match p.strip_prefix("persistent=") {
        None => Ok(None),
        Some(name) => Fault::parse(name).map(Some).ok_or_else(|| {
            let all: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            TriageError::Failed(format!(
                "{META_FILE}: planted: {p:?} names no engine fault; the faults are {}",
                all.join(", ")
            ))
        }),
    }
}

/// Checks the capture against its dataset file where that file can be read:
/// an error if it changed (naming the file and field), else a note saying
/// what was checked, or that the file is gone and the rows were not checked.
pub fn check_dataset(c: &Capture) -> Result<String, TriageError> {
    let d = &c.meta.dataset;
    let Some(path) = &d.path else {
        return Ok(format!("dataset {}: no file recorded; rows not checked against it", d.name));
    };
    let shown = show_path(std::path::Path::new(path));
    match Dataset::open(std::path::Path::new(path)) {
        Ok(ds) => {
            c.verify_dataset(&ds, &shown)?;
            Ok(format!(
                "dataset {shown}: content {} matches, {} rows cut again from their origins match",
                d.content_hash,
                c.meta.batch.origins.len()
            ))
        }
        Err(DatasetError::NotFound { .. }) => Ok(format!("dataset {shown} is gone: rows not checked against it")),
        Err(e) => Ok(format!("dataset {shown} cannot be read ({e}): rows not checked against it")),
    }
}

/// Replays `c` (see the module docs); `progress` hears what runs now.
pub fn replay(c: &Capture, opts: &ReplayOptions, progress: &mut dyn FnMut(&str)) -> Result<ReplayReport, TriageError> {
    let cfg = &c.config;
    let precision = c.meta.precision;
    let dataset = check_dataset(c)?;
    let fault = engine_fault(c.meta.planted.as_deref())?;
    let ctx = match &opts.context {
        Some(ctx) => ctx.clone(),
        None => Arc::new(crate::engine::open_context(opts.device)?),
    };
    let errors_before = ctx.validation_errors();
    let mut evidence = vec![dataset.clone()];
    let bad_weights: usize =
        c.state.params.tensors().iter().map(|t| t.data.iter().filter(|x| !x.is_finite()).count()).sum();
    if bad_weights > 0 {
        evidence.push(format!("the weights before the step hold {bad_weights} non-finite values"));
    }
    if let Some(k) = &c.carry {
        evidence.push(format!(
            "carried state: every run starts from the captured {} (h0 of {} layers, a prefix of {} positions)",
            crate::capture::CARRY_FILE,
            k.h0.len(),
            k.prefix_len
        ));
    }

    progress("CPU f64 reference");
    let reference = runs::reference(c)?;
    progress("CPU f32");
    let cpu32 = crate::engine::reference::grads_with::<f32>(
        cfg,
        &c.state.params,
        &c.batch,
        c.meta.optim.token_cap,
        c.carry.as_ref(),
    )?
    .0;
    let mut cpu32_run = runs::summarize(cfg, "cpu f32", "cpu", "f32", 1.0, cpu32.loss, &cpu32.grads);
    let cpu32_contract = runs::contract(cfg, None, Precision::F32, cpu32.loss, &cpu32.grads, &reference);
    cpu32_run.vs_f64 = Some(cpu32_contract.clone());

    // The captured precision at the captured loss scale, twice.
    let scale = c.state.scale.clone();
    let p = precision.name();
    let (mut engine, note) = runs::gpu_engine(&ctx, c, precision, &scale, fault)?;
    evidence.extend(note);
    // The user's map, else the one the captured step ran.
    let from_user = opts.precision_map.is_some();
    let map = match opts.precision_map.as_ref().or(c.meta.precision_map.as_ref()) {
        Some(_) if !precision.is_mixed() => {
            return Err(TriageError::Usage(format!(
                "--precision-map: the capture ran the {} step; a map applies to a mixed-precision capture",
                precision.name()
            )));
        }
        Some(text) => {
            let m =
                engine.precision_map().with(text).map_err(|e| TriageError::Usage(format!("--precision-map: {e}")))?;
            engine.set_precision_map(Some(m.clone()), GemmChoice::Auto).map_err(EngineError::from)?;
            evidence.push(format!("precision map: {m}"));
            Some(m)
        }
        None => None,
    };
    let gemm_path = engine.gemm_path_now().name().to_string();
    progress(&format!("GPU {p} run 1 of 2"));
    let a1 = runs::gpu_grads(&mut engine, c, &scale)?;
    progress(&format!("GPU {p} run 2 of 2"));
    let a2 = runs::gpu_grads(&mut engine, c, &scale)?;
    let stage = if precision.is_mixed() { runs::find_stage(&engine, precision, &a2.grads, scale.scale)? } else { None };
    drop(engine);
    let run = |name: &str, g: &crate::vk::engine::GpuGrads, prec: Precision, s: f64| {
        let mut r = runs::summarize(cfg, name, "gpu", prec.name(), s, g.loss, &g.grads);
        // The map is the captured-precision runs' (the f32 pair runs without it).
        let m = map.as_ref().filter(|_| prec == precision);
        r.vs_f64 = Some(runs::contract(cfg, m, prec, g.loss, &g.grads, &reference));
        r
    };
    let mut all = vec![run(&format!("gpu {p} #1"), &a1, precision, scale.scale)];
    all.push(run(&format!("gpu {p} #2"), &a2, precision, scale.scale));
    let captured_runs_differ = runs::bit_diff(cfg, &a1, &a2);
    let n_values = c.state.params.num_elements();
    let same_line = |p: &str, d: &Option<String>| match d {
        None => format!("gpu {p} runs 1 and 2: bit-identical (the loss and all {n_values} gradient values)"),
        Some(how) => format!("gpu {p} runs 1 and 2 differ: {how}"),
    };
    let mut same = vec![same_line(p, &captured_runs_differ)];

    // f32 at scale 1, twice (the same pair for an f32 capture).
    let (f32_contract, f32_runs_differ) = if precision.is_mixed() {
        let s1 = LossScale::fixed();
        let (mut e32, _) = runs::gpu_engine(&ctx, c, Precision::F32, &s1, fault)?;
        progress("GPU f32 run 1 of 2");
        let b1 = runs::gpu_grads(&mut e32, c, &s1)?;
        progress("GPU f32 run 2 of 2");
        let b2 = runs::gpu_grads(&mut e32, c, &s1)?;
        all.push(run("gpu f32 #1", &b1, Precision::F32, 1.0));
        all.push(run("gpu f32 #2", &b2, Precision::F32, 1.0));
        let d = runs::bit_diff(cfg, &b1, &b2);
        same.push(same_line("f32", &d));
        (all[2].vs_f64.clone().expect("set above"), d)
    } else {
        (all[0].vs_f64.clone().expect("set above"), None)
    };
    let validation = ctx.validation_errors() - errors_before;
    if validation > 0 {
        return Err(TriageError::Engine(EngineError::Validation(validation)));
    }
    all.push(cpu32_run);
    all.push(reference.result.clone());
    for r in &all {
        evidence.push(run_line(r));
    }
    evidence.extend(same);

    let mut facts = Facts { captured_runs_differ, f32_runs_differ, ..Facts::default() };
    facts.f32_out_of_contract = f32_verdict(&f32_contract, &cpu32_contract, &mut evidence);
    if precision.is_mixed() {
        let m = all[0].vs_f64.as_ref().expect("set above");
        // Non-finite gradients count where the reference's are finite.
        let non_finite = if reference.result.non_finite == 0 { all[0].non_finite } else { 0 };
        facts.mixed_out_of_contract = (!m.pass || non_finite > 0).then(|| {
            let mut s = format!("gpu {p} at loss scale {}: ", show_scale(scale.scale));
            if non_finite > 0 || !all[0].loss.is_finite() {
                s += &format!("{non_finite} gradient values non-finite, loss {:.6}; ", all[0].loss);
            }
            s += &m.line();
            if let Some(st) = &stage {
                s += &format!("; stage {} ({})", st.stage, st.tensor);
            }
            s
        });
        evidence.extend(stage.as_ref().map(StageFinding::line));
    }
    let recorded_run = if c.meta.engine == "cpu" { &all[all.len() - 2] } else { &all[0] };
    let rec_prec = if c.meta.engine == "cpu" { Precision::F32 } else { precision };
    facts.recorded_differs = match &map {
        // The user's map changes the step: what it recorded is not what ran here.
        Some(_) if from_user => {
            evidence.push("the recorded step is not compared: the precision map changes the step".into());
            None
        }
        _ => c.meta.recorded.as_ref().and_then(|rec| {
            evidence.push(runs::recorded_line(rec, recorded_run));
            runs::recorded_check(rec, recorded_run, cfg, rec_prec, &reference)
        }),
    };
    let z_scores = z_scores(c, &reference.result);
    facts.large = large(&z_scores, &reference.result, &mut evidence);
    planted_line(c, fault, &mut evidence);

    progress("dominant positions");
    let carry64 = c.carry.as_ref().map(crate::step::cast_carry::<f64>);
    let p64 = c.state.params.cast::<f64>();
    let (dominant, row_shares) =
        dominant_positions_with(cfg, &p64, &c.batch, &c.meta.batch.origins, opts.top_k, carry64.as_ref())?;
    share_lines(&row_shares, &dominant, &mut evidence);

    let (verdict, rule, reason) = classify(&facts);
    let ladder = if verdict == Verdict::Engine && opts.ladder {
        let f = run_ladder(&ctx, c, fault, progress)?;
        if c.carry.is_some() {
            evidence.push("the ladder ran the batch from a zero state (its rungs do not take a carried state)".into());
        }
        evidence.push(ladder_line(&f));
        Some(f)
    } else {
        None
    };
    Ok(ReplayReport {
        step: c.meta.step,
        verdict,
        rule,
        reason,
        precision,
        loss_scale: scale.scale,
        gemm_path,
        device: ctx.report().name.clone(),
        planted: c.meta.planted.clone(),
        fault: fault.map(|f| f.name().to_string()),
        runs: all,
        recorded: c.meta.recorded.clone(),
        z_scores,
        dominant,
        row_shares,
        stage,
        ladder,
        dataset,
        evidence,
        precision_map: map.map(|m| m.to_string()),
    })
}

/// `gpu f16 #1: loss 5.512345, grad norm 1.234e0, 0 non-finite; vs f64: …`.
fn run_line(r: &RunResult) -> String {
    let mut s = format!("{}: loss {:.6}, grad norm {:.4e}", r.name, r.loss, r.grad_norm);
    if r.non_finite > 0 {
        s += &format!(", {} gradient values non-finite", r.non_finite);
    }
    if let Some(c) = &r.vs_f64 {
        s += &format!("; vs f64: {}{}", c.line(), if c.pass { "" } else { " — OUT OF CONTRACT" });
    }
    s
}

/// Rule 2's fact: the f32 GPU leaves the contract, on the loss or on a
/// tensor where the f32 CPU itself stays within it. Where the f32 CPU is as
/// far off (an ill-conditioned tensor), that is f32 arithmetic, not the
/// engine: said in the evidence, not counted.
fn f32_verdict(gpu: &Contract, cpu: &Contract, evidence: &mut Vec<String>) -> Option<String> {
    let cpu_fails = |t: &str| cpu.failing.iter().any(|c| c.tensor == t);
    let (excused, own): (Vec<&TensorCheck>, Vec<&TensorCheck>) =
        gpu.failing.iter().partition(|t| t.new_non_finite == 0 && cpu_fails(&t.tensor));
    for t in &excused {
        evidence.push(format!(
            "{}: the f32 GPU's rel L2 {:.2e} is over {:.1e}, but so is the f32 CPU's: f32 arithmetic, not the engine",
            t.tensor, t.rel_l2, t.tolerance
        ));
    }
    let loss_own = gpu.loss_fails() && !cpu.loss_fails();
    if own.is_empty() && !loss_own {
        return None;
    }
    let mut parts = Vec::new();
    if loss_own {
        parts.push(format!("loss rel err {:.2e} over {:.1e}", gpu.loss_rel_err, gpu.loss_tolerance));
    }
    for t in own.iter().take(3) {
        let nf = if t.new_non_finite > 0 { format!(", {} non-finite", t.new_non_finite) } else { String::new() };
        parts.push(format!("{} rel L2 {:.2e} over {:.1e}{nf}", t.tensor, t.rel_l2, t.tolerance));
    }
    if own.len() > 3 {
        parts.push(format!("{} more tensors", own.len() - 3));
    }
    Some(parts.join("; "))
}

/// The reference's norms against the controller's levels, largest z first.
fn z_scores(c: &Capture, r: &RunResult) -> Vec<ZScore> {
    let min_std = ControllerConfig::default().min_std;
    let mut out: Vec<ZScore> = c
        .meta
        .norm_levels
        .iter()
        .filter_map(|l| {
            let norm =
                if l.name == "global" { r.grad_norm } else { r.tensor_norms.iter().find(|(n, _)| *n == l.name)?.1 };
            let z = z_score(l, norm, min_std);
            Some(ZScore { name: l.name.clone(), norm, z, ln_mean: l.ln_mean, ln_std: l.ln_std, n: l.n })
        })
        .collect();
    out.sort_by(|a, b| b.z.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.z.unwrap_or(f64::NEG_INFINITY)));
    out
}

/// Rule 5's fact: a norm above the controller's spike threshold, or an f64
/// reference that is itself non-finite.
fn large(z: &[ZScore], reference: &RunResult, evidence: &mut Vec<String>) -> Option<String> {
    let ctl = ControllerConfig::default();
    if !reference.grad_norm.is_finite() || !reference.loss.is_finite() {
        return Some(format!(
            "the f64 reference itself is non-finite (loss {}, grad norm {})",
            reference.loss, reference.grad_norm
        ));
    }
    if z.is_empty() {
        evidence.push("the capture has no running norm levels: whether the gradient is large cannot be said".into());
        return None;
    }
    let line = |s: &ZScore| {
        format!(
            "{} norm {:.4e} is z = {:.2} against its level {:.4e} (n = {}, threshold {})",
            s.name,
            s.norm,
            s.z.unwrap_or(f64::NAN),
            s.ln_mean.exp(),
            s.n,
            ctl.spike_z
        )
    };
    // The three largest, and the global norm's wherever it ranks.
    let shown = z.iter().enumerate().filter(|(i, s)| s.z.is_some() && (*i < 3 || s.name == "global"));
    evidence.extend(shown.map(|(_, s)| line(s)));
    let over: Vec<&ZScore> = z.iter().filter(|s| s.z.is_some_and(|z| z > ctl.spike_z)).collect();
    (!over.is_empty()).then(|| {
        let mut s = over.iter().take(3).map(|s| line(s)).collect::<Vec<_>>().join("; ");
        if over.len() > 3 {
            s += &format!("; {} more", over.len() - 3);
        }
        s
    })
}

fn planted_line(c: &Capture, fault: Option<Fault>, evidence: &mut Vec<String>) {
    if let Some(p) = &c.meta.planted {
        evidence.push(match fault {
            Some(f) => format!("planted in the run: {p}; the engine fault {f} is planted in the replay's GPU engine"),
            None => format!("planted in the run: {p}; an event of the run, not planted again"),
        });
    }
}

/// The top position and the rows holding most of the gradient.
fn share_lines(shares: &[f64], top: &[TokenGrad], evidence: &mut Vec<String>) {
    if let Some(t) = top.first() {
        let origin = match (t.document, t.offset) {
            (Some(d), Some(o)) => format!(", document {d} byte {o}"),
            _ => String::new(),
        };
        evidence.push(format!(
            "top position: row {} position {} (‖∂loss/∂e_t‖ = {:.4e}{origin}): {}",
            t.row, t.pos, t.norm, t.context
        ));
    }
    let mut rows: Vec<(usize, f64)> = shares.iter().copied().enumerate().collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    let list: Vec<String> = rows.iter().take(3).map(|(r, s)| format!("row {r} {:.1}%", 100.0 * s)).collect();
    evidence.push(format!("gradient share by row (Σ_t ‖∂loss/∂e_t‖²): {}", list.join(", ")));
}

/// The ladder on the capture's weights and whole batch, isolated, f32, with
/// the planted fault: its first failing rung and that rung's worst tensor.
fn run_ladder(
    ctx: &Arc<Context>,
    c: &Capture,
    fault: Option<Fault>,
    progress: &mut dyn FnMut(&str),
) -> Result<LadderFinding, TriageError> {
    let setup = ladder::Setup {
        cfg: c.config.clone(),
        params: c.state.params.clone(),
        batch: c.batch.clone(),
        opts: c.meta.optim,
        mode: ladder::Mode::Isolated,
        precision: Precision::F32,
    };
    let spec = ladder::LadderSpec {
        fault,
        on_error: ladder::OnError::Record,
        ..ladder::LadderSpec::new(ladder::Rung::ALL.to_vec(), setup)
    };
    let report = ladder::run(ctx, spec, |e| {
        if let ladder::Event::Started(r) = e {
            progress(&format!("ladder: {} ({})", r.id(), r.label()));
        }
    })?;
    let failed = report.rungs.iter().find(|r| r.status == Status::Fail);
    let worst = failed.and_then(|r| {
        r.cases
            .iter()
            .filter(|c| c.status == Status::Fail)
            .max_by(|a, b| (a.rel_l2 / a.tolerance).total_cmp(&(b.rel_l2 / b.tolerance)))
    });
    let gate_failed = report.end_to_end.as_ref().is_some_and(|e| e.status == Status::Fail);
    let first_failing = match (failed, report.errors.first()) {
        (Some(r), _) => Some(r.id.id().to_string()),
        (None, Some(e)) => Some(e.rung.id().to_string()),
        (None, None) if gate_failed => Some("end_to_end".to_string()),
        _ => None,
    };
    Ok(LadderFinding {
        first_failing,
        tensor: worst.map(|c| c.name.clone()),
        rel_l2: worst.map(|c| c.rel_l2),
        tolerance: worst.map(|c| c.tolerance),
        report,
    })
}

fn ladder_line(f: &LadderFinding) -> String {
    match (&f.first_failing, &f.tensor) {
        (Some(r), Some(t)) => format!(
            "ladder (this batch and weights, isolated, f32): first failing rung {r}, worst tensor {t} rel L2 {:.3e} (tolerance {:.1e})",
            f.rel_l2.unwrap_or(f64::NAN),
            f.tolerance.unwrap_or(f64::NAN)
        ),
        (Some(r), None) => format!("ladder (this batch and weights, isolated, f32): first failing rung {r}"),
        (None, _) => "ladder (this batch and weights, isolated, f32): every rung passes".into(),
    }
}

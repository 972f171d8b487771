//! Rungs 2–11: each stage of the training step on the Vulkan engine against
//! the CPU reference in f32 (the contract) and in f64 (which side is off).
//! The end-to-end gate is in `end_to_end.rs`, the attention stress case in
//! `stress.rs`.
//!
//! Isolated mode uploads the CPU's f32 values of a stage's inputs before the
//! GPU runs that stage alone, so each rung is judged by itself. Chained mode
//! runs the whole step on the GPU from its own outputs, as in training, and
//! compares every stage's outputs afterwards, so errors propagate.

use std::sync::Arc;

use super::case::case;
use super::setup::{carries_scale, optim_scale, scaled};
use super::{
    LadderError, MIXED_SCALE, MapStage, Mode, Precision, PrecisionMap, Rung, RungResult, Setup, Status, backward_scale,
    step_scale,
};
use crate::cpu::{self};
use crate::engine::gpu::Context;
use crate::engine::reference::Trace;
use crate::model::Params;
use crate::step::Fault;
use crate::step::GemmChoice;
use crate::step::{LossScale, OptimState};
use crate::vk::engine::{Engine, FlatBuf, Plan, Stage};
use crate::vk::gemm;

/// The compared values read from the step's state, not from a buffer: the
/// loss, then the optimizer's norms (before and after clipping).
const FROM_STATE: [&str; 3] = ["loss.value", "grad_norm", "post_clip_norm"];

/// One compared tensor with every side's values, for the inspector.
#[derive(Clone, Debug)]
pub struct RungTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub cpu: Vec<f32>,
    pub gpu: Vec<f32>,
    pub f64: Vec<f64>,
}

/// The GPU's tensors from one whole step, its device time, and each stage's.
#[derive(Clone)]
pub(super) struct Chained {
    pub(super) values: Vec<(String, Vec<f32>)>,
    pub(super) total_ms: Option<f64>,
    stage_ms: Vec<(Stage, Option<f64>)>,
}

/// A prepared ladder: the CPU traces (f32 and f64), the optimizer's starting
/// state, and the engine.
pub struct ModelLadder {
    pub setup: Setup,
    pub(super) engine: Engine,
    pub(super) cpu32: Trace<f32>,
    pub(super) cpu64: Trace<f64>,
    pub(super) cpu_ms: Vec<(&'static str, f64)>,
    /// The optimizer state both sides start the `optim` rung from (after one
    /// CPU step, so that the moments are not zero), and what the CPU made of it.
    prior: OptimState<f32>,
    after: (Params<f32>, OptimState<f32>, f64),
    after64: (Params<f64>, OptimState<f64>, f64),
    /// The CPU's norm after clipping in that step: (f32 side, f64 side). The
    /// clip's own check: it equals the norm unless clipping engaged.
    post_clip: (f64, f64),
    /// The CPU's loss scale after that step (GradScaler's update in f16).
    after_scale: LossScale,
    /// Each stage's precision, where the run gives a map (None: the
    /// precision's step, `setup.precision`).
    map: Option<PrecisionMap>,
    /// Chained mode: the GPU's tensors from one whole step, read once.
    chained: Option<Chained>,
    /// The tensors of the rungs run so far, by rung.
    kept: Vec<(Rung, Vec<RungTensor>)>,
    /// The loss scale the GPU's backward runs at instead of [`backward_scale`]'s
    /// (`--loss-scale`), also the scale of the f16 headroom figures.
    loss_scale: Option<f64>,
}

impl ModelLadder {
    /// The ladder of `setup`, its products on the kernel `GemmChoice::Auto`
    /// picks for the precision.
    pub fn new(ctx: &Arc<Context>, setup: Setup) -> Result<ModelLadder, LadderError> {
        Self::with_choice(ctx, setup, GemmChoice::Auto)
    }

    /// The ladder of `setup`, its products on the kernel `choice` picks for
    /// the precision (f32: the f32 step; f16, bf16: the mixed-precision step).
    pub fn with_choice(ctx: &Arc<Context>, setup: Setup, choice: GemmChoice) -> Result<ModelLadder, LadderError> {
        Self::with_map(ctx, setup, choice, None)
    }

    /// The ladder of `setup` with each stage in the precision `map` gives it
    /// (None: [`ModelLadder::with_choice`]); the f16 stages on the kernel
    /// `choice` picks. The tolerances count the map's f16 and bf16 stages
    /// ([`Rung::map_tolerance`]); the backward runs at the mixed loss scale
    /// where a backward stage is f16.
    pub fn with_map(
        ctx: &Arc<Context>,
        setup: Setup,
        choice: GemmChoice,
        map: Option<PrecisionMap>,
    ) -> Result<ModelLadder, LadderError> {
        let path = gemm::path_for(ctx, setup.precision, choice)?;
        let sp = scale_precision(setup.precision, map.as_ref());
        let step = step_scale(sp);
        let cfg = &setup.cfg;
        let cpu_err = |e: cpu::CpuError| LadderError::Input(e.to_string());
        cpu::profile::enable(true);
        let (_, bwd32, cpu32) =
            cpu::traced(cfg, &setup.params, &setup.batch, 1.0, setup.opts.token_cap).map_err(cpu_err)?;
        // The optimizer: one CPU step from zero moments gives the prior state.
        let g32 = bwd32.grads;
        let mut prior = OptimState::<f32>::new(cfg);
        {
            let (mut p, mut g) = (setup.params.clone(), g32.clone());
            cpu::apply_step(cfg, &mut p, &mut g, &mut prior, &mut LossScale::fixed(), &setup.opts);
        }
        // The rung's step carries a loss scale, so that unscaling is exercised.
        let (mut p1, mut g1, mut s1) = (setup.params.clone(), scaled(&g32, step), prior.clone());
        let mut after_scale = optim_scale(sp);
        let out = cpu::apply_step(cfg, &mut p1, &mut g1, &mut s1, &mut after_scale, &setup.opts);
        let cpu_ms = cpu::profile::take();
        cpu::profile::enable(false);
        let after = (p1, s1, out.grad_norm);

        let p64: Params<f64> = setup.params.cast();
        let (_, bwd64, cpu64) = cpu::traced(cfg, &p64, &setup.batch, 1.0, setup.opts.token_cap).map_err(cpu_err)?;
        let g64 = bwd64.grads;
        let mut s64 = OptimState::<f64> { m: prior.m.cast(), v: prior.v.cast(), step: prior.step };
        let (mut q64, mut gg64) = (p64, scaled(&g64, step));
        let out64 = cpu::apply_step(cfg, &mut q64, &mut gg64, &mut s64, &mut optim_scale(sp), &setup.opts);
        let after64 = (q64, s64, out64.grad_norm);
        let post_clip = (out.post_clip_norm, out64.post_clip_norm);

        let mut engine = Engine::new(ctx, cfg, &setup.params, &setup.opts, &LossScale::fixed(), path)?;
        engine.set_precision_map(map.clone(), choice)?;
        let mut l = ModelLadder {
            setup,
            engine,
            cpu32,
            cpu64,
            cpu_ms,
            prior,
            after,
            after64,
            post_clip,
            after_scale,
            map,
            chained: None,
            kept: Vec::new(),
            loss_scale: None,
        };
        l.engine.set_batch(&l.setup.batch)?;
        Ok(l)
    }

    /// Runs the GPU's backward at the loss scale `s` (finite, positive)
    /// instead of the precision's ([`backward_scale`]); `None` restores it.
    pub fn set_loss_scale(&mut self, s: Option<f64>) -> Result<(), LadderError> {
        if let Some(s) = s.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(LadderError::Input(format!("the loss scale must be finite and positive, not {s}")));
        }
        self.loss_scale = s;
        self.chained = None;
        Ok(())
    }

    /// The loss scale the GPU's backward runs at.
    pub fn loss_scale_now(&self) -> f64 {
        self.loss_scale.unwrap_or_else(|| backward_scale(self.scales()))
    }

    /// The scale the headroom of a backward tensor is measured at: the one an
    /// f16 step runs at (the set loss scale, else GradScaler's initial
    /// [`MIXED_SCALE`]), in every precision, so that an f32 run says whether
    /// its tensors would fit in f16.
    pub fn headroom_scale(&self) -> f64 {
        self.loss_scale.unwrap_or(MIXED_SCALE)
    }

    /// The precision map the ladder runs (None: the precision's step).
    pub fn precision_map(&self) -> Option<&PrecisionMap> {
        self.map.as_ref()
    }

    /// What each stage runs in: the map given, else the engine's default for
    /// the precision ([`Engine::precision_map`]: today's step, the
    /// recurrences in f16 where they run on cooperative matrices). Every
    /// tolerance and headroom warning is judged from it, so a run without a
    /// map and one with the default map spelled out are judged alike.
    pub fn stage_map(&self) -> PrecisionMap {
        self.map.clone().unwrap_or_else(|| self.engine.precision_map())
    }

    /// The precision whose loss scales the ladder's backward and optimizer
    /// steps take ([`scale_precision`]).
    fn scales(&self) -> Precision {
        scale_precision(self.setup.precision, self.map.as_ref())
    }

    /// Whether some stage runs below f32 (the mixed step's warnings).
    pub(super) fn mixed(&self) -> bool {
        self.map.as_ref().map_or(self.setup.precision.is_mixed(), PrecisionMap::is_mixed)
    }

    /// The precision stage `s` runs in (without a map, the products' precision).
    pub(super) fn precision_of(&self, s: MapStage) -> Precision {
        self.map.as_ref().map_or(self.setup.precision, |m| m.get(s))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, to change how it runs (its recurrence) before the rungs.
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The CPU f32 trace the ladder compares against.
    pub fn cpu_trace(&self) -> &Trace<f32> {
        &self.cpu32
    }

    /// Sets the moments and the step counter both sides start the `optim`
    /// rung from; returns the GPU's parameters as they are, for [`Self::restore`]
    /// after the step changed them.
    fn reset_optimizer(&self) -> Result<Vec<f32>, LadderError> {
        self.engine.set_optim_state(&self.prior, &optim_scale(self.scales()))?;
        Ok(self.engine.read_flat(FlatBuf::Params)?)
    }

    fn restore(&self, params: &[f32]) -> Result<(), LadderError> {
        Ok(self.engine.write_flat(FlatBuf::Params, params)?)
    }

    /// The CPU's values of a compared tensor: (f32, f64).
    fn cpu_values(&self, name: &str) -> (Vec<f32>, Vec<f64>) {
        let specs = |prefix: &str| name.strip_prefix(prefix);
        let pick32 = |p: &Params<f32>, n: &str| -> Vec<f32> {
            p.named(&self.setup.cfg).into_iter().find(|(k, _)| k == n).map(|(_, t)| t.data.clone()).unwrap_or_default()
        };
        let pick64 = |p: &Params<f64>, n: &str| -> Vec<f64> {
            p.named(&self.setup.cfg).into_iter().find(|(k, _)| k == n).map(|(_, t)| t.data.clone()).unwrap_or_default()
        };
        if name == "grad_norm" {
            return (vec![self.after.2 as f32], vec![self.after64.2]);
        }
        if name == "post_clip_norm" {
            return (vec![self.post_clip.0 as f32], vec![self.post_clip.1]);
        }
        if let Some(n) = specs("param.") {
            return (pick32(&self.after.0, n), pick64(&self.after64.0, n));
        }
        if let Some(n) = specs("adam.m.") {
            return (pick32(&self.after.1.m, n), pick64(&self.after64.1.m, n));
        }
        if let Some(n) = specs("adam.v.") {
            return (pick32(&self.after.1.v, n), pick64(&self.after64.1.v, n));
        }
        let t32 = self.cpu32.get(name).map(|t| t.data.clone()).unwrap_or_default();
        let t64 = self.cpu64.get(name).map(|t| t.data.clone()).unwrap_or_default();
        (t32, t64)
    }

    /// The tensors the last run of `rung` compared (empty before it ran).
    pub fn rung_tensors(&self, rung: Rung) -> &[RungTensor] {
        self.kept.iter().find(|(r, _)| *r == rung).map_or(&[], |(_, t)| t.as_slice())
    }

    /// Takes the kept tensors of `rung` out (the GUI moves them to its thread).
    pub fn take_rung_tensors(&mut self, rung: Rung) -> Vec<RungTensor> {
        match self.kept.iter().position(|(r, _)| *r == rung) {
            Some(i) => self.kept.remove(i).1,
            None => Vec::new(),
        }
    }

    /// The shape of a compared tensor: the trace's, the parameter's, or flat.
    fn shape_of(&self, name: &str, len: usize) -> Vec<usize> {
        if let Some(t) = self.cpu32.get(name) {
            return t.shape.clone();
        }
        let param = ["param.", "adam.m.", "adam.v."].iter().find_map(|p| name.strip_prefix(p));
        param
            .and_then(|n| crate::model::param_specs(&self.setup.cfg).into_iter().find(|(k, _)| k == n))
            .map_or(vec![len], |(_, s)| s)
    }

    /// Reads GPU tensors by name (`loss.value` and the norms from the state);
    /// those that `scaled` says hold the loss scale `s` are divided by it.
    fn gpu_values(
        &self,
        names: &[String],
        s: f64,
        scaled: impl Fn(&str) -> bool,
    ) -> Result<Vec<Vec<f32>>, LadderError> {
        let tensors: Vec<&str> = names.iter().map(|s| s.as_str()).filter(|n| !FROM_STATE.contains(n)).collect();
        let mut read = self.engine.read_named(&tensors)?.into_iter();
        let report = self.engine.report()?;
        let inv = (1.0 / s) as f32;
        Ok(names
            .iter()
            .map(|n| match n.as_str() {
                "loss.value" => vec![report.loss as f32],
                "grad_norm" => vec![report.optim.grad_norm as f32],
                "post_clip_norm" => vec![report.optim.post_clip_norm as f32],
                _ => {
                    let mut v = read.next().expect("one per tensor");
                    if s != 1.0 && scaled(n) {
                        v.iter_mut().for_each(|x| *x *= inv);
                    }
                    v
                }
            })
            .collect())
    }

    /// Runs the whole step on the GPU once (chained mode and the end-to-end
    /// gate) and keeps every compared tensor.
    pub(super) fn chained(&mut self) -> Result<&Chained, LadderError> {
        if self.chained.is_none() {
            let cfg = &self.setup.cfg;
            let names: Vec<String> = Rung::ALL.iter().flat_map(|r| r.outputs(cfg)).collect();
            let is_optim = |n: &String| {
                FROM_STATE[1..].contains(&n.as_str())
                    || n.starts_with("param.")
                    || n.starts_with("adam.m.")
                    || n.starts_with("adam.v.")
            };
            let (step_names, grad_names): (Vec<String>, Vec<String>) = names.into_iter().partition(is_optim);
            let before = self.engine.read_flat(FlatBuf::Params)?;
            // Forward and backward at the backward scale (1 in f32), read
            // before the optimizer rewrites the gradients; the parameters'
            // gradients come back unscaled, the activations' still scaled.
            let s = self.loss_scale_now();
            self.engine.write_state(&LossScale { scale: s, ..LossScale::fixed() }, self.prior.step, 0)?;
            let (_, mut stage_ms) = self.engine.run(Plan::Grads)?;
            let unscaled_later = |n: &str| carries_scale(n) && !n.starts_with("grad.");
            let read = self.gpu_values(&grad_names, s, unscaled_later)?;
            let mut values: Vec<(String, Vec<f32>)> = grad_names.iter().cloned().zip(read).collect();
            // The whole step, at the optim rung's loss scale, from the prior moments.
            self.reset_optimizer()?;
            let (timings, step_ms) = self.engine.run(Plan::Step)?;
            values.extend(step_names.iter().cloned().zip(self.gpu_values(&step_names, 1.0, |_| false)?));
            stage_ms.extend(step_ms.into_iter().filter(|(s, _)| *s == Stage::Optim));
            self.restore(&before)?;
            self.chained = Some(Chained { values, total_ms: timings.total_ms(), stage_ms });
        }
        Ok(self.chained.as_ref().expect("set above"))
    }

    /// Plants a bug of the fault catalogue in the GPU engine (None: none).
    pub fn set_fault(&mut self, fault: Option<Fault>) {
        self.engine.set_fault(fault);
        self.chained = None;
    }

    /// Runs one of rungs 2–11 (`gemm` is an error: it runs alone, see
    /// [`super::run_gemm`]).
    pub fn run(&mut self, rung: Rung) -> Result<RungResult, LadderError> {
        let st = rung.stage().ok_or_else(|| LadderError::Unknown(rung.id().to_string()))?;
        let cfg = self.setup.cfg.clone();
        let names = rung.outputs(&cfg);
        let (gpu, gpu_ms): (Vec<Vec<f32>>, Option<f64>) = match self.setup.mode {
            Mode::Chained => {
                let ch = self.chained()?;
                let got = names
                    .iter()
                    .map(|n| ch.values.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()).unwrap_or_default())
                    .collect();
                (got, ch.stage_ms.iter().find(|(s, _)| *s == st).and_then(|(_, ms)| *ms))
            }
            Mode::Isolated => {
                // The backward's inputs carry the loss scale, as the GPU's own would.
                let s = self.loss_scale_now();
                if self.scales().is_mixed() || s != 1.0 {
                    self.engine.write_state(&LossScale { scale: s, ..LossScale::fixed() }, self.prior.step, 0)?;
                }
                for input in rung.inputs(&cfg) {
                    let data = &self.cpu32.get(&input).expect("traced").data;
                    if s != 1.0 && carries_scale(&input) {
                        let up: Vec<f32> = data.iter().map(|&x| x * s as f32).collect();
                        self.engine.write_named(&input, &up)?;
                    } else {
                        self.engine.write_named(&input, data)?;
                    }
                }
                let before = if st == Stage::Optim {
                    let step = step_scale(self.scales()) as f32;
                    for (name, _) in crate::model::param_specs(&cfg) {
                        let g = format!("grad.{name}");
                        let data: Vec<f32> =
                            self.cpu32.get(&g).expect("traced").data.iter().map(|&x| x * step).collect();
                        self.engine.write_named(&g, &data)?;
                    }
                    Some(self.reset_optimizer()?)
                } else {
                    None
                };
                // The stage's own dispatches' time (not the plan's start).
                let (t, per_stage) = self.engine.run(Plan::Stages(&[st]))?;
                let ms: f64 = per_stage.iter().filter_map(|s| s.1).sum();
                let s = if st == Stage::Optim { 1.0 } else { s };
                let got = self.gpu_values(&names, s, carries_scale)?;
                if let Some(p) = before {
                    self.restore(&p)?;
                }
                (got, t.total_ms().map(|_| ms))
            }
        };
        let (mode, mixed) = (self.setup.mode, self.mixed());
        let map = self.stage_map();
        let tol_case = |n: &str| rung.map_tolerance(&map, mode, &cfg, n);
        let mut cases = Vec::new();
        let mut kept = Vec::new();
        for (name, got) in names.iter().zip(gpu) {
            let (want32, want64) = self.cpu_values(name);
            // Per element judged where both sides start from the same inputs:
            // in chained mode the GPU's inherited differences can turn an
            // element's Adam update (m / √v of a near-zero gradient) at will.
            let elements = !mixed && mode == Mode::Isolated;
            cases.push(case(name, &got, &want32, &want64, tol_case(name), mixed, elements));
            let shape = self.shape_of(name, got.len());
            kept.push(RungTensor { name: name.clone(), shape, cpu: want32, gpu: got, f64: want64 });
        }
        // Every compared tensor's f16 headroom; a warning only where the
        // tensor's values pass through a stage the map runs in f16
        // (`headroom::passes_f16`; never the optimizer's f32 state, nor the
        // attention stress case below, whose scores are made extreme).
        let hs = self.headroom_scale();
        let scale_of = |n: &str| if carries_scale(n) { hs } else { 1.0 };
        let warn = |n: &str| rung != Rung::Optim && super::headroom::passes_f16(&map, &cfg, n);
        super::headroom::attach(&mut cases, &kept, scale_of, warn);
        self.kept.retain(|(r, _)| *r != rung);
        self.kept.push((rung, kept));
        let cpu_ms = self.cpu_ms.iter().filter(|(n, _)| rung.cpu_phases().contains(n)).map(|(_, ms)| ms).sum();
        if rung == Rung::AttnFwd && self.setup.mode == Mode::Isolated {
            let (mut c, k) = self.attention_stress()?;
            super::headroom::attach(&mut c, &k, |_| 1.0, |_| false);
            cases.extend(c);
            self.kept.last_mut().expect("pushed above").1.extend(k);
        }
        let mut r = RungResult::new(rung, self.setup.precision, cases);
        r.gemm_path = Some(self.engine.gemm_path_now().name().into());
        r.gpu_ms = gpu_ms;
        r.cpu_ms = cpu_ms;
        if rung == Rung::Optim && self.setup.mode == Mode::Isolated {
            let rep = self.engine.report()?;
            if rep.optim.clipped != (self.after.2 > self.setup.opts.clip) || rep.optim.skipped.is_some() {
                r.status = Status::Fail;
                r.cases[0].notes.push(format!(
                    "the GPU decided clipped={} skipped={:?}; the CPU clipped={} and took the step",
                    rep.optim.clipped,
                    rep.optim.skipped,
                    self.after.2 > self.setup.opts.clip
                ));
            }
            // The step counter the next step's bias correction reads.
            let (_, gpu_step, _) = self.engine.loss_scale_and_step()?;
            if gpu_step != self.after.1.step {
                r.status = Status::Fail;
                r.cases[0].notes.push(format!(
                    "the GPU's optimizer step counter is {gpu_step} after the step; the CPU's is {}",
                    self.after.1.step
                ));
            }
            // The mixed step's dynamic scale: GradScaler's update after a good step.
            if self.scales() == Precision::F16 {
                let (gpu, _, _) = self.engine.loss_scale_and_step()?;
                let want = &self.after_scale;
                if (gpu.scale, gpu.growth_tracker) != (want.scale, want.growth_tracker) {
                    r.status = Status::Fail;
                    r.cases[0].notes.push(format!(
                        "the GPU's loss scale is {} (growth tracker {}); GradScaler's is {} ({})",
                        gpu.scale, gpu.growth_tracker, want.scale, want.growth_tracker
                    ));
                }
            }
        }
        Ok(r)
    }
}

/// The precision whose loss scales ([`backward_scale`], [`step_scale`],
/// `optim_scale`) a ladder in `precision` under `map` takes: f16's (the
/// dynamic mixed scale) where the map has a backward stage in f16, else f32's
/// (bf16 has f32's range); without a map, `precision`'s own.
pub fn scale_precision(precision: Precision, map: Option<&PrecisionMap>) -> Precision {
    match map {
        None => precision,
        Some(m) if m.needs_loss_scale() => Precision::F16,
        Some(_) => Precision::F32,
    }
}

//! Precision bisect (docs/precision.md): the smallest set of stages that
//! must stay in f32 for rungs 2–11 (warnings allowed) and the end-to-end
//! gate to pass on one batch. Every stage with an f16 kernel here starts in
//! f16; where that fails, adaptive group testing halves the candidates (one
//! half in f16, the rest in f32) down to the stages whose f16 breaks the
//! ladder, checks that keeping them in f32 passes, and returns each to f16
//! where the ladder passes without it. Each probe is one `ladder::run`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{LadderError, LadderReport, LadderSpec, MapStage, Precision, PrecisionMap, Rung, Setup, Status, run};
use crate::engine::gpu::Context;
use crate::step::Fault;
use crate::step::GemmChoice;
use crate::step::LossScale;
use crate::vk::engine::Engine;
use crate::vk::gemm;

/// What to bisect: the ladder's inputs, the kernel choice, a planted fault.
#[derive(Clone)]
pub struct PrecisionBisectSpec {
    /// The batch and weights; its mode is the probes' (its precision is ignored).
    pub setup: Setup,
    pub gemm_choice: GemmChoice,
    pub fault: Option<Fault>,
    /// The loss scale every probe's backward runs at (and its headroom is
    /// measured at): a capture's, the scale its step ran (`--capture`);
    /// None: the ladder's for each probe's map (2^16 where a backward stage
    /// is f16, else 1).
    pub loss_scale: Option<f64>,
}

/// One map tried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MapProbe {
    /// Why it ran: `all f16`, `all f32`, `halves`, `check`, `minimise`.
    pub phase: String,
    /// The stages it kept in f32 (of the candidates).
    pub f32_stages: Vec<String>,
    pub map: PrecisionMap,
    pub pass: bool,
    /// The first rung that failed (or `end_to_end`, or `error`).
    pub rung: Option<String>,
    /// Its first failing tensor (or the gate's or the error's note).
    pub tensor: Option<String>,
    pub ms: f64,
    /// The loss scale its ladder's backward ran at (the spec's, else the
    /// ladder's for the map, `ModelLadder::loss_scale_now`).
    #[serde(default)]
    pub loss_scale: f64,
}

/// How the bisect ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every candidate stage in f16 passes: nothing must stay in f32.
    AllF16Passes,
    /// A set of stages kept in f32 makes it pass.
    Found,
    /// Even every stage in f32 fails: not a precision problem.
    NotPrecision,
    /// Cancelled before the end.
    Cancelled,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionBisectReport {
    pub fault: Option<String>,
    /// The stages that can run in f16 here (the bisect's candidates).
    pub candidates: Vec<String>,
    /// The stages with no f16 kernel here, always f32, and why.
    pub no_f16_kernel: Vec<(String, String)>,
    pub probes: Vec<MapProbe>,
    pub outcome: Outcome,
    /// The stages that must stay in f32 (empty unless `found`).
    pub keep_f32: Vec<String>,
    /// The passing map with the fewest f32 stages (None: none passes).
    pub map: Option<PrecisionMap>,
    pub total_ms: f64,
    /// The loss scale the probes ran at ([`PrecisionBisectSpec::loss_scale`];
    /// None: the ladder's for each map).
    #[serde(default)]
    pub loss_scale: Option<f64>,
}

/// Runs the bisect, calling `on_probe` after each probe; stops early (with
/// [`Outcome::Cancelled`]) once `cancel` is set.
pub fn precision_bisect(
    ctx: &Arc<Context>,
    spec: &PrecisionBisectSpec,
    cancel: &AtomicBool,
    mut on_probe: impl FnMut(&MapProbe),
) -> Result<PrecisionBisectReport, LadderError> {
    let start = Instant::now();
    let (candidates, no_f16_kernel) = candidates(ctx, spec)?;
    let mut b = Bisector { ctx, spec, candidates: candidates.clone(), probes: Vec::new(), seen: HashMap::new() };
    let names = |v: &[MapStage]| v.iter().map(|s| s.name()).collect::<Vec<_>>();
    let mut report = PrecisionBisectReport {
        fault: spec.fault.map(|f| f.to_string()),
        candidates: names(&candidates),
        no_f16_kernel,
        probes: Vec::new(),
        outcome: Outcome::Cancelled,
        keep_f32: Vec::new(),
        map: None,
        total_ms: 0.0,
        loss_scale: spec.loss_scale,
    };
    let outcome = b.search(cancel, &mut on_probe);
    report.probes = b.probes.clone();
    report.total_ms = start.elapsed().as_secs_f64() * 1e3;
    match outcome? {
        None => {}
        Some(Search::AllF16) => {
            report.outcome = Outcome::AllF16Passes;
            report.map = Some(b.map(&[]));
        }
        Some(Search::NotPrecision) => report.outcome = Outcome::NotPrecision,
        Some(Search::Keep(keep)) => {
            report.outcome = Outcome::Found;
            report.map = Some(b.map(&keep));
            report.keep_f32 = names(&keep);
        }
    }
    Ok(report)
}

/// The stages that can run in f16 on this device for this model (an engine
/// takes a map with that stage alone in f16), and the others with the
/// engine's reason.
#[allow(clippy::type_complexity)]
fn candidates(
    ctx: &Arc<Context>,
    spec: &PrecisionBisectSpec,
) -> Result<(Vec<MapStage>, Vec<(String, String)>), LadderError> {
    let s = &spec.setup;
    let path = gemm::path_for(ctx, Precision::F16, spec.gemm_choice)?;
    let mut engine = Engine::new(ctx, &s.cfg, &s.params, &s.opts, &LossScale::fixed(), path)?;
    let f32_map = PrecisionMap::uniform(Precision::F32, s.cfg.layers);
    let (mut yes, mut no) = (Vec::new(), Vec::new());
    for stage in PrecisionMap::stages(s.cfg.layers) {
        let mut m = f32_map.clone();
        m.set(stage, Precision::F16);
        match engine.set_precision_map(Some(m), spec.gemm_choice) {
            Ok(()) => yes.push(stage),
            Err(e) => no.push((stage.name(), e.to_string())),
        }
    }
    Ok((yes, no))
}

enum Search {
    AllF16,
    NotPrecision,
    Keep(Vec<MapStage>),
}

struct Bisector<'a> {
    ctx: &'a Arc<Context>,
    spec: &'a PrecisionBisectSpec,
    candidates: Vec<MapStage>,
    probes: Vec<MapProbe>,
    /// Outcomes by map text: a map is run once.
    seen: HashMap<String, bool>,
}

impl Bisector<'_> {
    /// The map with every candidate in f16 but `keep` (and every
    /// non-candidate) in f32.
    fn map(&self, keep: &[MapStage]) -> PrecisionMap {
        let mut m = PrecisionMap::uniform(Precision::F32, self.spec.setup.cfg.layers);
        for &s in &self.candidates {
            if !keep.contains(&s) {
                m.set(s, Precision::F16);
            }
        }
        m
    }

    /// Whether the ladder passes with `keep` in f32 and the other candidates in f16.
    fn passes(
        &mut self,
        keep: &[MapStage],
        phase: &str,
        cancel: &AtomicBool,
        on_probe: &mut impl FnMut(&MapProbe),
    ) -> Result<Option<bool>, LadderError> {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let map = self.map(keep);
        if let Some(&pass) = self.seen.get(&map.to_string()) {
            return Ok(Some(pass));
        }
        let t0 = Instant::now();
        let spec = LadderSpec {
            gemm_choice: self.spec.gemm_choice,
            fault: self.spec.fault,
            stop_at_failure: true,
            end_to_end: true,
            loss_scale: self.spec.loss_scale,
            precision_map: Some(map.clone()),
            ..LadderSpec::new(Rung::MODEL.to_vec(), Setup { precision: Precision::F16, ..self.spec.setup.clone() })
        };
        let (pass, rung, tensor) = match run(self.ctx, spec, |_| {}) {
            Ok(r) => judge(&r),
            Err(LadderError::Vk(e)) => (false, Some("error".to_string()), Some(e.to_string())),
            Err(e) => return Err(e),
        };
        let mut f32_stages: Vec<String> = keep.iter().map(|s| s.name()).collect();
        f32_stages.sort_by_key(|n| self.candidates.iter().position(|s| s.name() == *n));
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let loss_scale = self
            .spec
            .loss_scale
            .unwrap_or_else(|| super::backward_scale(super::scale_precision(Precision::F16, Some(&map))));
        let probe = MapProbe { phase: phase.into(), f32_stages, map, pass, rung, tensor, ms, loss_scale };
        on_probe(&probe);
        self.seen.insert(probe.map.to_string(), pass);
        self.probes.push(probe);
        Ok(Some(pass))
    }

    /// The whole search; None where it was cancelled.
    fn search(
        &mut self,
        cancel: &AtomicBool,
        on_probe: &mut impl FnMut(&MapProbe),
    ) -> Result<Option<Search>, LadderError> {
        let all = self.candidates.clone();
        let Some(ok) = self.passes(&[], "all f16", cancel, on_probe)? else { return Ok(None) };
        if ok {
            return Ok(Some(Search::AllF16));
        }
        let Some(ok) = self.passes(&all, "all f32", cancel, on_probe)? else { return Ok(None) };
        if !ok {
            return Ok(Some(Search::NotPrecision));
        }
        // The stages whose f16 fails the ladder (alone, or with their half).
        let Some(mut keep) = self.culprits(&all, cancel, on_probe)? else { return Ok(None) };
        // Check; where stages break it only together, move the rest to f32
        // one at a time until it passes (the all-f32 map does).
        loop {
            let Some(ok) = self.passes(&keep, "check", cancel, on_probe)? else { return Ok(None) };
            if ok {
                break;
            }
            match all.iter().find(|s| !keep.contains(s)) {
                Some(&s) => keep.push(s),
                None => break,
            }
        }
        // Minimise: back to f16 each member the ladder passes without.
        let mut i = 0;
        while i < keep.len() {
            let mut without = keep.clone();
            without.remove(i);
            match self.passes(&without, "minimise", cancel, on_probe)? {
                None => return Ok(None),
                Some(true) => keep = without,
                Some(false) => i += 1,
            }
        }
        keep.sort_by_key(|s| all.iter().position(|t| t == s));
        Ok(Some(Search::Keep(keep)))
    }

    /// Within `set`, whose stages in f16 (with everything else in f32) fail
    /// the ladder, the stages to keep in f32: each half is probed alone in
    /// f16 and searched where it fails; where neither half fails alone (the
    /// stages fail only together) the whole set is kept.
    fn culprits(
        &mut self,
        set: &[MapStage],
        cancel: &AtomicBool,
        on_probe: &mut impl FnMut(&MapProbe),
    ) -> Result<Option<Vec<MapStage>>, LadderError> {
        if set.len() <= 1 {
            return Ok(Some(set.to_vec()));
        }
        let (a, b) = set.split_at(set.len() / 2);
        let others =
            |half: &[MapStage]| self.candidates.iter().copied().filter(|s| !half.contains(s)).collect::<Vec<_>>();
        let (keep_a, keep_b) = (others(a), others(b));
        let Some(a_ok) = self.passes(&keep_a, "halves", cancel, on_probe)? else { return Ok(None) };
        let Some(b_ok) = self.passes(&keep_b, "halves", cancel, on_probe)? else { return Ok(None) };
        if a_ok && b_ok {
            return Ok(Some(set.to_vec()));
        }
        let mut out = Vec::new();
        for (half, ok) in [(a, a_ok), (b, b_ok)] {
            if !ok {
                let Some(found) = self.culprits(half, cancel, on_probe)? else { return Ok(None) };
                out.extend(found);
            }
        }
        Ok(Some(out))
    }
}

/// Whether a probe's ladder passed (no rung failed or could not run, the
/// gate passed; warnings allowed), and where it first failed.
fn judge(r: &LadderReport) -> (bool, Option<String>, Option<String>) {
    if let Some(rung) = r.rungs.iter().find(|x| x.status == Status::Fail) {
        let case = rung.cases.iter().find(|c| c.status == Status::Fail);
        let tensor = case.map(|c| match c.notes.first() {
            Some(n) => format!("{} ({n})", c.name),
            None => c.name.clone(),
        });
        return (false, Some(rung.id.to_string()), tensor);
    }
    if let Some(e) = r.errors.first() {
        return (false, Some(e.rung.to_string()), Some(e.error.clone()));
    }
    match (&r.end_to_end, &r.end_to_end_error) {
        (Some(e), _) if e.status == Status::Fail => {
            (false, Some("end_to_end".into()), Some(e.notes.first().cloned().unwrap_or_else(|| "the gate".into())))
        }
        (_, Some(why)) => (false, Some("end_to_end".into()), Some(why.clone())),
        _ if r.validation_errors > 0 => {
            (false, Some("validation".into()), Some(format!("{} validation errors", r.validation_errors)))
        }
        _ => (true, None, None),
    }
}

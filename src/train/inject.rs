//! Planted training events (`train --inject KIND@STEP[,KIND@STEP…]`): a bad
//! step of a known kind at a known step, so that the guard, the controller,
//! the captures and the replay's verdicts can be tested on purpose.
//!
//! `nan`, `spike` and `transient` spoil the step's gradients (an
//! [`engine::Poison`](crate::engine::Poison)); `persistent` plants a kernel
//! fault of the Vulkan engine from that step on; `f16_overflow` runs that
//! one step with the loss scale × 2^24 and puts the scale back after it.

use std::collections::BTreeMap;

use super::TrainError;
use crate::engine::{BIT_FLIP_TENSOR, Engine, EngineKind, Poison};
use crate::step::Fault;
use crate::step::LossScale;
use crate::step::Precision;

/// One planted event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// One gradient value NaN.
    Nan,
    /// Every gradient value × 1e4.
    Spike,
    /// A silent data corruption that fires once (a flipped exponent bit).
    Transient,
    /// A kernel fault of the Vulkan engine in every step from here on.
    Persistent(Fault),
    /// This step's loss scale × 2^24, so that the f16 backward overflows.
    F16Overflow,
}

/// The fault `persistent` plants when none is named.
pub const DEFAULT_PERSISTENT: Fault = Fault::ResetBeforeMatmul;

/// How much `f16_overflow` raises the loss scale for its step.
pub const OVERFLOW_FACTOR: f64 = 16_777_216.0; // 2^24

/// What `--inject` takes, for its messages.
const KINDS: &str = "nan, spike, transient, persistent[=FAULT], f16_overflow";

impl Inject {
    /// Every kind once (`persistent` with its default fault), in the order
    /// `dualscope faults` lists them.
    pub const ALL: [Inject; 5] =
        [Inject::Nan, Inject::Spike, Inject::Transient, Inject::Persistent(DEFAULT_PERSISTENT), Inject::F16Overflow];

    /// The kind's name as `--inject` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Inject::Nan => "nan",
            Inject::Spike => "spike",
            Inject::Transient => "transient",
            Inject::Persistent(_) => "persistent",
            Inject::F16Overflow => "f16_overflow",
        }
    }

    /// The event as `--inject` spells it: the name, or `persistent=FAULT`
    /// for a fault other than the default.
    pub fn label(self) -> String {
        match self {
            Inject::Persistent(f) if f != DEFAULT_PERSISTENT => format!("persistent={f}"),
            k => k.name().to_string(),
        }
    }

    /// What the planted event does.
    pub fn description(self) -> String {
        match self {
            Inject::Nan => "one gradient value (head.bias[0]) is NaN at that step: the engine's guard skips it".into(),
            Inject::Spike => "every gradient value × 1e4 at that step: a finite outlier the controller skips".into(),
            Inject::Transient => format!(
                "a transient engine fault that fires once: the top exponent bit of the largest-magnitude value of \
                 {BIT_FLIP_TENSOR}'s gradient flipped (silent data corruption: a huge finite value)"
            ),
            Inject::Persistent(f) => format!(
                "from that step on the GPU engine runs with the planted kernel fault {f} (persistent=FAULT names \
                 another; see the list above); --engine gpu"
            ),
            Inject::F16Overflow => format!(
                "that step runs with the loss scale × 2^{} so the f16 backward overflows (the guard skips it and \
                 backs off), then the scale is put back; --precision f16",
                OVERFLOW_FACTOR.log2()
            ),
        }
    }

    /// The verdict a replay of the event's capture should reach: `transient`
    /// for what does not reproduce (the gradients were spoilt after the
    /// engine computed them), `engine` for a planted kernel fault,
    /// `precision` for the f16 overflow.
    pub fn expected_verdict(self) -> &'static str {
        match self {
            Inject::Nan | Inject::Spike | Inject::Transient => "transient",
            Inject::Persistent(_) => "engine",
            Inject::F16Overflow => "precision",
        }
    }

    /// What is done to the step's gradients, if anything.
    pub fn poison(self) -> Option<Poison> {
        match self {
            Inject::Nan => Some(Poison::Nan),
            Inject::Spike => Some(Poison::Spike),
            Inject::Transient => Some(Poison::BitFlip),
            Inject::Persistent(_) | Inject::F16Overflow => None,
        }
    }

    /// One `KIND` of `--inject KIND@STEP`; `arg` is the whole item, for the message.
    fn parse_kind(kind: &str, arg: &str) -> Result<Inject, String> {
        let bad = |why: String| format!("--inject {arg}: {why}");
        Ok(match kind {
            "nan" => Inject::Nan,
            "spike" => Inject::Spike,
            "transient" => Inject::Transient,
            "persistent" => Inject::Persistent(DEFAULT_PERSISTENT),
            "f16_overflow" => Inject::F16Overflow,
            k => match k.strip_prefix("persistent=") {
                Some(f) => Inject::Persistent(Fault::parse(f).ok_or_else(|| {
                    let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                    bad(format!("unknown engine fault '{f}' ({})", names.join(", ")))
                })?),
                None => return Err(bad(format!("unknown kind '{k}' ({KINDS})"))),
            },
        })
    }
}

/// The planted events of a run: one per step at most.
pub type Injections = BTreeMap<u64, Inject>;

/// Adds `ev` at `step`, refusing a second event at the same step.
pub fn add(map: &mut Injections, step: u64, ev: Inject) -> Result<(), String> {
    if step == 0 {
        return Err(format!("--inject {}@0: steps count from 1", ev.label()));
    }
    if let Some(old) = map.insert(step, ev) {
        return Err(format!(
            "--inject: two planted events at step {step} ({} and {}); one step takes one",
            old.label(),
            ev.label()
        ));
    }
    Ok(())
}

/// Parses the items of `--inject` (`KIND@STEP`, already split at commas) into `map`.
pub fn parse_into(map: &mut Injections, items: &[String]) -> Result<(), String> {
    for item in items {
        let (kind, step) = item
            .rsplit_once('@')
            .ok_or_else(|| format!("--inject {item}: expected KIND@STEP (kinds: {KINDS}), as nan@120"))?;
        let ev = Inject::parse_kind(kind.trim(), item)?;
        let step: u64 = step
            .trim()
            .parse()
            .map_err(|_| format!("--inject {item}: step '{step}' is not a whole number of at least 1"))?;
        add(map, step, ev)?;
    }
    Ok(())
}

/// The events the engine and precision cannot take, as usage errors: a
/// kernel fault needs the GPU engine, an f16 overflow the f16 step.
pub fn check(map: &Injections, engine: EngineKind, precision: Precision) -> Result<(), TrainError> {
    for (&step, &ev) in map {
        match ev {
            Inject::Persistent(_) if engine != EngineKind::Vulkan => {
                return Err(TrainError::Usage(format!(
                    "--inject {}@{step}: engine faults are planted in the GPU engine; use --engine gpu",
                    ev.label()
                )));
            }
            Inject::F16Overflow if precision != Precision::F16 => {
                return Err(TrainError::Usage(format!(
                    "--inject f16_overflow@{step}: needs --precision f16 (the f32 and bf16 steps have f32's range; \
                     now {})",
                    precision.name()
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The planted kernel fault in force at `step`: that of the last
/// `persistent` event at or before it.
pub fn fault_at(map: &Injections, step: u64) -> Option<Fault> {
    map.range(..=step).rev().find_map(|(_, ev)| match ev {
        Inject::Persistent(f) => Some(*f),
        _ => None,
    })
}

/// Sets the engine up for step `step` (the fault in force, the raised loss
/// scale); returns the loss scale to put back after the step, if it was raised.
pub(super) fn before_step(map: &Injections, engine: &mut Engine, step: u64) -> Result<Option<LossScale>, TrainError> {
    if map.is_empty() {
        return Ok(None);
    }
    let fault = fault_at(map, step);
    if engine.fault() != fault {
        engine.set_fault(fault)?;
    }
    if map.get(&step) != Some(&Inject::F16Overflow) {
        return Ok(None);
    }
    let before = engine.loss_scale()?;
    engine.set_loss_scale(&LossScale { scale: before.scale * OVERFLOW_FACTOR, ..before.clone() })?;
    Ok(Some(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Injections, String> {
        let mut m = Injections::new();
        parse_into(&mut m, &items.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        Ok(m)
    }

    #[test]
    fn kinds_parse_and_bad_ones_are_named() {
        let m =
            parse(&["nan@3", "spike@4", "transient@5", "persistent@6", "persistent=mask_dropped@9", "f16_overflow@7"])
                .unwrap();
        assert_eq!(m[&3], Inject::Nan);
        assert_eq!(m[&5].poison(), Some(Poison::BitFlip));
        assert_eq!(m[&6], Inject::Persistent(Fault::ResetBeforeMatmul));
        assert_eq!(m[&9], Inject::Persistent(Fault::MaskDropped));
        assert_eq!(m[&7].expected_verdict(), "precision");
        assert_eq!(fault_at(&m, 5), None);
        assert_eq!(fault_at(&m, 8), Some(Fault::ResetBeforeMatmul));
        assert_eq!(fault_at(&m, 9), Some(Fault::MaskDropped));
        let e = parse(&["bogus@3"]).unwrap_err();
        assert_eq!(
            e,
            "--inject bogus@3: unknown kind 'bogus' (nan, spike, transient, persistent[=FAULT], f16_overflow)"
        );
        assert!(parse(&["persistent=nope@2"]).unwrap_err().contains("unknown engine fault 'nope'"));
        assert!(parse(&["nan"]).unwrap_err().starts_with("--inject nan: expected KIND@STEP"));
        assert!(parse(&["nan@x"]).unwrap_err().contains("step 'x'"));
        assert!(parse(&["nan@0"]).unwrap_err().contains("count from 1"));
        let e = parse(&["nan@4", "spike@4"]).unwrap_err();
        assert!(e.contains("two planted events at step 4 (nan and spike)"), "{e}");
    }

    #[test]
    fn engines_and_precisions_that_cannot_take_an_event_are_refused() {
        let m = parse(&["persistent@6"]).unwrap();
        let e = check(&m, EngineKind::Cpu, Precision::F32).unwrap_err().to_string();
        assert!(e.starts_with("--inject persistent@6: engine faults") && e.contains("--engine gpu"));
        check(&m, EngineKind::Vulkan, Precision::F32).unwrap();
        let m = parse(&["f16_overflow@2"]).unwrap();
        let e = check(&m, EngineKind::Vulkan, Precision::F32).unwrap_err().to_string();
        assert!(e.contains("--precision f16"), "{e}");
        check(&m, EngineKind::Vulkan, Precision::F16).unwrap();
    }
}

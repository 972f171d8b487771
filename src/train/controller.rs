//! The training run's risk controller, in the spirit of GNMR (gradient-norm-based
//! risk management): it keeps a running history of the gradient norm of every
//! parameter tensor and of the global norm, judges each step's gradients against
//! it *before* they are applied, and acts on risk:
//!
//! - **skip** a step whose gradient norm (global or of one tensor) is a far
//!   outlier (`--gn-skip-z`), or that the engine's guard skipped (non-finite
//!   or zero norm: docs/model.md step 4);
//! - **back off the loss scale** on a non-finite step (the engine halves a
//!   dynamic scale as GradScaler does; the controller reports it);
//! - **lower the learning rate for a while** on a bad step or a milder spike
//!   (`--gn-spike-z`): `lr × --lr-backoff` (not below `--lr-min-factor`) for
//!   `--lr-cooldown` steps, then back to the base rate;
//! - **roll back** to the last good checkpoint after `--rollback-after` bad
//!   steps in a row, giving up after `--max-rollbacks`.
//!
//! The history is an exponential moving mean and variance of `ln(norm)` per
//! tensor and for the global norm, fed only by applied steps. A step's risk is
//! its z-score `(ln n − mean) / max(std, --gn-min-std)`; only upward deviations
//! count, and only after `--gn-warmup` applied steps of history. Every action
//! comes with a one-line reason. The state is plain data (serde) so that a
//! checkpoint carries it and a resumed run continues with the same history.

use serde::{Deserialize, Serialize};

pub use crate::engine::Norms;

/// The thresholds (the `train` options of the same names: `--gn-warmup`, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerConfig {
    pub enabled: bool,
    pub warmup: u64,
    pub ema: f64,
    pub skip_z: f64,
    pub spike_z: f64,
    pub min_std: f64,
    pub lr_backoff: f64,
    pub lr_cooldown: u64,
    pub lr_min_factor: f64,
    pub rollback_after: u32,
    pub max_rollbacks: u32,
    /// Whether a step the engine's guard skipped while a dynamic loss scale
    /// backed off (an f16 overflow: GradScaler's routine) also cuts the
    /// learning rate. Off by default: the scale is the remedy for it.
    #[serde(default)]
    pub lr_cut_on_overflow: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            enabled: true,
            warmup: 20,
            ema: 0.95,
            // Calibrated on clean text (docs/training.md, "Calibration"): the
            // largest deviation of 4440 clean steps was 6.0.
            skip_z: 10.0,
            spike_z: 7.0,
            min_std: 0.25,
            lr_backoff: 0.5,
            lr_cooldown: 50,
            lr_min_factor: 0.0625,
            rollback_after: 3,
            max_rollbacks: 5,
            lr_cut_on_overflow: false,
        }
    }
}

/// Exponential moving mean and variance of one ln-norm.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ema {
    /// Values seen.
    pub n: u64,
    pub mean: f64,
    pub var: f64,
}

impl Ema {
    fn push(&mut self, x: f64, beta: f64) {
        if self.n == 0 {
            (self.mean, self.var) = (x, 0.0);
        } else {
            let d = x - self.mean;
            self.mean += (1.0 - beta) * d;
            self.var = beta * (self.var + (1.0 - beta) * d * d);
        }
        self.n += 1;
    }

    fn z(&self, x: f64, min_std: f64) -> f64 {
        (x - self.mean) / self.var.sqrt().max(min_std)
    }
}

/// The kinds of controller action; their names (`skip`, `scale_backoff`,
/// `lr_cut`, `lr_restore`, `rollback`, `stop`) are what the logs and the JSON
/// output hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// The step's gradients were not applied.
    Skip,
    /// The dynamic loss scale was lowered after a skipped step.
    ScaleBackoff,
    /// The learning rate was lowered for a while.
    LrCut,
    /// The lowered learning rate's time is up: back to the base rate.
    LrRestore,
    /// Back to the last good checkpoint (the caller restores it).
    Rollback,
    /// The run is given up as diverged (the caller ends it as failed).
    Stop,
}

impl ActionKind {
    pub const ALL: [ActionKind; 6] = [
        ActionKind::Skip,
        ActionKind::ScaleBackoff,
        ActionKind::LrCut,
        ActionKind::LrRestore,
        ActionKind::Rollback,
        ActionKind::Stop,
    ];

    /// The name in the logs: `scale_backoff`.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Skip => "skip",
            ActionKind::ScaleBackoff => "scale_backoff",
            ActionKind::LrCut => "lr_cut",
            ActionKind::LrRestore => "lr_restore",
            ActionKind::Rollback => "rollback",
            ActionKind::Stop => "stop",
        }
    }
}

/// What the controller did, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The training step (iteration; the data position) it happened at.
    pub step: u64,
    pub action: ActionKind,
    pub reason: String,
    /// The learning-rate factor after the action (lr = base × factor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lr_factor: Option<f64>,
    /// The loss scale after a back-off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// The step of the checkpoint a rollback returns to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_step: Option<u64>,
}

impl Action {
    fn new(step: u64, action: ActionKind, reason: String) -> Self {
        Action { step, action, reason, lr_factor: None, scale: None, to_step: None }
    }

    /// The human log line.
    pub fn line(&self) -> String {
        let mut s = format!("step {:>6}  {}: {}", self.step, self.action.name().to_uppercase(), self.reason);
        if let Some(f) = self.lr_factor {
            s += &format!(" [lr × {f}]");
        }
        if let Some(x) = self.scale {
            s += &format!(" [loss scale {x}]");
        }
        s
    }
}

/// The verdict on a step's gradients before they are applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    /// Do not apply: why.
    pub skip: Option<String>,
    /// Apply, but lower the learning rate: why.
    pub spike: Option<String>,
    /// The step's largest deviation and whose norm it is (`global` or a
    /// tensor), once there is history: what the thresholds are compared with
    /// (the log keeps it, so thresholds can be calibrated on a finished run).
    pub risk: Option<(f64, String)>,
}

/// What the step did in the end (after the engine's own guard).
#[derive(Clone, Debug)]
pub struct Outcome<'a> {
    pub norms: &'a Norms,
    /// Why the step was not applied: the controller's reason or the engine's guard.
    pub skipped: Option<String>,
    /// Whether the engine's guard (not the controller) skipped it.
    pub by_engine: bool,
    pub spike: Option<String>,
    /// Loss scale before and after the step.
    pub scale_before: f64,
    pub scale_after: f64,
}

/// The controller's whole state: thresholds, history, counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Controller {
    pub config: ControllerConfig,
    pub global: Ema,
    /// Per tensor, canonical order.
    pub tensors: Vec<(String, Ema)>,
    pub consecutive_bad: u32,
    pub lr_factor: f64,
    pub cooldown_left: u64,
    pub skips: u64,
    pub engine_skips: u64,
    pub spikes: u64,
    pub lr_cuts: u64,
    pub rollbacks: u32,
}

impl Controller {
    pub fn new(config: ControllerConfig) -> Self {
        Controller {
            config,
            global: Ema::default(),
            tensors: Vec::new(),
            consecutive_bad: 0,
            lr_factor: 1.0,
            cooldown_left: 0,
            skips: 0,
            engine_skips: 0,
            spikes: 0,
            lr_cuts: 0,
            rollbacks: 0,
        }
    }

    /// Start of step `step`: a lowered learning rate whose time is up returns to base.
    pub fn begin_step(&mut self, step: u64) -> Vec<Action> {
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            if self.cooldown_left == 0 && self.lr_factor != 1.0 {
                self.lr_factor = 1.0;
                let mut a = Action::new(
                    step,
                    ActionKind::LrRestore,
                    format!("{} steps without a risk event: back to the base learning rate", self.config.lr_cooldown),
                );
                a.lr_factor = Some(1.0);
                return vec![a];
            }
        }
        Vec::new()
    }

    /// Judges a step's norms against the history, before they are applied.
    pub fn assess(&self, norms: &Norms) -> Assessment {
        let mut out = Assessment { skip: None, spike: None, risk: None };
        // Non-finite or zero norms are the engine guard's to skip.
        if !self.config.enabled || !norms.global.is_finite() || norms.global <= 0.0 {
            return out;
        }
        let c = &self.config;
        let judge = |what: &str, norm: f64, ema: &Ema| -> Option<(f64, String)> {
            if ema.n < c.warmup || !(norm > 0.0 && norm.is_finite()) {
                return None;
            }
            let z = ema.z(norm.ln(), c.min_std);
            let reason = format!(
                "{what} {norm:.4e} is {z:.1} deviations above its running level {:.4e} (ln-EMA)",
                ema.mean.exp()
            );
            Some((z, reason))
        };
        let mut worst: Option<(f64, String)> = judge("global gradient norm", norms.global, &self.global);
        let mut whose = "global".to_string();
        for ((name, n), (_, ema)) in norms.tensors.iter().zip(&self.tensors) {
            if let Some((z, r)) = judge(&format!("gradient norm of {name}"), *n, ema)
                && worst.as_ref().is_none_or(|w| z > w.0)
            {
                worst = Some((z, r));
                whose = name.clone();
            }
        }
        out.risk = worst.as_ref().map(|w| (w.0, whose));
        if let Some((z, reason)) = worst {
            if z > c.skip_z {
                out.skip = Some(format!("outlier: {reason} > {}", c.skip_z));
            } else if z > c.spike_z {
                out.spike = Some(format!("spike: {reason} > {}", c.spike_z));
            }
        }
        out
    }

    fn cut_lr(&mut self, step: u64, why: &str) -> Action {
        let c = &self.config;
        let from = self.lr_factor;
        self.lr_factor = (self.lr_factor * c.lr_backoff).max(c.lr_min_factor);
        self.cooldown_left = c.lr_cooldown.max(1);
        self.lr_cuts += 1;
        let reason = if self.lr_factor < from {
            format!("{why}: learning rate × {} for {} steps", c.lr_backoff, c.lr_cooldown)
        } else {
            format!("{why}: learning rate held at its floor for {} more steps", c.lr_cooldown)
        };
        let mut a = Action::new(step, ActionKind::LrCut, reason);
        a.lr_factor = Some(self.lr_factor);
        a
    }

    /// Records what step `step` did and returns the actions it calls for. A
    /// `rollback` action asks the caller to restore the last good checkpoint
    /// (and then [`Controller::rolled_back`]); a `stop` action (a rollback past
    /// `--max-rollbacks`) asks it to end the run as failed.
    pub fn record(&mut self, step: u64, o: &Outcome) -> Vec<Action> {
        let mut actions = Vec::new();
        if let Some(reason) = &o.skipped {
            self.skips += 1;
            self.engine_skips += o.by_engine as u64;
            self.consecutive_bad += 1;
            let who = if o.by_engine { "engine guard" } else { "controller" };
            actions.push(Action::new(step, ActionKind::Skip, format!("{reason} ({who}; weights untouched)")));
            let overflow = o.by_engine && o.scale_after < o.scale_before;
            if o.scale_after < o.scale_before {
                let mut a = Action::new(
                    step,
                    ActionKind::ScaleBackoff,
                    format!("skipped step: loss scale {} -> {}", o.scale_before, o.scale_after),
                );
                a.scale = Some(o.scale_after);
                actions.push(a);
            }
            if !self.config.enabled {
                return actions;
            }
            if !overflow || self.config.lr_cut_on_overflow {
                actions.push(self.cut_lr(step, "bad step"));
            }
            let k = self.config.rollback_after;
            if k > 0 && self.consecutive_bad >= k {
                if self.rollbacks >= self.config.max_rollbacks {
                    actions.push(Action::new(
                        step,
                        ActionKind::Stop,
                        format!(
                            "training diverged: {} bad steps in a row after {} rollbacks (--max-rollbacks {}); \
                             last: {reason}",
                            self.consecutive_bad, self.rollbacks, self.config.max_rollbacks
                        ),
                    ));
                    return actions;
                }
                actions.push(Action::new(
                    step,
                    ActionKind::Rollback,
                    format!("{} bad steps in a row (last: {reason})", self.consecutive_bad),
                ));
            }
        } else {
            self.consecutive_bad = 0;
            self.global.push(o.norms.global.ln(), self.config.ema);
            if self.tensors.len() != o.norms.tensors.len() {
                self.tensors = o.norms.tensors.iter().map(|(n, _)| (n.clone(), Ema::default())).collect();
            }
            for ((_, ema), (_, n)) in self.tensors.iter_mut().zip(&o.norms.tensors) {
                if *n > 0.0 && n.is_finite() {
                    ema.push(n.ln(), self.config.ema);
                }
            }
            if let (Some(spike), true) = (&o.spike, self.config.enabled) {
                self.spikes += 1;
                actions.push(self.cut_lr(step, spike));
            }
        }
        actions
    }

    /// After a rollback: the history of the checkpoint (`at_checkpoint`) comes
    /// back, the counters and the lowered learning rate stay.
    pub fn rolled_back(&mut self, at_checkpoint: &Controller) {
        self.global = at_checkpoint.global.clone();
        self.tensors = at_checkpoint.tensors.clone();
        self.consecutive_bad = 0;
        self.rollbacks += 1;
    }

    /// A summary for the run's JSON.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "enabled": self.config.enabled, "skips": self.skips, "engine_skips": self.engine_skips,
            "spikes": self.spikes, "lr_cuts": self.lr_cuts, "rollbacks": self.rollbacks,
            "lr_factor": self.lr_factor, "config": self.config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norms(g: f64, t: &[f64]) -> Norms {
        Norms { global: g, tensors: t.iter().enumerate().map(|(i, &x)| (format!("t{i}"), x)).collect() }
    }

    /// Feeds one step through assess/record the way `train` does.
    fn step(c: &mut Controller, k: u64, n: &Norms, engine_skip: bool) -> (Assessment, Vec<Action>) {
        let mut acts = c.begin_step(k);
        let a = c.assess(n);
        let skipped = if engine_skip { Some("gradient norm is not finite".to_string()) } else { a.skip.clone() };
        let o = Outcome {
            norms: n,
            skipped,
            by_engine: engine_skip,
            spike: a.spike.clone(),
            scale_before: 1.0,
            scale_after: 1.0,
        };
        acts.extend(c.record(k, &o));
        (a, acts)
    }

    fn warm(c: &mut Controller, steps: u64) {
        for k in 1..=steps {
            let wobble = 1.0 + 0.05 * ((k % 3) as f64 - 1.0);
            let (a, acts) = step(c, k, &norms(0.8 * wobble, &[0.5 * wobble, 0.3]), false);
            assert_eq!(a.skip, None);
            assert!(acts.is_empty(), "{acts:?}");
        }
    }

    #[test]
    fn an_outlier_is_skipped_only_after_warmup() {
        let mut c = Controller::new(ControllerConfig::default());
        // During warm-up even a wild norm is applied (and learnt).
        let (a, _) = step(&mut c, 1, &norms(50.0, &[40.0, 1.0]), false);
        assert_eq!(a.skip, None);
        let mut c = Controller::new(ControllerConfig::default());
        warm(&mut c, 30);
        let (a, acts) = step(&mut c, 31, &norms(40.0, &[30.0, 0.3]), false);
        // The deviation the log keeps is the one that decided, with its tensor.
        let (z, whose) = a.risk.clone().expect("a risk after warm-up");
        assert!(z > c.config.skip_z && whose == "t0", "{z} {whose}");
        let why = a.skip.expect("skipped");
        assert!(why.contains("outlier") && why.contains("t0"), "the worst tensor is named: {why}");
        assert_eq!(acts.iter().map(|a| a.action.name()).collect::<Vec<_>>(), ["skip", "lr_cut"]);
        assert_eq!(c.lr_factor, 0.5);
        assert_eq!(c.global.n, 30, "a skipped step does not feed the history");
    }

    #[test]
    fn a_single_tensor_outlier_is_caught_when_the_global_norm_is_calm() {
        let mut c = Controller::new(ControllerConfig::default());
        warm(&mut c, 30);
        // t1 jumps 20x but is small next to t0: the global norm barely moves.
        let (a, _) = step(&mut c, 31, &norms(0.82, &[0.5, 6.0]), false);
        assert!(a.skip.as_deref().unwrap_or("").contains("t1"), "{a:?}");
    }

    #[test]
    fn a_spike_cuts_the_rate_and_the_rate_comes_back() {
        let cfg = ControllerConfig { lr_cooldown: 5, ..Default::default() };
        let mut c = Controller::new(cfg);
        warm(&mut c, 30);
        // ×8 is ln 8 / 0.25 = 8.3 deviations at the std floor: a spike (7), not an outlier (10).
        let (a, acts) = step(&mut c, 31, &norms(0.8 * 8.0, &[0.5 * 8.0, 0.3]), false);
        assert_eq!(a.skip, None);
        assert!(a.spike.is_some());
        assert_eq!(acts[0].action.name(), "lr_cut");
        assert_eq!(c.lr_factor, 0.5);
        let mut restored = None;
        for k in 32..40 {
            let (_, acts) = step(&mut c, k, &norms(0.8, &[0.5, 0.3]), false);
            if acts.iter().any(|a| a.action.name() == "lr_restore") {
                restored = Some(k);
            }
        }
        assert_eq!(restored, Some(36), "5 steps after the cut");
        assert_eq!(c.lr_factor, 1.0);
    }

    /// An f16 overflow the dynamic scale backs off from is the scaler's to
    /// handle: skipped and backed off, the learning rate kept (unless asked).
    #[test]
    fn an_overflow_skip_backs_off_without_an_lr_cut() {
        for cut in [false, true] {
            let mut c = Controller::new(ControllerConfig { lr_cut_on_overflow: cut, ..Default::default() });
            warm(&mut c, 30);
            let n = norms(f64::INFINITY, &[f64::INFINITY, 0.3]);
            let o = Outcome {
                norms: &n,
                skipped: Some("gradient norm is not finite".into()),
                by_engine: true,
                spike: None,
                scale_before: 65536.0,
                scale_after: 32768.0,
            };
            let kinds: Vec<_> = c.record(31, &o).iter().map(|a| a.action.name()).collect();
            let want = if cut { vec!["skip", "scale_backoff", "lr_cut"] } else { vec!["skip", "scale_backoff"] };
            assert_eq!(kinds, want);
            assert_eq!(c.consecutive_bad, 1, "it still counts towards a rollback");
        }
    }

    #[test]
    fn bad_steps_in_a_row_roll_back_and_then_give_up() {
        let cfg = ControllerConfig { rollback_after: 3, max_rollbacks: 1, ..Default::default() };
        let mut c = Controller::new(cfg);
        warm(&mut c, 25);
        let snapshot = c.clone();
        let nan = norms(f64::NAN, &[f64::NAN, 0.3]);
        let mut kinds = Vec::new();
        for k in 26..=28 {
            let (a, acts) = step(&mut c, k, &nan, true);
            assert_eq!(a.skip, None, "non-finite steps are the engine's to skip");
            kinds.extend(acts.into_iter().map(|a| a.action.name()));
        }
        assert_eq!(kinds.iter().filter(|k| **k == "skip").count(), 3);
        assert_eq!(kinds.last().copied(), Some("rollback"));
        assert!(c.lr_factor < 0.2, "three cuts: {}", c.lr_factor);
        c.rolled_back(&snapshot);
        assert_eq!((c.consecutive_bad, c.rollbacks, c.skips), (0, 1, 3));
        // A good step resets the streak; then three more bad ones exceed --max-rollbacks.
        step(&mut c, 29, &norms(0.8, &[0.5, 0.3]), false);
        step(&mut c, 30, &nan, true);
        step(&mut c, 31, &nan, true);
        let o = Outcome {
            norms: &nan,
            skipped: Some("x".into()),
            by_engine: true,
            spike: None,
            scale_before: 1.0,
            scale_after: 1.0,
        };
        let acts = c.record(32, &o);
        let stop = acts.last().unwrap();
        assert_eq!(stop.action.name(), "stop");
        assert!(stop.reason.contains("diverged") && stop.reason.contains("--max-rollbacks 1"), "{stop:?}");
    }

    #[test]
    fn a_backed_off_scale_is_reported_and_the_lr_floor_holds() {
        let cfg = ControllerConfig { rollback_after: 0, lr_min_factor: 0.25, ..Default::default() };
        let mut c = Controller::new(cfg);
        let nan = norms(f64::INFINITY, &[1.0]);
        let o = |before, after| Outcome {
            norms: &nan,
            skipped: Some("gradient norm is not finite".into()),
            by_engine: true,
            spike: None,
            scale_before: before,
            scale_after: after,
        };
        let acts = c.record(1, &o(65536.0, 32768.0));
        assert_eq!(acts[1].action.name(), "scale_backoff");
        assert_eq!(acts[1].scale, Some(32768.0));
        for k in 2..6 {
            let acts = c.record(k, &o(1.0, 1.0));
            assert!(acts.iter().all(|a| a.action.name() != "rollback" && a.action.name() != "scale_backoff"));
        }
        assert_eq!(c.lr_factor, 0.25);
    }

    #[test]
    fn disabled_it_only_reports_engine_skips() {
        let cfg = ControllerConfig { enabled: false, ..Default::default() };
        let mut c = Controller::new(cfg);
        warm(&mut c, 30);
        let (a, _) = step(&mut c, 31, &norms(400.0, &[300.0, 0.3]), false);
        assert_eq!((a.skip, a.spike), (None, None));
        for k in 32..40 {
            let (_, acts) = step(&mut c, k, &norms(f64::NAN, &[0.5, 0.3]), true);
            assert_eq!(acts.len(), 1, "only the skip: {acts:?}");
        }
        assert_eq!(c.lr_factor, 1.0);
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let mut c = Controller::new(ControllerConfig::default());
        warm(&mut c, 7);
        let back: Controller = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!((back.global.n, back.tensors.len(), back.lr_factor), (c.global.n, c.tensors.len(), c.lr_factor));
        assert!((back.global.mean - c.global.mean).abs() < 1e-12 && (back.global.var - c.global.var).abs() < 1e-12);
        assert_eq!(back.config, c.config);
    }

    #[test]
    fn action_kinds_are_written_by_their_names() {
        for k in ActionKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.name()));
            assert_eq!(serde_json::from_value::<ActionKind>(serde_json::json!(k.name())).unwrap(), k);
        }
        let a = Action::new(4, ActionKind::ScaleBackoff, "why".into());
        assert_eq!(a.line(), "step      4  SCALE_BACKOFF: why");
    }
}

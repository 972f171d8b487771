//! The training controller's options of `train`; the controller itself is
//! [`crate::train::controller`].

use clap::Args;

use super::common::CliError;
use crate::train::ControllerConfig;

/// The controller's thresholds, as `train` options (see
/// [`crate::train::controller`]).
#[derive(Args, Debug, Clone)]
pub struct ControllerArgs {
    /// Turn the controller off: only the engine's guard acts (non-finite or zero norm: skip).
    #[arg(long)]
    pub no_controller: bool,
    /// Applied steps of norm history before outliers and spikes are judged.
    #[arg(long, default_value_t = 20)]
    pub gn_warmup: u64,
    /// Decay of the moving mean and variance of ln(gradient norm) (0 < β < 1).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub gn_ema: f64,
    /// Skip a step whose global or per-tensor ln-norm is this many deviations above its mean.
    #[arg(long, default_value_t = 10.0, allow_negative_numbers = true)]
    pub gn_skip_z: f64,
    /// Lower the learning rate (and apply the step) above this many deviations.
    #[arg(long, default_value_t = 7.0, allow_negative_numbers = true)]
    pub gn_spike_z: f64,
    /// Floor of the ln-norm deviation (0.25: a 5.8x jump is 7 deviations at least, 12x is 10).
    #[arg(long, default_value_t = 0.25, allow_negative_numbers = true)]
    pub gn_min_std: f64,
    /// Factor on the learning rate at each risk event.
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    pub lr_backoff: f64,
    /// Steps the lowered learning rate lasts after the last risk event.
    #[arg(long, default_value_t = 50)]
    pub lr_cooldown: u64,
    /// The learning rate never goes below base × this.
    #[arg(long, default_value_t = 0.0625, allow_negative_numbers = true)]
    pub lr_min_factor: f64,
    /// Roll back to the last good checkpoint after this many bad (skipped) steps in a row (0: never).
    #[arg(long, default_value_t = 3)]
    pub rollback_after: u32,
    /// Fail the run (exit 1) on the rollback after this many.
    #[arg(long, default_value_t = 5)]
    pub max_rollbacks: u32,
    /// Also cut the learning rate when the engine's guard skips an f16 overflow
    /// that a dynamic loss scale backs off from (by default the scale is the remedy).
    #[arg(long)]
    pub lr_cut_on_overflow: bool,
}

impl ControllerArgs {
    pub fn config(&self) -> Result<ControllerConfig, CliError> {
        let bad = |m: String| Err(CliError::Usage(m));
        let pos = |x: f64| x.is_finite() && x > 0.0;
        if !(self.gn_ema > 0.0 && self.gn_ema < 1.0) {
            return bad(format!("--gn-ema must be between 0 and 1 (exclusive), got {}", self.gn_ema));
        }
        for (name, x) in [("--gn-skip-z", self.gn_skip_z), ("--gn-spike-z", self.gn_spike_z)] {
            if !pos(x) {
                return bad(format!("{name} must be a finite positive number, got {x}"));
            }
        }
        if self.gn_spike_z > self.gn_skip_z {
            return bad(format!("--gn-spike-z ({}) must not exceed --gn-skip-z ({})", self.gn_spike_z, self.gn_skip_z));
        }
        if !pos(self.gn_min_std) {
            return bad(format!("--gn-min-std must be a finite positive number, got {}", self.gn_min_std));
        }
        if !(pos(self.lr_backoff) && self.lr_backoff <= 1.0) {
            return bad(format!("--lr-backoff must be in (0, 1], got {}", self.lr_backoff));
        }
        if !(pos(self.lr_min_factor) && self.lr_min_factor <= 1.0) {
            return bad(format!("--lr-min-factor must be in (0, 1], got {}", self.lr_min_factor));
        }
        Ok(ControllerConfig {
            enabled: !self.no_controller,
            warmup: self.gn_warmup,
            ema: self.gn_ema,
            skip_z: self.gn_skip_z,
            spike_z: self.gn_spike_z,
            min_std: self.gn_min_std,
            lr_backoff: self.lr_backoff,
            lr_cooldown: self.lr_cooldown,
            lr_min_factor: self.lr_min_factor,
            rollback_after: self.rollback_after,
            max_rollbacks: self.max_rollbacks,
            lr_cut_on_overflow: self.lr_cut_on_overflow,
        })
    }
}

//! What the ladder runs on: the mode, the parameters and batch, the default
//! batch, and the loss scales its backward and optimizer steps run at.

use serde::{Deserialize, Serialize};

use super::{LadderError, Precision};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::{LossScale, StepOptions};

/// How the GPU side gets a stage's inputs: `Isolated`, from the CPU's f32
/// values (every rung judged alone), or `Chained`, from the GPU's own earlier
/// stages (errors propagate as in training). Also the value of `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Isolated,
    Chained,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Isolated => "isolated",
            Mode::Chained => "chained",
        }
    }
}

/// What the ladder runs on.
#[derive(Clone, Debug)]
pub struct Setup {
    pub cfg: Config,
    pub params: Params<f32>,
    pub batch: Batch,
    pub opts: StepOptions,
    pub mode: Mode,
    pub precision: Precision,
}

/// The ladder's default batch: the config's B random windows of T+1 tokens
/// from `ds`, with every other row cut to two thirds of its length, so that
/// padding and masks are always exercised (with B ≥ 2).
pub fn default_batch(ds: &crate::dataset::Dataset, cfg: &Config, seed: u64) -> Result<Batch, LadderError> {
    let err = |e: &dyn std::fmt::Display| LadderError::Input(e.to_string());
    let full = ds.random_windows(seed, cfg.batch, cfg.seq_len + 1).map_err(|e| err(&e))?;
    let rows: Vec<Vec<u8>> = (0..full.rows)
        .map(|b| {
            let r = full.row(b);
            let keep = if b % 2 == 1 { (r.len() * 2 / 3).max(2) } else { r.len() };
            r[..keep.min(r.len())].to_vec()
        })
        .collect();
    Batch::from_rows(&rows).map_err(|e| err(&e))
}

/// The loss scale of the `optim` rung's step: a power of two, so that the
/// scaled gradients are exact and a missing or misplaced unscale shows.
pub const OPTIM_SCALE: f64 = 1024.0;

/// The loss scale of the mixed-precision (f16) ladder's backward passes and
/// of its `optim` step: GradScaler's initial scale, what a mixed step starts
/// with (a power of two: scaling and unscaling are exact).
pub const MIXED_SCALE: f64 = 65536.0;

/// The loss scale the GPU's backward passes run at: 1 in f32 (and bfloat16,
/// whose range is f32's), [`MIXED_SCALE`] in f16. The ladder divides the
/// GPU's scaled tensors by it (exactly) before comparing.
pub fn backward_scale(precision: Precision) -> f64 {
    match precision {
        Precision::F16 => MIXED_SCALE,
        Precision::F32 | Precision::Bf16 => 1.0,
    }
}

/// The loss scale of the `optim` rung's step (and of the chained whole step):
/// [`OPTIM_SCALE`], or [`MIXED_SCALE`] in f16, where it is also the scale of
/// the step's f16 products.
pub fn step_scale(precision: Precision) -> f64 {
    match precision {
        Precision::F16 => MIXED_SCALE,
        Precision::F32 | Precision::Bf16 => OPTIM_SCALE,
    }
}

/// The state's loss scale for the `optim` step: fixed in f32 and bfloat16;
/// dynamic in f16 (GradScaler, from [`MIXED_SCALE`]), so that the rung also
/// checks the scale's update after a good step.
pub(super) fn optim_scale(precision: Precision) -> LossScale {
    let dynamic = precision == Precision::F16;
    LossScale { scale: step_scale(precision), dynamic, ..LossScale::fixed() }
}

pub(super) fn scaled<T: crate::tensor::Real>(g: &Params<T>, s: f64) -> Params<T> {
    let mut g = g.clone();
    for t in g.tensors_mut() {
        t.data.iter_mut().for_each(|x| *x *= T::of(s));
    }
    g
}

/// Whether the GPU holds `name` multiplied by the loss scale when the stage
/// that writes it has run: the gradients of the backward pass before the
/// optimizer unscales them (`ctx.token_norm` is computed unscaled).
pub(super) fn carries_scale(name: &str) -> bool {
    name == "loss.dlogits" || name.starts_with("grad.") || name.contains(".d_")
}

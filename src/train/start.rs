//! Where a training run starts (a fresh model, a checkpoint's weights, or a
//! saved run, refusing options that clash with it), the batch of each step
//! with its rows' origins, and the check that keeps non-finite weights out
//! of every file.

use std::path::PathBuf;

use super::TrainError;
use super::controller::Controller;
use super::run::TrainPlan;
use super::state::{SavedRun, load_run, resume_file};
use crate::checkpoint::LoadOptions;
use crate::dataset::{Batch, Dataset, RowOrigin};
use crate::engine::TrainState;
use crate::engine::inputs::{ModelError, ParamSource, load_model};
use crate::model::{Config, Params};

/// Refuses weights that are not all finite before they are written: an
/// update that overflowed (a learning rate far too large) stops the run, and
/// the files keep the last good state (step `good_step`). Under
/// `--allow-non-finite` (`load`) a run started from non-finite weights on
/// purpose writes what it computes.
pub(super) fn finite_unless_allowed(
    cfg: &Config,
    params: &Params<f32>,
    step: u64,
    good_step: u64,
    load: LoadOptions,
) -> Result<(), TrainError> {
    if load.allow_non_finite {
        return Ok(());
    }
    let bad = crate::checkpoint::non_finite_params(cfg, params);
    match bad.first() {
        None => Ok(()),
        Some((name, n)) => Err(TrainError::Stopped {
            step,
            reason: format!(
                "the update made {n} value(s) of {name} non-finite ({} tensor(s) in all); nothing of it was written, \
                 the checkpoint of step {good_step} is the last good state (lower --lr)",
                bad.len()
            ),
        }),
    }
}

/// The batch of step `step` (the same whatever happened before it), and
/// where each of its rows came from.
pub(super) fn batch_at(
    ds: &Dataset,
    seed: u64,
    step: u64,
    rows: usize,
    len: usize,
    pad: bool,
) -> Result<(Batch, Vec<RowOrigin>), TrainError> {
    let (b, origins) = ds.random_windows_traced(batch_seed(seed, step), rows, len)?;
    Ok((if pad { pad_to(&b, len - 1) } else { b }, origins))
}

/// The seed of step `step`'s batch in a run seeded `seed`: every loop that
/// walks a run's steps (`train`, `drift`) draws the same batches.
pub fn batch_seed(seed: u64, step: u64) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(step)
}

/// Pads every row to `t + 1` tokens (masked), so that a GPU workspace sized
/// once fits every batch. Padding changes no valid position (docs/model.md).
pub fn pad_to(b: &Batch, t: usize) -> Batch {
    if b.t >= t {
        return b.clone();
    }
    let mut tokens = vec![0u8; b.rows * (t + 1)];
    for r in 0..b.rows {
        tokens[r * (t + 1)..r * (t + 1) + b.lens[r]].copy_from_slice(b.row(r));
    }
    Batch { rows: b.rows, t, tokens, lens: b.lens.clone() }
}

/// Where a run starts.
pub(super) struct Start {
    pub config: Config,
    pub state: TrainState,
    pub controller: Controller,
    pub step: u64,
    pub seed: u64,
    pub rows: usize,
    pub t: usize,
    pub resumed: Option<PathBuf>,
}

/// A fresh model, a checkpoint's weights, or the saved run of `plan.resume`
/// (refusing options that clash with it).
pub(super) fn start(plan: &TrainPlan, ds: &Dataset) -> Result<Start, TrainError> {
    let Some(r) = &plan.resume else {
        let seed = plan.seed.unwrap_or(0);
        let source = match &plan.checkpoint {
            Some(p) => ParamSource::Checkpoint(p, plan.load),
            None => ParamSource::Init { config: plan.config.as_deref().unwrap_or("small"), seed },
        };
        // Weights, gradients and two moments, checked before the init allocates them.
        let (config, params) = match &plan.weights {
            Some((config, params)) => (config.clone(), params.clone()),
            None => load_model(source, 4, 4).map_err(|e| match e {
                ModelError::Checkpoint(e) => TrainError::Checkpoint(e),
                ModelError::Config(e) => TrainError::Config(e),
                ModelError::Size(e) => TrainError::Failed(e.to_string()),
            })?,
        };
        let scale =
            plan.loss_scale.clone().unwrap_or_else(|| crate::step::LossScale::for_precision(plan.vulkan.precision));
        let (rows, t) = (plan.batch.unwrap_or(config.batch), plan.seq_len.unwrap_or(config.seq_len));
        let state = TrainState::fresh(&config, params, scale);
        let controller = Controller::new(plan.controller.clone());
        return Ok(Start { config, state, controller, step: 0, seed, rows, t, resumed: None });
    };
    let path = resume_file(r);
    let SavedRun { config, state, run: rs } = load_run(&path, plan.load)?;
    let clash = |what: &str, given: String, kept: String| {
        TrainError::Usage(format!("--{what} {given}: the run being resumed has {kept}; drop --{what}"))
    };
    match (plan.seed, plan.batch, plan.seq_len) {
        (Some(s), _, _) if s != rs.seed => return Err(clash("seed", s.to_string(), rs.seed.to_string())),
        (_, Some(b), _) if b != rs.batch => return Err(clash("batch", b.to_string(), rs.batch.to_string())),
        (_, _, Some(l)) if l != rs.seq_len => return Err(clash("seq-len", l.to_string(), rs.seq_len.to_string())),
        _ => {}
    }
    if plan.carry != rs.carry {
        let name = |c: &Option<super::carry::CarryWalk>| match c {
            Some(w) => format!("--carry-state --carry-windows {}", w.windows),
            None => "random windows from zero (no --carry-state)".to_string(),
        };
        return Err(TrainError::Usage(format!(
            "{}: the run being resumed trained with {}; resume it the same way (now {})",
            path.display(),
            name(&rs.carry),
            name(&plan.carry)
        )));
    }
    if rs.dataset_hash != ds.content_hash() {
        return Err(TrainError::Usage(format!(
            "--data {}: the run being resumed trained on {} (content hash {}), this file differs",
            plan.data.display(),
            rs.dataset,
            rs.dataset_hash
        )));
    }
    if rs.step >= plan.steps {
        return Err(TrainError::Usage(format!(
            "{}: the run is already at step {}; ask for more with --steps (now {})",
            path.display(),
            rs.step,
            plan.steps
        )));
    }
    // The controller keeps its thresholds with its history.
    Ok(Start {
        config,
        state,
        controller: rs.controller,
        step: rs.step,
        seed: rs.seed,
        rows: rs.batch,
        t: rs.seq_len,
        resumed: Some(path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights with an infinity are refused before any file gets them; finite ones pass.
    #[test]
    fn non_finite_weights_stop_the_run() {
        let cfg = Config::tiny();
        let mut params = Params::<f32>::init(&cfg, 0);
        finite_unless_allowed(&cfg, &params, 3, 2, LoadOptions::default()).unwrap();
        params.head_bias.data[1] = f32::INFINITY;
        let e = finite_unless_allowed(&cfg, &params, 3, 2, LoadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("head.bias") && e.contains("step 2"), "{e}");
        // Under --allow-non-finite the same weights are written as they are.
        finite_unless_allowed(&cfg, &params, 3, 2, LoadOptions { allow_non_finite: true }).unwrap();
    }
}

//! The engine's entry points: [`Engine::run`] submits a [`Plan`] on the batch
//! set last; [`Engine::grads`] and [`Engine::train_step`] set a batch, run
//! and report; [`Engine::report`] reads what the last step did.

use std::time::Instant;

use super::io::state_words;
use super::kernels::st;
use super::{Engine, FlatBuf, GpuGrads, Stage, Staged};
use crate::dataset::Batch;
use crate::step::{OptimOutcome, SkipReason, StepReport};
use crate::vk::{Sequence, Timing, Timings, VkError, VkResult};

/// What one submit runs on the batch set last, after the step's beginning
/// (this step's loss scale, counters cleared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan<'s> {
    /// Forward and backward, then the gradients' unscale and norm: the
    /// batch's loss and gradients, nothing applied. Timed per dispatch.
    Grads,
    /// The whole training step, the optimizer included. Timed as
    /// [`Engine::set_timing`] says.
    Step,
    /// These stages alone (the ladder's isolated runs, the optimizer on
    /// uploaded gradients). Timed per dispatch.
    Stages(&'s [Stage]),
}

/// Whether a training step replays the sequence recorded for an earlier
/// batch of the same shape ([`Engine::train_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// Record the step afresh, submit it, drop it.
    No,
    /// Replay the recorded step (recording it first where there is none):
    /// the host's work per step is writing the batch and one submit.
    Yes,
}

impl Engine {
    /// Runs `plan` in one submit: the timings, with each stage's device
    /// milliseconds (`None` without timestamps).
    pub fn run(&self, plan: Plan<'_>) -> VkResult<Staged> {
        let timing = if plan == Plan::Step { self.timing } else { Timing::PerDispatch };
        let t0 = Instant::now();
        let mut seq = Sequence::with_timing(&self.ctx, timing)?;
        let t1 = Instant::now();
        let ranges = self.record_plan(&mut seq, plan)?;
        let t2 = Instant::now();
        seq.end()?;
        let t3 = Instant::now();
        let timings = seq.replay()?;
        let t4 = Instant::now();
        drop(seq);
        let t5 = Instant::now();
        if self.env.host_profile() && plan == Plan::Step {
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            eprintln!(
                "host: new {:.3} record {:.3} end {:.3} submit+wait {:.3} drop {:.3} ms ({} dispatches)",
                ms(t0, t1),
                ms(t1, t2),
                ms(t2, t3),
                ms(t3, t4),
                ms(t4, t5),
                timings.dispatches.len()
            );
        }
        let per_stage = ranges
            .into_iter()
            .map(|(s, r)| {
                let ns: Option<Vec<f64>> = timings.dispatches[r].iter().map(|d| d.ns).collect();
                (s, ns.map(|v| v.iter().sum::<f64>() / 1e6))
            })
            .collect();
        Ok((timings, per_stage))
    }

    /// Loss and gradients (unscaled, S = the current scale) of `batch`.
    pub fn grads(&mut self, batch: &Batch) -> VkResult<GpuGrads> {
        self.set_batch(batch)?;
        self.run(Plan::Grads)?;
        let r = self.report()?;
        Ok(GpuGrads {
            loss: r.loss,
            n_targets: r.n_targets,
            grad_norm: r.optim.grad_norm,
            capped: r.capped_tokens,
            grads: self.read_params(FlatBuf::Grads)?,
        })
    }

    /// One training step on `batch`, recorded afresh or replayed (see
    /// [`Replay`]); reads back only the state words.
    pub fn train_step(&mut self, batch: &Batch, replay: Replay) -> VkResult<(StepReport, Timings)> {
        match replay {
            Replay::No => {
                self.set_batch(batch)?;
                let (timings, _) = self.run(Plan::Step)?;
                Ok((self.report()?, timings))
            }
            Replay::Yes => self.step_replaying(batch),
        }
    }

    /// [`Replay::Yes`]: the batch's data, its target count included, is in
    /// buffers the recorded commands read, so one recording serves every
    /// batch of its shape. The recording ends by copying the state words
    /// into a host-visible buffer, so the report needs no second submit.
    fn step_replaying(&mut self, batch: &Batch) -> VkResult<(StepReport, Timings)> {
        let t0 = Instant::now();
        self.set_batch(batch)?;
        let t1 = Instant::now();
        let timings = {
            let mut cache = self.replay.lock().unwrap_or_else(|p| p.into_inner());
            if cache.is_none() {
                let mut seq = Sequence::with_timing(&self.ctx, self.timing)?;
                self.record_step(&mut seq)?;
                let words = (st::WORDS * 4) as u64;
                seq.copy(&self.state, 0, &self.state_host, 0, words)?;
                // SAFETY: every buffer recorded is this engine's own
                // (parameters, gradients, moments, state and its host copy,
                // decay table, workspace). The recording is kept in the
                // engine's first field, so it is dropped (waiting for its
                // work) before any of them; `forget_replay` drops it before
                // the workspace is replaced, and no other buffer of the
                // engine is ever replaced.
                *cache = Some(unsafe { seq.into_recording()? });
            }
            cache.as_mut().expect("recorded above").replay()?
        };
        // The state words as the step left them (its last command).
        let w = state_words(&self.state_host.read_f32()?);
        if self.env.host_profile() {
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            let t2 = Instant::now();
            eprintln!("host (replayed step): batch {:.3} record-or-replay, wait {:.3} ms", ms(t0, t1), ms(t1, t2));
        }
        Ok((self.report_from(&w)?, timings))
    }

    /// What the last step did, from the state words.
    pub fn report(&self) -> VkResult<StepReport> {
        self.report_from(&self.read_state()?)
    }

    /// What a step did, from the state words `w` it left.
    pub(super) fn report_from(&self, w: &[u32; st::WORDS]) -> VkResult<StepReport> {
        if w[st::GRID_FAIL] != 0 {
            return Err(VkError::Invalid(
                "the grid recurrence's barrier gave up waiting: this device did not run all its workgroups at once; \
                 run with DUALSCOPE_RECURRENCE=seq"
                    .into(),
            ));
        }
        let fl = |i: usize| f32::from_bits(w[i]) as f64;
        let skipped = match w[st::SKIP] {
            0 => None,
            1 => Some(SkipReason::NonFiniteNorm),
            2 => Some(SkipReason::ZeroNorm),
            3 => Some(SkipReason::NonFinitePostClip),
            _ => Some(SkipReason::ZeroPostClip),
        };
        Ok(StepReport {
            loss: fl(st::LOSS),
            n_targets: self.ws()?.n_targets,
            capped_tokens: w[st::CAPPED] as usize,
            optim: OptimOutcome {
                grad_norm: fl(st::NORM),
                clipped: w[st::CLIPPED] == 1,
                post_clip_norm: fl(st::POST_CLIP),
                skipped,
                scale: fl(st::STEP_SCALE),
                next_scale: fl(st::SCALE),
            },
        })
    }
}

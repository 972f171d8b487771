//! The carried-state check (`ladder --carry-check`, docs/carry-state.md): one
//! row of `L = K·T` positions passed whole against the same row cut into `K`
//! chunks of `T` with the state carried from chunk to chunk.
//!
//! With the weights fixed, a chunked pass computes the very function of the
//! whole pass, so each chunk's logits and per-position losses must match the
//! whole pass's positions within the f32 contract (the rung tolerances of
//! `head_fwd` and `loss`), measured against the whole pass in f64. The last
//! chunk's gradients (truncated BPTT: the chunk's loss, the state constant)
//! in f32 are compared with the same chunk's in f64 under the backward rungs'
//! 1e-4. A control makes the check able to fail: the chunks after the first
//! rerun from zero must leave the whole pass's logits at their first `W − 1`
//! positions by far more than the tolerance (the prefix matters).
//!
//! On the GPU (given a context) the same chunks run on the Vulkan engine
//! carrying its own state: each chunk's logits against the whole pass in f64
//! under the same tolerance, its loss under the loss gate, and the last
//! chunk's gradients against the CPU's in f64 from the GPU's carried state
//! under the backward rungs' 1e-4.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::compare::{Comparison, compare};
use super::rung::Rung;
use super::tolerance::LOSS_TOLERANCE;
use crate::cpu::{self, forward};
use crate::dataset::Batch;
use crate::engine::gpu::Context;
use crate::engine::reference::{CpuError, forward_with};
use crate::engine::{Engine, EngineError, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::step::{Carry, LossScale, StepOptions};

/// One chunk against the whole pass's positions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkCheck {
    pub chunk: usize,
    /// The chunk's f32 logits (state carried) against the whole pass in f64.
    pub logits: Comparison,
    /// Its per-position losses, likewise.
    pub token_loss: Comparison,
    /// The first `min(W − 1, T)` positions' logits of the chunk rerun from
    /// zero against the whole pass: large for every chunk after the first.
    pub from_zero_head: Option<Comparison>,
}

/// A gradient of the last chunk, f32 against f64 from the same state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradCheck {
    pub tensor: String,
    pub cmp: Comparison,
}

/// One chunk on the GPU, its state carried by the GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuChunk {
    pub chunk: usize,
    /// Its logits against the whole pass in f64.
    pub logits: Comparison,
    /// |loss − the whole pass's mean over the chunk's positions| / that mean.
    pub loss_rel: f64,
}

/// The GPU side of the check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuCarry {
    pub per_chunk: Vec<GpuChunk>,
    /// The last chunk's gradients against the CPU's in f64 from the GPU's state.
    pub last_chunk_grads: Vec<GradCheck>,
}

/// The whole check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CarryReport {
    pub chunks: usize,
    pub t: usize,
    pub window: usize,
    pub logits_tolerance: f64,
    pub loss_tolerance: f64,
    pub grad_tolerance: f64,
    pub per_chunk: Vec<ChunkCheck>,
    pub last_chunk_grads: Vec<GradCheck>,
    /// The whole pass's loss and the chunks' (their positions' mean).
    pub whole_loss: f64,
    pub chunked_loss: f64,
    /// The GPU side (None: not run, `not_run` says why).
    pub gpu: Option<GpuCarry>,
    pub passed: bool,
    /// What did not run, one line each (the GPU engine).
    pub not_run: Vec<String>,
}

/// Runs the check on `row` (`K·T + 1` tokens) with `params`, on the GPU too
/// where `gpu` is `Ok` (its `Err` is the line `not_run` gets).
pub fn check(
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    k: usize,
    t: usize,
    gpu: Result<&Arc<Context>, String>,
) -> Result<CarryReport, EngineError> {
    assert!(k >= 1 && t >= 1 && row.len() == k * t + 1, "carry check: a row of K·T + 1 tokens");
    let p64 = params.cast::<f64>();
    let whole = forward(cfg, &p64, &Batch::from_rows(&[row]).map_err(|_| CpuError::NoTargets)?)?;
    let v = cfg.vocab;
    let (lt, tt, gt) = (Rung::HeadFwd.tolerance("head.logits"), LOSS_TOLERANCE, Rung::GruBwd.tolerance("grad"));
    let mut carry32: Option<Carry<f32>> = None;
    let mut per_chunk = Vec::with_capacity(k);
    let mut grads = Vec::new();
    let mut sum_loss = 0.0;
    let head = (cfg.window.saturating_sub(1)).min(t);
    for c in 0..k {
        let chunk = Batch::from_rows(&[&row[c * t..c * t + t + 1]]).map_err(|_| CpuError::NoTargets)?;
        let f = forward_with(cfg, params, &chunk, carry32.as_ref())?;
        let want = &whole.logits[c * t * v..(c + 1) * t * v];
        let want_loss = &whole.token_loss[c * t..(c + 1) * t];
        let from_zero_head = (c > 0 && head > 0).then(|| {
            let z = forward(cfg, params, &chunk).expect("the chunk ran once");
            compare(&z.logits[..head * v], &want[..head * v])
        });
        per_chunk.push(ChunkCheck {
            chunk: c,
            logits: compare(&f.logits, want),
            token_loss: compare(&f.token_loss, want_loss),
            from_zero_head,
        });
        sum_loss += f.loss * t as f64;
        if c + 1 == k {
            let (g32, _) = cpu::grads_with(cfg, params, &chunk, None, carry32.as_ref())?;
            let same: Option<Carry<f64>> = carry32.as_ref().map(crate::step::cast_carry);
            let (g64, _) = cpu::grads_with(cfg, &p64, &chunk, None, same.as_ref())?;
            for ((name, a), b) in g32.grads.named(cfg).into_iter().zip(g64.grads.tensors()) {
                grads.push(GradCheck { tensor: name, cmp: compare(&a.data, &b.data) });
            }
        }
        carry32 = Some(f.final_state(cfg));
    }
    let (gpu, not_run) = match gpu {
        Ok(ctx) => (Some(gpu_side(ctx, cfg, params, row, k, t, &whole.logits, &whole.token_loss)?), Vec::new()),
        Err(why) => (None, vec![format!("gpu: {why}")]),
    };
    let ok = |c: &Comparison, tol: f64| c.new_non_finite == 0 && c.rel_l2 <= tol;
    let gpu_ok = gpu.as_ref().is_none_or(|g| {
        g.per_chunk.iter().all(|c| ok(&c.logits, lt) && c.loss_rel <= tt)
            && g.last_chunk_grads.iter().all(|x| ok(&x.cmp, gt))
    });
    let passed = gpu_ok
        && per_chunk.iter().all(|c| {
            ok(&c.logits, lt)
                && ok(&c.token_loss, tt)
                && c.from_zero_head.as_ref().is_none_or(|z| z.rel_l2 > 100.0 * lt)
        })
        && grads.iter().all(|g| ok(&g.cmp, gt));
    Ok(CarryReport {
        chunks: k,
        t,
        window: cfg.window,
        logits_tolerance: lt,
        loss_tolerance: tt,
        grad_tolerance: gt,
        per_chunk,
        last_chunk_grads: grads,
        whole_loss: whole.loss,
        chunked_loss: sum_loss / (k * t) as f64,
        gpu,
        passed,
        not_run,
    })
}

/// The chunks on the Vulkan engine, its own state carried.
#[allow(clippy::too_many_arguments)]
fn gpu_side(
    ctx: &Arc<Context>,
    cfg: &Config,
    params: &Params<f32>,
    row: &[u8],
    k: usize,
    t: usize,
    whole_logits: &[f64],
    whole_loss: &[f64],
) -> Result<GpuCarry, EngineError> {
    let state = TrainState::fresh(cfg, params.clone(), LossScale::fixed());
    let mut e = Engine::vulkan(ctx, cfg, &state, &StepOptions::default(), &VulkanOptions::default())?;
    let p64 = params.cast::<f64>();
    let v = cfg.vocab;
    let mut carry = Carry::<f32>::zeros(cfg, 1);
    let mut per_chunk = Vec::with_capacity(k);
    let mut last_chunk_grads = Vec::new();
    for c in 0..k {
        let chunk = Batch::from_rows(&[&row[c * t..c * t + t + 1]]).map_err(|_| CpuError::NoTargets)?;
        e.set_carry(Some(carry.clone()))?;
        let g = e.grads(&chunk)?;
        let logits = e.read_device(&["head.logits"])?.remove(0);
        let want = whole_loss[c * t..(c + 1) * t].iter().sum::<f64>() / t as f64;
        per_chunk.push(GpuChunk {
            chunk: c,
            logits: compare(&logits, &whole_logits[c * t * v..(c + 1) * t * v]),
            loss_rel: (g.loss - want).abs() / want.abs().max(f64::MIN_POSITIVE),
        });
        if c + 1 == k {
            let same = crate::step::cast_carry::<f64>(&carry);
            let (g64, _) = cpu::grads_with(cfg, &p64, &chunk, None, Some(&same))?;
            for ((name, a), b) in g.grads.named(cfg).into_iter().zip(g64.grads.tensors()) {
                last_chunk_grads.push(GradCheck { tensor: name, cmp: compare(&a.data, &b.data) });
            }
        }
        carry = e.final_state().expect("carrying").clone();
    }
    Ok(GpuCarry { per_chunk, last_chunk_grads })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks of a T that is not a multiple of anything, W > 1: passes, and
    /// the control (chunks from zero) is far off.
    #[test]
    fn chunked_equals_whole_at_tiny() {
        let mut cfg = Config::tiny();
        cfg.window = 4;
        let p = Params::<f32>::init(&cfg, 7);
        let mut rng = crate::rng::Rng::new(8);
        let row: Vec<u8> = (0..3 * 7 + 1).map(|_| rng.below(256) as u8).collect();
        let r = check(&cfg, &p, &row, 3, 7, Err("not asked".into())).unwrap();
        assert!(r.passed, "{r:#?}");
        assert!((r.whole_loss - r.chunked_loss).abs() <= 1e-5 * r.whole_loss);
        for c in &r.per_chunk[1..] {
            assert!(c.from_zero_head.as_ref().unwrap().rel_l2 > 1e-3, "{c:?}");
        }
    }
}

//! The drift loop: three runs in lockstep (the Vulkan engine, the CPU
//! reference in f32 and in f64) on `train`'s batches, each step's
//! divergences against the envelope, and the first step outside written as a
//! capture.

use std::path::Path;
use std::sync::Arc;

use super::TriageError;
use super::drift::{
    DRIFT_FORMAT, DriftPlan, DriftReport, DriftStep, Envelope, Outside, REPORT_FILE, TensorInfo, rel_diff,
};
use crate::capture::{BatchMeta, CAPTURE_FORMAT, CAPTURES_DIR, Capture, CaptureMeta, DatasetRef, Recorded};
use crate::cpu;
use crate::dataset::{Batch, Dataset, RowOrigin};
use crate::engine::gpu::{Context, Timing};
use crate::engine::{Engine, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::step::{LossScale, OptimState, StepReport};
use crate::train::{batch_seed, pad_to};

/// What the loop tells as it goes; every method defaults to nothing.
pub trait Observer {
    /// The run about to start (no steps yet).
    fn begin(&mut self, _r: &DriftReport) {}
    /// Step `s` is done (already the last of `r.steps`).
    fn step(&mut self, _r: &DriftReport, _s: &DriftStep) {}
    /// A note from the engine (a recurrence fallback), once.
    fn note(&mut self, _note: &str) {}
}

/// An observer that tells nothing.
impl Observer for () {}

/// Per tensor: the divergence of the GPU from the f32 CPU run, the rounding
/// reference (f32 CPU from f64 CPU) and the envelope, with the worst tensor.
fn measure(
    cfg: &Config,
    env: &Envelope,
    step: u64,
    gpu: &Params<f32>,
    p32: &Params<f32>,
    p64: &Params<f64>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (g, c, d) = (gpu.named(cfg), p32.named(cfg), p64.named(cfg));
    let mut div = Vec::with_capacity(c.len());
    let mut reference = Vec::with_capacity(c.len());
    let mut envelope = Vec::with_capacity(c.len());
    for ((_, tg), ((_, t32), (_, t64))) in g.iter().zip(c.iter().zip(d.iter())) {
        div.push(rel_diff(&tg.data, &t32.data));
        let r = rel_diff(&t32.data, &t64.data);
        reference.push(r);
        envelope.push(env.bound(r, step));
    }
    (div, reference, envelope)
}

/// Runs `plan` on `ds` with the Vulkan engine on `ctx`, telling `obs` as it
/// goes; with `plan.out`, writes the first step outside the envelope as a
/// capture and the report as `drift.json`.
pub fn run(
    ctx: &Arc<Context>,
    plan: &DriftPlan,
    ds: &Dataset,
    obs: &mut dyn Observer,
) -> Result<DriftReport, TriageError> {
    plan.check()?;
    let cfg = &plan.config;
    // The f64 run's activations are the largest; its weights, moments and
    // gradients come on top of the f32 ones.
    crate::engine::inputs::check_shape(cfg, plan.rows, plan.t, 8)?;
    crate::engine::inputs::check_params(cfg, 12, 4, "--config").map_err(|e| TriageError::Failed(e.to_string()))?;
    if let Some(d) = &plan.out {
        prepare_out(d)?;
    }
    // The GPU from its precision's loss scale, its step timed as a whole (as `train` runs it).
    let state = TrainState::fresh(cfg, plan.start.clone(), crate::step::LossScale::for_precision(plan.precision));
    let vk = VulkanOptions { precision: plan.precision, gemm: plan.gemm, timing: Timing::Span };
    let mut gpu = Engine::vulkan(ctx, cfg, &state, &plan.optim, &vk)?;
    let (mut p32, mut o32, mut s32) = (plan.start.clone(), OptimState::<f32>::new(cfg), LossScale::fixed());
    let (mut p64, mut o64, mut s64) = (plan.start.cast::<f64>(), OptimState::<f64>::new(cfg), LossScale::fixed());
    let envelope = Envelope::new(plan.precision);
    let tensors = plan.start.named(cfg).into_iter().map(|(name, t)| TensorInfo { name, n_elements: t.len() }).collect();
    let mut report = DriftReport {
        format_version: DRIFT_FORMAT,
        config: cfg.clone(),
        dataset: ds.name().to_string(),
        precision: plan.precision,
        gemm_path: gpu.precision_and_path().1.to_string(),
        seed: plan.seed,
        rows: plan.rows,
        t: plan.t,
        steps_asked: plan.steps,
        optim: plan.optim,
        envelope,
        planted: plan.planted.map(|p| p.name()),
        planted_step: plan.planted.map(|p| p.step),
        tensors,
        steps: Vec::new(),
        first_outside: None,
        capture: None,
        notes: Vec::new(),
    };
    obs.begin(&report);
    for step in 1..=plan.steps {
        if let Some(p) = plan.planted.filter(|p| p.step == step) {
            gpu.set_fault(Some(p.fault))?;
        }
        let seed = batch_seed(plan.seed, step);
        let (batch, origins) = ds.random_windows_traced(seed, plan.rows, plan.t + 1)?;
        let padded = pad_to(&batch, plan.t);
        // The GPU's state before the step, for the capture of the first step outside.
        let before = match (&plan.out, &report.first_outside) {
            (Some(_), None) => Some(gpu.snapshot()?),
            _ => None,
        };
        let rg = gpu.step(&padded)?;
        if let Some(why) = gpu.take_note() {
            obs.note(&why);
            report.notes.push(why);
        }
        let r32 = cpu::train_step(cfg, &mut p32, &mut o32, &mut s32, &batch, &plan.optim)?;
        let r64 = cpu::train_step(cfg, &mut p64, &mut o64, &mut s64, &batch, &plan.optim)?;
        let pg = gpu.params()?.into_owned();
        let (divergence, reference, env) = measure(cfg, &envelope, step, &pg, &p32, &p64);
        let mut s = DriftStep {
            step,
            loss_gpu: rg.loss,
            loss_cpu32: r32.loss,
            loss_cpu64: r64.loss,
            gpu_skipped: rg.optim.skipped.map(|k| k.to_string()),
            divergence,
            reference,
            envelope: env,
            worst: 0,
            outside: false,
        };
        s.worst = (0..s.divergence.len()).max_by(|&a, &b| s.ratio(a).total_cmp(&s.ratio(b))).unwrap_or(0);
        let out_now: Vec<usize> = (0..s.divergence.len()).filter(|&i| s.is_outside(i)).collect();
        s.outside = !out_now.is_empty();
        let first = s.outside && report.first_outside.is_none();
        if first {
            let name = |i: usize| report.tensors[i].name.clone();
            report.first_outside = Some(Outside {
                step,
                tensor: name(s.worst),
                divergence: s.divergence[s.worst],
                envelope: s.envelope[s.worst],
                tensors: out_now.iter().map(|&i| name(i)).collect(),
            });
        }
        report.steps.push(s);
        if let (true, Some(dir), Some(state)) = (first, &plan.out, before) {
            let c = capture(plan, ds, &report, &gpu, state, padded, origins, &rg);
            report.capture = Some(crate::capture::write(&c, &dir.join(CAPTURES_DIR))?);
        }
        obs.step(&report, report.steps.last().expect("pushed above"));
        if first && plan.stop_at_first {
            break;
        }
    }
    if let Some(d) = &plan.out {
        let text = serde_json::to_vec_pretty(&report).map_err(|e| TriageError::Failed(e.to_string()))?;
        crate::checkpoint::write_atomic(&d.join(REPORT_FILE), &text)
            .map_err(|e| TriageError::Failed(format!("--out {}: {e}", crate::dataset::show_path(d))))?;
    }
    Ok(report)
}

/// `--out DIR` is a folder (made if missing), not a file.
fn prepare_out(d: &Path) -> Result<(), TriageError> {
    let shown = crate::dataset::show_path(d);
    if d.exists() && !d.is_dir() {
        return Err(TriageError::Usage(format!("--out {shown}: is not a folder")));
    }
    std::fs::create_dir_all(d).map_err(|e| TriageError::Usage(format!("--out {shown}: cannot be created ({e})")))
}

/// The capture of the last step of `r` (the first outside the envelope):
/// the GPU's state before it, its batch as the GPU ran it, and why.
#[allow(clippy::too_many_arguments)]
fn capture(
    plan: &DriftPlan,
    ds: &Dataset,
    r: &DriftReport,
    gpu: &Engine,
    state: TrainState,
    batch: Batch,
    origins: Vec<RowOrigin>,
    rg: &StepReport,
) -> Capture {
    let s = r.steps.last().expect("the step is in the report");
    let o = r.first_outside.as_ref().expect("the step is outside");
    let w = s.worst;
    let reason = format!(
        "drift: {} parted from the f32 CPU run by {:.2e}, past the rounding envelope {:.2e} \
         (K = {} × max(reference {:.2e}, floor {:.2e}) × {}); {} tensor(s) outside",
        o.tensor,
        s.divergence[w],
        s.envelope[w],
        r.envelope.k,
        s.reference[w],
        r.envelope.floor(s.step),
        r.envelope.ratio,
        o.tensors.len()
    );
    let meta = CaptureMeta {
        format_version: CAPTURE_FORMAT,
        step: s.step,
        triggers: vec!["drift".into()],
        reasons: vec![reason],
        engine: "gpu".into(),
        precision: plan.precision,
        gemm_path: gpu.as_vulkan().map_or("cpu", |e| e.gemm_path_now().name()).to_string(),
        optim: plan.optim,
        seed: plan.seed,
        loss_scale: state.scale.clone(),
        optim_step: state.optim.step,
        dataset: DatasetRef {
            name: ds.name().to_string(),
            path: ds.path().map(|p| p.display().to_string()),
            content_hash: ds.content_hash(),
            len_bytes: ds.len_bytes() as u64,
        },
        batch: BatchMeta {
            rows: batch.rows,
            t: batch.t,
            lens: batch.lens.clone(),
            origins,
            tokens_hash: String::new(),
        },
        recorded: Some(Recorded {
            loss: rg.loss,
            grad_norm: rg.optim.grad_norm,
            tensor_norms: Vec::new(),
            skipped: rg.optim.skipped.map(|k| k.to_string()),
            scale_after: rg.optim.next_scale,
        }),
        norm_levels: Vec::new(),
        planted: plan.planted.filter(|p| p.step <= s.step).map(|p| p.name()),
        lead_up: Vec::new(),
        written_by: env!("CARGO_PKG_VERSION").into(),
        precision_map: None,
        carry: false,
        carry_windows: None,
        carry_prefix_len: None,
    };
    Capture { meta, config: plan.config.clone(), state, batch, lead_up: Vec::new(), carry: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_keeps_rows_and_lengths() {
        let b = Batch::from_rows(&[b"abc".as_slice(), b"de"]).unwrap();
        let p = pad_to(&b, 5);
        assert_eq!((p.t, p.lens.clone()), (5, vec![3, 2]));
        assert_eq!((p.row(0), p.row(1)), (b.row(0), b.row(1)));
        assert_eq!(p.tokens.len(), 12);
    }
}

//! The runs behind a growth report: the CPU reference in f64 and in f32,
//! then the GPU engine's forward and backward, on one row, each side's
//! series kept and the rest of its trace dropped before the next side runs
//! (so that at most one whole trace is in memory).

use std::sync::Arc;

use super::TriageError;
use super::growth::{Envelope, GrowthReport, Series, series_names};
use crate::cpu::{self, Round, Rounding};
use crate::dataset::Batch;
use crate::engine::gpu::{Context, Timing};
use crate::engine::reference::Trace;
use crate::engine::{Engine, TrainState, VulkanOptions};
use crate::model::{Config, Params};
use crate::step::{GemmChoice, MapStage, Precision, PrecisionMap, StageKind};
use crate::step::{LossScale, StepOptions};
use crate::tensor::Real;

/// What to run: the model, one row of `T + 1` tokens, the GPU's step.
#[derive(Clone, Debug)]
pub struct GrowthPlan {
    pub config: Config,
    pub params: Params<f32>,
    /// `x[0..=T]`.
    pub row: Vec<u8>,
    /// Where the row came from, in words (the report's `source`).
    pub source: String,
    /// The row's first token in its text.
    pub offset: usize,
    pub precision: Precision,
    pub gemm: GemmChoice,
    /// Change the GPU's input token at this position (the CPU's row stays):
    /// a planted error that starts exactly there.
    pub plant_token_at: Option<usize>,
}

impl GrowthPlan {
    /// Positions (T).
    pub fn len(&self) -> usize {
        self.row.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Refuses `--len len` before any row is cut: at least 1, and the CPU's
/// float64 trace (forward, backward and their record) and the report must
/// fit in memory.
pub fn check_len(cfg: &Config, len: usize) -> Result<(), TriageError> {
    if len == 0 {
        return Err(TriageError::Usage("--len must be at least 1".into()));
    }
    let trace = cpu::activation_bytes(cfg, 1, len, 8);
    let widths: u64 = series_names(cfg).len() as u64 * (cfg.hidden.max(cfg.d_embed).max(cfg.attn_dim) as u64 + 8);
    let report = crate::memory::bytes_of(&[len as u64, widths, 8 * 3]);
    let bytes = report.and_then(|r| trace.checked_mul(2)?.checked_add(r)).filter(|_| trace != u64::MAX);
    crate::memory::check_alloc(&format!("--len {len}"), bytes).map_err(|e| TriageError::Usage(e.to_string()))
}

/// `row` with its token at `at` changed (one added, modulo 256): a
/// different embedding from position `at` on, and a different target at
/// `at − 1`.
pub fn plant(row: &[u8], at: usize) -> Vec<u8> {
    let mut r = row.to_vec();
    if let Some(x) = r.get_mut(at) {
        *x = x.wrapping_add(1);
    }
    r
}

/// `p` with the products' weights (every matrix but the embedding, a
/// gather) rounded to `precision`: the first version of the mixed step's
/// reference, which rounded the weights alone (the reference now rounds
/// every operand, [`kernel_rounding`]; kept to compare the two).
pub fn rounded_weights(p: &Params<f32>, precision: Precision) -> Params<f32> {
    let round = |v: f32| match precision {
        Precision::F32 => v,
        Precision::F16 => ::gemm::f16::from_f32(v).to_f32(),
        Precision::Bf16 => crate::ladder::round_bf16(v),
    };
    let mut q = p.clone();
    for t in q.tensors_mut() {
        if t.shape.len() == 2 {
            t.data.iter_mut().for_each(|x| *x = round(*x));
        }
    }
    q.embed = p.embed.clone();
    q
}

/// The operand rounding of the kernels an engine ran under `map`, stage by
/// stage (`rec_on_coopmat`: its recurrences ran on the cooperative-matrix
/// kernels): an f16 product (a GEMM, tiled or on cooperative matrices, and
/// the cooperative-matrix recurrences' f16 copies of `h_{t−1}` and `d_gh`)
/// rounds both operands to IEEE f16; the per-row recurrence kernels' and the
/// embedding's f16 variants round to f16's mantissa in f32's range
/// (`stage_round.glsl`); bf16 stages to bfloat16. With the names of the
/// stages it rounds, as `stage=f16`.
pub fn kernel_rounding(map: &PrecisionMap, rec_on_coopmat: bool) -> (Rounding, Vec<String>) {
    let layers = map.layers();
    let mut rd = Rounding {
        gru_input: vec![Round::Exact; layers],
        gru_input_bwd: vec![Round::Exact; layers],
        gru_rec: vec![Round::Exact; layers],
        gru_rec_bwd: vec![Round::Exact; layers],
        ..Rounding::exact()
    };
    let mut names = Vec::new();
    for (s, p) in map.iter() {
        let round = match p {
            Precision::F32 => continue,
            Precision::Bf16 => Round::Bf16,
            Precision::F16 => match s.kind {
                StageKind::Embed => Round::F16Mantissa,
                StageKind::GruRec if !rec_on_coopmat => Round::F16Mantissa,
                _ => Round::F16,
            },
        };
        names.push(format!("{s}={}", p.name()));
        let MapStage { kind, layer: l, backward } = s;
        match (kind, backward) {
            (StageKind::Embed, false) => rd.embed = round,
            (StageKind::Embed, true) => {}
            (StageKind::GruInput, false) => rd.gru_input[l] = round,
            (StageKind::GruInput, true) => rd.gru_input_bwd[l] = round,
            (StageKind::GruRec, false) => rd.gru_rec[l] = round,
            (StageKind::GruRec, true) => rd.gru_rec_bwd[l] = round,
            (StageKind::Attn, false) => rd.attn = round,
            (StageKind::Attn, true) => rd.attn_bwd = round,
            (StageKind::Head, false) => rd.head = round,
            (StageKind::Head, true) => rd.head_bwd = round,
        }
    }
    (rd, names)
}

/// The series' values from a trace, in the order of `names`, gradients
/// (`.d_` series) divided by `scale`.
fn keep_unscaled(trace: &Trace<f32>, names: &[&str], scale: f64) -> Result<Vec<Vec<f32>>, TriageError> {
    let mut v = keep(trace, names)?;
    if scale != 1.0 {
        let inv = (1.0 / scale) as f32;
        for (x, n) in v.iter_mut().zip(names) {
            if n.contains(".d_") {
                x.iter_mut().for_each(|y| *y *= inv);
            }
        }
    }
    Ok(v)
}

/// The series' values from a trace, in the order of `names`.
fn keep<T: Real>(trace: &Trace<T>, names: &[&str]) -> Result<Vec<Vec<T>>, TriageError> {
    names
        .iter()
        .map(|n| {
            trace.get(n).map(|t| t.data.clone()).ok_or_else(|| TriageError::Failed(format!("the CPU trace has no {n}")))
        })
        .collect()
}

/// The GPU side: its series (gradients divided by the backward's loss
/// scale), loss, product kernel and notes.
struct GpuSide {
    values: Vec<Vec<f32>>,
    loss: f64,
    path: String,
    scale: f64,
    notes: Vec<String>,
    /// What each stage ran in, and whether the recurrences ran on the
    /// cooperative-matrix kernels (the operand rounding the reference copies).
    map: PrecisionMap,
    rec_on_coopmat: bool,
}

fn gpu_side(ctx: &Arc<Context>, plan: &GrowthPlan, batch: &Batch, names: &[&str]) -> Result<GpuSide, TriageError> {
    let cfg = &plan.config;
    // The mixed step's backward runs at the ladder's loss scale, as a
    // training run's would: at 1 its f16 gradients would underflow.
    let scale = crate::ladder::backward_scale(plan.precision);
    let state = TrainState::fresh(cfg, plan.params.clone(), LossScale { scale, ..LossScale::fixed() });
    let vk = VulkanOptions { precision: plan.precision, gemm: plan.gemm, timing: Timing::Span };
    let mut engine = Engine::vulkan(ctx, cfg, &state, &StepOptions::default(), &vk)?;
    let out = engine.grads(batch)?;
    let mut notes = Vec::new();
    if let Some(n) = engine.take_note() {
        notes.push(n);
    }
    let path = engine.precision_and_path().1.to_string();
    let vk_engine = engine.as_vulkan().expect("Engine::vulkan is the Vulkan engine");
    // The one-workgroup recurrences round as the cooperative-matrix ones (true f16).
    let rec_on_coopmat = vk_engine.recurrence_on_coopmat() || vk_engine.recurrence_wg().is_some();
    let map = vk_engine.precision_map();
    let mut values = vk_engine.read_named(names).map_err(crate::engine::EngineError::from)?;
    if ctx.validation_errors() > 0 {
        return Err(crate::engine::EngineError::Validation(ctx.validation_errors()).into());
    }
    if scale != 1.0 {
        let inv = (1.0 / scale) as f32;
        for (v, n) in values.iter_mut().zip(names) {
            if n.contains(".d_") {
                v.iter_mut().for_each(|x| *x *= inv);
            }
        }
    }
    Ok(GpuSide { values, loss: out.loss, path, scale, notes, map, rec_on_coopmat })
}

/// Runs the row on the three sides and compares them position by position;
/// `progress` hears each stage's name.
pub fn run(ctx: &Arc<Context>, plan: &GrowthPlan, progress: &mut dyn FnMut(&str)) -> Result<GrowthReport, TriageError> {
    let cfg = &plan.config;
    let t = plan.len();
    check_len(cfg, t)?;
    if let Some(p) = plan.plant_token_at
        && p >= t
    {
        return Err(TriageError::Usage(format!(
            "--plant-token-at {p}: past the last position ({})",
            t.saturating_sub(1)
        )));
    }
    let batch = Batch::from_rows(&[&plan.row])?;
    let listed = series_names(cfg);
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();

    progress("CPU forward and backward in f64");
    let p64: Params<f64> = plan.params.cast();
    let (f, _, tr64) = cpu::traced(cfg, &p64, &batch, 1.0, None)?;
    let loss_cpu64 = f.loss;
    drop(f);
    let cpu64 = keep(&tr64, &names)?;
    drop(tr64);

    progress("CPU forward and backward in f32");
    let (f, _, tr32) = cpu::traced(cfg, &plan.params, &batch, 1.0, None)?;
    let loss_cpu32 = f.loss;
    drop(f);
    let cpu32 = keep(&tr32, &names)?;
    drop(tr32);

    progress("GPU forward and backward");
    let gpu_batch = match plan.plant_token_at {
        Some(p) => Batch::from_rows(&[plant(&plan.row, p)])?,
        None => batch.clone(),
    };
    let gpu = gpu_side(ctx, plan, &gpu_batch, &names)?;
    drop(gpu_batch);

    // The mixed step's reference: the f32 CPU with every product's operands
    // rounded where the GPU's kernels rounded them (weights, activations,
    // the recurrences' carried state and the gradients at the GPU's loss
    // scale), from the stages the GPU ran.
    let (rounding, rounded_stages) = kernel_rounding(&gpu.map, gpu.rec_on_coopmat);
    let rounded = if plan.precision.is_mixed() && !rounding.is_exact() {
        progress("CPU forward and backward in f32, operands rounded as the GPU's kernels round them");
        let (_, _, tr) = cpu::traced_rounded(cfg, &plan.params, &batch, gpu.scale, &rounding)?;
        Some(keep_unscaled(&tr, &names, gpu.scale)?)
    } else {
        None
    };

    progress("comparing");
    let env = Envelope::new(plan.precision);
    let series = listed
        .iter()
        .enumerate()
        .map(|(i, (name, dir))| {
            let width = cpu64[i].len() / t.max(1);
            let rounded = rounded.as_ref().map(|r| r[i].as_slice());
            Series::new(name, *dir, width, &gpu.values[i], &cpu32[i], &cpu64[i], rounded, &env)
        })
        .collect();
    let mut r = GrowthReport::from_series(cfg.clone(), plan.source.clone(), plan.offset, plan.precision, env, series);
    r.gemm_path = gpu.path;
    r.loss_scale = gpu.scale;
    r.loss_gpu = gpu.loss;
    r.loss_cpu32 = loss_cpu32;
    r.loss_cpu64 = loss_cpu64;
    r.planted_at = plan.plant_token_at;
    r.notes = gpu.notes;
    r.rounded_stages = if rounded.is_some() { rounded_stages } else { Vec::new() };
    Ok(r)
}

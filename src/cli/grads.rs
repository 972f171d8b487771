//! `dualscope grads` and `dualscope step`: one batch made of whole files.

use clap::Args;
use serde_json::json;
use std::path::PathBuf;

use super::args::NonFiniteArg;
use super::backend;
use super::common::{CliError, check_output, emit, rows_from_files};
use super::{EngineArg, OptimArgs, PrecisionArg};
use crate::checkpoint::{load_params_opts, save_params, save_params_with};
use crate::engine::{Engine, GradsOut, TrainState, VulkanOptions};
use crate::step::{LossScale, StepOptions};
use crate::tensor::Real;

/// What `grads` and `step` run: a checkpoint, a batch of whole files, an engine.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// The parameters (safetensors, as `init` writes them).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// A data file; each one is a row made of all its bytes (repeat for more rows).
    #[arg(long, required = true)]
    pub data: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = EngineArg::Cpu)]
    pub engine: EngineArg,
    #[command(flatten)]
    pub trust: NonFiniteArg,
}

#[derive(Args, Debug)]
pub struct GradsArgs {
    #[command(flatten)]
    pub batch: BatchArgs,
    /// Where to write the gradients (safetensors, parameter names).
    #[arg(long)]
    pub out: PathBuf,
    /// Arithmetic of the CPU engine (the file is float32 either way).
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    pub precision: PrecisionArg,
    /// Per-token guard on the `W_ctx` gradient.
    #[arg(long, allow_negative_numbers = true)]
    pub token_cap: Option<f64>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StepArgs {
    #[command(flatten)]
    pub batch: BatchArgs,
    /// Where to write the updated checkpoint.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub optim: OptimArgs,
    #[arg(long)]
    pub json: bool,
}

fn inputs<'a>(ckpt: &'a std::path::Path, data: &'a [PathBuf]) -> Vec<&'a std::path::Path> {
    std::iter::once(ckpt).chain(data.iter().map(|p| p.as_path())).collect()
}

pub fn run_grads(a: &GradsArgs) -> Result<i32, CliError> {
    backend::check_precision(a.batch.engine, a.precision)?;
    super::validate_token_cap(a.token_cap)?;
    check_output("--out", &a.out, &inputs(&a.batch.checkpoint, &a.batch.data))?;
    let (cfg, params) = load_params_opts(&a.batch.checkpoint, a.batch.trust.options())?;
    let elem = match a.precision {
        PrecisionArg::F32 => 4,
        PrecisionArg::F64 => 8,
    };
    let batch = rows_from_files(&a.batch.data, &cfg, elem)?;
    let GradsOut { loss, grad_norm, n_targets, capped, grads } = match (a.batch.engine, a.precision) {
        (EngineArg::Cpu, PrecisionArg::F64) => {
            crate::engine::reference::grads(&cfg, &params.cast::<f64>(), &batch, a.token_cap)?.into()
        }
        (engine, _) => {
            let state = TrainState::fresh(&cfg, params, LossScale::fixed());
            let opts = StepOptions { token_cap: a.token_cap, ..Default::default() };
            Engine::open(engine.kind(), &cfg, state, &opts, &VulkanOptions::default())?.grads(&batch)?
        }
    };
    let meta = vec![
        ("kind".to_string(), "gradients".to_string()),
        ("loss".to_string(), format!("{loss:e}")),
        ("grad_norm".to_string(), format!("{grad_norm:e}")),
    ];
    save_params_with(&a.out, &cfg, &grads, &meta)?;
    emit(
        a.json,
        json!({"loss": loss, "grad_norm": grad_norm, "n_targets": n_targets, "rows": batch.rows,
               "capped_tokens": capped, "precision": precision_name(a.precision), "out": a.out}),
        || {
            println!("loss       {loss:.8}");
            println!("grad_norm  {grad_norm:.8}");
            println!("targets    {n_targets} over {} rows", batch.rows);
            if a.token_cap.is_some() {
                println!("capped     {capped} positions");
            }
            println!("wrote      {}", a.out.display());
        },
    );
    Ok(0)
}

fn precision_name(p: PrecisionArg) -> &'static str {
    match p {
        PrecisionArg::F32 => f32::DTYPE,
        PrecisionArg::F64 => f64::DTYPE,
    }
}

pub fn run_step(a: &StepArgs) -> Result<i32, CliError> {
    let opts = a.optim.options()?;
    check_output("--out", &a.out, &inputs(&a.batch.checkpoint, &a.batch.data))?;
    let (cfg, params) = load_params_opts(&a.batch.checkpoint, a.batch.trust.options())?;
    let batch = rows_from_files(&a.batch.data, &cfg, 4)?;
    let state = TrainState::fresh(&cfg, params, LossScale::fixed());
    let mut engine = Engine::open(a.batch.engine.kind(), &cfg, state, &opts, &VulkanOptions::default())?;
    let r = engine.step(&batch)?;
    if let Some(note) = engine.take_note() {
        eprintln!("note: {note}");
    }
    let params = engine.params()?;
    save_params(&a.out, &cfg, &*params)?;
    let skipped = r.optim.skipped.map(|s| s.to_string());
    emit(
        a.json,
        json!({"loss": r.loss, "grad_norm": r.optim.grad_norm, "skipped": r.optim.skipped.is_some(),
               "skip_reason": skipped, "clipped": r.optim.clipped, "post_clip_norm": r.optim.post_clip_norm,
               "capped_tokens": r.capped_tokens, "out": a.out}),
        || {
            println!("loss       {:.8}", r.loss);
            println!("grad_norm  {:.8}", r.optim.grad_norm);
            match &skipped {
                Some(why) => println!("skipped    yes ({why}); weights unchanged"),
                None => println!("skipped    no{}", if r.optim.clipped { " (clipped)" } else { "" }),
            }
            println!("wrote      {}", a.out.display());
        },
    );
    Ok(0)
}

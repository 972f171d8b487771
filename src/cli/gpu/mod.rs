//! The GPU commands: `gpu-info`, `ladder`, `bisect`, `audit`, `faults` and
//! `gemm-bench`, one file each (bisect, audit and faults in `diagnose.rs`),
//! and what they share: loading the inputs, the fault flag, the JSON file.

mod args;
mod carry_check;
mod diagnose;
mod gemm_bench;
mod headroom;
mod info;
mod ladder;

pub(in crate::cli) use args::{choice, choice_for};
pub use diagnose::{AuditArgs, BisectArgs, FaultsArgs, audit, bisect, faults};
pub use gemm_bench::{GemmBenchArgs, gemm_bench};
pub use info::{GpuInfoArgs, info};
pub use ladder::{LadderArgs, run_ladder};

use std::path::{Path, PathBuf};

use super::args::ModelArgs;
use super::common::CliError;
use crate::ladder::inputs::{self, InputError, ParamSource};
use crate::step::Fault;

pub(in crate::cli) use crate::ladder::inputs::Inputs;

impl From<InputError> for CliError {
    fn from(e: InputError) -> Self {
        match e {
            InputError::Dataset(e) => CliError::Dataset(e),
            InputError::Batch(e) => CliError::Batch(e),
            InputError::Checkpoint(e) => CliError::Checkpoint(e),
            InputError::Config(e) => CliError::Config(e),
            InputError::Ladder(e) => CliError::Usage(e.to_string()),
            InputError::Model(e) => e.into(),
        }
    }
}

/// What ladder, bisect and audit run on (`ladder::inputs::load`): a
/// checkpoint, whose config wins, or a seeded init of `config`, and the
/// dataset. Checks `out` against the inputs first.
pub(in crate::cli) fn load_inputs(
    model: &ModelArgs,
    data: &Option<PathBuf>,
    out: &Option<PathBuf>,
) -> Result<Inputs, CliError> {
    let ModelArgs { config, checkpoint, seed, trust } = model;
    let (config, seed) = (config.as_str(), *seed);
    if let Some(out) = out {
        let mut inputs: Vec<&Path> = data.iter().chain(checkpoint).map(|p| p.as_path()).collect();
        inputs.extend(super::common::config_file(config));
        super::common::check_output("--out", out, &inputs)?;
    }
    let source = match checkpoint {
        Some(_) if config != "small" => {
            return Err(CliError::Usage("--config and --checkpoint: the checkpoint carries its config".into()));
        }
        Some(path) => ParamSource::Checkpoint(path, trust.options()),
        None => {
            // Refused before the init allocates them: the parameters with
            // their gradients, optimizer moments and float64 copies.
            let cfg = crate::model::Config::resolve(config)?;
            crate::engine::inputs::check_params(&cfg, 8, 4, &format!("--config {config}"))?;
            ParamSource::Init { config, seed }
        }
    };
    inputs::load(source, data.as_deref()).map_err(|e| match e {
        InputError::Dataset(e) if data.is_some() => super::common::data_error(e),
        e => e.into(),
    })
}

/// Writes a JSON report atomically.
pub(in crate::cli) fn write_report(out: &Option<PathBuf>, value: &serde_json::Value) -> Result<(), CliError> {
    if let Some(out) = out {
        let text = serde_json::to_string_pretty(value).expect("report serializes");
        crate::checkpoint::write_atomic(out, text.as_bytes())?;
    }
    Ok(())
}

pub(in crate::cli) fn parse_fault(name: &Option<String>) -> Result<Option<Fault>, CliError> {
    match name {
        None => Ok(None),
        Some(n) => Fault::parse(n).map(Some).ok_or_else(|| {
            let all: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            let stage = crate::step::STAGE_FAULT;
            CliError::Usage(format!("--fault {n:?}: the faults are {}, {stage}=STAGE", all.join(", ")))
        }),
    }
}

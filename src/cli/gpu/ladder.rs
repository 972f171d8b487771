//! `dualscope ladder`: the CPU-vs-GPU ladder of MODEL.md, run by
//! `ladder::run`, printed as a table or JSON.

use clap::Args;
use serde_json::json;

use super::{Inputs, choice, load_inputs, parse_fault, write_report};
use crate::cli::args::{DeviceArg, FaultArg, ModelArgs};
use crate::cli::backend::open_context as open;
use crate::cli::common::{CliError, emit};
use crate::ladder::{self, RungResult};
use crate::ladder::{Mode, Precision};
use crate::vk::gemm::GemmChoice;
use crate::vk::{DeviceReport, VkError};

#[derive(Args, Debug)]
pub struct LadderArgs {
    /// Rungs to run, comma-separated (default: every implemented rung).
    #[arg(long, value_delimiter = ',')]
    pub rungs: Vec<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// GEMM kernel for f16 precision, every rung (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<GemmChoice>,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// Text or JSON-lines file to take the batch from (default: the embedded dataset).
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    /// With --len: one row of --len positions starting at this token offset.
    #[arg(long)]
    pub offset: Option<usize>,
    /// One row of this many positions (T; the row holds T+1 tokens) instead
    /// of the config's batch of random windows.
    #[arg(long)]
    pub len: Option<usize>,
    /// isolated: each rung's GPU inputs come from the CPU; chained: from the GPU's own earlier stages.
    #[arg(long, value_enum, default_value_t = Mode::Isolated)]
    pub mode: Mode,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub fault: FaultArg,
    /// Fill every buffer the GPU step writes with NaN before each run, so
    /// that a read of a value never written fails its rung.
    #[arg(long)]
    pub poison: bool,
    #[arg(long)]
    pub json: bool,
}

/// The parameters and the batch the model rungs run on.
fn ladder_inputs(
    a: &LadderArgs,
) -> Result<(crate::model::Config, crate::model::Params<f32>, crate::dataset::Batch, String), CliError> {
    use crate::ladder::inputs::{BatchChoice, ladder_batch};
    let Inputs { cfg, params, ds } = load_inputs(&a.model, &a.data, &a.out)?;
    let choice = match (a.len, a.offset) {
        (Some(len), offset) => BatchChoice::Row { offset: offset.unwrap_or(0), len },
        (None, Some(_)) => return Err(CliError::Usage("--offset needs --len".into())),
        (None, None) => BatchChoice::Windows { seed: a.model.seed },
    };
    let (batch, source) = ladder_batch(&ds, &cfg, choice)?;
    Ok((cfg, params, batch, source))
}

pub fn run_ladder(a: &LadderArgs) -> Result<i32, CliError> {
    let rungs: Vec<String> = if a.rungs.is_empty() {
        ladder::ALL_RUNGS.iter().map(|s| s.to_string()).collect()
    } else {
        a.rungs.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    };
    if rungs.is_empty() {
        return Err(CliError::Usage(format!("--rungs is empty; the rungs are {}", ladder::ALL_RUNGS.join(", "))));
    }
    let rungs = ladder::parse_rungs(&rungs).map_err(|e| CliError::Usage(format!("--rungs: {e}")))?;
    let precision = a.precision;
    let mode = a.mode;
    let choice = choice(a.gemm_path)?;
    let fault = parse_fault(&a.fault.fault)?;
    let (cfg, params, batch, source) = ladder_inputs(a)?;
    let ctx = std::sync::Arc::new(open(a.gpu.device)?);
    let engine_err = |e: ladder::LadderError| match e {
        ladder::LadderError::Vk(VkError::Unsupported(why) | VkError::Invalid(why)) => CliError::Engine(why),
        ladder::LadderError::Vk(e @ (VkError::Alloc { .. } | VkError::Limit(_))) => CliError::Engine(e.to_string()),
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Failed(e.to_string()),
    };
    let setup = ladder::Setup {
        cfg: cfg.clone(),
        params,
        batch: batch.clone(),
        opts: crate::cpu::StepOptions::default(),
        mode,
        precision,
    };
    let spec = ladder::LadderSpec {
        gemm_seed: a.model.seed,
        gemm_choice: choice,
        fault,
        poison: a.poison,
        ..ladder::LadderSpec::new(rungs, setup)
    };
    let report = ladder::run(&ctx, spec, |_| {}).map_err(engine_err)?;
    let ladder::LadderReport { rungs: results, end_to_end, gemm_path, validation_errors, status, .. } = report;
    let value = json!({
        "device": ctx.report().name,
        "config": cfg,
        "precision": precision,
        "gemm_path": gemm_path,
        "mode": mode,
        "fault": fault,
        "poison": a.poison,
        "batch": { "rows": batch.rows, "seq_len": batch.t, "targets": batch.num_targets(), "source": source },
        "validation": { "on": ctx.validation(), "errors": validation_errors },
        "rungs": results,
        "end_to_end": end_to_end,
        "status": status,
    });
    write_report(&a.out, &value)?;
    emit(a.json, value, || {
        println!("batch: {source}; mode {}; precision {}", mode.as_str(), precision.name());
        if let Some(p) = gemm_path {
            println!("products on: {p}");
        }
        if let Some(f) = fault {
            println!("fault planted: {} ({})", f.name(), f.description());
        }
        print_table(ctx.report(), &results, validation_errors);
        if let Some(e) = &end_to_end {
            print_end_to_end(e);
        }
    });
    Ok(if status == ladder::Status::Fail { 1 } else { 0 })
}

fn print_end_to_end(e: &ladder::EndToEnd) {
    println!(
        "\nend-to-end {}: loss gpu {:.7} cpu {:.7} (rel {:.2e}, gate {:.1e}); grad norm gpu {:.6e} cpu {:.6e} (rel {:.2e}, diagnostic {:.1e}); grads rel L2 {:.2e}",
        e.status.as_str(),
        e.loss_gpu,
        e.loss_cpu,
        e.loss_rel_err,
        e.loss_tolerance,
        e.grad_norm_gpu,
        e.grad_norm_cpu,
        e.grad_norm_rel_diff,
        e.grad_norm_tolerance,
        e.grads_rel_l2
    );
    for c in &e.top_contributors {
        println!("  {:<28} {:>5.1}% of the difference, rel L2 {:.2e}", c.tensor, 100.0 * c.share, c.rel_l2);
    }
    for n in &e.notes {
        println!("  {n}");
    }
}

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.3}"))
}

fn print_table(r: &DeviceReport, results: &[RungResult], validation_errors: u64) {
    println!(
        "device {}: {} ({}), validation {}",
        r.index,
        r.name,
        r.driver_name,
        if r.validation { "on" } else { "off" }
    );
    for rung in results {
        println!(
            "\n{:<10} {:<5} rel_l2 {:.3e}  max_abs {:.3e} [{}]  tol {:.1e}  sentinels {}  gpu {} ms  cpu {:.3} ms  [{}, {}]",
            rung.id,
            rung.status.as_str(),
            rung.rel_l2,
            rung.max_abs_err,
            rung.max_abs_case,
            rung.tolerance,
            if rung.sentinel_ok { "ok" } else { "BROKEN" },
            ms(rung.gpu_ms),
            rung.cpu_ms,
            rung.precision.name(),
            rung.gemm_path.unwrap_or("-")
        );
        println!(
            "  {:<5} {:<42} {:<26} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
            "", "case", "shape", "rel_l2", "gpu_f64", "cpu32_f64", "max_abs", "nonfin", "gpu_ms", "cpu_ms"
        );
        for c in &rung.cases {
            println!(
                "  {:<5} {:<42} {:<26} {:>10.3e} {:>10} {:>10.3e} {:>10.3e} {:>8} {:>9} {:>9.3}",
                c.status.as_str(),
                c.name,
                c.params,
                c.rel_l2,
                c.rel_l2_gpu_f64.map_or("-".into(), |x| format!("{x:.3e}")),
                c.rel_l2_cpu_f32,
                c.max_abs_err,
                format!("{}/{}", c.non_finite_cpu, c.non_finite_gpu),
                ms(c.gpu_ms),
                c.cpu_ms
            );
            for n in &c.notes {
                println!("        {n}");
            }
        }
    }
    if validation_errors > 0 {
        println!("\n{validation_errors} Vulkan validation error(s) (see stderr): the run counts as failed");
    }
}

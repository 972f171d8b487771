//! `dualscope precision-bisect`: the smallest set of stages that must stay
//! in f32 for the ladder and the loss gate to pass on one batch
//! (`ladder::precision_bisect`), with every probe. Exit 0 when a passing map
//! was found, 1 when even every stage in f32 fails (no precision problem), 2
//! for a usage or device error.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;
use serde_json::json;

use super::args::{DeviceArg, FaultArg, ModelArgs};
use super::backend::open_context;
use super::common::{CliError, emit};
use super::gpu::{Inputs, choice, load_inputs, parse_fault, write_report};
use super::progress::{Bar, shown};
use crate::engine::gpu::VkError;
use crate::ladder::inputs::{BatchChoice, ladder_batch};
use crate::ladder::{self, Mode, Outcome, PrecisionBisectReport, PrecisionBisectSpec, Setup};
use crate::step::GemmChoice;
use crate::step::Precision;

#[derive(Args, Debug)]
pub struct PrecisionBisectArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text or JSON-lines file to take the batch from (default: the embedded dataset).
    #[arg(long, conflicts_with = "capture")]
    pub data: Option<PathBuf>,
    /// A capture folder (`OUT/captures/step_NNNNNN`): its config, weights, batch and planted fault.
    #[arg(long, conflicts_with_all = ["data", "checkpoint", "len", "offset", "batch", "seq_len"])]
    pub capture: Option<PathBuf>,
    /// With --len: one row of --len positions from this token offset.
    #[arg(long)]
    pub offset: Option<usize>,
    /// One row of this many positions instead of the config's batch of random windows.
    #[arg(long)]
    pub len: Option<usize>,
    /// The config's batch rows (random windows) instead of its own.
    #[arg(long, conflicts_with = "len")]
    pub batch: Option<usize>,
    /// The config's sequence length (random windows) instead of its own.
    #[arg(long, conflicts_with = "len")]
    pub seq_len: Option<usize>,
    /// isolated: each rung's GPU inputs from the CPU; chained: from the GPU's own earlier stages.
    #[arg(long, value_enum, default_value_t = Mode::Isolated)]
    pub mode: Mode,
    /// GEMM kernel of the f16 stages (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<GemmChoice>,
    #[command(flatten)]
    pub gpu: DeviceArg,
    #[command(flatten)]
    pub fault: FaultArg,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// The setup, fault and loss scale of the run: a capture's (the scale its
/// step ran), or the flags' (None: the ladder's for each map).
#[allow(clippy::type_complexity)]
fn setup(a: &PrecisionBisectArgs) -> Result<(Setup, Option<crate::step::Fault>, Option<f64>, String), CliError> {
    let setup = |cfg, params, batch| Setup {
        cfg,
        params,
        batch,
        opts: crate::step::StepOptions::default(),
        mode: a.mode,
        precision: Precision::F16,
    };
    if let Some(dir) = &a.capture {
        let c = crate::capture::load(dir).map_err(|e| CliError::Failed(e.to_string()))?;
        let planted = crate::triage::replay::engine_fault(c.meta.planted.as_deref())
            .map_err(|e| CliError::Failed(e.to_string()))?;
        let fault = match parse_fault(&a.fault.fault)? {
            Some(f) => Some(f),
            None => planted,
        };
        let what = format!("capture {} (step {})", dir.display(), c.meta.step);
        let s = Setup { opts: c.meta.optim, ..setup(c.config.clone(), c.state.params.clone(), c.batch.clone()) };
        let scale = c.meta.loss_scale.scale;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(CliError::Failed(format!(
                "--capture {}: its loss scale {scale} is not finite and positive",
                dir.display()
            )));
        }
        return Ok((s, fault, Some(scale), what));
    }
    let fault = parse_fault(&a.fault.fault)?;
    let Inputs { mut cfg, params, ds } = load_inputs(&a.model, &a.data, &a.out)?;
    if let Some(b) = a.batch {
        cfg.batch = b;
    }
    if let Some(t) = a.seq_len {
        cfg.seq_len = t;
    }
    let choice = match (a.len, a.offset) {
        (Some(0), _) => return Err(CliError::Usage("--len must be at least 1".into())),
        (Some(len), offset) => BatchChoice::Row { offset: offset.unwrap_or(0), len },
        (None, Some(_)) => return Err(CliError::Usage("--offset needs --len".into())),
        (None, None) => BatchChoice::Windows { seed: a.model.seed },
    };
    let (rows, t) = match choice {
        BatchChoice::Row { len, .. } => (1, len),
        BatchChoice::Windows { .. } => (cfg.batch, cfg.seq_len),
    };
    if rows == 0 || t == 0 {
        return Err(CliError::Usage(format!("--batch {rows} --seq-len {t}: both must be at least 1")));
    }
    crate::engine::inputs::check_batch(&cfg, rows, t, 8, &format!("a batch of {rows} × {t}"))?;
    let (batch, source) = ladder_batch(&ds, &cfg, choice)?;
    Ok((setup(cfg, params, batch), fault, None, source))
}

pub fn run(a: &PrecisionBisectArgs) -> Result<i32, CliError> {
    let (setup, fault, loss_scale, source) = setup(a)?;
    let gemm_choice = choice(a.gemm_path)?;
    let ctx = std::sync::Arc::new(open_context(a.gpu.device)?);
    let spec = PrecisionBisectSpec { setup, gemm_choice, fault, loss_scale };
    let quiet = a.json || a.quiet;
    let bar = Bar::new("precision-bisect probes", None, shown(a.quiet, a.json));
    let report = ladder::precision_bisect(&ctx, &spec, &AtomicBool::new(false), |p| {
        bar.inc(1);
        if !quiet {
            let f32s = if p.f32_stages.is_empty() { "none".to_string() } else { p.f32_stages.join(", ") };
            let at =
                p.rung.as_ref().map_or(String::new(), |r| format!(" at {r}: {}", p.tensor.as_deref().unwrap_or("")));
            bar.eprintln(format!(
                "probe {:<9} f32: {f32s} → {}{at} ({:.0} ms)",
                p.phase,
                if p.pass { "pass" } else { "fail" },
                p.ms
            ));
        }
    })
    .map_err(|e| match e {
        ladder::LadderError::Vk(VkError::Unsupported(why) | VkError::Invalid(why)) => CliError::Engine(why),
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Failed(e.to_string()),
    })?;
    bar.finish_and_clear();
    let value = json!({
        "device": ctx.report().name,
        "batch": { "rows": spec.setup.batch.rows, "seq_len": spec.setup.batch.t, "source": source },
        "mode": spec.setup.mode,
        "loss_scale": spec.loss_scale,
        "report": report,
    });
    write_report(&a.out, &value)?;
    emit(a.json, value, || print(&report, &source));
    Ok(match report.outcome {
        Outcome::AllF16Passes | Outcome::Found => 0,
        Outcome::NotPrecision | Outcome::Cancelled => 1,
    })
}

fn print(r: &PrecisionBisectReport, source: &str) {
    println!("batch: {source}");
    match r.loss_scale {
        Some(s) => println!("loss scale: {s} (the capture's: every probe's backward runs at it)"),
        None => println!("loss scale: the ladder's for each map (2^16 with an f16 backward stage, else 1)"),
    }
    if let Some(f) = &r.fault {
        println!("fault planted: {f}");
    }
    println!("candidates (an f16 kernel here): {}", r.candidates.join(", "));
    for (s, why) in &r.no_f16_kernel {
        println!("always f32: {s} ({why})");
    }
    println!("\n{:<3} {:<9} {:<6} {:>9}  f32 stages → first failure", "#", "phase", "result", "ms");
    for (i, p) in r.probes.iter().enumerate() {
        let f32s = if p.f32_stages.is_empty() { "none".to_string() } else { p.f32_stages.join(", ") };
        let at = p.rung.as_ref().map_or(String::new(), |r| format!(" → {r}: {}", p.tensor.as_deref().unwrap_or("")));
        println!("{:<3} {:<9} {:<6} {:>9.0}  {f32s}{at}", i + 1, p.phase, if p.pass { "pass" } else { "FAIL" }, p.ms);
    }
    println!();
    match r.outcome {
        Outcome::AllF16Passes => println!("result: every candidate stage passes in f16; nothing must stay in f32"),
        Outcome::Found => println!("result: keep in f32: {}", r.keep_f32.join(", ")),
        Outcome::NotPrecision => println!(
            "result: even every stage in f32 fails the ladder: this is not a precision problem (run `dualscope ladder` on it)"
        ),
        Outcome::Cancelled => println!("result: cancelled"),
    }
    if let Some(m) = &r.map {
        println!("map: --precision-map {m}");
    }
    println!("{} probes, {:.1} s", r.probes.len(), r.total_ms / 1e3);
}

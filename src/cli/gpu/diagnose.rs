//! `dualscope bisect`, `audit` and `faults`: finding where a planted or real
//! bug shows (the length, the rung, the token) and listing the faults (the
//! ladder's kernel faults and the training events of `train --inject`).

use clap::Args;
use serde_json::json;

use super::{Inputs, load_inputs, parse_fault, write_report};
use crate::cli::args::{DeviceArg, FaultArg, ModelArgs, RowArgs};
use crate::cli::backend::open_context as open;
use crate::cli::common::{CliError, emit, show};
use crate::cli::progress::{self, Bar};
use crate::ladder;
use crate::step::Fault;
use crate::train::Inject;

#[derive(Args, Debug)]
pub struct BisectArgs {
    #[command(flatten)]
    pub fault: FaultArg,
    #[command(flatten)]
    pub row: RowArgs,
    /// The longest length tried (default: 4096, or what the data holds).
    #[arg(long)]
    pub max_len: Option<usize>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

pub fn bisect(a: &BisectArgs) -> Result<i32, CliError> {
    let fault = parse_fault(&a.fault.fault)?;
    if a.max_len == Some(0) {
        return Err(CliError::Usage("--max-len must be at least 1".into()));
    }
    let Inputs { cfg, params, ds } = load_inputs(&a.model, &a.row.data, &a.out)?;
    let avail = ds.len_tokens().saturating_sub(a.row.offset.saturating_add(1));
    let max_len = a.max_len.unwrap_or(4096).min(avail);
    if max_len < 1 {
        return Err(CliError::Usage(format!(
            "--offset {}: {} holds no row of 2 tokens there",
            a.row.offset,
            ds.name()
        )));
    }
    crate::engine::inputs::check_batch(&cfg, 1, max_len, 8, &format!("--max-len {max_len}"))?;
    let row = ds.window(a.row.offset, max_len + 1)?;
    let ctx = std::sync::Arc::new(open(a.gpu.device)?);
    let json = a.json;
    // Each probe's line (not with --quiet) and a count of the probes.
    let bar = Bar::new("bisect probes", None, progress::shown(a.quiet, json));
    let report = ladder::bisect(&ctx, &cfg, &params, &row, max_len, fault, |p| {
        bar.inc(1);
        if !json && !a.quiet {
            match (&p.rung, &p.tensor) {
                (Some(r), Some(t)) => bar.println(format!("len {:>6}: FAIL at {r} ({t})", p.len)),
                _ => bar.println(format!("len {:>6}: pass", p.len)),
            }
        }
    })
    .map_err(|e| match e {
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Engine(e.to_string()),
    })?;
    bar.finish_and_clear();
    let value = serde_json::to_value(&report).expect("report serializes");
    write_report(&a.out, &value)?;
    emit(json, value, || match (&report.smallest_failing, &report.failure) {
        (Some(n), Some(p)) => {
            println!(
                "smallest failing length {n} (last good {}): first rung {}, tensor {}",
                report.last_good.map_or("none".into(), |g| g.to_string()),
                p.rung.as_deref().unwrap_or("?"),
                p.tensor.as_deref().unwrap_or("?")
            );
            if let (Some(pos), Some(tok)) = (p.position, p.token) {
                println!(
                    "first wrong position {pos}, input token {} (rel L2 there {:.2e})",
                    describe_byte(tok),
                    p.position_rel_l2.unwrap_or(f64::NAN)
                );
            }
        }
        _ => println!("no length up to {max_len} fails"),
    });
    Ok(if report.smallest_failing.is_some() { 1 } else { 0 })
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub row: RowArgs,
    /// Positions in the row.
    #[arg(long, default_value_t = 512)]
    pub len: usize,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The loss scale of the GPU's backward (its contributions are divided by the scale it reports).
    #[arg(long, default_value_t = 1024.0, allow_negative_numbers = true)]
    pub loss_scale: f64,
    #[command(flatten)]
    pub fault: FaultArg,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// Also write the JSON report (with every per-token norm) to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

pub fn audit(a: &AuditArgs) -> Result<i32, CliError> {
    use crate::ladder::audit::Verdict;
    let fault = parse_fault(&a.fault.fault)?;
    if !(a.loss_scale.is_finite() && a.loss_scale > 0.0) {
        return Err(CliError::Usage(format!("--loss-scale {}: a positive finite number", a.loss_scale)));
    }
    if a.len == 0 {
        return Err(CliError::Usage("--len must be at least 1".into()));
    }
    let Inputs { cfg, params, ds } = load_inputs(&a.model, &a.row.data, &a.out)?;
    crate::engine::inputs::check_batch(&cfg, 1, a.len, 8, &format!("--len {}", a.len))?;
    let row = ds.window(a.row.offset, a.len + 1).map_err(|e| match e {
        crate::dataset::DatasetError::WindowOutOfRange { total, .. } => CliError::Usage(format!(
            "--len {} --offset {}: {} holds {total} tokens, fewer than the {} the row needs",
            a.len,
            a.row.offset,
            show(std::path::Path::new(ds.name())),
            a.row.offset.saturating_add(a.len).saturating_add(1)
        )),
        e => e.into(),
    })?;
    if let Some(&b) = row.first()
        && row.iter().all(|&x| x == b)
    {
        // Every key is the same: the attention's gradients are zero up to
        // rounding, and comparing their directions would only show noise.
        return Err(CliError::Usage(format!(
            "--data {}: the row of --len {} at --offset {} is one byte (0x{b:02x}) repeated; \
             the audit needs a row with more than one distinct byte",
            show(std::path::Path::new(ds.name())),
            a.len,
            a.row.offset
        )));
    }
    let ctx = std::sync::Arc::new(open(a.gpu.device)?);
    let stages = crate::ladder::audit::AUDIT_STAGES.len() as u64;
    let bar = Bar::new("audit", Some(stages), progress::shown(a.quiet, a.json));
    let mut started = 0;
    let mut on_stage = |s: &str| {
        bar.set(started, s);
        started += 1;
    };
    let report = crate::ladder::audit::audit_with(&ctx, &cfg, &params, &row, a.loss_scale, fault, &mut on_stage)
        .map_err(|e| match e {
            ladder::LadderError::Input(why) => CliError::Usage(why),
            e => CliError::Engine(e.to_string()),
        })?;
    bar.finish_and_clear();
    let value = serde_json::to_value(&report).expect("report serializes");
    write_report(&a.out, &value)?;
    let bad = report.tensors.iter().any(|t| matches!(t.verdict, Verdict::RealError | Verdict::MissingUnscale));
    let summary = json!({
        "len": report.len, "loss_scale": report.loss_scale, "fault": report.fault,
        "loss_cpu": report.loss_cpu, "loss_gpu": report.loss_gpu,
        "grad_norm_cpu": report.grad_norm_cpu, "grad_norm_gpu": report.grad_norm_gpu,
        "tensors": report.tensors.iter().map(|t| json!({
            "tensor": t.tensor, "verdict": t.verdict, "evidence": t.evidence,
            "tokens_off": t.tokens_off, "worst_position": t.worst_position,
        })).collect::<Vec<_>>(),
    });
    emit(a.json, summary, || {
        println!(
            "{} positions; loss cpu {:.7} gpu {:.7}; grad norm cpu {:.6e} gpu {:.6e}; GPU backward at loss scale {}",
            report.len, report.loss_cpu, report.loss_gpu, report.grad_norm_cpu, report.grad_norm_gpu, report.loss_scale
        );
        for t in &report.tensors {
            println!("{:<22} {:<16} {}", t.tensor, format!("{:?}", t.verdict), t.evidence);
        }
    });
    Ok(if bad { 1 } else { 0 })
}

#[derive(Args, Debug)]
pub struct FaultsArgs {
    #[arg(long)]
    pub json: bool,
}

/// The ladder's planted kernel faults, then the planted training events of
/// `train --inject` (JSON: one list, each object with its `scope`).
pub fn faults(a: &FaultsArgs) -> Result<i32, CliError> {
    // The stage fault (printed only: the JSON list keeps its two scopes),
    // shown on its example stage `head` (the stage's rung catches it).
    let stage = Fault::F16StageSkipSlice(crate::step::MapStage::fwd(crate::step::StageKind::Head, 0));
    let ladder = Fault::ALL.iter().map(|f| {
        json!({"scope": "ladder", "name": f.name(), "expected_rung": f.expected_rung(), "description": f.description()})
    });
    let train = Inject::ALL.iter().map(|e| {
        json!({"scope": "train", "name": e.name(), "expected_verdict": e.expected_verdict(), "description": e.description()})
    });
    emit(a.json, serde_json::Value::Array(ladder.chain(train).collect()), || {
        for f in Fault::ALL {
            println!("{:<22} caught by {:<9} {}", f.name(), f.expected_rung(), f.description());
        }
        println!();
        println!("precision faults (only a stage's f16/bf16 run shows them; precision-bisect finds the stage):");
        println!("{:<22} caught by STAGE's rung {}", format!("{}=STAGE", stage.name()), stage.description());
        println!();
        println!("training events (train --inject KIND@STEP):");
        for e in Inject::ALL {
            println!("{:<22} replay: {:<9} {}", e.name(), e.expected_verdict(), e.description());
        }
    });
    Ok(0)
}

/// A byte as a reader sees it: `'a' (0x61)`, `'\n' (0x0a)`, `0xc3`.
fn describe_byte(b: u8) -> String {
    match b {
        b'\n' => "'\\n' (0x0a)".into(),
        b'\t' => "'\\t' (0x09)".into(),
        0x20..=0x7e => format!("'{}' (0x{b:02x})", b as char),
        _ => format!("0x{b:02x}"),
    }
}

//! `dualscope replay CAPTURE`: runs a captured step again on both engines
//! (`triage::replay`) and prints the verdict, its evidence, the positions
//! that dominate the gradient and, for an engine fault, the ladder's first
//! failing rung. Exit 0 for *data* and *clean*, 1 for *engine*, *precision*
//! and *transient* (and a capture that cannot be read), 2 for a usage or
//! device error.

use clap::Args;
use std::path::{Path, PathBuf};

use super::args::{DeviceArg, PrecisionMapArg};
use super::common::{CliError, check_output, emit, show};
use super::progress::{Bar, shown};
use crate::capture::{self, BATCH_FILE, Capture, LEAD_UP_FILE, META_FILE, STATE_FILE};
use crate::triage::replay::{ReplayOptions, ReplayReport, replay, show_scale};

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The capture folder (`OUT/captures/step_NNNNNN`) or its capture.json.
    pub capture: PathBuf,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// How many of the positions that dominate the gradient to list.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub top: u32,
    /// Do not run the ladder when the verdict is `engine`.
    #[arg(long)]
    pub no_ladder: bool,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// Over the captured step's precision (a mixed-precision capture).
    #[command(flatten)]
    pub map: PrecisionMapArg,
    /// Print the report as one JSON object on stdout (the verdict, the runs, the evidence).
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// The capture's files and its dataset: what `--out` may not replace.
fn inputs(dir: &Path, c: Option<&Capture>) -> Vec<PathBuf> {
    let dir = if dir.file_name().is_some_and(|n| n == META_FILE) { dir.parent().unwrap_or(dir) } else { dir };
    let mut v: Vec<PathBuf> = [META_FILE, STATE_FILE, BATCH_FILE, LEAD_UP_FILE].iter().map(|f| dir.join(f)).collect();
    v.extend(c.and_then(|c| c.meta.dataset.path.as_ref()).map(PathBuf::from));
    v
}

pub fn run(a: &ReplayArgs) -> Result<i32, CliError> {
    if let Some(out) = &a.out {
        let files = inputs(&a.capture, None);
        check_output("--out", out, &files.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    }
    let c = capture::load(&a.capture).map_err(|e| CliError::Failed(e.to_string()))?;
    if let Some(out) = &a.out {
        let files = inputs(&a.capture, Some(&c));
        check_output("--out", out, &files.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    }
    let opts = ReplayOptions {
        top_k: a.top as usize,
        ladder: !a.no_ladder,
        context: None,
        device: a.gpu.device,
        precision_map: a.map.precision_map.clone(),
    };
    // Each run's line (not with --quiet or --json) and a count of them.
    let bar = Bar::new("replay runs", None, shown(a.quiet, a.json));
    let report = replay(&c, &opts, &mut |what| {
        bar.inc(1);
        if !a.quiet && !a.json {
            bar.eprintln(format!("replay: {what}"));
        }
    })?;
    bar.finish_and_clear();
    let mut value = serde_json::to_value(&report).expect("the report serializes");
    if let Some(o) = value.as_object_mut() {
        o.insert("capture".into(), serde_json::json!(show(&a.capture)));
        o.insert("exit_code".into(), serde_json::json!(report.exit_code()));
    }
    if let Some(out) = &a.out {
        let text = serde_json::to_string_pretty(&value).expect("the report serializes");
        crate::checkpoint::write_atomic(out, text.as_bytes())?;
    }
    emit(a.json, value, || print_human(&c, &report, a.out.as_deref()));
    Ok(report.exit_code())
}

fn print_human(c: &Capture, r: &ReplayReport, out: Option<&Path>) {
    println!("{}", r.verdict_line());
    let m = &c.meta;
    println!(
        "capture    step {} ({}), {} on {}, loss scale {}, replayed on {} ({})",
        m.step,
        if m.triggers.is_empty() { "no trigger".to_string() } else { m.triggers.join(", ") },
        r.precision.name(),
        m.engine,
        show_scale(r.loss_scale),
        r.device,
        r.gemm_path
    );
    for why in &m.reasons {
        println!("reason     {why}");
    }
    println!("evidence:");
    for e in &r.evidence {
        println!("  - {e}");
    }
    if !r.dominant.is_empty() {
        println!("dominant positions (‖∂loss/∂e_t‖, largest first):");
        println!(
            "  {:>4} {:>5} {:>11} {:>8} {:>9} {:>6}  context",
            "row", "pos", "norm", "document", "offset", "share"
        );
        for t in &r.dominant {
            let opt = |x: Option<usize>| x.map_or("-".to_string(), |v| v.to_string());
            let share = r.row_shares.get(t.row).map_or(String::new(), |s| format!("{:.1}%", 100.0 * s));
            println!(
                "  {:>4} {:>5} {:>11.4e} {:>8} {:>9} {:>6}  {}",
                t.row,
                t.pos,
                t.norm,
                opt(t.document),
                opt(t.offset),
                share,
                t.context
            );
        }
    }
    if let Some(l) = &r.ladder {
        match &l.first_failing {
            Some(rung) => println!(
                "ladder     first failing rung: {rung}{}",
                l.tensor.as_ref().map(|t| format!(", worst tensor {t}")).unwrap_or_default()
            ),
            None => println!("ladder     every rung passes on this batch"),
        }
        for rr in &l.report.rungs {
            println!(
                "  {:<10} {:<7} rel L2 {:.3e} (tolerance {:.1e})",
                rr.id.id(),
                rr.status.as_str(),
                rr.rel_l2,
                rr.tolerance
            );
        }
    }
    if let Some(out) = out {
        println!("wrote      {}", show(out));
    }
}

//! `dualscope drift`: the GPU engine and the CPU reference trained in
//! lockstep ([`crate::triage::drift`]), a table of their divergence as it
//! goes, and the first step outside the rounding envelope (exit 1), or none
//! (exit 0).

use std::path::PathBuf;
use std::sync::Arc;

use super::progress::Bar as ProgressBar;
use clap::Args;

use super::OptimArgs;
use super::args::{DeviceArg, NonFiniteArg};
use super::common::{CliError, data_error, log_line, progress, show};
use crate::dataset::Dataset;
use crate::model::{Config, Params};
use crate::triage::TriageError;
use crate::triage::drift::{DriftPlan, DriftReport, DriftStep, Observer, Planted, run};

#[derive(Args, Debug)]
pub struct DriftArgs {
    /// The dataset: any file (bytes) or a .jsonl file with a `text` field per line.
    #[arg(long)]
    pub data: PathBuf,
    /// Steps to train in lockstep.
    #[arg(long)]
    pub steps: u64,
    /// small, bench, tiny, or a JSON config file (default small; refused with --checkpoint).
    #[arg(long)]
    pub config: Option<String>,
    /// Start from this checkpoint's weights (fresh optimizer state) instead of a seeded initialisation.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    #[command(flatten)]
    pub trust: NonFiniteArg,
    /// The GPU step's precision (f32, or the mixed step: f16, bf16); the CPU runs are f32 and f64.
    #[arg(long, value_enum, default_value_t = crate::step::Precision::F32)]
    pub precision: crate::step::Precision,
    /// Rows per batch (B); default: the config's batch.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Positions per row (T); default: the config's seq_len.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Seeds the initialisation and the choice of windows (as `train`).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub optim: OptimArgs,
    /// Plant a persistent engine fault from STEP on: persistent[=FAULT]@STEP
    /// (FAULT from `dualscope faults`; default reset_before_matmul).
    #[arg(long, value_name = "persistent[=FAULT]@STEP")]
    pub inject: Option<String>,
    /// Stop after the first step outside the envelope (default: run every step).
    #[arg(long)]
    pub stop_at_first: bool,
    /// A folder for drift.json and the capture of the first step outside (captures/step_NNNNNN/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print a table row every N steps (and at the first, the last and the first outside).
    #[arg(long, default_value_t = 10)]
    pub log_every: u64,
    #[command(flatten)]
    pub device: DeviceArg,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// The table: a row every `every` steps, at the first, the last and the
/// first step outside.
struct Printer {
    /// `--json` or `--quiet`: no bar and no table.
    json: bool,
    every: u64,
    pb: Option<ProgressBar>,
}

impl Printer {
    fn say(&self, line: String) {
        if let (false, Some(pb)) = (self.json, &self.pb) {
            log_line(pb, line);
        }
    }
}

impl Observer for Printer {
    fn begin(&mut self, r: &DriftReport) {
        self.pb = Some(progress(r.steps_asked, "drift").hidden_if(self.json));
        self.say(format!(
            "drift: GPU ({} on {}) vs CPU f32 vs CPU f64, {} steps of {}×{} on {}; envelope {} × max(reference, {:.1e}·√step) × {}",
            r.precision.name(),
            r.gemm_path,
            r.steps_asked,
            r.rows,
            r.t,
            r.dataset,
            r.envelope.k,
            r.envelope.floor_per_step,
            r.envelope.ratio
        ));
        if let (Some(p), Some(at)) = (&r.planted, r.planted_step) {
            self.say(format!("planted: {p} from step {at} on"));
        }
        self.say(format!(
            "{:>6}  {:>9} {:>9} {:>9}  {:<22} {:>9} {:>9} {:>9} {:>7}",
            "step", "loss gpu", "cpu32", "cpu64", "worst tensor", "diverg.", "ref", "envelope", "ratio"
        ));
    }

    fn step(&mut self, r: &DriftReport, s: &DriftStep) {
        let first_out = r.first_outside.as_ref().is_some_and(|o| o.step == s.step);
        let last = s.step == r.steps_asked;
        if s.step == 1 || s.step.is_multiple_of(self.every) || first_out || last {
            let w = s.worst;
            let mark = if s.outside { "  OUTSIDE" } else { "" };
            let skip = s.gpu_skipped.as_ref().map_or(String::new(), |k| format!("  (GPU skipped: {k})"));
            self.say(format!(
                "{:>6}  {:>9.5} {:>9.5} {:>9.5}  {:<22} {:>9.2e} {:>9.2e} {:>9.2e} {:>7.2}{mark}{skip}",
                s.step,
                s.loss_gpu,
                s.loss_cpu32,
                s.loss_cpu64,
                r.tensors[w].name,
                s.divergence[w],
                s.reference[w],
                s.envelope[w],
                s.ratio(w)
            ));
        }
        if let Some(pb) = &self.pb {
            pb.inc(1);
        }
    }

    fn note(&mut self, note: &str) {
        eprintln!("note: {note}");
    }
}

/// A drift error as the commands report it (usage and device errors exit 2).
fn cli_error(e: TriageError) -> CliError {
    match e {
        TriageError::Usage(m) => CliError::Usage(m),
        TriageError::Engine(e) => e.into(),
        TriageError::Dataset(e) => CliError::Dataset(e),
        TriageError::Batch(e) => CliError::Batch(e),
        TriageError::Cpu(e) => CliError::Cpu(e),
        e => CliError::Failed(e.to_string()),
    }
}

impl DriftArgs {
    /// The model to start from: a checkpoint's weights or a seeded init.
    fn model(&self) -> Result<(Config, Params<f32>), CliError> {
        let (checkpoint, config) = (self.checkpoint.as_deref(), self.config.as_deref());
        super::common::checkpoint_or_config(checkpoint, config, self.trust.options(), self.seed, 12, 4)
    }
}

pub fn run_drift(a: &DriftArgs) -> Result<i32, CliError> {
    let optim = a.optim.options()?;
    let planted = a.inject.as_deref().map(Planted::parse).transpose().map_err(CliError::Usage)?;
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    if let Some(out) = &a.out
        && out.exists()
        && !out.is_dir()
    {
        return Err(CliError::Usage(format!("--out {}: is not a folder", show(out))));
    }
    let (config, start) = a.model()?;
    let plan = DriftPlan {
        rows: a.batch.unwrap_or(config.batch),
        t: a.seq_len.unwrap_or(config.seq_len),
        config,
        start,
        steps: a.steps,
        seed: a.seed,
        precision: a.precision,
        gemm: super::gpu::choice_for(None, a.precision)?,
        optim,
        planted,
        stop_at_first: a.stop_at_first,
        out: a.out.clone(),
    };
    plan.check().map_err(cli_error)?;
    let ds = Dataset::open(&a.data).map_err(data_error)?;
    let ctx = Arc::new(crate::engine::open_context(a.device.device)?);
    let mut printer = Printer { json: a.json || a.quiet, every: a.log_every.max(1), pb: None };
    let result = run(&ctx, &plan, &ds, &mut printer);
    if let Some(pb) = &printer.pb {
        pb.finish_and_clear();
    }
    let r = result.map_err(cli_error)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| CliError::Failed(e.to_string()))?);
    } else {
        if let Some(c) = &r.capture {
            println!("capture of the first step outside: {}", show(c));
        }
        if let Some(d) = &a.out {
            println!("report: {}", show(&d.join(crate::triage::drift::REPORT_FILE)));
        }
        println!("{}", r.summary_line());
    }
    Ok(if r.first_outside.is_some() { 1 } else { 0 })
}

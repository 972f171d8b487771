//! `dualscope growth`: one long row through the GPU engine and the CPU
//! reference in f32 and f64 ([`crate::triage::growth`]); per series the
//! worst ratio of the GPU's difference to the rounding envelope, and the
//! first position outside it (exit 1) or none (exit 0).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;

use super::args::{DeviceArg, NonFiniteArg};
use super::common::{CliError, check_output, config_file, data_error, show};
use super::progress::{Bar, shown};
use crate::dataset::DatasetError;
use crate::model::{Config, Params};
use crate::triage::growth::{GrowthPlan, GrowthReport, check_len as growth_check_len, run};

/// The longest row taken when `--len` is not given (or what the text holds).
pub const DEFAULT_LEN: usize = 4096;

#[derive(Args, Debug)]
pub struct GrowthArgs {
    /// The text (any file, or .jsonl with a `text` field per line; default: the embedded corpus).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The row's first token in the text.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Positions in the row (T; the row is T + 1 tokens). Default: 4096, or what the text holds from --offset.
    #[arg(long)]
    pub len: Option<usize>,
    /// Take the row from this capture (its config and weights too) instead of --data.
    #[arg(long, conflicts_with_all = ["data", "config", "checkpoint"])]
    pub capture: Option<PathBuf>,
    /// The capture's row (with --capture).
    #[arg(long, default_value_t = 0, requires = "capture")]
    pub row: usize,
    /// small, bench, tiny, or a JSON config file (default small; refused with --checkpoint).
    #[arg(long)]
    pub config: Option<String>,
    /// The weights from this checkpoint (its config wins) instead of a seeded initialisation.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    #[command(flatten)]
    pub trust: NonFiniteArg,
    /// Seeds the initialisation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The GPU step's precision (f32, or the mixed step: f16, bf16); the CPU runs are f32 and f64.
    #[arg(long, value_enum, default_value_t = crate::step::Precision::F32)]
    pub precision: crate::step::Precision,
    /// A test of the report: the GPU's row has its token at this position changed.
    #[arg(long, hide = true)]
    pub plant_token_at: Option<usize>,
    /// Also write the JSON report (every position) to this file (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub device: DeviceArg,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

impl GrowthArgs {
    /// The model: a checkpoint's weights or a seeded init.
    fn model(&self) -> Result<(Config, Params<f32>), CliError> {
        let (checkpoint, config) = (self.checkpoint.as_deref(), self.config.as_deref());
        super::common::checkpoint_or_config(checkpoint, config, self.trust.options(), self.seed, 4, 8)
    }

    /// The inputs `--out` may not replace.
    fn inputs(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> =
            self.data.iter().chain(&self.checkpoint).chain(&self.capture).map(|p| p.as_path()).collect();
        v.extend(self.config.as_deref().and_then(config_file));
        v
    }

    /// The plan's model and row from a capture: its config, weights and row `--row`.
    fn plan_from_capture(&self, dir: &Path) -> Result<GrowthPlan, CliError> {
        let c = crate::capture::load(dir).map_err(|e| CliError::Failed(e.to_string()))?;
        if self.row >= c.batch.rows {
            return Err(CliError::Usage(format!(
                "--row {}: the capture {} holds {} rows",
                self.row,
                show(dir),
                c.batch.rows
            )));
        }
        let mut row = c.batch.row(self.row).to_vec();
        if let Some(n) = self.len {
            growth_check_len(&c.config, n).map_err(CliError::from)?;
            if n + 1 > row.len() {
                return Err(CliError::Usage(format!(
                    "--len {n}: row {} of the capture has {} positions",
                    self.row,
                    row.len().saturating_sub(1)
                )));
            }
            row.truncate(n + 1);
        }
        let t = row.len().saturating_sub(1);
        Ok(GrowthPlan {
            source: format!("{}: row {} ({t} positions)", show(dir), self.row),
            config: c.config,
            params: c.state.params,
            row,
            offset: 0,
            precision: self.precision,
            gemm: super::gpu::choice_for(None, self.precision)?,
            plant_token_at: self.plant_token_at,
        })
    }

    /// The plan's model and row from `--data` (or the embedded corpus).
    fn plan_from_text(&self) -> Result<GrowthPlan, CliError> {
        let (config, params) = self.model()?;
        let ds = crate::ladder::inputs::load_dataset(self.data.as_deref()).map_err(data_error)?;
        let total = ds.len_tokens();
        if self.offset.saturating_add(2) > total {
            return Err(CliError::Usage(format!(
                "--offset {}: {} holds {total} tokens, no row of 2 tokens starts there",
                self.offset,
                show(Path::new(ds.name()))
            )));
        }
        let len = self.len.unwrap_or_else(|| DEFAULT_LEN.min(total - self.offset - 1));
        growth_check_len(&config, len).map_err(CliError::from)?;
        let row = ds.window(self.offset, len + 1).map_err(|e| match e {
            DatasetError::WindowOutOfRange { total, .. } => CliError::Usage(format!(
                "--len {len} --offset {}: {} holds {total} tokens, fewer than the {} the row needs",
                self.offset,
                show(Path::new(ds.name())),
                self.offset.saturating_add(len).saturating_add(1)
            )),
            e => CliError::Dataset(e),
        })?;
        Ok(GrowthPlan {
            source: format!("{}: {len} positions at offset {}", ds.name(), self.offset),
            config,
            params,
            row,
            offset: self.offset,
            precision: self.precision,
            gemm: super::gpu::choice_for(None, self.precision)?,
            plant_token_at: self.plant_token_at,
        })
    }
}

/// The envelope's references in words: `f32 ` or `f32 and f16-operands `.
fn reference_words(r: &GrowthReport) -> String {
    match r.envelope.operands {
        crate::step::Precision::F32 => "f32 ".into(),
        _ if r.rounded_stages.is_empty() => "f32 ".into(),
        p => format!("f32 and {}-operands ", p.name()),
    }
}

/// The human summary: what ran, a line per series, the first position outside.
fn print_summary(r: &GrowthReport) {
    println!(
        "growth: GPU ({} on {}, backward at loss scale {}) vs CPU f32 vs CPU f64 on {}; envelope {} × max({}reference over ±{}, {:.1e})",
        r.precision.name(),
        r.gemm_path,
        r.loss_scale,
        r.source,
        r.envelope.k,
        reference_words(r),
        r.envelope.window,
        r.envelope.floor,
    );
    println!("loss gpu {:.6} cpu32 {:.6} cpu64 {:.6}", r.loss_gpu, r.loss_cpu32, r.loss_cpu64);
    if let Some(p) = r.planted_at {
        println!("planted: the GPU's input token at position {p} changed");
    }
    for n in &r.notes {
        println!("note: {n}");
    }
    if !r.rounded_stages.is_empty() {
        println!("reference rounds the operands of: {}", r.rounded_stages.join(" "));
    }
    for line in r.series_lines() {
        println!("{line}");
    }
    println!("{}", r.summary_line());
}

pub fn run_growth(a: &GrowthArgs) -> Result<i32, CliError> {
    if a.len == Some(0) {
        return Err(CliError::Usage("--len must be at least 1".into()));
    }
    if let Some(out) = &a.out {
        check_output("--out", out, &a.inputs())?;
    }
    let plan = match &a.capture {
        Some(dir) => a.plan_from_capture(dir)?,
        None => a.plan_from_text()?,
    };
    if let Some(p) = plan.plant_token_at
        && p >= plan.len()
    {
        return Err(CliError::Usage(format!(
            "--plant-token-at {p}: past the last position ({})",
            plan.len().saturating_sub(1)
        )));
    }
    let ctx = Arc::new(crate::engine::open_context(a.device.device)?);
    // The stages on a terminal only (the bar's text): a failure stays one line in a log.
    let bar = Bar::new("growth", None, shown(a.quiet, a.json));
    let r = run(&ctx, &plan, &mut |stage| bar.set_message(&format!("{stage}…")))?;
    bar.finish_and_clear();
    let text = |pretty: bool| {
        if pretty { serde_json::to_string_pretty(&r) } else { serde_json::to_string(&r) }
            .map_err(|e| CliError::Failed(e.to_string()))
    };
    if let Some(out) = &a.out {
        crate::checkpoint::write_atomic(out, text(false)?.as_bytes())?;
    }
    if a.json {
        println!("{}", text(false)?);
    } else {
        print_summary(&r);
        if let Some(out) = &a.out {
            println!("report: {}", show(out));
        }
    }
    Ok(if r.first_outside.is_some() { 1 } else { 0 })
}

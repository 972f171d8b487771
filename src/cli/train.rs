//! `dualscope train` and the default `demo`: a real training loop.

use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::backend::Stepper;
use super::common::{CliError, check_memory, emit, log_line, progress};
use super::{EngineArg, OptimArgs};
use crate::checkpoint::{load_params, save_params, write_atomic};
use crate::cpu::{StepOptions, StepReport};
use crate::dataset::{Dataset, synthetic};
use crate::model::{Config, Params};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The dataset: any file (bytes) or a .jsonl file with a `text` field per line.
    #[arg(long)]
    pub data: PathBuf,
    /// small, bench, or a JSON config file (ignored with --checkpoint).
    #[arg(long, default_value = "small")]
    pub config: String,
    /// Start from this checkpoint instead of a fresh initialisation.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Positions per row (T); default: the config's seq_len.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Rows per batch (B); default: the config's batch.
    #[arg(long)]
    pub batch: Option<usize>,
    #[arg(long, value_enum, default_value_t = EngineArg::Cpu)]
    pub engine: EngineArg,
    /// A directory for checkpoints and the step log.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seeds the initialisation and the choice of windows.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print a log line every N steps.
    #[arg(long, default_value_t = 10)]
    pub log_every: usize,
    /// Also write a checkpoint every N steps (0: only at the end).
    #[arg(long, default_value_t = 0)]
    pub save_every: usize,
    #[command(flatten)]
    pub optim: OptimArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[arg(long, default_value_t = 150)]
    pub steps: usize,
    #[arg(long, default_value_t = 4)]
    pub batch: usize,
    #[arg(long, default_value_t = 96)]
    pub seq_len: usize,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs { steps: 150, batch: 4, seq_len: 96 }
    }
}

struct Loop<'a> {
    cfg: Config,
    stepper: Stepper,
    ds: &'a Dataset,
    rows: usize,
    len: usize,
    seed: u64,
}

struct Logged {
    step: usize,
    ms: f64,
    report: StepReport,
}

impl Loop<'_> {
    /// Runs `steps` steps; `on_step` sees each one (for logs and checkpoints).
    fn run(
        &mut self,
        steps: usize,
        mut on_step: impl FnMut(&Logged, &Stepper) -> Result<(), CliError>,
    ) -> Result<Vec<Logged>, CliError> {
        let mut log = Vec::with_capacity(steps);
        for step in 1..=steps {
            let batch = self.ds.random_windows(
                self.seed.wrapping_mul(1_000_003).wrapping_add(step as u64),
                self.rows,
                self.len,
            )?;
            if step == 1 {
                check_memory(&self.cfg, &batch, 4)?;
            }
            let t0 = Instant::now();
            let report = self.stepper.step(&batch)?;
            let entry = Logged { step, ms: t0.elapsed().as_secs_f64() * 1e3, report };
            on_step(&entry, &self.stepper)?;
            log.push(entry);
        }
        Ok(log)
    }
}

fn entry_json(e: &Logged) -> serde_json::Value {
    json!({"step": e.step, "loss": e.report.loss, "grad_norm": e.report.optim.grad_norm,
           "skipped": e.report.optim.skipped.map(|s| s.to_string()), "clipped": e.report.optim.clipped,
           "capped_tokens": e.report.capped_tokens, "ms": e.ms})
}

fn mean_loss(log: &[Logged]) -> f64 {
    log.iter().map(|e| e.report.loss).sum::<f64>() / log.len().max(1) as f64
}

pub fn run(a: &TrainArgs) -> Result<i32, CliError> {
    let opts = a.optim.options()?;
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    let (cfg, params) = match &a.checkpoint {
        Some(p) => load_params(p)?,
        None => {
            let cfg = Config::resolve(&a.config)?;
            let params = Params::init(&cfg, a.seed);
            (cfg, params)
        }
    };
    let ds = Dataset::open(&a.data)?;
    let rows = a.batch.unwrap_or(cfg.batch);
    let t = a.seq_len.unwrap_or(cfg.seq_len);
    if rows == 0 || t == 0 {
        return Err(CliError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    // The engine first, so that a missing device leaves no empty --out directory.
    let stepper = Stepper::new(a.engine, &cfg, params, &opts)?;
    if let Some(dir) = &a.out {
        prepare_dir(dir)?;
    }
    let mut lp = Loop { cfg: cfg.clone(), stepper, ds: &ds, rows, len: t + 1, seed: a.seed };
    let pb = progress(a.steps as u64, "training");
    let (log_every, save_every, json) = (a.log_every.max(1), a.save_every, a.json);
    let mut window: Vec<f64> = Vec::new();
    let mut skips = 0usize;
    let log = lp.run(a.steps, |e, stepper| {
        pb.inc(1);
        window.push(e.report.loss);
        skips += e.report.optim.skipped.is_some() as usize;
        // A skipped step is always logged, with its reason.
        if !json && (e.step % log_every == 0 || e.step == 1 || e.report.optim.skipped.is_some()) {
            let mean = window.iter().sum::<f64>() / window.len() as f64;
            window.clear();
            let skip = e.report.optim.skipped.map(|s| format!("  SKIPPED: {s}")).unwrap_or_default();
            let capped = match a.optim.token_cap {
                Some(_) => format!("  capped {}", e.report.capped_tokens),
                None => String::new(),
            };
            log_line(
                &pb,
                format!(
                    "step {:>6}  loss {:.4} (mean {:.4})  grad_norm {:.4}  skipped {skips}{capped}  {:.1} ms/step{skip}",
                    e.step, e.report.loss, mean, e.report.optim.grad_norm, e.ms
                ),
            );
        }
        if let (Some(dir), true) = (&a.out, save_every > 0 && e.step % save_every == 0) {
            save_params(&dir.join(format!("step_{:06}.safetensors", e.step)), &cfg, &*stepper.params()?)?;
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let skipped = log.iter().filter(|e| e.report.optim.skipped.is_some()).count();
    let head = &log[..log.len().min(10)];
    let tail = &log[log.len().saturating_sub(10)..];
    if let Some(dir) = &a.out {
        save_params(&dir.join("last.safetensors"), &cfg, &*lp.stepper.params()?)?;
        let lines: String = log.iter().map(|e| format!("{}\n", entry_json(e))).collect();
        write_atomic(&dir.join("log.jsonl"), lines.as_bytes())?;
    }
    emit(
        a.json,
        json!({"steps": log.len(), "skipped": skipped, "first_loss": log[0].report.loss,
               "last_loss": log[log.len() - 1].report.loss, "mean_loss_first10": mean_loss(head),
               "mean_loss_last10": mean_loss(tail), "config": cfg, "dataset": ds.name(),
               "out": a.out, "log": log.iter().map(entry_json).collect::<Vec<_>>()}),
        || {
            println!(
                "trained {} steps on {}: mean loss {:.4} over the first 10 steps, {:.4} over the last 10; {} skipped",
                log.len(),
                ds.name(),
                mean_loss(head),
                mean_loss(tail),
                skipped
            );
            if let Some(dir) = &a.out {
                println!("checkpoint and log in {}", dir.display());
            }
        },
    );
    Ok(0)
}

fn prepare_dir(dir: &Path) -> Result<(), CliError> {
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::Usage(format!("--out {}: exists and is not a directory", dir.display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| CliError::Failed(format!("--out {}: {e}", dir.display())))
}

/// The default command until the GUI lands: train the `small` model on the
/// embedded corpus and show the loss falling.
pub fn demo(a: &DemoArgs) -> Result<i32, CliError> {
    let ds = synthetic::default_dataset();
    let cfg = Config::small();
    println!("dualscope demo: the CPU reference engine trains the `small` dual-stream model");
    println!(
        "on the embedded synthetic corpus ({}), batch {} × {} tokens, {} threads.",
        ds.name(),
        a.batch,
        a.seq_len,
        rayon::current_num_threads()
    );
    let stepper = Stepper::new(EngineArg::Cpu, &cfg, Params::init(&cfg, 0), &StepOptions::default())?;
    let mut lp = Loop { cfg: cfg.clone(), stepper, ds: &ds, rows: a.batch.max(1), len: a.seq_len.max(1) + 1, seed: 0 };
    let pb = progress(a.steps as u64, "training");
    let mut window = Vec::new();
    let log = lp.run(a.steps.max(1), |e, _| {
        pb.inc(1);
        window.push(e.report.loss);
        if e.step % 10 == 0 || e.step == 1 {
            let mean = window.iter().sum::<f64>() / window.len() as f64;
            window.clear();
            log_line(
                &pb,
                format!(
                    "step {:>4}  loss {:.4}  ({:.2} bits/byte)  {:.1} ms/step",
                    e.step,
                    mean,
                    mean / std::f64::consts::LN_2,
                    e.ms
                ),
            );
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let head = &log[..log.len().min(10)];
    let tail = &log[log.len().saturating_sub(10)..];
    println!("mean loss {:.4} → {:.4} nats/byte over {} steps", mean_loss(head), mean_loss(tail), log.len());
    Ok(0)
}

//! `dualscope bench`: milliseconds per full training step, median after warm-up.

use clap::Args;
use serde_json::json;
use std::time::Instant;

use super::EngineArg;
use super::common::{CliError, emit, progress, require_cpu};
use crate::cpu::{self, LossScale, OptimState, StepOptions};
use crate::dataset::synthetic;
use crate::model::{Config, Params};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value_t = EngineArg::Cpu)]
    pub engine: EngineArg,
    /// small, bench, or a JSON config file.
    #[arg(long, default_value = "small")]
    pub config: String,
    /// Rows per batch; default: the config's batch.
    #[arg(long)]
    pub batch: Option<usize>,
    /// Positions per row; default: the config's seq_len.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Timed steps.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Also report the time per phase of the step (CPU engine).
    #[arg(long)]
    pub breakdown: bool,
    /// Write the benchmark's batch (JSON: `tokens` per row and `lens`), so that
    /// a peer implementation can time the very same step.
    #[arg(long)]
    pub save_batch: Option<std::path::PathBuf>,
    /// Write the benchmark's initial checkpoint.
    #[arg(long)]
    pub save_checkpoint: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// Median, 10th and 90th percentile of `xs` (sorted in place).
pub fn percentiles(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { 0.5 * (xs[n / 2 - 1] + xs[n / 2]) };
    (median, at(0.1), at(0.9))
}

pub fn run(a: &BenchArgs) -> Result<i32, CliError> {
    require_cpu(a.engine, "bench")?;
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    let cfg = Config::resolve(&a.config)?;
    let rows = a.batch.unwrap_or(cfg.batch);
    let t = a.seq_len.unwrap_or(cfg.seq_len);
    if rows == 0 || t == 0 {
        return Err(CliError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    let ds = synthetic::default_dataset();
    let batch = ds.random_windows(1, rows, t + 1)?;
    super::common::check_memory(&cfg, &batch, 4)?;
    let mut params = Params::<f32>::init(&cfg, 0);
    if let Some(path) = &a.save_checkpoint {
        crate::checkpoint::save_params(path, &cfg, &params)?;
    }
    if let Some(path) = &a.save_batch {
        let rows_json: Vec<&[u8]> = (0..batch.rows).map(|b| batch.row(b)).collect();
        let body = json!({"tokens": rows_json, "lens": batch.lens}).to_string();
        crate::checkpoint::write_atomic(path, body.as_bytes())?;
    }
    let mut state = OptimState::new(&cfg);
    let mut scale = LossScale::fixed();
    let opts = StepOptions::default();
    let pb = progress((a.warmup + a.steps) as u64, "benchmark");
    let mut times = Vec::with_capacity(a.steps);
    let mut first_loss = None;
    for i in 0..a.warmup + a.steps {
        if i == a.warmup {
            crate::cpu::profile::enable(a.breakdown);
        }
        let t0 = Instant::now();
        let r = cpu::train_step(&cfg, &mut params, &mut state, &mut scale, &batch, &opts)?;
        first_loss.get_or_insert(r.loss);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= a.warmup {
            times.push(ms);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let phases: Vec<(&str, f64)> =
        crate::cpu::profile::take().into_iter().map(|(n, ms)| (n, ms / a.steps as f64)).collect();
    crate::cpu::profile::enable(false);
    let (median, p10, p90) = percentiles(&mut times);
    let tokens = (rows * t) as f64;
    let threads = rayon::current_num_threads();
    emit(
        a.json,
        json!({"engine": "cpu", "config": a.config, "batch": rows, "seq_len": t, "threads": threads,
               "warmup": a.warmup, "steps": a.steps, "median_ms": median, "p10_ms": p10, "p90_ms": p90,
               "tokens_per_s": tokens / (median / 1e3), "first_loss": first_loss,
               "breakdown_ms": phases.iter().map(|(n, ms)| json!({"phase": n, "ms": ms})).collect::<Vec<_>>()}),
        || {
            println!("engine cpu, config {} (B={rows}, T={t}), {threads} threads", a.config);
            println!(
                "{} steps after {} warm-up: median {median:.2} ms/step (p10 {p10:.2}, p90 {p90:.2}), {:.0} tokens/s",
                a.steps,
                a.warmup,
                tokens / (median / 1e3)
            );
            for (name, ms) in &phases {
                println!("  {name:<22} {ms:9.2} ms/step (mean)");
            }
        },
    );
    Ok(0)
}

//! `dualscope bench`: milliseconds per full training step, median after
//! warm-up. The timing is [`crate::engine::bench`]; this file parses the
//! options and prints.

use super::progress::Bar as ProgressBar;
use clap::Args;
use serde_json::json;

use super::args::DeviceArg;
use super::common::{CliError, progress};
use crate::dataset::{Batch, synthetic};
use crate::engine::EngineError;
use crate::engine::bench::{self, BenchSteps, Progress, Timed};
use crate::engine::stats::percentiles;
use crate::model::{Config, Params};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchEngine {
    Cpu,
    Gpu,
    /// Both engines on the same batch in one run, with the ratio.
    Both,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value_t = BenchEngine::Cpu)]
    pub engine: BenchEngine,
    /// small, bench, tiny, or a JSON config file.
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
    /// Untimed steps before the timed ones.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Also print the time per phase (CPU) and per stage and kernel (GPU); always in the JSON.
    #[arg(long)]
    pub breakdown: bool,
    /// Several shapes: B=1 T=512, B/4, B, and B with 2T.
    #[arg(long)]
    pub sweep: bool,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// The GPU step's precision: f32, or the mixed-precision step (f16 =
    /// mixed: f16 products with f32 accumulation and a dynamic loss scale;
    /// bf16). The CPU engine always runs f32.
    #[arg(long, value_enum, default_value_t = crate::step::Precision::F32)]
    pub precision: crate::step::Precision,
    #[command(flatten)]
    pub precision_map: super::args::PrecisionMapArg,
    /// GEMM kernel of the mixed step (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<crate::step::GemmChoice>,
    /// Write the benchmark's batch (JSON: `tokens` per row and `lens`), so that
    /// a peer implementation can time the very same step.
    #[arg(long)]
    pub save_batch: Option<std::path::PathBuf>,
    /// Write the benchmark's initial checkpoint.
    #[arg(long)]
    pub save_checkpoint: Option<std::path::PathBuf>,
    /// Also time `train`'s default step with the controller on (compute,
    /// the controller's judgement, apply: the split step that reads back only
    /// the per-tensor norms), GPU only.
    #[arg(long)]
    pub controller: bool,
    #[arg(long)]
    pub json: bool,
    /// No progress bar (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// Progress bars for the benchmark's phases; hidden when `.1` (`--json`, `--quiet`).
struct Bars(Option<ProgressBar>, bool);

impl Progress for Bars {
    fn start(&mut self, what: &str, len: u64) {
        self.0 = Some(progress(len, what).hidden_if(self.1));
    }
    fn inc(&mut self) {
        if let Some(pb) = &self.0 {
            pb.inc(1);
        }
    }
    fn finish(&mut self) {
        if let Some(pb) = self.0.take() {
            pb.finish_and_clear();
        }
    }
}

/// The benchmark's GPU errors: whatever stops it is an engine error (exit 2).
fn gpu_error(e: EngineError) -> CliError {
    match e {
        EngineError::Unsupported(e) | EngineError::Vulkan(e) => CliError::Engine(format!("--engine gpu: {e}")),
        EngineError::Validation(n) => CliError::Failed(format!("{n} Vulkan validation errors (see stderr)")),
        e => e.into(),
    }
}

fn bench_gpu(a: &BenchArgs, cfg: &Config, params: &Params<f32>, batch: &Batch) -> Result<Timed, CliError> {
    let ctx = std::sync::Arc::new(super::backend::open_context(a.gpu.device)?);
    let precision = a.precision;
    let choice = super::gpu::choice_for(a.gemm_path, precision)?;
    let n = BenchSteps { warmup: a.warmup, steps: a.steps };
    let map = a.precision_map.over(|| {
        crate::engine::gpu::default_map(&ctx, cfg, precision, choice).map_err(|e| CliError::Engine(e.to_string()))
    })?;
    let mut t =
        bench::vulkan(n, &ctx, cfg, params, batch, precision, choice, map.as_ref(), &mut Bars(None, a.quiet || a.json))
            .map_err(gpu_error)?;
    if a.controller {
        let mut judge = controller_judge();
        let path = bench::controller_path(
            n,
            &ctx,
            cfg,
            params,
            batch,
            precision,
            choice,
            map.as_ref(),
            &mut judge,
            &mut Bars(None, a.quiet || a.json),
        );
        t.controller = Some(path.map_err(gpu_error)?);
    }
    Ok(t)
}

/// The training controller with its default thresholds, judging one step
/// after another as `train` does (begin, assess, record): `true` skips.
fn controller_judge() -> impl FnMut(&crate::engine::Norms) -> bool {
    use crate::train::{Controller, ControllerConfig, Outcome};
    let mut ctl = Controller::new(ControllerConfig::default());
    let mut step = 0;
    move |norms| {
        step += 1;
        ctl.begin_step(step);
        let v = ctl.assess(norms);
        let o = Outcome {
            norms,
            skipped: v.skip.clone(),
            by_engine: false,
            spike: v.spike,
            scale_before: 1.0,
            scale_after: 1.0,
        };
        ctl.record(step, &o);
        v.skip.is_some()
    }
}

fn summary(engine: &str, t: &mut Timed, tokens: f64) -> serde_json::Value {
    let (median, p10, p90) = percentiles(&mut t.wall);
    let device = (!t.device.is_empty()).then(|| percentiles(&mut t.device));
    json!({
        "engine": engine, "precision": t.precision, "gemm_path": t.gemm_path, "median_ms": median, "p10_ms": p10, "p90_ms": p90,
        "device_median_ms": device.map(|d| d.0), "device_p10_ms": device.map(|d| d.1), "device_p90_ms": device.map(|d| d.2),
        "tokens_per_s": tokens / (median / 1e3), "first_loss": t.first_loss,
        "breakdown_ms": t.breakdown.iter().map(|(n, ms)| json!({"phase": n, "ms": ms})).collect::<Vec<_>>(),
        // Every kernel, largest first (not only the largest few), so that sums over them are whole.
        "kernels_ms": t.kernels.iter().map(|(n, ms)| json!({"kernel": n, "ms": ms})).collect::<Vec<_>>(),
        "recurrence": t.recurrence,
        "replay_median_ms": t.replay.as_mut().map(|r| percentiles(&mut r.0).0),
        "replay_device_median_ms": t.replay.as_mut().filter(|r| !r.1.is_empty()).map(|r| percentiles(&mut r.1).0),
        "controller_median_ms": t.controller.as_mut().map(|r| percentiles(&mut r.0).0),
        "controller_device_median_ms": t.controller.as_mut().filter(|r| !r.1.is_empty()).map(|r| percentiles(&mut r.1).0),
        "instrumented_median_ms": t.instrumented.as_mut().map(|r| percentiles(&mut r.0).0),
        "instrumented_device_median_ms": t.instrumented.as_mut().filter(|r| !r.1.is_empty()).map(|r| percentiles(&mut r.1).0),
    })
}

fn one(a: &BenchArgs, cfg: &Config, rows: usize, t: usize) -> Result<serde_json::Value, CliError> {
    let ds = synthetic::default_dataset();
    let what = format!("--batch {rows} --seq-len {t}");
    crate::engine::inputs::check_batch(cfg, rows, t, 4, &what)?;
    crate::engine::inputs::check_params(cfg, 4, 4, &format!("--config {}", a.config))?;
    let batch = ds.random_windows(1, rows, t + 1)?;
    let params = Params::<f32>::init(cfg, 0);
    if let Some(path) = &a.save_checkpoint {
        crate::checkpoint::save_params(path, cfg, &params)?;
    }
    if let Some(path) = &a.save_batch {
        let rows_json: Vec<&[u8]> = (0..batch.rows).map(|b| batch.row(b)).collect();
        let body = json!({"tokens": rows_json, "lens": batch.lens}).to_string();
        crate::checkpoint::write_atomic(path, body.as_bytes())?;
    }
    let tokens = (rows * t) as f64;
    let mut engines = Vec::new();
    let (cpu_on, gpu_on) = match a.engine {
        BenchEngine::Cpu => (true, false),
        BenchEngine::Gpu => (false, true),
        BenchEngine::Both => (true, true),
    };
    // The GPU first: an engine error (no device) stops before the long CPU part.
    let gpu = if gpu_on { Some(bench_gpu(a, cfg, &params, &batch)?) } else { None };
    let n = BenchSteps { warmup: a.warmup, steps: a.steps };
    let cpu =
        if cpu_on { Some(bench::cpu(n, cfg, &params, &batch, &mut Bars(None, a.quiet || a.json))?) } else { None };
    let mut medians = (None, None);
    if let Some(mut c) = cpu {
        let s = summary("cpu", &mut c, tokens);
        medians.0 = s["median_ms"].as_f64();
        engines.push(s);
    }
    if let Some(mut g) = gpu {
        let s = summary("gpu", &mut g, tokens);
        medians.1 = s["median_ms"].as_f64();
        engines.push(s);
    }
    let speedup = match medians {
        (Some(c), Some(g)) if g > 0.0 => Some(c / g),
        _ => None,
    };
    let replay = engines.iter().find(|e| e["engine"] == "gpu").and_then(|e| e["replay_median_ms"].as_f64());
    let speedup_replay = match (medians.0, replay) {
        (Some(c), Some(g)) if g > 0.0 => Some(c / g),
        _ => None,
    };
    Ok(json!({"config": a.config, "batch": rows, "seq_len": t, "threads": rayon::current_num_threads(),
              "warmup": a.warmup, "steps": a.steps, "engines": engines, "speedup": speedup,
              "speedup_replay": speedup_replay}))
}

fn print(v: &serde_json::Value, breakdown: bool) {
    println!("config {} (B={}, T={}), {} CPU threads", v["config"], v["batch"], v["seq_len"], v["threads"]);
    for e in v["engines"].as_array().into_iter().flatten() {
        let dev = e["device_median_ms"].as_f64().map_or(String::new(), |d| format!(", device {d:.3} ms"));
        println!(
            "  {} ({}, products on {}): median {:.3} ms/step (p10 {:.3}, p90 {:.3}){dev}, {:.0} tokens/s",
            e["engine"].as_str().unwrap_or("?"),
            e["precision"].as_str().unwrap_or("?"),
            e["gemm_path"].as_str().unwrap_or("?"),
            e["median_ms"].as_f64().unwrap_or(f64::NAN),
            e["p10_ms"].as_f64().unwrap_or(f64::NAN),
            e["p90_ms"].as_f64().unwrap_or(f64::NAN),
            e["tokens_per_s"].as_f64().unwrap_or(f64::NAN)
        );
        if let Some(r) = e["replay_median_ms"].as_f64() {
            let dev = e["replay_device_median_ms"].as_f64().map_or(String::new(), |d| format!(", device {d:.3} ms"));
            println!("  {} replayed (recorded once): median {r:.3} ms/step{dev}", e["engine"].as_str().unwrap_or("?"));
        }
        if let Some(r) = e["controller_median_ms"].as_f64() {
            let dev =
                e["controller_device_median_ms"].as_f64().map_or(String::new(), |d| format!(", device {d:.3} ms"));
            println!(
                "  {} with the controller (train's default step): median {r:.3} ms/step{dev}",
                e["engine"].as_str().unwrap_or("?")
            );
        }
        if let Some(r) = e["instrumented_median_ms"].as_f64() {
            let dev = e["instrumented_device_median_ms"]
                .as_f64()
                .map_or(String::new(), |d| format!(", device {d:.3} ms (sum of the dispatches)"));
            println!("  {} timed per kernel: median {r:.3} ms/step{dev}", e["engine"].as_str().unwrap_or("?"));
        }
        if let Some(r) = e.get("recurrence").filter(|r| !r.is_null()) {
            let floor = match (r["barrier_us"].as_f64(), r["floor_ms"].as_f64()) {
                (Some(b), Some(f)) => {
                    format!("; floor {f:.3} ms ({} barriers × {b:.2} µs)", r["barriers_per_step"].as_u64().unwrap_or(0))
                }
                _ => String::new(),
            };
            println!(
                "      recurrence {} ({} products): {:.3} ms/step{floor}",
                r["mode"].as_str().unwrap_or("?"),
                r["product"].as_str().unwrap_or("?"),
                r["recurrence_ms"].as_f64().unwrap_or(f64::NAN)
            );
            if let Some(why) = r["fallback"].as_str() {
                println!("      note: {why}");
            }
        }
        if breakdown {
            for p in e["breakdown_ms"].as_array().into_iter().flatten() {
                println!(
                    "      {:<26} {:9.3} ms/step",
                    p["phase"].as_str().unwrap_or("?"),
                    p["ms"].as_f64().unwrap_or(0.0)
                );
            }
            for k in e["kernels_ms"].as_array().into_iter().flatten().take(12) {
                println!(
                    "      kernel {:<30} {:9.3} ms/step",
                    k["kernel"].as_str().unwrap_or("?"),
                    k["ms"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
    if let Some(s) = v["speedup"].as_f64() {
        println!("  speedup (CPU wall / GPU wall, same run): {s:.2}×");
    }
    if let Some(s) = v["speedup_replay"].as_f64() {
        println!("  speedup with the GPU step replayed (CPU wall / replayed GPU wall): {s:.2}×");
    }
}

/// Bytes of timing a step may keep (wall and device times of the plain,
/// replayed and instrumented runs, and the per-stage and per-kernel series):
/// a generous bound for the check of `--steps` against memory.
const BYTES_PER_STEP: u64 = 8 * 512;

pub fn run(a: &BenchArgs) -> Result<i32, CliError> {
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    if a.warmup.checked_add(a.steps).is_none() {
        return Err(CliError::Usage(format!(
            "--warmup {} with --steps {}: too many steps to count",
            a.warmup, a.steps
        )));
    }
    let steps = format!("--steps {}", a.steps);
    crate::engine::inputs::check_alloc(&steps, crate::engine::inputs::bytes_of(&[a.steps as u64, BYTES_PER_STEP]))?;
    let inputs: Vec<&std::path::Path> = super::common::config_file(&a.config).into_iter().collect();
    for (flag, out) in [("--save-batch", &a.save_batch), ("--save-checkpoint", &a.save_checkpoint)] {
        if let Some(out) = out {
            super::common::check_output(flag, out, &inputs)?;
        }
    }
    if a.engine == BenchEngine::Cpu && a.controller {
        return Err(CliError::Usage("--controller applies only to --engine gpu or both".into()));
    }
    if a.engine == BenchEngine::Cpu && a.gemm_path.is_some() {
        return Err(CliError::Usage("--gemm-path applies only to --engine gpu or both".into()));
    }
    let cfg = Config::resolve(&a.config)?;
    let rows = a.batch.unwrap_or(cfg.batch);
    let t = a.seq_len.unwrap_or(cfg.seq_len);
    if rows == 0 || t == 0 {
        return Err(CliError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    let shapes: Vec<(usize, usize)> = if a.sweep {
        vec![(1, 512), (rows.div_ceil(4), t), (rows, t), (rows, t.saturating_mul(2))]
    } else {
        vec![(rows, t)]
    };
    let mut results = Vec::new();
    for (b, tt) in shapes {
        let v = one(a, &cfg, b, tt)?;
        if !a.json {
            print(&v, a.breakdown);
        }
        results.push(v);
    }
    if a.json {
        let value = if a.sweep { json!({"sweep": results}) } else { results.remove(0) };
        println!("{value}");
    }
    Ok(0)
}

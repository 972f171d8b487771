//! `dualscope bench`: milliseconds per full training step, median after warm-up.

use clap::Args;
use serde_json::json;
use std::time::Instant;

use super::common::{CliError, progress};
use crate::cpu::{self, LossScale, OptimState, StepOptions};
use crate::dataset::{Batch, synthetic};
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
    /// Also print the time per phase (CPU) and per stage and kernel (GPU); always in the JSON.
    #[arg(long)]
    pub breakdown: bool,
    /// Several shapes: B=1 T=512, B/4, B, and B with 2T.
    #[arg(long)]
    pub sweep: bool,
    /// Vulkan device index (default: DUALSCOPE_VK_DEVICE, else 0).
    #[arg(long)]
    pub device: Option<usize>,
    /// The GPU step's precision: f32, or the mixed-precision step (f16 =
    /// mixed: f16 products with f32 accumulation and a dynamic loss scale;
    /// bf16). The CPU engine always runs f32.
    #[arg(long, value_enum, default_value_t = super::gpu::LadderPrecision::F32)]
    pub precision: super::gpu::LadderPrecision,
    /// GEMM kernel of the mixed step (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<super::gpu::GemmPathArg>,
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

/// One engine's timing of a step.
struct Timed {
    /// Wall milliseconds per step.
    wall: Vec<f64>,
    /// Device milliseconds per step (GPU timestamps), when the device has them.
    device: Vec<f64>,
    first_loss: f64,
    /// Milliseconds per step by phase (CPU: mean) or by stage and by kernel
    /// (GPU: median over the steps).
    breakdown: Vec<(String, f64)>,
    kernels: Vec<(String, f64)>,
    /// GPU: how the recurrences ran, and their floor (see `recurrence_floor`).
    recurrence: Option<serde_json::Value>,
    /// GPU: wall and device milliseconds of the step recorded once and
    /// replayed (`Sequence::replay`, the CUDA-graph way), step after step.
    replay: Option<(Vec<f64>, Vec<f64>)>,
    /// GPU: wall and device milliseconds (the sum of the dispatches) of the
    /// step with a timestamp pair around every dispatch, the run the
    /// breakdowns come from.
    instrumented: Option<(Vec<f64>, Vec<f64>)>,
    /// What was timed: the step's precision and the kernel of its products.
    precision: &'static str,
    gemm_path: &'static str,
}

fn bench_cpu(a: &BenchArgs, cfg: &Config, params: &Params<f32>, batch: &Batch) -> Result<Timed, CliError> {
    let mut params = params.clone();
    let mut state = OptimState::new(cfg);
    let mut scale = LossScale::fixed();
    let opts = StepOptions::default();
    let pb = progress((a.warmup + a.steps) as u64, "benchmark cpu");
    let mut wall = Vec::with_capacity(a.steps);
    let mut first_loss = None;
    for i in 0..a.warmup + a.steps {
        if i == a.warmup {
            crate::cpu::profile::enable(true);
        }
        let t0 = Instant::now();
        let r = cpu::train_step(cfg, &mut params, &mut state, &mut scale, batch, &opts)?;
        first_loss.get_or_insert(r.loss);
        if i >= a.warmup {
            wall.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let breakdown =
        crate::cpu::profile::take().into_iter().map(|(n, ms)| (n.to_string(), ms / a.steps as f64)).collect();
    crate::cpu::profile::enable(false);
    Ok(Timed {
        wall,
        device: Vec::new(),
        first_loss: first_loss.unwrap_or(f64::NAN),
        breakdown,
        kernels: Vec::new(),
        recurrence: None,
        replay: None,
        instrumented: None,
        precision: "f32",
        gemm_path: "cpu",
    })
}

fn bench_gpu(a: &BenchArgs, cfg: &Config, params: &Params<f32>, batch: &Batch) -> Result<Timed, CliError> {
    use crate::vk::engine::Engine;
    let ctx = std::sync::Arc::new(super::backend::open_context(a.device)?);
    let fail = |e: crate::vk::VkError| CliError::Engine(format!("--engine gpu: {e}"));
    let precision = a.precision.precision();
    let choice = super::gpu::GemmPathArg::choice_for(a.gemm_path, precision)?;
    let mut e = Engine::with_precision(&ctx, cfg, params, &StepOptions::default(), precision, choice).map_err(fail)?;
    e.set_batch(batch).map_err(fail)?;
    // Instrumented: every dispatch between timestamps, for the breakdowns.
    let pb = progress((a.warmup + a.steps) as u64, "benchmark gpu (per kernel)");
    let (mut timed_wall, mut timed_device) = (Vec::new(), Vec::new());
    // Per stage and per kernel, each step's milliseconds: their medians are
    // reported (a mean would carry the slow steps of a GPU still raising
    // its clocks).
    let mut stages: Vec<(String, Vec<f64>)> = Vec::new();
    let mut kernels: Vec<(String, Vec<f64>)> = Vec::new();
    let add =
        |list: &mut Vec<(String, Vec<f64>)>, name: String, ms: f64| match list.iter_mut().find(|(n, _)| *n == name) {
            Some(x) => x.1.push(ms),
            None => list.push((name, vec![ms])),
        };
    let mut first_loss = None;
    // Warm-up: `--warmup` steps and at least a second, so that a GPU that
    // idled has raised its clocks before anything is kept.
    let warm_until = Instant::now() + std::time::Duration::from_secs(1);
    for i in 0.. {
        if i >= a.warmup && Instant::now() >= warm_until {
            break;
        }
        e.run_step().map_err(fail)?;
        first_loss.get_or_insert_with(|| e.report().map(|r| r.loss).unwrap_or(f64::NAN));
        if i < a.warmup {
            pb.inc(1);
        }
    }
    for _ in 0..a.steps {
        let t0 = Instant::now();
        let (timings, per_stage) = e.run_step_staged().map_err(fail)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        timed_wall.push(ms);
        timed_device.extend(timings.total_ms());
        for (s, ms) in per_stage {
            add(&mut stages, format!("{s:?}"), ms.unwrap_or(0.0));
        }
        for (k, ms) in timings.per_kernel_ms() {
            add(&mut kernels, k, ms);
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let median = |list: Vec<(String, Vec<f64>)>| -> Vec<(String, f64)> {
        list.into_iter().map(|(n, mut xs)| (n, percentiles(&mut xs).0)).collect()
    };
    let (stages, mut kernels) = (median(stages), median(kernels));
    // The step as `train` runs it: recorded every step, timed as a whole.
    e.set_timing(crate::vk::Timing::Span);
    let pb = progress((a.warmup + a.steps) as u64, "benchmark gpu");
    let (mut wall, mut device) = (Vec::new(), Vec::new());
    for i in 0..a.warmup + a.steps {
        let t0 = Instant::now();
        let timings = e.run_step().map_err(fail)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= a.warmup {
            wall.push(ms);
            device.extend(timings.total_ms());
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    kernels.sort_by(|x, y| y.1.total_cmp(&x.1));
    let recurrence = Some(recurrence_floor(&e, cfg, batch.t, &kernels).map_err(fail)?);
    let replay = Some(bench_replay(a, &ctx, &e).map_err(fail)?);
    if ctx.validation_errors() > 0 {
        return Err(CliError::Failed(format!("{} Vulkan validation errors (see stderr)", ctx.validation_errors())));
    }
    let first_loss = first_loss.unwrap_or(f64::NAN);
    let (precision, gemm_path) = (precision.name(), e.gemm_path().name());
    let instrumented = Some((timed_wall, timed_device));
    Ok(Timed {
        wall,
        device,
        first_loss,
        breakdown: stages,
        kernels,
        recurrence,
        replay,
        instrumented,
        precision,
        gemm_path,
    })
}

/// The same step recorded once, then replayed `warmup + steps` times: wall
/// milliseconds (submit to fence) and device milliseconds per replay.
fn bench_replay(
    a: &BenchArgs,
    ctx: &crate::vk::Context,
    e: &crate::vk::engine::Engine,
) -> Result<(Vec<f64>, Vec<f64>), crate::vk::VkError> {
    let mut seq = crate::vk::Sequence::with_timing(ctx, crate::vk::Timing::Span)?;
    e.record_step(&mut seq)?;
    seq.end()?;
    let (mut wall, mut device) = (Vec::new(), Vec::new());
    for i in 0..a.warmup + a.steps {
        let t0 = Instant::now();
        let timings = seq.replay()?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if i >= a.warmup {
            wall.push(ms);
            device.extend(timings.total_ms());
        }
    }
    e.report()?;
    Ok((wall, device))
}

/// The recurrences' device time per step against their floor: the dependent
/// steps (per direction layers × (T - 1) grid barriers, or T for a two-layer
/// wavefront) times the latency of
/// one barrier alone, measured with the arithmetic switched off
/// (`Engine::probe_grid_barrier`, median of 5). Only for the grid recurrence.
fn recurrence_floor(
    e: &crate::vk::engine::Engine,
    cfg: &Config,
    t: usize,
    kernels: &[(String, f64)],
) -> Result<serde_json::Value, crate::vk::VkError> {
    use crate::vk::engine::Recurrence;
    let mode = e.recurrence();
    let measured: f64 = kernels.iter().filter(|(k, _)| k.contains("recurrence")).map(|(_, ms)| ms).sum();
    // The recurrent products: f32, or f16 on cooperative matrices (the mixed step's grid kernels).
    let product = if e.recurrence_on_coopmat() { "f16 coopmat" } else { "f32" };
    // The wavefronts' operand loads (see Engine::wave_noncoherent).
    let loads = |wave: bool, forward: bool| match (wave, e.wave_noncoherent(forward)) {
        (false, _) => serde_json::Value::Null,
        (true, true) => json!("noncoherent"),
        (true, false) => json!("coherent"),
    };
    let mut v = json!({
        "mode": mode.name(),
        "product": product,
        "wave_loads": {"forward": loads(e.forward_wave(), true), "backward": loads(e.backward_wave(), false)},
        "recurrence_ms": measured,
        "fallback": e.recurrence_fallback()
    });
    if mode != Recurrence::Grid || t < 2 {
        return Ok(v);
    }
    let mut probes = Vec::new();
    for _ in 0..5 {
        if let Some(ms) = e.probe_grid_barrier(t)? {
            probes.push(ms);
        }
    }
    if probes.is_empty() {
        return Ok(v);
    }
    let barrier_us = percentiles(&mut probes).0 * 1e3 / (t - 1) as f64;
    // One barrier between two steps of a layer, or between two intervals of
    // a wavefront.
    let per_layer = cfg.layers * (t - 1);
    // Wavefronts: T + 1 intervals forward, T + BWD_WAVE_LAG backward.
    let lag = crate::vk::engine::BWD_WAVE_LAG;
    let barriers = [(e.forward_wave(), 1), (e.backward_wave(), lag)]
        .iter()
        .map(|&(w, lag)| if w { t + lag - 1 } else { per_layer })
        .sum::<usize>();
    v["barrier_us"] = json!(barrier_us);
    v["barriers_per_step"] = json!(barriers);
    v["floor_ms"] = json!(barrier_us * barriers as f64 / 1e3);
    // DUALSCOPE_GRID_PROBE=1: where a forward step's time goes, from the
    // forward grid kernel with parts switched off (its results are then
    // meaningless; only the time is kept), µs per step.
    if std::env::var("DUALSCOPE_GRID_PROBE").is_ok() {
        let parts = [
            ("whole", 0u32),
            ("no_barrier", 2),
            ("no_product", 4),
            ("no_gates", 8),
            ("product_only", 10),
            ("barrier_and_loads_only", 12),
            ("gates_only", 6),
            ("nothing", 14),
        ];
        let mut probe = serde_json::Map::new();
        for (name, flag) in parts {
            let mut xs: Vec<f64> = (0..5).filter_map(|_| e.probe_grid(t, flag).ok().flatten()).collect();
            if !xs.is_empty() {
                probe.insert(format!("{name}_us"), json!(percentiles(&mut xs).0 * 1e3 / t as f64));
            }
        }
        v["fwd_step_probe"] = serde_json::Value::Object(probe);
        let parts = [
            ("whole", 0u32),
            ("no_operand_loads", 2),
            ("no_products", 4),
            ("no_stores", 8),
            ("no_step_inputs", 16),
            ("no_loads_no_products", 6),
            ("products_only", 8 | 16),
            ("barrier_only", 1),
            ("noncoherent_operands", 32),
        ];
        let mut probe = serde_json::Map::new();
        for (name, flag) in parts {
            let mut xs: Vec<f64> = (0..5).filter_map(|_| e.probe_bwd_wave(flag).ok().flatten()).collect();
            if !xs.is_empty() {
                probe.insert(format!("{name}_us"), json!(percentiles(&mut xs).0 * 1e3 / (t + lag) as f64));
            }
        }
        v["bwd_wave_probe"] = serde_json::Value::Object(probe);
    }
    Ok(v)
}

fn summary(engine: &str, t: &mut Timed, tokens: f64) -> serde_json::Value {
    let (median, p10, p90) = percentiles(&mut t.wall);
    let device = (!t.device.is_empty()).then(|| percentiles(&mut t.device));
    json!({
        "engine": engine, "precision": t.precision, "gemm_path": t.gemm_path, "median_ms": median, "p10_ms": p10, "p90_ms": p90,
        "device_median_ms": device.map(|d| d.0), "device_p10_ms": device.map(|d| d.1), "device_p90_ms": device.map(|d| d.2),
        "tokens_per_s": tokens / (median / 1e3), "first_loss": t.first_loss,
        "breakdown_ms": t.breakdown.iter().map(|(n, ms)| json!({"phase": n, "ms": ms})).collect::<Vec<_>>(),
        "kernels_ms": t.kernels.iter().take(25).map(|(n, ms)| json!({"kernel": n, "ms": ms})).collect::<Vec<_>>(),
        "recurrence": t.recurrence,
        "replay_median_ms": t.replay.as_mut().map(|r| percentiles(&mut r.0).0),
        "replay_device_median_ms": t.replay.as_mut().filter(|r| !r.1.is_empty()).map(|r| percentiles(&mut r.1).0),
        "instrumented_median_ms": t.instrumented.as_mut().map(|r| percentiles(&mut r.0).0),
        "instrumented_device_median_ms": t.instrumented.as_mut().filter(|r| !r.1.is_empty()).map(|r| percentiles(&mut r.1).0),
    })
}

fn one(a: &BenchArgs, cfg: &Config, rows: usize, t: usize) -> Result<serde_json::Value, CliError> {
    let ds = synthetic::default_dataset();
    let batch = ds.random_windows(1, rows, t + 1)?;
    super::common::check_memory(cfg, &batch, 4)?;
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
    let cpu = if cpu_on { Some(bench_cpu(a, cfg, &params, &batch)?) } else { None };
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

pub fn run(a: &BenchArgs) -> Result<i32, CliError> {
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    let cfg = Config::resolve(&a.config)?;
    let rows = a.batch.unwrap_or(cfg.batch);
    let t = a.seq_len.unwrap_or(cfg.seq_len);
    if rows == 0 || t == 0 {
        return Err(CliError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    let shapes: Vec<(usize, usize)> =
        if a.sweep { vec![(1, 512), (rows.div_ceil(4), t), (rows, t), (rows, 2 * t)] } else { vec![(rows, t)] };
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

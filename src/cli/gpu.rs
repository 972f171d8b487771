//! `dualscope gpu-info` and `dualscope ladder`: the Vulkan device and the
//! CPU-vs-GPU ladder of MODEL.md.

use clap::{Args, ValueEnum};
use serde_json::json;

use super::backend::open_context as open;
use super::common::{CliError, emit};
use crate::ladder::{self, Precision, RungResult, Status};
use crate::model::Config;
use crate::vk::engine::Fault;
use crate::vk::{DeviceReport, VkError};

#[derive(Args, Debug)]
pub struct GpuInfoArgs {
    /// Device index in the ranked list (default: DUALSCOPE_VK_DEVICE, else 0).
    #[arg(long)]
    pub device: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LadderPrecision {
    F32,
    /// The mixed-precision step: products with f16 inputs and f32
    /// accumulation, a dynamic loss scale (`mixed` is the same).
    #[value(alias = "mixed")]
    F16,
    /// The mixed-precision step with bfloat16 inputs (tiled kernel).
    Bf16,
}

impl LadderPrecision {
    pub fn precision(self) -> Precision {
        match self {
            LadderPrecision::F32 => Precision::F32,
            LadderPrecision::F16 => Precision::F16,
            LadderPrecision::Bf16 => Precision::Bf16,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GemmPathArg {
    /// Cooperative matrices where the device has them (f16), else tiled.
    Auto,
    Tiled,
    /// Force the 128×128 cooperative-matrix kernel (an error where it cannot run).
    Coopmat,
    /// Force the older 64×64 cooperative-matrix kernel (for comparison).
    Coopmat64,
}

impl GemmPathArg {
    /// [`GemmPathArg::choice`] for a step in `precision`: the f32 step has one
    /// kernel, so without the flag it ignores `DUALSCOPE_GEMM_PATH` (which
    /// picks among the f16 kernels); with the flag, a cooperative-matrix
    /// choice in f32 is still an error.
    pub(super) fn choice_for(
        arg: Option<GemmPathArg>,
        precision: Precision,
    ) -> Result<crate::vk::ops::GemmChoice, CliError> {
        match arg {
            None if !precision.is_mixed() => Ok(crate::vk::ops::GemmChoice::Auto),
            arg => Self::choice(arg),
        }
    }

    /// The flag when given, else `DUALSCOPE_GEMM_PATH`, else auto.
    pub(super) fn choice(arg: Option<GemmPathArg>) -> Result<crate::vk::ops::GemmChoice, CliError> {
        use crate::vk::ops::GemmChoice;
        match arg {
            Some(GemmPathArg::Auto) => Ok(GemmChoice::Auto),
            Some(GemmPathArg::Tiled) => Ok(GemmChoice::Tiled),
            Some(GemmPathArg::Coopmat) => Ok(GemmChoice::CoopMat),
            Some(GemmPathArg::Coopmat64) => Ok(GemmChoice::CoopMat64),
            None => GemmChoice::from_env().map_err(|e| CliError::Usage(format!("DUALSCOPE_GEMM_PATH: {e}"))),
        }
    }
}

#[derive(Args, Debug)]
pub struct LadderArgs {
    /// Rungs to run, comma-separated (default: every implemented rung).
    #[arg(long, value_delimiter = ',')]
    pub rungs: Vec<String>,
    /// small, bench, tiny, or a JSON config file: the shapes to check.
    #[arg(long, default_value = "small")]
    pub config: String,
    #[arg(long, value_enum, default_value_t = LadderPrecision::F32)]
    pub precision: LadderPrecision,
    /// GEMM kernel for f16 precision, every rung (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<GemmPathArg>,
    /// Device index in the ranked list (default: DUALSCOPE_VK_DEVICE, else 0).
    #[arg(long)]
    pub device: Option<usize>,
    /// Seed of the random inputs (GEMM operands, parameters, batch windows).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
    /// Parameters from this checkpoint (its config wins) instead of a seeded init.
    #[arg(long)]
    pub checkpoint: Option<std::path::PathBuf>,
    /// isolated: each rung's GPU inputs come from the CPU; chained: from the GPU's own earlier stages.
    #[arg(long, value_enum, default_value_t = ModeArg::Isolated)]
    pub mode: ModeArg,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Plant one bug of the fault catalogue in the GPU engine (see `dualscope faults`).
    #[arg(long)]
    pub fault: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BisectArgs {
    /// Plant one bug of the fault catalogue (see `dualscope faults`).
    #[arg(long)]
    pub fault: Option<String>,
    /// The text to run on (default: the embedded dataset); one row from --offset.
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// The longest length tried (default: 4096, or what the data holds).
    #[arg(long)]
    pub max_len: Option<usize>,
    /// small, bench, tiny, or a JSON config file.
    #[arg(long, default_value = "small")]
    pub config: String,
    /// Parameters from this checkpoint (its config wins) instead of a seeded init.
    #[arg(long)]
    pub checkpoint: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long)]
    pub device: Option<usize>,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// What ladder, bisect and audit run on: the parameters (a checkpoint, whose
/// config wins, or a seeded init of `config`) and the dataset (the embedded
/// one by default). Checks `out` against the inputs first.
struct Inputs {
    cfg: Config,
    params: crate::model::Params<f32>,
    ds: crate::dataset::Dataset,
}

fn load_inputs(
    config: &str,
    checkpoint: &Option<std::path::PathBuf>,
    seed: u64,
    data: &Option<std::path::PathBuf>,
    out: &Option<std::path::PathBuf>,
) -> Result<Inputs, CliError> {
    if let Some(out) = out {
        let inputs: Vec<&std::path::Path> = data.iter().chain(checkpoint).map(|p| p.as_path()).collect();
        super::common::check_output(out, &inputs)?;
    }
    let (cfg, params) = match checkpoint {
        Some(path) => {
            if config != "small" {
                return Err(CliError::Usage("--config and --checkpoint: the checkpoint carries its config".into()));
            }
            crate::checkpoint::load_params(path)?
        }
        None => {
            let cfg = Config::resolve(config)?;
            let p = crate::model::Params::<f32>::init(&cfg, seed);
            (cfg, p)
        }
    };
    let ds = match data {
        Some(path) => crate::dataset::Dataset::open(path)?,
        None => crate::dataset::synthetic::default_dataset(),
    };
    Ok(Inputs { cfg, params, ds })
}

/// Writes a JSON report atomically.
fn write_report(out: &Option<std::path::PathBuf>, value: &serde_json::Value) -> Result<(), CliError> {
    if let Some(out) = out {
        let text = serde_json::to_string_pretty(value).expect("report serializes");
        crate::checkpoint::write_atomic(out, text.as_bytes())?;
    }
    Ok(())
}

pub fn bisect(a: &BisectArgs) -> Result<i32, CliError> {
    let fault = parse_fault(&a.fault)?;
    let Inputs { cfg, params, ds } = load_inputs(&a.config, &a.checkpoint, a.seed, &a.data, &a.out)?;
    let avail = ds.len_tokens().saturating_sub(a.offset + 1);
    let max_len = a.max_len.unwrap_or(4096).min(avail);
    if max_len < 1 {
        return Err(CliError::Usage(format!("--offset {}: {} holds no row of 2 tokens there", a.offset, ds.name())));
    }
    let row = ds.window(a.offset, max_len + 1)?;
    let ctx = std::sync::Arc::new(open(a.device)?);
    let json = a.json;
    let report = ladder::bisect(&ctx, &cfg, &params, &row, max_len, fault, |p| {
        if !json {
            match (&p.rung, &p.tensor) {
                (Some(r), Some(t)) => println!("len {:>6}: FAIL at {r} ({t})", p.len),
                _ => println!("len {:>6}: pass", p.len),
            }
        }
    })
    .map_err(|e| match e {
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Engine(e.to_string()),
    })?;
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
    /// The text (default: the embedded dataset); one row of --len positions from --offset.
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    #[arg(long, default_value_t = 512)]
    pub len: usize,
    #[arg(long, default_value = "small")]
    pub config: String,
    #[arg(long)]
    pub checkpoint: Option<std::path::PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The loss scale of the GPU's backward (its contributions are divided by the scale it reports).
    #[arg(long, default_value_t = 1024.0)]
    pub loss_scale: f64,
    #[arg(long)]
    pub fault: Option<String>,
    #[arg(long)]
    pub device: Option<usize>,
    /// Also write the JSON report (with every per-token norm) to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn audit(a: &AuditArgs) -> Result<i32, CliError> {
    use crate::ladder::audit::Verdict;
    let fault = parse_fault(&a.fault)?;
    if !(a.loss_scale.is_finite() && a.loss_scale > 0.0) {
        return Err(CliError::Usage(format!("--loss-scale {}: a positive finite number", a.loss_scale)));
    }
    let Inputs { cfg, params, ds } = load_inputs(&a.config, &a.checkpoint, a.seed, &a.data, &a.out)?;
    let row = ds.window(a.offset, a.len + 1)?;
    let ctx = std::sync::Arc::new(open(a.device)?);
    let report = crate::ladder::audit::audit(&ctx, &cfg, &params, &row, a.loss_scale, fault).map_err(|e| match e {
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Engine(e.to_string()),
    })?;
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

fn parse_fault(name: &Option<String>) -> Result<Option<Fault>, CliError> {
    match name {
        None => Ok(None),
        Some(n) => Fault::parse(n).map(Some).ok_or_else(|| {
            let all: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            CliError::Usage(format!("--fault {n:?}: the faults are {}", all.join(", ")))
        }),
    }
}

pub fn faults(a: &FaultsArgs) -> Result<i32, CliError> {
    let list: Vec<serde_json::Value> = Fault::ALL
        .iter()
        .map(|f| json!({"name": f.name(), "expected_rung": f.expected_rung(), "description": f.description()}))
        .collect();
    emit(a.json, serde_json::Value::Array(list), || {
        for f in Fault::ALL {
            println!("{:<22} caught by {:<9} {}", f.name(), f.expected_rung(), f.description());
        }
    });
    Ok(0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Isolated,
    Chained,
}

#[derive(Args, Debug)]
pub struct GemmBenchArgs {
    /// Shapes as MxNxK (repeatable); default: the `bench` config's big products and 4096³.
    #[arg(long = "shape")]
    pub shapes: Vec<String>,
    /// Timed products per shape (one sequence; the median is reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Kernel: tiled (f32), tiled-f16 (inputs' mantissas rounded to f16),
    /// tiled-f16-range (f16 values, the mixed step's tiled kernel), tiled-bf16,
    /// coopmat (f16 cooperative matrices, 128×128 tiles) or coopmat64 (the
    /// older 64×64 one).
    #[arg(long, default_value = "tiled")]
    pub path: String,
    #[arg(long)]
    pub device: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

fn parse_shape(s: &str) -> Result<(usize, usize, usize), CliError> {
    let dims: Vec<usize> = s
        .split('x')
        .map(|d| d.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|_| CliError::Usage(format!("--shape {s}: expected MxNxK with positive integers")))?;
    match dims[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
        _ => Err(CliError::Usage(format!("--shape {s}: expected MxNxK with positive integers"))),
    }
}

/// `dualscope gemm-bench`: device-timed GEMM rates (median of `reps`).
pub fn gemm_bench(a: &GemmBenchArgs) -> Result<i32, CliError> {
    let shapes: Vec<(usize, usize, usize)> = if a.shapes.is_empty() {
        vec![(8192, 1536, 512), (8192, 256, 768), (1536, 512, 8192), (4096, 4096, 4096)]
    } else {
        a.shapes.iter().map(|s| parse_shape(s)).collect::<Result<_, _>>()?
    };
    if a.reps == 0 {
        return Err(CliError::Usage("--reps must be at least 1".into()));
    }
    let ctx = open(a.device)?;
    use crate::vk::ops::{GemmChoice, GemmPath, pick_path};
    let path = match a.path.as_str() {
        "tiled" => GemmPath::TiledF32,
        "tiled-f16" => GemmPath::TiledF16In,
        "tiled-bf16" => GemmPath::TiledBf16In,
        "tiled-f16-range" => GemmPath::TiledF16,
        "coopmat" => pick_path(&ctx, true, GemmChoice::CoopMat).map_err(|e| CliError::Engine(e.to_string()))?,
        "coopmat64" => pick_path(&ctx, true, GemmChoice::CoopMat64).map_err(|e| CliError::Engine(e.to_string()))?,
        other => {
            return Err(CliError::Usage(format!(
                "--path {other}: expected tiled, tiled-f16, tiled-f16-range, tiled-bf16, coopmat or coopmat64"
            )));
        }
    };
    let mut rows = Vec::new();
    for (m, n, k) in shapes {
        let shape = crate::vk::ops::GemmShape { m, n, k, ta: false, tb: false, accumulate: false };
        let mut ms =
            crate::vk::ops::gemm_throughput(&ctx, path, &shape, a.reps).map_err(|e| CliError::Engine(e.to_string()))?;
        let (median, _, _) = super::bench::percentiles(&mut ms);
        let tflops = 2.0 * (m * n * k) as f64 / (median / 1e3) / 1e12;
        rows.push(json!({"m": m, "n": n, "k": k, "median_ms": median, "tflops": tflops, "reps": a.reps}));
    }
    emit(a.json, json!({"device": ctx.report().name, "path": path.name(), "shapes": rows}), || {
        println!("{}: {} GEMM, device timestamps, median of {}", ctx.report().name, path.name(), a.reps);
        for r in &rows {
            println!(
                "  {:>5}x{:<5}x{:<5} {:9.3} ms  {:8.3} TFLOP/s",
                r["m"],
                r["n"],
                r["k"],
                r["median_ms"].as_f64().unwrap_or(0.0),
                r["tflops"].as_f64().unwrap_or(0.0)
            );
        }
    });
    Ok(0)
}

pub fn info(a: &GpuInfoArgs) -> Result<i32, CliError> {
    let ctx = open(a.device)?;
    let r = ctx.report();
    emit(a.json, serde_json::to_value(r).expect("report serializes"), || print_report(r));
    Ok(0)
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn print_report(r: &DeviceReport) {
    println!("device {}: {} ({})", r.index, r.name, r.device_type);
    println!("  driver       {} — {}", r.driver_name, r.driver_info);
    println!("  Vulkan       {}", r.api_version);
    println!("  subgroup     {}", r.subgroup_size);
    println!("  shared mem   {} bytes per workgroup", r.max_shared_memory);
    println!(
        "  workgroup    ≤ {} invocations, size ≤ {:?}, count ≤ {:?}",
        r.max_workgroup_invocations, r.max_workgroup_size, r.max_workgroup_count
    );
    println!("  buffers      ≤ {} bytes per storage binding", r.max_storage_buffer_range);
    if r.timestamps {
        println!("  timestamps   {} ns per tick", r.timestamp_period_ns);
    } else {
        println!("  timestamps   not on the compute queue");
    }
    let f = &r.features;
    println!(
        "  features     cooperative matrix {} (f16 16×16×16 path: {}), 16-bit storage {}, float16 {}, bfloat16 {}",
        yes(f.cooperative_matrix),
        yes(f.coopmat_f16_16x16x16),
        yes(f.storage_16bit),
        yes(f.float16),
        yes(f.bfloat16)
    );
    println!("  validation   {}", if r.validation { "on" } else { "off" });
    if let Some(why) = &r.coopmat_off {
        println!("  coopmat      {why}");
    }
    if r.devices.len() > 1 {
        println!("devices (best first; pick with --device N or DUALSCOPE_VK_DEVICE):");
        for d in &r.devices {
            let mark = if d.index == r.index { " (picked)" } else { "" };
            println!("  {}: {} ({}){mark}", d.index, d.name, d.device_type);
        }
    }
}

/// The parameters and the batch the model rungs run on.
fn ladder_inputs(
    a: &LadderArgs,
) -> Result<(Config, crate::model::Params<f32>, crate::dataset::Batch, String), CliError> {
    use crate::dataset::Batch;
    let Inputs { cfg, params, ds } = load_inputs(&a.config, &a.checkpoint, a.seed, &a.data, &a.out)?;
    let (batch, source) = match (a.len, a.offset) {
        (Some(t), offset) => {
            let offset = offset.unwrap_or(0);
            let row = ds.window(offset, t + 1)?;
            (Batch::from_rows(&[row])?, format!("{}: one row of {t} positions at offset {offset}", ds.name()))
        }
        (None, Some(_)) => return Err(CliError::Usage("--offset needs --len".into())),
        (None, None) => {
            let b = ladder::default_batch(&ds, &cfg, a.seed).map_err(|e| CliError::Usage(e.to_string()))?;
            let what =
                format!("{} random windows of up to {} positions, every other row shortened", cfg.batch, cfg.seq_len);
            (b, format!("{}: {what} (seed {})", ds.name(), a.seed))
        }
    };
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
    ladder::check_rungs(&rungs).map_err(|e| CliError::Usage(format!("--rungs: {e}")))?;
    let precision = a.precision.precision();
    let mode = match a.mode {
        ModeArg::Isolated => ladder::Mode::Isolated,
        ModeArg::Chained => ladder::Mode::Chained,
    };
    let choice = GemmPathArg::choice(a.gemm_path)?;
    let fault = parse_fault(&a.fault)?;
    let model_rungs = rungs.iter().any(|r| r != "gemm");
    let (cfg, params, batch, source) = ladder_inputs(a)?;
    let ctx = std::sync::Arc::new(open(a.device)?);
    let engine_err = |e: ladder::LadderError| match e {
        ladder::LadderError::Vk(VkError::Unsupported(why) | VkError::Invalid(why)) => CliError::Engine(why),
        ladder::LadderError::Vk(e @ (VkError::Alloc { .. } | VkError::Limit(_))) => CliError::Engine(e.to_string()),
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Failed(e.to_string()),
    };
    let mut model = None;
    if model_rungs {
        let setup = ladder::Setup {
            cfg: cfg.clone(),
            params,
            batch: batch.clone(),
            opts: crate::cpu::StepOptions::default(),
            mode,
            precision,
        };
        let mut m = ladder::ModelLadder::with_choice(&ctx, setup, choice).map_err(engine_err)?;
        m.set_fault(fault);
        model = Some(m);
    }
    let mut results: Vec<RungResult> = Vec::new();
    for id in &rungs {
        let r = match (id.as_str(), model.as_mut()) {
            ("gemm", _) => ladder::run_rung_with_fault(&ctx, id, &cfg, precision, a.seed, choice, fault),
            (_, Some(m)) => m.run_rung(id),
            (_, None) => unreachable!("model rungs build the model ladder"),
        }
        .map_err(engine_err)?;
        results.push(r);
    }
    let end_to_end = match model.as_mut() {
        Some(m) => Some(m.end_to_end().map_err(engine_err)?),
        None => None,
    };
    // The kernel the step's products ran on (the model rungs'), else the gemm rung's.
    let gemm_path =
        model.as_ref().map(|m| m.engine().gemm_path_now().name()).or_else(|| results.iter().find_map(|r| r.gemm_path));
    let validation_errors = ctx.validation_errors();
    let failed = results.iter().any(|r| r.status == Status::Fail)
        || end_to_end.as_ref().is_some_and(|e| e.status == Status::Fail)
        || validation_errors > 0;
    let value = json!({
        "device": ctx.report().name,
        "config": cfg,
        "precision": precision,
        "gemm_path": gemm_path,
        "mode": mode,
        "fault": fault,
        "batch": { "rows": batch.rows, "seq_len": batch.t, "targets": batch.num_targets(), "source": source },
        "validation": { "on": ctx.validation(), "errors": validation_errors },
        "rungs": results,
        "end_to_end": end_to_end,
        "status": if failed { "fail" } else { "pass" },
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
    Ok(if failed { 1 } else { 0 })
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

/// A byte as a reader sees it: `'a' (0x61)`, `'\n' (0x0a)`, `0xc3`.
fn describe_byte(b: u8) -> String {
    match b {
        b'\n' => "'\\n' (0x0a)".into(),
        b'\t' => "'\\t' (0x09)".into(),
        0x20..=0x7e => format!("'{}' (0x{b:02x})", b as char),
        _ => format!("0x{b:02x}"),
    }
}

//! Command-line front end over the library. Human-readable output by default,
//! one JSON object on stdout with `--json`.

mod args;
mod backend;
mod bench;
mod common;
mod controller;
mod drift;
mod gpu;
mod grads;
mod growth;
mod gui;
mod init;
mod mutate;
mod precision_bisect;
pub(crate) mod progress;
mod replay;
mod scan;
mod train;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use common::CliError;

#[derive(Parser, Debug)]
#[command(name = "dualscope", version, about = "A visual debugger for a GPU training engine of the dual-stream model")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Build the GPU kernels at run time from this shader folder (a copy of
    /// `shaders/`, as `dualscope mutate` makes) instead of the SPIR-V built
    /// in; default: DUALSCOPE_SHADER_DIR.
    #[arg(long, global = true, value_name = "DIR")]
    pub shaders: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Open the visual debugger (the default when no command is given).
    Gui(gui::GuiArgs),
    /// Train on the embedded synthetic corpus and show the loss falling.
    Demo(train::DemoArgs),
    /// Write a freshly initialised checkpoint.
    Init(init::InitArgs),
    /// Loss and gradients of one batch; writes the gradients as safetensors.
    Grads(grads::GradsArgs),
    /// One training step from fresh optimizer state; writes the new checkpoint.
    Step(grads::StepArgs),
    /// A training loop on a dataset file.
    Train(train::TrainArgs),
    /// Milliseconds per training step (median after warm-up).
    Bench(bench::BenchArgs),
    /// The Vulkan device: name, driver, limits, features (exit 2 without Vulkan).
    GpuInfo(gpu::GpuInfoArgs),
    /// CPU-vs-GPU ladder of docs/model.md (exit 0: nothing failed, 1: a rung failed, 2: usage or device error).
    Ladder(gpu::LadderArgs),
    /// The fault catalogue: planted bugs the ladder must catch (use with `ladder --fault NAME`).
    Faults(gpu::FaultsArgs),
    /// Length bisect: the smallest sequence length at which the GPU step fails the ladder.
    Bisect(gpu::BisectArgs),
    /// CPU/GPU norm audit: per token and per tensor, each engine's gradient contribution, classified.
    Audit(gpu::AuditArgs),
    /// Device-timed f32 GEMM rates on the Vulkan engine.
    GemmBench(gpu::GemmBenchArgs),
    /// Run a captured step again on both engines and say what made it go wrong (exit 0: data or clean, 1: engine, precision or transient, 2: usage or device error).
    Replay(replay::ReplayArgs),
    /// GPU and CPU trained in lockstep: per-step parameter divergence and the first step past rounding (exit 0: none, 1: one, 2: usage or device error).
    Drift(drift::DriftArgs),
    /// Every window of a dataset through forward and backward, ranked by risk; the riskiest kept as captures.
    Scan(scan::ScanArgs),
    /// One long row: per position the GPU–CPU difference of each state and gradient against the rounding envelope (exit 0: none outside, 1: one, 2: usage or device error).
    Growth(growth::GrowthArgs),
    /// The fewest stages that must stay in f32 for the ladder and the loss gate to pass (exit 0: a passing map, 1: even all-f32 fails, 2: usage or device error).
    PrecisionBisect(precision_bisect::PrecisionBisectArgs),
    /// Mutation testing of the GPU kernels: mutants of the GLSL, the ladder on each, the score and every survivor (exit 1: below --min-score).
    Mutate(mutate::MutateArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Cpu,
    Gpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    F32,
    F64,
}

/// Options shared by every command that takes an optimizer step.
#[derive(Args, Debug, Clone)]
pub struct OptimArgs {
    /// Learning rate (greater than 0, at most 10).
    #[arg(long, default_value_t = 3e-3, allow_negative_numbers = true)]
    pub lr: f64,
    /// Clip threshold of the global gradient norm.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub clip: f64,
    /// AdamW weight decay (2-D weights except the embedding).
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    pub wd: f64,
    /// Per-token guard: cap on each position's `W_ctx` gradient contribution norm.
    #[arg(long, allow_negative_numbers = true)]
    pub token_cap: Option<f64>,
}

impl OptimArgs {
    pub fn options(&self) -> Result<StepOptions, CliError> {
        let bad = |m: String| Err(CliError::Usage(m));
        validate_lr(self.lr)?;
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return bad(format!("--clip must be a finite positive number, got {}", self.clip));
        }
        if !(self.wd.is_finite() && self.wd >= 0.0) {
            return bad(format!("--wd must be a finite non-negative number, got {}", self.wd));
        }
        validate_token_cap(self.token_cap)?;
        Ok(StepOptions {
            lr: self.lr,
            clip: self.clip,
            weight_decay: self.wd,
            token_cap: self.token_cap,
            ..Default::default()
        })
    }
}

use crate::step::StepOptions;

/// The largest `--lr` accepted: past it a step only throws the weights away.
pub(crate) const MAX_LR: f64 = 10.0;

/// A learning rate must be finite, above 0 and at most [`MAX_LR`].
pub(crate) fn validate_lr(lr: f64) -> Result<(), CliError> {
    let why = if !lr.is_finite() {
        "must be a finite number"
    } else if lr <= 0.0 {
        "must be > 0"
    } else if lr > MAX_LR {
        "must be at most 10"
    } else {
        return Ok(());
    };
    Err(CliError::Usage(format!("--lr {} {why}", short_number(lr))))
}

/// A number as a user would type it: `0.5`, `-1`, `1e300` (Rust's `{}`
/// writes every digit of a huge float).
pub(crate) fn short_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e6).contains(&x.abs()) { format!("{x}") } else { format!("{x:e}") }
}

/// The per-token guard's cap must be a finite positive number.
pub(crate) fn validate_token_cap(cap: Option<f64>) -> Result<(), CliError> {
    match cap {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            Err(CliError::Usage(format!("--token-cap must be a finite positive number, got {t}")))
        }
        _ => Ok(()),
    }
}

pub fn run(cli: Cli) -> Result<i32, CliError> {
    use crate::engine::gpu::shader_dir;
    let env_dir = std::env::var_os(shader_dir::ENV).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    match (&cli.shaders, env_dir) {
        (Some(dir), _) => shader_dir::choose(dir, "--shaders").map_err(CliError::Usage)?,
        (None, Some(dir)) => shader_dir::choose(&dir, shader_dir::ENV).map_err(CliError::Usage)?,
        (None, None) => {}
    }
    match cli.command {
        None => gui::run(&gui::GuiArgs::default()),
        Some(Command::Gui(a)) => gui::run(&a),
        Some(Command::Demo(a)) => train::demo(&a),
        Some(Command::Init(a)) => init::run(&a),
        Some(Command::Grads(a)) => grads::run_grads(&a),
        Some(Command::Step(a)) => grads::run_step(&a),
        Some(Command::Train(a)) => train::run(&a),
        Some(Command::Bench(a)) => bench::run(&a),
        Some(Command::GpuInfo(a)) => gpu::info(&a),
        Some(Command::Ladder(a)) => gpu::run_ladder(&a),
        Some(Command::Faults(a)) => gpu::faults(&a),
        Some(Command::Bisect(a)) => gpu::bisect(&a),
        Some(Command::Audit(a)) => gpu::audit(&a),
        Some(Command::GemmBench(a)) => gpu::gemm_bench(&a),
        Some(Command::Replay(a)) => replay::run(&a),
        Some(Command::Drift(a)) => drift::run_drift(&a),
        Some(Command::Scan(a)) => scan::run(&a),
        Some(Command::Growth(a)) => growth::run_growth(&a),
        Some(Command::PrecisionBisect(a)) => precision_bisect::run(&a),
        Some(Command::Mutate(a)) => mutate::run(&a),
    }
}

//! `dualscope train` and `demo`: the options of the training loop
//! ([`crate::train::train`]) and its printed lines.

use super::progress::Bar as ProgressBar;
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

use super::common::{CliError, emit, log_line, progress};
use super::controller::ControllerArgs;
use super::{EngineArg, OptimArgs};
use crate::dataset::{Dataset, synthetic};
use crate::engine::stats::mean;
use crate::engine::{EngineKind, VulkanOptions};
use crate::model::Config;
use crate::step::{LossScale, StepOptions};
use crate::train::inject::{self, Inject, Injections};
use crate::train::{
    Action, Begin, CaptureOptions, ControllerConfig, MemoryCheck, Observer, StepEvent, TrainError, TrainPlan, train,
};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The dataset: any file (bytes), a .jsonl file with a `text` field per line, or
    /// `embedded:synthetic` for the embedded corpus.
    #[arg(long)]
    pub data: PathBuf,
    /// small, bench, tiny, or a JSON config file (default small; ignored with --checkpoint, refused with --resume).
    #[arg(long)]
    pub config: Option<String>,
    /// Start from this checkpoint's weights (fresh optimizer state) instead of a fresh initialisation.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Continue a run: a --out directory of an earlier run (or its train_state.safetensors).
    /// Weights, optimizer moments and step, loss scale, controller and data position come back;
    /// --out defaults to that directory.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub trust: super::args::NonFiniteArg,
    /// The step to train up to (with --resume: counted from the start of the run).
    #[arg(long, default_value_t = 200)]
    pub steps: u64,
    /// Positions per row (T); default: the config's seq_len. Longer documents are windowed.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Rows per batch (B); default: the config's batch.
    #[arg(long)]
    pub batch: Option<usize>,
    #[arg(long, value_enum, default_value_t = EngineArg::Cpu)]
    pub engine: EngineArg,
    /// A directory for checkpoints and the step and controller logs.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seeds the initialisation and the choice of windows (default 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print a log line every N steps.
    #[arg(long, default_value_t = 10)]
    pub log_every: u64,
    /// Also write a parameter checkpoint step_NNNNNN.safetensors every N steps (0: never).
    #[arg(long, default_value_t = 0)]
    pub save_every: u64,
    /// Write the resumable checkpoint (train_state.safetensors) every N steps, and at the end;
    /// it is also the good state a rollback returns to.
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: u64,
    /// The loss scale: fixed (1) or dynamic (GradScaler: 2^16, halved on a
    /// skipped step). Default: dynamic with --precision f16, else fixed.
    #[arg(long, value_enum)]
    pub loss_scale: Option<ScaleArg>,
    /// The GPU step's precision: f32, or the mixed-precision step (f16 =
    /// mixed: f16 products with f32 accumulation; bf16). --engine gpu only.
    #[arg(long, value_enum, default_value_t = crate::step::Precision::F32)]
    pub precision: crate::step::Precision,
    #[command(flatten)]
    pub precision_map: super::args::PrecisionMapArg,
    /// GEMM kernel of the mixed step (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<crate::step::GemmChoice>,
    #[command(flatten)]
    pub optim: OptimArgs,
    #[command(flatten)]
    pub controller: ControllerArgs,
    #[command(flatten)]
    pub events: Box<EventArgs>,
    /// Carry each row's hidden state from one window to the next (truncated BPTT):
    /// rows read stretches of --carry-windows windows in order (docs/carry-state.md). Both engines.
    #[arg(long)]
    pub carry_state: bool,
    /// With --carry-state: windows per stretch, after which every row starts afresh from zero.
    #[arg(long, default_value_t = 8, value_name = "K")]
    pub carry_windows: u64,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// `train`'s planted events and captures (boxed: they would make `TrainArgs`
/// the one large variant of the command enum).
#[derive(Args, Debug)]
pub struct EventArgs {
    /// Testing aid: planted events, KIND@STEP: nan (one gradient value NaN), spike (gradients × 1e4),
    /// transient (a flipped exponent bit in one gradient, once), persistent[=FAULT] (a GPU kernel
    /// fault from STEP on; default reset_before_matmul), f16_overflow (loss scale × 2^24 for that
    /// step; --precision f16). `dualscope faults` lists them.
    #[arg(long, value_delimiter = ',', value_name = "KIND@STEP[,KIND@STEP...]")]
    pub inject: Vec<String>,
    /// Testing aid: make one gradient value NaN at these steps (the same as --inject nan@STEP).
    #[arg(long, value_delimiter = ',', value_name = "STEP[,STEP...]")]
    pub inject_nan_at: Vec<u64>,
    /// Testing aid: multiply the gradients by 1e4 at these steps (the same as --inject spike@STEP).
    #[arg(long, value_delimiter = ',', value_name = "STEP[,STEP...]")]
    pub inject_spike_at: Vec<u64>,
    /// Also capture these steps (state before the step, batch, provenance) into OUT/captures/,
    /// whatever they do; needs --out. Every guard skip, controller action and planted event is
    /// captured anyway.
    #[arg(long, value_delimiter = ',', value_name = "STEP[,STEP...]")]
    pub capture_at: Vec<u64>,
    /// Keep at most N captures: the first and the N-1 most recent (0: write none).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_captures: usize,
    /// A rollback's capture holds the batches of the K steps before it.
    #[arg(long, default_value_t = 8, value_name = "K")]
    pub capture_before: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScaleArg {
    Fixed,
    Dynamic,
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

/// `train`'s printing: the progress bar, a line every `--log-every` steps
/// (and at the first and every skipped step) and one per controller action.
struct TrainPrinter {
    json: bool,
    /// `--quiet`: no bar and no step lines.
    quiet: bool,
    log_every: u64,
    token_cap: bool,
    pb: Option<ProgressBar>,
    /// Losses since the last printed line.
    window: Vec<f64>,
}

impl TrainPrinter {
    fn say(&self, line: String) {
        if let (false, Some(pb)) = (self.json, &self.pb) {
            log_line(pb, line);
        }
    }

    fn finish(&self) {
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}

impl Observer for TrainPrinter {
    fn begin(&mut self, b: &Begin<'_>) {
        self.pb = Some(progress(b.last_step + 1 - b.first_step, "training").hidden_if(self.json || self.quiet));
        if let Some(p) = b.resumed {
            self.say(format!(
                "resumed {} at step {} (optimizer step {}, loss scale {}, lr × {})",
                p.display(),
                b.first_step - 1,
                b.optim_step,
                b.loss_scale,
                b.lr_factor
            ));
        }
    }

    fn note(&mut self, note: &str) {
        eprintln!("note: {note}");
    }

    fn step(&mut self, s: &StepEvent<'_>) {
        let e = s.entry;
        self.window.push(e.loss);
        if !self.json && !self.quiet && (e.step.is_multiple_of(self.log_every) || s.first || e.skipped.is_some()) {
            let capped = if self.token_cap { format!("  capped {}", e.capped_tokens) } else { String::new() };
            let lr = e.lr;
            let lr_text = if s.lr_factor != 1.0 || lr != s.base_lr { format!("  lr {lr:.3e}") } else { String::new() };
            let scale_text = if e.scale != 1.0 { format!("  scale {}", e.scale) } else { String::new() };
            let skip_text = e.skipped.as_ref().map_or(String::new(), |why| format!("  SKIPPED: {why}"));
            self.say(format!(
                "step {:>6}  loss {:.4} (mean {:.4})  grad_norm {:.4}  skipped {}{capped}{lr_text}{scale_text}  {:.1} ms/step{skip_text}",
                e.step,
                e.loss,
                mean(&self.window),
                e.grad_norm,
                s.skipped_total,
                e.ms
            ));
            self.window.clear();
        }
        if let Some(pb) = &self.pb {
            pb.inc(1);
        }
    }

    fn action(&mut self, a: &Action) {
        self.say(a.line());
    }

    fn capture(&mut self, path: &Path, reason: &str) {
        self.say(format!("capture: {} ({reason})", path.display()));
    }
}

impl TrainArgs {
    /// The loop's plan from the options, checked as far as the options alone
    /// allow (before the dataset is opened).
    fn plan(&self) -> Result<TrainPlan, CliError> {
        let optim = self.optim.options()?;
        let controller = self.controller.config()?;
        let mut inject = Injections::new();
        let ev = &self.events;
        inject::parse_into(&mut inject, &ev.inject).map_err(CliError::Usage)?;
        for (steps, kind) in [(&ev.inject_nan_at, Inject::Nan), (&ev.inject_spike_at, Inject::Spike)] {
            for &k in steps {
                inject::add(&mut inject, k, kind).map_err(CliError::Usage)?;
            }
        }
        let vulkan = VulkanOptions {
            precision: self.precision,
            gemm: super::gpu::choice_for(self.gemm_path, self.precision)?,
            ..VulkanOptions::default()
        };
        let plan = TrainPlan {
            data: self.data.clone(),
            config: self.config.clone(),
            checkpoint: self.checkpoint.clone(),
            resume: self.resume.clone(),
            steps: self.steps,
            seq_len: self.seq_len,
            batch: self.batch,
            seed: self.seed,
            engine: self.engine.kind(),
            vulkan,
            precision_map: self.precision_map.precision_map.clone(),
            out: self.out.clone(),
            save_every: self.save_every,
            checkpoint_every: self.checkpoint_every,
            loss_scale: self.loss_scale.map(|s| match s {
                ScaleArg::Fixed => LossScale::fixed(),
                ScaleArg::Dynamic => LossScale::dynamic(),
            }),
            optim,
            controller,
            inject,
            captures: CaptureOptions {
                at: ev.capture_at.iter().copied().collect(),
                max: ev.max_captures,
                before: ev.capture_before,
            },
            memory_check: MemoryCheck::Shape,
            load: self.trust.options(),
            carry: self.carry_state.then_some(crate::train::CarryWalk { windows: self.carry_windows }),
            weights: None,
            gpu: None,
            keep_params: false,
        };
        plan.check()?;
        Ok(plan)
    }
}

pub fn run(a: &TrainArgs) -> Result<i32, CliError> {
    if a.engine == EngineArg::Cpu && a.gemm_path.is_some() {
        return Err(CliError::Usage("--gemm-path applies only to --engine gpu".into()));
    }
    let plan = a.plan()?;
    // `--data embedded:synthetic` (the embedded corpus's name) trains on the
    // built-in corpus, as the GUI's default model was made (docs/default-model.md).
    let ds = if a.data.as_os_str() == synthetic::DEFAULT_NAME {
        synthetic::default_dataset()
    } else {
        Dataset::open(&a.data).map_err(super::common::data_error)?
    };
    let mut printer = TrainPrinter {
        json: a.json,
        quiet: a.quiet,
        log_every: a.log_every.max(1),
        token_cap: a.optim.token_cap.is_some(),
        pb: None,
        window: Vec::new(),
    };
    let s = match train(&plan, &ds, &mut printer) {
        Ok(s) => s,
        Err(e @ TrainError::Stopped { .. }) => {
            printer.finish();
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    printer.finish();
    let losses = &s.losses;
    let n = losses.len();
    let head = &losses[..n.min(10)];
    let tail = &losses[n.saturating_sub(10)..];
    let (precision, gemm_path) = (s.precision, s.gemm_path);
    emit(
        a.json,
        json!({"steps": n, "precision": precision, "gemm_path": gemm_path, "first_step": s.first_step, "last_step": s.last_step, "resumed_from": s.resumed_from,
               "skipped": s.skipped, "first_loss": losses[0], "last_loss": losses[n - 1],
               "mean_loss_first10": mean(head), "mean_loss_last10": mean(tail), "config": s.config,
               "dataset": s.dataset, "out": s.out, "controller": s.controller.summary(), "actions": s.actions,
               "captures": s.captures,
               "log": s.entries}),
        || {
            println!(
                "trained steps {}..{} on {}: mean loss {:.4} over the first {}, {:.4} over the last {}; {} skipped; \
                 controller: {} actions, {} rollbacks",
                s.first_step,
                s.last_step,
                s.dataset,
                mean(head),
                head.len(),
                mean(tail),
                tail.len(),
                s.skipped,
                s.actions.len(),
                s.controller.rollbacks
            );
            match &a.precision_map.precision_map {
                Some(m) => println!("precision map {m:?} over --precision {precision}, f16 products on {gemm_path}"),
                None if precision != "f32" => {
                    println!("mixed-precision step: {precision} products on {gemm_path}, f32 everything else")
                }
                None => {}
            }
            if let Some(dir) = &s.out {
                println!("checkpoints and logs in {}", dir.display());
                if !s.captures.is_empty() {
                    let first = s.captures.iter().map(|c| c.step.to_string()).take(8).collect::<Vec<_>>();
                    let more = if s.captures.len() > 8 { ", …" } else { "" };
                    println!(
                        "{} capture(s) in {} (steps {}{more})",
                        s.captures.len(),
                        dir.join(crate::capture::CAPTURES_DIR).display(),
                        first.join(", ")
                    );
                }
            }
        },
    );
    Ok(0)
}

/// `demo`'s printing: a line every 10 steps with the mean loss since the last.
struct DemoPrinter {
    pb: ProgressBar,
    window: Vec<f64>,
}

impl Observer for DemoPrinter {
    fn step(&mut self, s: &StepEvent<'_>) {
        let e = s.entry;
        self.pb.inc(1);
        self.window.push(e.loss);
        if e.step.is_multiple_of(10) || e.step == 1 {
            let mean = mean(&self.window);
            self.window.clear();
            log_line(
                &self.pb,
                format!(
                    "step {:>4}  loss {:.4}  ({:.2} bits/byte)  {:.1} ms/step",
                    e.step,
                    mean,
                    mean / std::f64::consts::LN_2,
                    e.ms
                ),
            );
        }
    }
}

/// The default command until the GUI lands: train the `small` model on the
/// embedded corpus and show the loss falling (the training loop on the CPU
/// reference, without the controller).
pub fn demo(a: &DemoArgs) -> Result<i32, CliError> {
    let ds = synthetic::default_dataset();
    let plan = TrainPlan {
        data: PathBuf::from(ds.name()),
        config: Some("small".into()),
        checkpoint: None,
        resume: None,
        steps: a.steps as u64,
        seq_len: Some(a.seq_len),
        batch: Some(a.batch),
        seed: Some(0),
        engine: EngineKind::Cpu,
        vulkan: VulkanOptions::default(),
        precision_map: None,
        out: None,
        save_every: 0,
        checkpoint_every: u64::MAX,
        loss_scale: Some(LossScale::fixed()),
        optim: StepOptions::default(),
        controller: ControllerConfig { enabled: false, ..Default::default() },
        inject: Default::default(),
        captures: CaptureOptions { max: 0, ..Default::default() },
        memory_check: MemoryCheck::FirstBatch,
        load: Default::default(),
        carry: None,
        weights: None,
        gpu: None,
        keep_params: false,
    };
    // The plan's checks (no zero sizes, steps that fit in memory) come before the banner.
    plan.check()?;
    crate::engine::inputs::check_batch(
        &Config::small(),
        a.batch,
        a.seq_len,
        4,
        &format!("--batch {} --seq-len {}", a.batch, a.seq_len),
    )?;
    println!("dualscope demo: the CPU reference engine trains the `small` dual-stream model");
    println!(
        "on the embedded synthetic corpus ({}), batch {} × {} tokens, {} threads.",
        ds.name(),
        a.batch,
        a.seq_len,
        rayon::current_num_threads()
    );
    let mut printer = DemoPrinter { pb: progress(a.steps as u64, "training"), window: Vec::new() };
    let s = train(&plan, &ds, &mut printer)?;
    printer.pb.finish_and_clear();
    let head = &s.losses[..s.losses.len().min(10)];
    let tail = &s.losses[s.losses.len().saturating_sub(10)..];
    println!("mean loss {:.4} → {:.4} nats/byte over {} steps", mean(head), mean(tail), s.losses.len());
    Ok(0)
}

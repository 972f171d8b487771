//! `dualscope train` and the default `demo`: a real training loop.

use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::backend::{Poison, Stepper, TrainState};
use super::common::{CliError, check_memory, check_shape, emit, log_line, progress};
use super::controller::{Action, Controller, ControllerArgs, Outcome};
use super::{EngineArg, OptimArgs};
use crate::checkpoint::{
    TrainCheckpoint, load_params, load_train_checkpoint, save_params, save_train_checkpoint, write_atomic,
};
use crate::cpu::{LossScale, OptimOutcome, OptimState, StepOptions, StepReport};
use crate::dataset::{Batch, Dataset, synthetic};
use crate::model::{Config, Params};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The dataset: any file (bytes) or a .jsonl file with a `text` field per line.
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
    #[arg(long, value_enum, default_value_t = super::gpu::LadderPrecision::F32)]
    pub precision: super::gpu::LadderPrecision,
    /// GEMM kernel of the mixed step (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<super::gpu::GemmPathArg>,
    #[command(flatten)]
    pub optim: OptimArgs,
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// Testing aid: make one gradient value NaN at these steps (exercises the guard and the controller).
    #[arg(long, value_delimiter = ',', value_name = "STEP[,STEP...]")]
    pub inject_nan_at: Vec<u64>,
    /// Testing aid: multiply the gradients by 1e4 at these steps (a finite outlier).
    #[arg(long, value_delimiter = ',', value_name = "STEP[,STEP...]")]
    pub inject_spike_at: Vec<u64>,
    #[arg(long)]
    pub json: bool,
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

fn mean_loss(log: &[Logged]) -> f64 {
    log.iter().map(|e| e.report.loss).sum::<f64>() / log.len().max(1) as f64
}

/// Name of the resumable checkpoint in `--out`.
pub const TRAIN_STATE_FILE: &str = "train_state.safetensors";
const LOG_FILE: &str = "log.jsonl";
const CONTROLLER_FILE: &str = "controller.jsonl";

/// The run's state beside the tensors of a training checkpoint (its
/// `train_state` metadata, JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RunState {
    version: u32,
    /// Steps done: the data position (step k trains on the batch of seed and k).
    step: u64,
    /// The AdamW step counter (behind `step` by the skipped and rolled-back steps).
    optim_step: u64,
    loss_scale: LossScale,
    controller: Controller,
    seed: u64,
    batch: usize,
    seq_len: usize,
    dataset: String,
    dataset_hash: String,
}

/// The last good state: what a rollback returns to and what the checkpoint file holds.
struct Good {
    step: u64,
    state: TrainState,
    controller: Controller,
}

/// The batch of step `step` (the same whatever happened before it).
fn batch_at(ds: &Dataset, seed: u64, step: u64, rows: usize, len: usize, pad: bool) -> Result<Batch, CliError> {
    let b = ds.random_windows(seed.wrapping_mul(1_000_003).wrapping_add(step), rows, len)?;
    Ok(if pad { pad_to(b, len - 1) } else { b })
}

/// Pads every row to `t + 1` tokens (masked), so that a GPU workspace sized
/// once fits every batch. Padding changes no valid position (MODEL.md).
fn pad_to(b: Batch, t: usize) -> Batch {
    if b.t >= t {
        return b;
    }
    let mut tokens = vec![0u8; b.rows * (t + 1)];
    for r in 0..b.rows {
        tokens[r * (t + 1)..r * (t + 1) + b.lens[r]].copy_from_slice(b.row(r));
    }
    Batch { rows: b.rows, t, tokens, lens: b.lens }
}

/// A checkpoint path given to --resume: a directory holding train_state.safetensors, or the file.
fn resume_file(p: &Path) -> PathBuf {
    if p.is_dir() { p.join(TRAIN_STATE_FILE) } else { p.to_path_buf() }
}

fn load_run(path: &Path) -> Result<(Config, TrainState, RunState), CliError> {
    let ck = load_train_checkpoint(path)?;
    let rs: RunState = serde_json::from_str(&ck.state)
        .map_err(|e| CliError::Failed(format!("{}: invalid train_state metadata: {e}", path.display())))?;
    if rs.version != 1 {
        return Err(CliError::Failed(format!("{}: train_state version {} is not 1", path.display(), rs.version)));
    }
    let state = TrainState {
        params: ck.params,
        optim: OptimState { m: ck.m, v: ck.v, step: rs.optim_step },
        scale: rs.loss_scale.clone(),
    };
    Ok((ck.config, state, rs))
}

/// Appends JSON lines to a file in --out, flushed line by line.
struct JsonLog(Option<std::fs::File>);

impl JsonLog {
    fn open(path: Option<PathBuf>) -> Result<Self, CliError> {
        let Some(path) = path else { return Ok(JsonLog(None)) };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| CliError::Failed(format!("{}: cannot open for appending: {e}", path.display())))?;
        Ok(JsonLog(Some(f)))
    }

    fn push(&mut self, v: &serde_json::Value) -> Result<(), CliError> {
        if let Some(f) = &mut self.0 {
            writeln!(f, "{v}").and_then(|_| f.flush()).map_err(|e| CliError::Failed(format!("writing a log: {e}")))?;
        }
        Ok(())
    }

    fn sync(&self) {
        if let Some(f) = &self.0 {
            let _ = f.sync_data();
        }
    }
}

/// The lines of `from` (a log of an earlier run) whose `step` is at most
/// `upto`, written atomically to `to`: the steps after a checkpoint are run
/// again on resume, and a line cut by a kill is dropped.
fn keep_log_upto(from: &Path, to: &Path, upto: u64) -> Result<(), CliError> {
    let text = match std::fs::read(from) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CliError::Failed(format!("{}: {e}", from.display()))),
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|k| k <= upto)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    write_atomic(to, kept.as_bytes())?;
    Ok(())
}

/// Temporary files of atomic writes cut short by a kill (`.NAME.tmp.PID.N`).
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = [TRAIN_STATE_FILE, "last.safetensors", LOG_FILE, CONTROLLER_FILE, "step_"]
            .iter()
            .any(|n| name.starts_with(&format!(".{n}")));
        if ours && name.contains(".tmp.") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// One step's log entry; `skipped` is why it was not applied (the engine's
/// guard or the controller).
fn entry_json(
    step: u64,
    ms: f64,
    r: &StepReport,
    skipped: Option<&str>,
    lr: f64,
    optim_step: u64,
    actions: &[Action],
) -> serde_json::Value {
    json!({"step": step, "loss": r.loss, "grad_norm": r.optim.grad_norm, "skipped": skipped, "clipped": r.optim.clipped,
           "capped_tokens": r.capped_tokens, "lr": lr, "scale": r.optim.scale, "optim_step": optim_step,
           "actions": actions, "ms": ms})
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

pub fn run(a: &TrainArgs) -> Result<i32, CliError> {
    let opts = a.optim.options()?;
    let ctl_cfg = a.controller.config()?;
    if a.steps == 0 {
        return Err(CliError::Usage("--steps must be at least 1".into()));
    }
    if a.checkpoint_every == 0 {
        return Err(CliError::Usage("--checkpoint-every must be at least 1".into()));
    }
    if a.resume.is_some() && (a.checkpoint.is_some() || a.config.is_some()) {
        return Err(CliError::Usage("--resume keeps the run's model: drop --checkpoint and --config".into()));
    }
    let ds = Dataset::open(&a.data)?;
    let precision = a.precision.precision();
    let choice = super::gpu::GemmPathArg::choice_for(a.gemm_path, precision)?;
    let scale0 = match a.loss_scale {
        Some(ScaleArg::Fixed) => LossScale::fixed(),
        Some(ScaleArg::Dynamic) => LossScale::dynamic(),
        None => crate::vk::engine::default_loss_scale(precision),
    };
    // Where to start: a fresh model, a checkpoint's weights, or a whole run.
    let (cfg, state, mut ctl, start, seed, rows, t, resumed) = match &a.resume {
        Some(r) => {
            let path = resume_file(r);
            let (cfg, state, rs) = load_run(&path)?;
            let clash = |what: &str, given: String, kept: String| {
                CliError::Usage(format!("--{what} {given}: the run being resumed has {kept}; drop --{what}"))
            };
            match (a.seed, a.batch, a.seq_len) {
                (Some(s), _, _) if s != rs.seed => return Err(clash("seed", s.to_string(), rs.seed.to_string())),
                (_, Some(b), _) if b != rs.batch => return Err(clash("batch", b.to_string(), rs.batch.to_string())),
                (_, _, Some(l)) if l != rs.seq_len => {
                    return Err(clash("seq-len", l.to_string(), rs.seq_len.to_string()));
                }
                _ => {}
            }
            if rs.dataset_hash != ds.content_hash() {
                return Err(CliError::Usage(format!(
                    "--data {}: the run being resumed trained on {} (content hash {}), this file differs",
                    a.data.display(),
                    rs.dataset,
                    rs.dataset_hash
                )));
            }
            if rs.step >= a.steps {
                return Err(CliError::Usage(format!(
                    "{}: the run is already at step {}; ask for more with --steps (now {})",
                    path.display(),
                    rs.step,
                    a.steps
                )));
            }
            // The controller keeps its thresholds with its history.
            (cfg, state, rs.controller, rs.step, rs.seed, rs.batch, rs.seq_len, Some(path))
        }
        None => {
            let seed = a.seed.unwrap_or(0);
            let (cfg, params) = match &a.checkpoint {
                Some(p) => load_params(p)?,
                None => {
                    let cfg = Config::resolve(a.config.as_deref().unwrap_or("small"))?;
                    let params = Params::init(&cfg, seed);
                    (cfg, params)
                }
            };
            let rows = a.batch.unwrap_or(cfg.batch);
            let t = a.seq_len.unwrap_or(cfg.seq_len);
            let state = TrainState::fresh(&cfg, params, scale0);
            (cfg, state, Controller::new(ctl_cfg.clone()), 0, seed, rows, t, None)
        }
    };
    if rows == 0 || t == 0 {
        return Err(CliError::Usage("--batch and --seq-len must be at least 1".into()));
    }
    // A very long --seq-len is refused before anything is cut or allocated.
    check_shape(&cfg, rows, t, 4)?;
    let out = a.out.clone().or_else(|| a.resume.as_ref().filter(|r| r.is_dir()).cloned());
    if let (Some(dir), None) = (&out, &resumed)
        && dir.join(TRAIN_STATE_FILE).exists()
    {
        return Err(CliError::Usage(format!(
            "--out {0}: holds a training run; continue it with --resume {0}, or choose another --out",
            dir.display()
        )));
    }
    let inject: BTreeMap<u64, Poison> = a
        .inject_nan_at
        .iter()
        .map(|&k| (k, Poison::Nan))
        .chain(a.inject_spike_at.iter().map(|&k| (k, Poison::Spike)))
        .collect();
    // The engine first, so that a missing device leaves no empty --out directory.
    let base_lr = opts.lr;
    let run_opts = StepOptions { lr: base_lr * ctl.lr_factor, ..opts };
    let mut stepper = Stepper::resume(a.engine, &cfg, state.clone(), &run_opts, precision, choice)?;
    let ds_hash = ds.content_hash();
    let run_state = |step: u64, st: &TrainState, ctl: &Controller| RunState {
        version: 1,
        step,
        optim_step: st.optim.step,
        loss_scale: st.scale.clone(),
        controller: ctl.clone(),
        seed,
        batch: rows,
        seq_len: t,
        dataset: ds.name().to_string(),
        dataset_hash: ds_hash.clone(),
    };
    let save_state = |dir: &Path, g: &Good| -> Result<(), CliError> {
        let rs = run_state(g.step, &g.state, &g.controller);
        let ck = TrainCheckpoint {
            config: cfg.clone(),
            params: g.state.params.clone(),
            m: g.state.optim.m.clone(),
            v: g.state.optim.v.clone(),
            state: serde_json::to_string(&rs).expect("plain data"),
        };
        Ok(save_train_checkpoint(&dir.join(TRAIN_STATE_FILE), &ck)?)
    };
    let mut good = Good { step: start, state, controller: ctl.clone() };
    if let Some(dir) = &out {
        prepare_dir(dir)?;
        remove_stale_temporaries(dir);
        match &resumed {
            Some(from) => {
                let from_dir = from.parent().unwrap_or(Path::new("."));
                for f in [LOG_FILE, CONTROLLER_FILE] {
                    keep_log_upto(&from_dir.join(f), &dir.join(f), start)?;
                }
            }
            None => {
                for f in [LOG_FILE, CONTROLLER_FILE] {
                    write_atomic(&dir.join(f), b"")?;
                }
            }
        }
        // A checkpoint from the start: a kill at any moment leaves one to resume.
        if resumed.is_none() || a.out.is_some() {
            save_state(dir, &good)?;
        }
    }
    let mut log = JsonLog::open(out.as_ref().map(|d| d.join(LOG_FILE)))?;
    let mut clog = JsonLog::open(out.as_ref().map(|d| d.join(CONTROLLER_FILE)))?;

    let pb = progress(a.steps - start, "training");
    let say = |line: String| {
        if !a.json {
            log_line(&pb, line);
        }
    };
    if let Some(p) = &resumed {
        say(format!(
            "resumed {} at step {start} (optimizer step {}, loss scale {}, lr × {})",
            p.display(),
            good.state.optim.step,
            good.state.scale.scale,
            ctl.lr_factor
        ));
    }
    let pad = a.engine == EngineArg::Gpu;
    let log_every = a.log_every.max(1);
    let mut entries = Vec::new();
    let mut losses = Vec::new();
    let mut window = Vec::new();
    let mut all_actions: Vec<Action> = Vec::new();
    let mut skipped_now = 0usize;
    let mut checkpoint_due = false;
    let mut lr_now = base_lr * ctl.lr_factor;
    let mut fast: Option<(StepReport, super::controller::Norms)> = None;
    for step in start + 1..=a.steps {
        let mut actions = ctl.begin_step(step);
        let lr = base_lr * ctl.lr_factor;
        if lr != lr_now {
            stepper.set_lr(lr)?;
            lr_now = lr;
        }
        let batch = batch_at(&ds, seed, step, rows, t + 1, pad)?;
        let t0 = Instant::now();
        let scale_before = stepper.loss_scale()?.scale;
        // Without the controller (and no injected fault) the whole step is one
        // submit with nothing read back but the state words; the controller
        // needs every tensor's gradient norm before the optimizer runs.
        if !ctl.config.enabled && !inject.contains_key(&step) {
            let report = stepper.step(&batch)?;
            let norms = super::controller::Norms { global: report.optim.grad_norm, tensors: Vec::new() };
            fast = Some((report, norms));
        }
        let (report, norms, verdict) = if let Some((report, norms)) = fast.take() {
            let verdict = ctl.assess(&norms);
            (report, norms, verdict)
        } else {
            let pending = stepper.compute(&batch, inject.get(&step).copied())?;
            let norms = pending.norms.clone();
            let verdict = ctl.assess(&norms);
            let report = match &verdict.skip {
                None => stepper.apply(pending)?,
                Some(_) => StepReport {
                    loss: pending.loss,
                    n_targets: pending.n_targets,
                    capped_tokens: pending.capped,
                    optim: OptimOutcome {
                        grad_norm: norms.global,
                        clipped: false,
                        post_clip_norm: norms.global,
                        skipped: None,
                        scale: pending.scale,
                        next_scale: pending.scale,
                    },
                },
            };
            (report, norms, verdict)
        };
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let scale_after = report.optim.next_scale;
        let by_engine = report.optim.skipped.is_some();
        let skipped = report.optim.skipped.map(|s| s.to_string()).or(verdict.skip.clone());
        let outcome = Outcome {
            norms: &norms,
            skipped: skipped.clone(),
            by_engine,
            spike: verdict.spike,
            scale_before,
            scale_after,
        };
        actions.extend(ctl.record(step, &outcome));
        if let Some(stop) = actions.iter().find(|x| x.action == "stop") {
            for act in &actions {
                clog.push(&json!(act))?;
            }
            pb.finish_and_clear();
            return Err(CliError::Failed(format!("step {step}: {}", stop.reason)));
        }
        skipped_now += skipped.is_some() as usize;
        let rollback = actions.iter().any(|x| x.action == "rollback");
        if rollback {
            // Back to the last good checkpoint; the data position goes on, and
            // the loss scale stays where the bad steps took it.
            let st = TrainState { scale: stepper.loss_scale()?, ..good.state.clone() };
            stepper.restore(&st)?;
            ctl.rolled_back(&good.controller);
            if let Some(x) = actions.iter_mut().find(|x| x.action == "rollback") {
                x.to_step = Some(good.step);
                x.reason += &format!(": back to the checkpoint of step {}", good.step);
            }
        }
        let report_json = entry_json(step, ms, &report, skipped.as_deref(), lr, stepper.optim_step()?, &actions);
        let mut skip_text = String::new();
        if let Some(why) = &skipped {
            skip_text = format!("  SKIPPED: {why}");
        }
        window.push(report.loss);
        losses.push(report.loss);
        if !a.json && (step % log_every == 0 || step == start + 1 || skipped.is_some()) {
            let capped = match a.optim.token_cap {
                Some(_) => format!("  capped {}", report.capped_tokens),
                None => String::new(),
            };
            let lr_text = if ctl.lr_factor != 1.0 || lr != base_lr { format!("  lr {lr:.3e}") } else { String::new() };
            let scale_text =
                if report.optim.scale != 1.0 { format!("  scale {}", report.optim.scale) } else { String::new() };
            log_line(
                &pb,
                format!(
                    "step {:>6}  loss {:.4} (mean {:.4})  grad_norm {:.4}  skipped {skipped_now}{capped}{lr_text}{scale_text}  {:.1} ms/step{skip_text}",
                    step,
                    report.loss,
                    mean(&window),
                    report.optim.grad_norm,
                    ms
                ),
            );
            window.clear();
        }
        for act in &actions {
            say(act.line());
            clog.push(&json!(act))?;
        }
        pb.inc(1);
        all_actions.extend(actions);
        checkpoint_due |= step % a.checkpoint_every == 0 || step == a.steps;
        let good_now = ctl.consecutive_bad == 0;
        let mut snapshot = None;
        if checkpoint_due && (good_now || step == a.steps) {
            snapshot = Some(stepper.snapshot()?);
        }
        log.push(&report_json)?;
        entries.push(report_json);
        if let Some(st) = snapshot {
            checkpoint_due = false;
            let g = Good { step, state: st, controller: ctl.clone() };
            if let Some(dir) = &out {
                log.sync();
                clog.sync();
                save_state(dir, &g)?;
            }
            if good_now {
                good = g;
            }
        }
        if let (Some(dir), true) = (&out, a.save_every > 0 && step % a.save_every == 0) {
            save_params(&dir.join(format!("step_{step:06}.safetensors")), &cfg, &*stepper.params()?)?;
        }
    }
    pb.finish_and_clear();
    if let Some(dir) = &out {
        save_params(&dir.join("last.safetensors"), &cfg, &*stepper.params()?)?;
    }
    let n = losses.len();
    let head = &losses[..n.min(10)];
    let tail = &losses[n.saturating_sub(10)..];
    let (precision, gemm_path) = stepper.precision_and_path();
    emit(
        a.json,
        json!({"steps": n, "precision": precision, "gemm_path": gemm_path, "first_step": start + 1, "last_step": a.steps, "resumed_from": resumed,
               "skipped": skipped_now, "first_loss": losses[0], "last_loss": losses[n - 1],
               "mean_loss_first10": mean(head), "mean_loss_last10": mean(tail), "config": cfg,
               "dataset": ds.name(), "out": out, "controller": ctl.summary(), "actions": all_actions,
               "log": entries}),
        || {
            println!(
                "trained steps {}..{} on {}: mean loss {:.4} over the first 10, {:.4} over the last 10; {} skipped; \
                 controller: {} actions, {} rollbacks",
                start + 1,
                a.steps,
                ds.name(),
                mean(head),
                mean(tail),
                skipped_now,
                all_actions.len(),
                ctl.rollbacks
            );
            if precision != "f32" {
                println!("mixed-precision step: {precision} products on {gemm_path}, f32 everything else");
            }
            if let Some(dir) = &out {
                println!("checkpoints and logs in {}", dir.display());
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

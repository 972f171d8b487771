//! `dualscope ladder`: the CPU-vs-GPU ladder of docs/model.md, run by
//! `ladder::run`, printed as a table or JSON.

use clap::Args;
use serde_json::json;

use super::{Inputs, choice, load_inputs, parse_fault, write_report};
use crate::cli::args::{DeviceArg, FaultArg, ModelArgs, PrecisionMapArg};
use crate::cli::backend::open_context as open;
use crate::cli::common::{CliError, emit};
use crate::cli::progress::{self, Bar};
use crate::engine::gpu::{DeviceReport, VkError};
use crate::ladder::Mode;
use crate::ladder::suite::{Suite, SuiteRun};
use crate::ladder::{self, RungResult};
use crate::step::GemmChoice;
use crate::step::Precision;

#[derive(Args, Debug)]
pub struct LadderArgs {
    /// Rungs to run, comma-separated (default: every implemented rung).
    #[arg(long, value_delimiter = ',')]
    pub rungs: Vec<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    #[command(flatten)]
    pub precision_map: PrecisionMapArg,
    /// GEMM kernel for f16 precision, every rung (default: DUALSCOPE_GEMM_PATH, else auto).
    #[arg(long, value_enum)]
    pub gemm_path: Option<GemmChoice>,
    #[command(flatten)]
    pub gpu: DeviceArg,
    /// Text or JSON-lines file to take the batch from (default: the embedded dataset).
    #[arg(long)]
    pub data: Option<std::path::PathBuf>,
    /// With --len: one row of --len positions starting at this token offset.
    #[arg(long)]
    pub offset: Option<usize>,
    /// One row of this many positions (T; the row holds T+1 tokens) instead
    /// of the config's batch of random windows.
    #[arg(long, conflicts_with_all = ["batch", "seq_len"])]
    pub len: Option<usize>,
    /// Rows of the batch of random windows; default: the config's batch (as
    /// `bench` and `train` take it).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Positions per row of that batch; default: the config's seq_len.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// isolated: each rung's GPU inputs come from the CPU; chained: from the GPU's own earlier stages.
    #[arg(long, value_enum, default_value_t = Mode::Isolated)]
    pub mode: Mode,
    /// Also write the JSON report to this file (atomically).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub fault: FaultArg,
    /// Run the whole ladder N times from the same inputs and report, per rung
    /// and tensor, whether the GPU's and the CPU's values are bit-identical to
    /// run 1's (docs/determinism.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,
    /// Exit 0 although a rung, a case or the end-to-end gate did not run
    /// (a kernel this device lacks, e.g. `--gemm-path coopmat` without
    /// cooperative matrices); without it such a run exits 1. Not-run results
    /// are reported as `not_run` either way, never as a pass.
    #[arg(long)]
    pub allow_not_run: bool,
    /// Fill every buffer the GPU step writes with NaN before each run, so
    /// that a read of a value never written fails its rung.
    #[arg(long)]
    pub poison: bool,
    /// The loss scale of the GPU's backward and of the f16 headroom figures,
    /// a power of two (default: 2^16 in f16, where the backward runs at it; 1
    /// in f32 and bf16, whose headroom is still measured at 2^16). See docs/headroom.md.
    #[arg(long, value_name = "S", value_parser = super::headroom::parse_loss_scale)]
    pub loss_scale: Option<f64>,
    /// Instead of the rungs: one row of K·T positions (T = --len, default 2W+3, from --offset of
    /// --data) passed whole against K chunks of T with the state carried (docs/carry-state.md).
    #[arg(long, value_name = "K", conflicts_with_all = ["batch", "seq_len"])]
    pub carry_check: Option<usize>,
    /// quick: one run on the shapes asked for; full: that run and up to seven more
    /// that reach the kernels' tails, chunked recurrences, B = T = 1, a loss
    /// scale of 2^8, engaged clipping and the per-token guard (docs/mutation.md).
    #[arg(long, value_enum, default_value_t = Suite::Quick, conflicts_with_all = ["repeat", "carry_check"])]
    pub suite: Suite,
    #[arg(long)]
    pub json: bool,
    /// Add to the JSON a digest of the bits of every tensor the GPU computed
    /// (`"digests"`, rung/tensor → hex) and the kernels the run created
    /// (`"kernels"`): `dualscope mutate` tells a mutant that changed nothing
    /// from one the tolerances missed by them.
    #[arg(long)]
    pub digests: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// The parameters and the batch the model rungs run on.
type Prepared = (crate::model::Config, crate::model::Params<f32>, crate::dataset::Batch, String);

fn ladder_inputs(a: &LadderArgs, inputs: &Inputs, run: &SuiteRun) -> Result<Prepared, CliError> {
    use crate::ladder::inputs::{BatchChoice, ladder_batch};
    let ds = &inputs.ds;
    if let Some(cfg) = &run.model {
        // A suite's own shape: a seeded init of it, a batch of windows.
        let what = format!("the suite's {} run", run.name);
        crate::engine::inputs::check_params(cfg, 8, 4, &what)?;
        crate::engine::inputs::check_batch(
            cfg,
            cfg.batch,
            cfg.seq_len,
            crate::ladder::inputs::LADDER_BYTES_PER_VALUE,
            &what,
        )?;
        let params = crate::model::Params::init(cfg, a.model.seed);
        let (batch, source) = ladder_batch(ds, cfg, BatchChoice::Windows { seed: a.model.seed })?;
        return Ok((cfg.clone(), params, batch, source));
    }
    let (mut cfg, params) = (inputs.cfg.clone(), inputs.params.clone());
    for (flag, v, field) in [("--batch", a.batch, &mut cfg.batch), ("--seq-len", a.seq_len, &mut cfg.seq_len)] {
        match v {
            Some(0) => return Err(CliError::Usage(format!("{flag} must be at least 1"))),
            Some(v) => *field = v,
            None => {}
        }
    }
    let choice = match (a.len, a.offset) {
        (Some(0), _) => return Err(CliError::Usage("--len must be at least 1".into())),
        (Some(len), offset) => BatchChoice::Row { offset: offset.unwrap_or(0), len },
        (None, Some(_)) => return Err(CliError::Usage("--offset needs --len".into())),
        (None, None) => BatchChoice::Windows { seed: a.model.seed },
    };
    // Both CPU traces, the GPU's values and the kept tensors must fit before any row is cut.
    let (rows, t, what) = match choice {
        BatchChoice::Row { len, .. } => (1, len, format!("--len {len}")),
        BatchChoice::Windows { .. } if a.batch.is_some() || a.seq_len.is_some() => {
            (cfg.batch, cfg.seq_len, format!("--batch {} --seq-len {}", cfg.batch, cfg.seq_len))
        }
        BatchChoice::Windows { .. } => {
            (cfg.batch, cfg.seq_len, format!("the config's batch {} × seq_len {}", cfg.batch, cfg.seq_len))
        }
    };
    crate::engine::inputs::check_batch(&cfg, rows, t, crate::ladder::inputs::LADDER_BYTES_PER_VALUE, &what)?;
    let (batch, source) = ladder_batch(ds, &cfg, choice)?;
    Ok((cfg, params, batch, source))
}

pub fn run_ladder(a: &LadderArgs) -> Result<i32, CliError> {
    if let Some(k) = a.carry_check {
        return super::carry_check::run(a, k);
    }
    let rungs: Vec<String> = if a.rungs.is_empty() {
        ladder::ALL_RUNGS.iter().map(|s| s.to_string()).collect()
    } else {
        a.rungs.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    };
    if rungs.is_empty() {
        return Err(CliError::Usage(format!("--rungs is empty; the rungs are {}", ladder::ALL_RUNGS.join(", "))));
    }
    let rungs = ladder::parse_rungs(&rungs).map_err(|e| CliError::Usage(format!("--rungs: {e}")))?;
    let choice = choice(a.gemm_path)?;
    let fault = parse_fault(&a.fault.fault)?;
    let inputs = load_inputs(&a.model, &a.data, &a.out)?;
    let runs = crate::ladder::suite::runs(a.suite, &inputs.cfg);
    // Every run's inputs are checked before the device is opened.
    let prepared = runs.iter().map(|r| ladder_inputs(a, &inputs, r)).collect::<Result<Vec<_>, _>>()?;
    let ctx = std::sync::Arc::new(open(a.gpu.device)?);
    let mut values = Vec::new();
    let mut worst = ladder::Status::Pass;
    for (run, prepared) in runs.iter().zip(prepared) {
        if runs.len() > 1 && !a.json {
            println!("\n══ suite run {}: {}", run.name, run.describe(&inputs.cfg));
        }
        let (value, status) = run_one(a, &ctx, prepared, run, &rungs, choice, fault)?;
        worst = worst.max(status);
        values.push((run, value));
    }
    let value = match a.suite {
        Suite::Quick => values.pop().map(|(_, v)| v).unwrap_or_default(),
        Suite::Full => full_report(&inputs.cfg, values, worst),
    };
    write_report(&a.out, &value)?;
    emit(a.json, value, || {
        if runs.len() > 1 {
            println!("\nsuite full: {} runs, status {}", runs.len(), worst.as_str());
        }
    });
    Ok(exit_code(worst, a.allow_not_run))
}

/// The full suite's report: every run's, its digests gathered under the run's name.
fn full_report(
    base: &crate::model::Config,
    values: Vec<(&SuiteRun, serde_json::Value)>,
    worst: ladder::Status,
) -> serde_json::Value {
    let mut digests = serde_json::Map::new();
    let mut kernels = std::collections::BTreeSet::new();
    let mut runs = Vec::new();
    for (run, mut v) in values {
        if let Some(d) = v.as_object_mut().and_then(|o| o.remove("digests")) {
            for (k, x) in d.as_object().into_iter().flatten() {
                digests.insert(format!("{}/{k}", run.name), x.clone());
            }
        }
        if let Some(k) = v.as_object_mut().and_then(|o| o.remove("kernels")) {
            kernels.extend(k.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)));
        }
        runs.push(json!({ "name": run.name, "what": run.describe(base), "report": v }));
    }
    let mut out = json!({ "suite": "full", "status": worst, "runs": runs });
    if !digests.is_empty() {
        out["digests"] = serde_json::Value::Object(digests);
        out["kernels"] = json!(kernels);
    }
    out
}

/// One run of the suite: its report (printed as prose unless `--json`) and status.
fn run_one(
    a: &LadderArgs,
    ctx: &std::sync::Arc<crate::engine::gpu::Context>,
    prepared: Prepared,
    run: &SuiteRun,
    rungs: &[ladder::Rung],
    choice: GemmChoice,
    fault: Option<crate::step::Fault>,
) -> Result<(serde_json::Value, ladder::Status), CliError> {
    let (precision, mode) = (a.precision, a.mode);
    let (cfg, params, batch, source) = prepared;
    let map = a.precision_map.over(|| {
        crate::engine::gpu::default_map(ctx, &cfg, precision, choice).map_err(|e| CliError::Engine(e.to_string()))
    })?;
    let engine_err = |e: ladder::LadderError| match e {
        ladder::LadderError::Vk(VkError::Unsupported(why) | VkError::Invalid(why)) => CliError::Engine(why),
        ladder::LadderError::Vk(e @ (VkError::Alloc { .. } | VkError::Limit(_))) => CliError::Engine(e.to_string()),
        ladder::LadderError::Input(why) => CliError::Usage(why),
        e => CliError::Failed(e.to_string()),
    };
    let setup = ladder::Setup {
        cfg: cfg.clone(),
        params,
        batch: batch.clone(),
        opts: match run.clip {
            Some((clip, weight_decay)) => {
                crate::step::StepOptions { clip, weight_decay, token_cap: run.token_cap, ..Default::default() }
            }
            None => crate::step::StepOptions { token_cap: run.token_cap, ..Default::default() },
        },
        mode,
        precision,
    };
    let spec = ladder::LadderSpec {
        gemm_seed: a.model.seed,
        gemm_choice: choice,
        fault,
        poison: a.poison,
        loss_scale: run.loss_scale.or(a.loss_scale),
        precision_map: map,
        gemm_tensors: a.digests,
        ..ladder::LadderSpec::new(rungs.to_vec(), setup)
    };
    let digests = std::cell::RefCell::new(serde_json::Map::new());
    // The bar counts the rungs and the end-to-end gate of every run.
    let per_run = spec.rungs.len() as u64 + u64::from(spec.end_to_end);
    let runs = a.repeat.map_or(1, u64::from);
    let bar = Bar::new("ladder", Some(per_run * runs), progress::shown(a.quiet, a.json));
    let on_event = |e: ladder::Event<'_>| match e {
        ladder::Event::Started(r) => bar.set_message(r.id()),
        ladder::Event::Finished(rung, _, tensors) => {
            if a.digests {
                let mut d = digests.borrow_mut();
                for t in &tensors {
                    d.insert(format!("{}/{}", rung.id(), t.name), json!(digest(&t.gpu)));
                }
            }
            bar.inc(1)
        }
        ladder::Event::EndToEnd(e) => {
            if let (true, Ok(e)) = (a.digests, e) {
                // Debug prints an f64 exactly (it reads back to the same bits).
                let exact = format!("{:?} {:?}", e.loss_gpu, e.grad_norm_gpu);
                digests.borrow_mut().insert("end_to_end/loss_and_grad_norm".into(), json!(exact));
            }
            bar.inc(1)
        }
    };
    let (report, repeat) = match a.repeat {
        Some(n) => ladder::repeat(ctx, spec, n as usize, |_, e| on_event(e)).map(|(r, rep)| (r, Some(rep))),
        None => ladder::run(ctx, spec, on_event).map(|r| (r, None)),
    }
    .map_err(engine_err)?;
    bar.finish_and_clear();
    let summary = report.summary();
    let ladder::LadderReport {
        rungs: results,
        end_to_end,
        end_to_end_not_run,
        gemm_path,
        validation_errors,
        status,
        precision_map,
        ..
    } = report;
    let mut value = json!({
        "device": ctx.report().name,
        "config": cfg,
        "precision": precision,
        "precision_map": precision_map,
        "gemm_path": gemm_path,
        "mode": mode,
        "fault": fault,
        "poison": a.poison,
        "loss_scale": run.loss_scale.or(a.loss_scale),
        "batch": { "rows": batch.rows, "seq_len": batch.t, "targets": batch.num_targets(), "source": source },
        "validation": ctx.validation_summary(),
        "rungs": results,
        "end_to_end": end_to_end,
        "end_to_end_not_run": end_to_end_not_run,
        "summary": summary,
        "status": status,
    });
    if a.digests {
        value["digests"] = serde_json::Value::Object(digests.take());
        value["kernels"] = json!(crate::engine::gpu::kernels_created());
    }
    if let Some(rep) = &repeat {
        value["repeat"] = serde_json::to_value(rep).map_err(|e| CliError::Failed(e.to_string()))?;
    }
    if !a.json {
        println!("batch: {source}; mode {}; precision {}", mode.as_str(), precision.name());
        if let Some(p) = gemm_path {
            println!("products on: {p}");
        }
        if let Some(m) = &precision_map {
            println!("precision map: {}", m.summary());
        }
        if let Some(f) = fault {
            println!("fault planted: {f} ({})", f.description());
        }
        print_table(ctx.report(), &results, validation_errors);
        super::headroom::print_headroom(&results);
        if let Some(e) = &end_to_end {
            print_end_to_end(e);
        }
        if let Some(why) = &end_to_end_not_run {
            println!("\nend-to-end not run: {why}");
        }
        if let Some(rep) = &repeat {
            print_repeat(rep);
        }
        print_summary(&summary, status);
    }
    Ok((value, status))
}

/// FNV-1a over the values' bits, as 16 hex digits.
fn digest(values: &[f32]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        for b in v.to_bits().to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// 1 when the run failed, or when something did not run and `allow_not_run`
/// is off (a check that did not happen is not a pass); else 0.
fn exit_code(status: ladder::Status, allow_not_run: bool) -> i32 {
    match status {
        ladder::Status::Fail => 1,
        ladder::Status::NotRun if !allow_not_run => 1,
        ladder::Status::Pass | ladder::Status::Warn | ladder::Status::NotRun => 0,
    }
}

/// `rungs: 9 pass, 0 warn, 0 fail, 2 not run; cases: …; end-to-end pass; status pass`.
fn print_summary(s: &ladder::Summary, status: ladder::Status) {
    let errors = if s.errors > 0 { format!(", {} could not run (error)", s.errors) } else { String::new() };
    let gate = s.end_to_end.map_or(String::new(), |g| format!("; end-to-end {}", g.as_str()));
    println!("\nsummary: rungs {}{errors}; cases {}{gate}; status {}", s.rungs.line(), s.cases.line(), status.as_str());
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
    println!("device {}: {} ({}), validation {}", r.index, r.name, r.driver_name, r.validation_mode.label());
    for rung in results {
        // A rung that did not run at all: one line, not a table of empty cases.
        if !rung.cases.is_empty() && rung.cases.iter().all(|c| c.status == ladder::Status::NotRun) {
            let note = rung.cases.first().and_then(|c| c.notes.first()).map_or("", String::as_str);
            let why = note.strip_prefix("not run: ").unwrap_or(note);
            println!(
                "\n{:<10} not run ({} cases on {}): {why}",
                rung.id,
                rung.cases.len(),
                rung.gemm_path.as_deref().unwrap_or("-")
            );
            continue;
        }
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
            rung.gemm_path.as_deref().unwrap_or("-")
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
            // The headroom warnings get one short line each after the table.
            for n in c.notes.iter().filter(|n| !super::headroom::is_headroom_note(n)) {
                println!("        {n}");
            }
        }
    }
    if validation_errors > 0 {
        println!("\n{validation_errors} Vulkan validation error(s) (see stderr): the run counts as failed");
    }
}

/// The determinism table: one row per rung and tensor, the GPU's columns then
/// the CPU's (whether every run gave run 1's bits, how many elements differ at
/// most, the largest |Δ| and ULP distance).
fn print_repeat(rep: &ladder::RepeatReport) {
    let verdict = if rep.bit_identical { "every tensor bit-identical" } else { "NOT bit-identical" };
    let e2e = match rep.end_to_end_identical {
        Some(true) => "; end-to-end loss and grad norm identical",
        Some(false) => "; end-to-end loss or grad norm DIFFER",
        None => "",
    };
    println!(
        "\ndeterminism over {} runs: {verdict} (GPU: {} tensor(s) differ, CPU: {}){e2e}",
        rep.runs, rep.gpu_differing, rep.cpu_differing
    );
    println!(
        "  {:<10} {:>5} {:>9} {:>10} {:>8}   {:>5} {:>9} {:>10}   tensor",
        "rung", "gpu=", "differing", "max |Δ|", "max ulp", "cpu=", "differing", "max |Δ|"
    );
    let yes = |t: &ladder::TensorRepeat| if t.bit_identical { "yes" } else { "NO" };
    let cols =
        |t: &ladder::TensorRepeat| format!("{:>5} {:>9} {:>10.3e}", yes(t), t.diff.differing, t.diff.max_abs_diff);
    // The tensor's name last: the `gemm` rung's (a product and its shape) are long.
    for g in rep.tensors.iter().filter(|t| t.side == ladder::Side::Gpu) {
        let c = rep.tensors.iter().find(|c| c.side == ladder::Side::Cpu && c.rung == g.rung && c.tensor == g.tensor);
        let cpu = c.map_or(format!("{:>26}", "-"), cols);
        println!("  {:<10} {} {:>8}   {cpu}   {}", g.rung, cols(g), g.diff.max_ulp, g.tensor);
    }
}

//! `dualscope scan`: every window of a dataset through the forward and
//! backward pass, the riskiest kept as captures ([`crate::triage::scan`]);
//! `scan --merge` joins the results of several shards.

use std::path::{Path, PathBuf};

use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::EngineArg;
use super::args::NonFiniteArg;
use super::common::{CliError, data_error, emit, show};
use super::progress::{self, Bar};
use crate::dataset::Dataset;
use crate::engine::inputs::{ParamSource, load_model};
use crate::step::Precision;
use crate::triage::TriageError;
use crate::triage::scan::{ModelId, Progress, Rank, ScanModel, ScanReport, ScanSpec, Shard, merge, scan, state};

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// The dataset: any file (bytes are tokens) or a .jsonl file with a `text` field per line.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The weights to scan with (its config wins).
    #[arg(long, conflicts_with = "config")]
    pub checkpoint: Option<PathBuf>,
    /// small, bench, tiny, or a JSON config file, seeded by --seed (default small).
    #[arg(long)]
    pub config: Option<String>,
    /// The seed of the initialisation with --config.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = EngineArg::Cpu)]
    pub engine: EngineArg,
    /// The GPU step's precision (f16: loss scale 2^16, divided out). --engine gpu only for f16/bf16.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Positions per window (T); windows of T + 1 tokens at stride T. Default: the config's seq_len.
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Windows per batch (B). Default: the config's batch.
    #[arg(long)]
    pub batch: Option<usize>,
    /// How many of the riskiest windows to keep and write as captures (default 16; with --merge, the scans').
    #[arg(long)]
    pub top: Option<usize>,
    /// What ranks the windows.
    #[arg(long, value_enum, default_value_t = Rank::Grad)]
    pub rank: Rank,
    /// A folder for the resumable state, the captures and scan.json; a re-run continues from it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// I/N: only the windows whose byte position lies in the I-th of N equal byte ranges of the file.
    #[arg(long)]
    pub shard: Option<String>,
    /// Merge the finished scans in these folders (disjoint shards of one scan) into --out.
    #[arg(long, num_args = 2.., value_name = "DIR")]
    pub merge: Vec<PathBuf>,
    /// Testing aid: stop (state saved) after this many windows; re-run to continue.
    #[arg(long)]
    pub max_windows: Option<u64>,
    #[command(flatten)]
    pub trust: NonFiniteArg,
    #[arg(long)]
    pub json: bool,
    /// No progress bar and none of the progress lines (the result and errors stay).
    #[arg(long)]
    pub quiet: bool,
}

/// A triage error as the command reports it.
fn cli_error(e: TriageError) -> CliError {
    match e {
        TriageError::Usage(m) => CliError::Usage(m),
        TriageError::Engine(e) => e.into(),
        TriageError::Dataset(e) => CliError::Dataset(e),
        TriageError::Batch(e) => CliError::Batch(e),
        TriageError::Cpu(e) => CliError::Cpu(e),
        e => CliError::Failed(e.to_string()),
    }
}

/// The weights: a checkpoint's (identified by its path and content hash) or
/// a seeded initialisation of a config.
fn model(a: &ScanArgs) -> Result<ScanModel, CliError> {
    if let Some(p) = &a.checkpoint {
        let (config, params) = load_model(ParamSource::Checkpoint(p, a.trust.options()), 4, 4)?;
        let path = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        let content_hash = state::file_hash(p).map_err(cli_error)?;
        return Ok(ScanModel {
            config,
            params,
            id: ModelId::Checkpoint { path: path.display().to_string(), content_hash },
        });
    }
    let name = a.config.clone().unwrap_or_else(|| "small".into());
    let (config, params) = load_model(ParamSource::Init { config: &name, seed: a.seed }, 4, 4)?;
    Ok(ScanModel { params, id: ModelId::Config { name, config: config.clone(), seed: a.seed }, config })
}

pub fn run(a: &ScanArgs) -> Result<i32, CliError> {
    if !a.merge.is_empty() {
        return run_merge(a);
    }
    let Some(data) = &a.data else {
        return Err(CliError::Usage("--data FILE is needed (or --merge DIR DIR… --out DIR)".into()));
    };
    let shard = match &a.shard {
        Some(s) => Shard::parse(s).map_err(CliError::Usage)?,
        None => Shard::ALL,
    };
    for (flag, v) in [("--seq-len", a.seq_len), ("--batch", a.batch), ("--top", a.top)] {
        if v == Some(0) {
            return Err(CliError::Usage(format!("{flag} 0: must be at least 1")));
        }
    }
    if a.engine == EngineArg::Cpu && a.precision != Precision::F32 {
        return Err(CliError::Usage(format!(
            "--precision {}: the mixed-precision step runs on --engine gpu; the CPU reference computes in f32",
            a.precision.name()
        )));
    }
    if let Some(out) = &a.out
        && out.exists()
        && !out.is_dir()
    {
        return Err(CliError::Usage(format!("--out {}: is a file, not a folder", show(out))));
    }
    let ds = Dataset::open(data).map_err(data_error)?;
    let model = model(a)?;
    let spec = ScanSpec {
        t: a.seq_len.unwrap_or(model.config.seq_len),
        batch: a.batch.unwrap_or(model.config.batch),
        top: a.top.unwrap_or(16),
        rank: a.rank,
        shard,
        engine: a.engine.kind(),
        precision: a.precision,
        max_windows: a.max_windows,
        save_every: Duration::from_secs(5),
    };
    crate::engine::inputs::check_batch(
        &model.config,
        spec.batch,
        spec.t,
        4,
        &format!("--batch {} --seq-len {}", spec.batch, spec.t),
    )?;
    let bar = Bar::new("scan windows", None, progress::shown(a.quiet, a.json));
    let r = scan(&ds, &model, &spec, a.out.as_deref(), &mut |p: &Progress| {
        let rate = format!("{:.0} tokens/s (engine {:.0})", p.tokens_per_s, p.engine_tokens_per_s);
        bar.set_all(p.done, p.total, p.eta_s.map(Duration::from_secs_f64), &rate);
    });
    bar.finish_and_clear();
    let r = r.map_err(cli_error)?;
    print_report(a.json, &r, &ds.to_string(), a.out.as_deref());
    Ok(0)
}

fn run_merge(a: &ScanArgs) -> Result<i32, CliError> {
    let Some(out) = &a.out else {
        return Err(CliError::Usage("--merge needs --out DIR for the merged captures".into()));
    };
    let r = merge(&a.merge, out, a.top, a.data.as_deref()).map_err(cli_error)?;
    let what = format!("{} scans merged", a.merge.len());
    print_report(a.json, &r, &what, Some(out));
    Ok(0)
}

fn print_report(as_json: bool, r: &ScanReport, what: &str, out: Option<&Path>) {
    emit(as_json, json!({"complete": r.complete, "report": r, "out": out}), || {
        let state = if r.complete { "scanned" } else { "stopped after" };
        println!(
            "{state} {}/{} windows of {what}: {} tokens in {:.1} s, {:.0} tokens/s (engine {:.0} tokens/s)",
            r.done, r.windows, r.tokens, r.seconds, r.tokens_per_s, r.engine_tokens_per_s
        );
        println!("rank  window        document  offset      loss  max|logit|  headroom  max‖∂loss/∂e_t‖");
        for (i, e) in r.ranking.iter().enumerate() {
            let m = &e.metrics;
            println!(
                "{:>4}  {:>8}  {:>10}  {:>8}  {:>8.4}  {:>10.3e}  {:>8.2}  {:>10.3e}",
                i + 1,
                e.window,
                e.origin.document,
                e.origin.offset,
                m.loss,
                m.max_logit,
                m.headroom,
                m.max_grad
            );
        }
        match (out, r.complete) {
            (Some(d), true) => println!("{} captures and scan.json in {}", r.captures.len(), show(d)),
            (Some(d), false) => println!("state saved in {}; run the same command again to continue", show(d)),
            (None, _) => {}
        }
    });
}

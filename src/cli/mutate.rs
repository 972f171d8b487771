//! `dualscope mutate`: mutation testing of the engine's own kernels. Each
//! mutant of the GLSL is built into a copy of the shader folder and the
//! ladder runs on it in a child process; the report is the score and every
//! survivor with its diff and class (docs/mutation.md).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::cli::common::{CliError, emit};
use crate::engine::gpu::{ShaderDir, shader_dir};
use crate::mutate::campaign::{MutantResult, Outcome, Runner, suite_line};
use crate::mutate::plan::{self, Selection};
use crate::mutate::report::{Tally, by};
use crate::mutate::{Operator, folder};

#[derive(Args, Debug)]
pub struct MutateArgs {
    /// Shader files to mutate (`gemm_f32`, `include/common.glsl`), comma-separated;
    /// default: every file of the kernels the clean ladder runs.
    #[arg(long, value_delimiter = ',')]
    pub kernels: Vec<String>,
    /// Mutation operators, comma-separated (default: all; `--list-operators` names them).
    #[arg(long, value_delimiter = ',')]
    pub operators: Vec<String>,
    /// Name the operators and exit.
    #[arg(long)]
    pub list_operators: bool,
    /// Run a stratified sample of this many mutants (the same for the same --seed).
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run only this mutant (repeatable); its mutated shader folder is kept
    /// under --out, to open with `dualscope --shaders DIR gui`.
    #[arg(long = "mutant", value_name = "ID")]
    pub mutants: Vec<String>,
    /// List the mutants (id, then the change) and exit without running any.
    #[arg(long)]
    pub list: bool,
    /// Start no new mutant after this many seconds (the rest are reported as not run).
    #[arg(long, value_name = "SECONDS")]
    pub budget: Option<f64>,
    /// The ladder's arguments for one suite, e.g. "--config tiny" (repeatable:
    /// a mutant is killed when any suite fails); default: the default ladder.
    #[arg(long = "ladder-args", value_name = "ARGS", allow_hyphen_values = true)]
    pub ladder_args: Vec<String>,
    /// Stop a ladder run after this many seconds (the mutant's outcome is
    /// then `timeout`); default: 5 × the clean run's, at least 60.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Keep the results here and resume from the ones it holds (default: a
    /// temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Exit 1 when the score is below this fraction (0..1).
    #[arg(long, value_name = "FRACTION")]
    pub min_score: Option<f64>,
    #[arg(long)]
    pub json: bool,
    /// No line per mutant on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// The clean shader folder: the chosen one (`--shaders`), else `shaders/`
/// here, else the source tree this binary was built from.
fn clean_folder() -> Result<ShaderDir, CliError> {
    if let Some(d) = shader_dir::chosen() {
        return ShaderDir::open(d.root()).map_err(CliError::Usage);
    }
    let candidates = [PathBuf::from("shaders"), PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shaders")];
    candidates.iter().find_map(|p| ShaderDir::open(p).ok()).ok_or_else(|| {
        CliError::Usage("no shader folder: run from the source tree or give --shaders DIR (a copy of shaders/)".into())
    })
}

fn seconds(flag: &str, v: Option<f64>) -> Result<Option<Duration>, CliError> {
    match v {
        Some(s) if !(s.is_finite() && s > 0.0 && s < 1e9) => {
            Err(CliError::Usage(format!("{flag} must be a positive number of seconds, got {s}")))
        }
        Some(s) => Ok(Some(Duration::from_secs_f64(s))),
        None => Ok(None),
    }
}

pub fn run(a: &MutateArgs) -> Result<i32, CliError> {
    if a.list_operators {
        Operator::ALL.iter().for_each(|o| println!("{}", o.name()));
        return Ok(0);
    }
    let operators = a.operators.iter().map(|o| Operator::parse(o.trim())).collect::<Result<Vec<_>, _>>();
    let operators = operators.map_err(|e| CliError::Usage(format!("--operators: {e}")))?;
    if a.sample == Some(0) {
        return Err(CliError::Usage("--sample must be at least 1".into()));
    }
    if let Some(m) = a.min_score.filter(|m| !(0.0..=1.0).contains(m)) {
        return Err(CliError::Usage(format!("--min-score must be between 0 and 1, got {m}")));
    }
    let budget = seconds("--budget", a.budget)?;
    let timeout = seconds("--timeout", a.timeout)?;
    let suites: Vec<Vec<String>> = if a.ladder_args.is_empty() {
        vec![Vec::new()]
    } else {
        a.ladder_args.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
    };
    for s in suites.iter().flatten() {
        if ["--shaders", "--json", "--out", "--repeat", "--carry-check"].contains(&s.as_str()) {
            return Err(CliError::Usage(format!("--ladder-args: {s} is set by mutate itself or not a ladder run")));
        }
    }
    let clean = clean_folder()?;
    let exe = std::env::current_exe().map_err(|e| CliError::Failed(format!("this program's path: {e}")))?;
    let (work, temporary) = match &a.out {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("dualscope-mutate-{}", std::process::id())), true),
    };
    if work.exists() && !work.is_dir() {
        return Err(CliError::Usage(format!("--out {}: not a folder", work.display())));
    }
    let mut runner = Runner { exe, suites, timeout: timeout.unwrap_or(Duration::from_secs(3600)) };
    let say = |line: String| {
        if !a.quiet && !a.json {
            eprintln!("{line}");
        }
    };
    say(format!("mutate: the clean ladder, twice per suite, in {}", clean.root().display()));
    let base = runner.baseline(clean.root(), &work).map_err(CliError::Failed)?;
    if timeout.is_none() {
        let per_run = base.seconds / (2 * runner.suites.len()) as f64;
        runner.timeout = Duration::from_secs_f64((5.0 * per_run * runner.suites.len() as f64).max(60.0));
    }
    let sel = Selection {
        kernels: a.kernels.iter().map(|k| k.trim().to_string()).filter(|k| !k.is_empty()).collect(),
        operators,
        sample: a.sample,
        seed: a.seed,
        ids: a.mutants.clone(),
    };
    let mutants = plan::select(&clean, &base, &sel).map_err(CliError::Usage)?;
    if a.list {
        for m in &mutants {
            println!("{}\t`{}` → `{}`", m.id, m.original, m.replacement);
        }
        return Ok(0);
    }
    let n = mutants.len();
    let (results, unrun) = plan::run_all(&runner, &clean, &base, &mutants, &work, budget, |i, r, resumed| {
        let how = if resumed { " (resumed)" } else { "" };
        say(format!("[{}/{n}] {} {}{how} {:.1} s", i + 1, r.mutant.id, outcome_line(&r.outcome), r.seconds));
    })
    .map_err(CliError::Failed)?;
    let total = Tally::of(&results);
    let value = json!({
        "shaders": clean.root(),
        "suites": runner.suites.iter().map(|s| suite_line(s)).collect::<Vec<_>>(),
        "timeout_s": runner.timeout.as_secs_f64(),
        "baseline": { "kernels": base.kernels, "unstable": base.unstable, "seconds": base.seconds },
        "total": total,
        "not_run_budget": unrun,
        "by_kernel": by(&results, |r| r.mutant.kernel.clone()),
        "by_operator": by(&results, |r| r.mutant.operator.name().to_string()),
        "results": results,
    });
    if !temporary {
        let bytes = serde_json::to_vec_pretty(&value).map_err(|e| CliError::Failed(e.to_string()))?;
        crate::checkpoint::write_atomic(&work.join("report.json"), &bytes)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    emit(a.json, value, || print_report(&runner, &results, &total, unrun, &work, temporary));
    if temporary {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(match (a.min_score, total.score) {
        (Some(min), Some(s)) if s < min => 1,
        _ => 0,
    })
}

fn outcome_line(o: &Outcome) -> String {
    match o {
        Outcome::Killed { failed } => format!("killed ({})", failed.join(", ")),
        Outcome::Timeout { suite } => format!("timeout (suite {suite})"),
        Outcome::Crashed { suite, message } => format!("crashed (suite {suite}: {message})"),
        Outcome::Missed { changed } => format!("MISSED ({} tensor(s) changed, ladder green)", changed.len()),
        Outcome::Stillborn { message } => format!("stillborn ({})", message.lines().next().unwrap_or("")),
        o => o.name().to_string(),
    }
}

fn print_report(
    runner: &Runner,
    results: &[MutantResult],
    total: &Tally,
    unrun: usize,
    work: &std::path::Path,
    temporary: bool,
) {
    let suites: Vec<String> = runner.suites.iter().map(|s| suite_line(s)).collect();
    println!("mutants: {}; suites: {}", results.len(), suites.join(" | "));
    let head = format!(
        "{:<34} {:>7} {:>6} {:>7} {:>7} {:>6} {:>6} {:>9} {:>9}  score",
        "", "mutants", "killed", "timeout", "crashed", "missed", "equiv", "stillborn", "same_spv"
    );
    let row = |name: &str, t: &Tally| {
        println!(
            "{name:<34} {:>7} {:>6} {:>7} {:>7} {:>6} {:>6} {:>9} {:>9}  {}",
            t.mutants,
            t.killed,
            t.timeout,
            t.crashed,
            t.missed,
            t.equivalent,
            t.stillborn,
            t.same_spirv,
            t.score_line()
        )
    };
    for (what, groups) in [
        ("kernel", by(results, |r| r.mutant.kernel.clone())),
        ("operator", by(results, |r| r.mutant.operator.name().to_string())),
    ] {
        println!("\nby {what}\n{head}");
        groups.iter().for_each(|(k, t)| row(k, t));
    }
    println!();
    row("all", total);
    if unrun > 0 {
        println!("{unrun} mutant(s) not run: the budget was spent (run again with the same --out to go on)");
    }
    for r in results.iter().filter(|r| matches!(r.outcome, Outcome::Missed { .. } | Outcome::Equivalent)) {
        let class = match &r.outcome {
            Outcome::Missed { changed } => format!("missed by tolerance: changed {}", changed.join(", ")),
            _ => "equivalent on these inputs: every compared tensor bit-identical".into(),
        };
        println!("\nsurvivor {} ({class})\n{}", r.mutant.id, r.diff.trim_end());
        if !temporary {
            println!(
                "open it: dualscope --shaders {} gui",
                folder::mutant_dir(work, &r.mutant.id).join("shaders").display()
            );
        }
    }
}

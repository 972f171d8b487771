//! Which mutants a campaign runs, and the loop that runs them, resumable
//! from the results a folder already holds.

use std::path::Path;
use std::time::{Duration, Instant};

use super::campaign::{Baseline, MutantResult, Runner};
use super::folder;
use super::{Mutant, Operator, generate, sample};
use crate::engine::gpu::ShaderDir;

/// What to mutate.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Files (`gemm_f32.comp`, `include/common.glsl`) or their stems
    /// (`gemm_f32`); empty: every file of the kernels the clean ladder ran.
    pub kernels: Vec<String>,
    /// Empty: every operator.
    pub operators: Vec<Operator>,
    /// At most this many, a stratified sample ([`sample`]).
    pub sample: Option<usize>,
    pub seed: u64,
    /// Only these ids (`--mutant`).
    pub ids: Vec<String>,
}

/// Every file of the folder a mutant can be made in: its `.comp` files and headers.
fn all_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for (sub, ext) in [("", "comp"), ("include", "glsl")] {
        let Ok(rd) = std::fs::read_dir(root.join(sub)) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_file() && p.extension().is_some_and(|x| x == ext) {
                let name = p.file_name().unwrap_or_default().to_string_lossy().to_string();
                files.push(if sub.is_empty() { name } else { format!("{sub}/{name}") });
            }
        }
    }
    files.sort();
    files
}

/// The mutants `sel` names, in file then source order.
pub fn select(clean: &ShaderDir, base: &Baseline, sel: &Selection) -> Result<Vec<Mutant>, String> {
    let everything = all_files(clean.root());
    let files: Vec<String> = if sel.kernels.is_empty() {
        folder::files_of(clean, &base.kernels)
    } else {
        let mut out = Vec::new();
        for k in &sel.kernels {
            let hit: Vec<&String> = everything
                .iter()
                .filter(|f| *f == k || super::id::stem(f) == k || super::id::stem(f) == format!("include/{k}"))
                .collect();
            if hit.is_empty() {
                return Err(format!("--kernels: no shader file `{k}` in {}", clean.root().display()));
            }
            out.extend(hit.into_iter().cloned());
        }
        out.sort();
        out.dedup();
        out
    };
    let ops: Vec<Operator> = if sel.operators.is_empty() { Operator::ALL.to_vec() } else { sel.operators.clone() };
    let mut mutants = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(clean.root().join(f)).map_err(|e| format!("{f}: {e}"))?;
        mutants.extend(generate(f, &text, &ops));
    }
    if !sel.ids.is_empty() {
        let mut picked = Vec::new();
        for id in &sel.ids {
            match super::find(&mutants, id).map_err(|e| format!("--mutant: {e}"))? {
                Some(m) => picked.push(m.clone()),
                None => return Err(format!("--mutant: no mutant {id} in these shaders")),
            }
        }
        return Ok(picked);
    }
    Ok(match sel.sample {
        Some(n) => sample(&mutants, n, sel.seed),
        None => mutants,
    })
}

/// Where a mutant's result is stored under `work`.
fn result_path(work: &Path, m: &Mutant) -> std::path::PathBuf {
    work.join("results").join(format!("{}.json", folder::slug(&m.id)))
}

/// A stored result of exactly this mutant, if `work` holds one.
fn stored(work: &Path, m: &Mutant) -> Option<MutantResult> {
    let text = std::fs::read_to_string(result_path(work, m)).ok()?;
    serde_json::from_str::<MutantResult>(&text).ok().filter(|r| &r.mutant == m)
}

/// Runs every mutant not yet in `work`, until `budget` is spent; `on_result`
/// sees each result (`true`: read back from `work`). Returns the results in
/// the mutants' order and how many the budget left unrun.
pub fn run_all(
    runner: &Runner,
    clean: &ShaderDir,
    base: &Baseline,
    mutants: &[Mutant],
    work: &Path,
    budget: Option<Duration>,
    mut on_result: impl FnMut(usize, &MutantResult, bool),
) -> Result<(Vec<MutantResult>, usize), String> {
    let start = Instant::now();
    let results_dir = work.join("results");
    std::fs::create_dir_all(&results_dir).map_err(|e| format!("{}: {e}", results_dir.display()))?;
    let mut out = Vec::new();
    let mut unrun = 0;
    for (i, m) in mutants.iter().enumerate() {
        if let Some(r) = stored(work, m) {
            on_result(i, &r, true);
            out.push(r);
            continue;
        }
        if budget.is_some_and(|b| start.elapsed() > b) {
            unrun += 1;
            continue;
        }
        let r = runner.mutant(clean, base, m, work)?;
        let json = serde_json::to_vec_pretty(&r).map_err(|e| e.to_string())?;
        crate::checkpoint::write_atomic(&result_path(work, m), &json).map_err(|e| e.to_string())?;
        // The mutant's copy of the shaders is kept only for survivors (to open them).
        if r.outcome.detected() || !r.outcome.scored() && r.outcome.name() != "equivalent" {
            let _ = std::fs::remove_dir_all(folder::mutant_dir(work, &m.id));
        }
        on_result(i, &r, false);
        out.push(r);
    }
    Ok((out, unrun))
}

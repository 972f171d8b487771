//! A shader folder as `dualscope mutate` sees it: which files each module
//! is built from (its `.comp` and the headers it includes), a mutated copy
//! of the folder, and the modules a mutant changes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Mutant;
use crate::engine::gpu::ShaderDir;

/// The files (`x.comp`, `include/y.glsl`) a `.comp` file is made of: itself
/// and every header it includes, directly or through another header.
pub fn sources_of(root: &Path, comp: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![comp.to_string()];
    while let Some(file) = todo.pop() {
        if !seen.insert(file.clone()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else { continue };
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("#include") {
                let name = rest.trim().trim_matches(|c| c == '"' || c == '<' || c == '>');
                todo.push(format!("include/{name}"));
            }
        }
    }
    seen
}

/// For each module of `dir` the files it is built from.
pub fn module_sources(dir: &ShaderDir) -> BTreeMap<String, BTreeSet<String>> {
    let mut by_file: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    dir.plan()
        .iter()
        .map(|p| {
            let files = by_file.entry(p.file.clone()).or_insert_with(|| sources_of(dir.root(), &p.file)).clone();
            (p.name.clone(), files)
        })
        .collect()
}

/// The files that make up the modules `kernels` run, sorted.
pub fn files_of(dir: &ShaderDir, kernels: &[String]) -> Vec<String> {
    let sources = module_sources(dir);
    let mut files = BTreeSet::new();
    for k in kernels {
        if let Some(m) = dir.module_for(k) {
            files.extend(sources[&m.name].iter().cloned());
        }
    }
    files.into_iter().collect()
}

/// Copies the shader folder `from` (its `.comp` files and `include/`) to
/// `to`, with `mutant` applied to its file. `to` is made afresh.
pub fn write_mutated(from: &Path, to: &Path, mutant: &Mutant) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    if to.exists() {
        std::fs::remove_dir_all(to).map_err(|e| io(to, e))?;
    }
    std::fs::create_dir_all(to.join("include")).map_err(|e| io(to, e))?;
    for sub in ["", "include"] {
        let dir = from.join(sub);
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let path = entry.map_err(|e| io(&dir, e))?.path();
            if !path.is_file() {
                continue;
            }
            let name =
                path.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: odd name", path.display()))?;
            let rel = if sub.is_empty() { name.to_string() } else { format!("{sub}/{name}") };
            let dest = to.join(&rel);
            if rel == mutant.kernel {
                let text = std::fs::read_to_string(&path).map_err(|e| io(&path, e))?;
                let mutated = mutant.apply(&text).map_err(|e| e.to_string())?;
                std::fs::write(&dest, mutated).map_err(|e| io(&dest, e))?;
            } else {
                std::fs::copy(&path, &dest).map_err(|e| io(&dest, e))?;
            }
        }
    }
    Ok(())
}

/// What building a mutant's modules showed before any run.
#[derive(Debug, PartialEq)]
pub enum Built {
    /// A module the run uses does not compile: the compiler's message.
    Stillborn(String),
    /// Every module the run uses is the clean one, byte for byte: the change
    /// is in code the run's variants leave out, or the compiler undid it.
    SameSpirv,
    /// These modules changed.
    Changed(Vec<String>),
}

/// Builds the modules of `used` (the clean run's modules) that the mutant's
/// file goes into, in the mutated folder and the clean one, and compares.
pub fn build_mutant(clean: &ShaderDir, mutated: &ShaderDir, mutant: &Mutant, used: &[String]) -> Built {
    let sources = module_sources(clean);
    let mut changed = Vec::new();
    let mut modules: Vec<&str> = used
        .iter()
        .filter_map(|k| clean.module_for(k))
        .filter(|m| sources[&m.name].contains(&mutant.kernel))
        .map(|m| m.name.as_str())
        .collect();
    modules.dedup();
    for name in modules {
        let Some(plan) = mutated.plan().iter().find(|p| p.name == name) else { continue };
        let new = match mutated.build(plan) {
            Ok(s) => s,
            Err(e) => return Built::Stillborn(format!("{name}: {e}")),
        };
        let old = clean.spirv(name).map(|s| s.to_vec()).unwrap_or_default();
        if new != old {
            changed.push(name.to_string());
        }
    }
    if changed.is_empty() { Built::SameSpirv } else { Built::Changed(changed) }
}

/// A file name for a mutant's id (its `:` and `/` become `_`).
pub fn slug(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The folder a mutant's copy of the shaders is written to under `work`.
pub fn mutant_dir(work: &Path, id: &str) -> PathBuf {
    work.join("mutants").join(slug(id))
}

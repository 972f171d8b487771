//! The layout of `docs/architecture.md`, checked: data flows one way, so a
//! top-level module of `src/` names only modules to its left, and no source
//! file, under `src/` or `tests/`, grows past the size the style guide allows.

use std::path::{Path, PathBuf};

/// The top-level modules, left to right: each may use those before it.
const LAYERS: [&str; 18] = [
    "rng",
    "tensor",
    "memory",
    "dataset",
    "model",
    "checkpoint",
    "step",
    "cpu",
    "vk",
    "engine",
    "capture",
    "ladder",
    "train",
    "triage",
    "mutate",
    "session",
    "ui",
    "cli",
];

/// Longest a file under `src/` or `tests/` may be (docs/architecture.md, "Files").
const MAX_LINES: usize = 600;

/// Every `.rs` file under `dir`, in its subfolders too.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display())) {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for lib.rs, main.rs).
fn layer_of(src: &Path, file: &Path) -> Option<usize> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    LAYERS.iter().position(|l| *l == name)
}

/// Every top-level module a text names through `crate::` (also inside
/// `use crate::{a, b::c}` groups).
fn named_modules(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(body.split(',').filter_map(|item| item.trim().split("::").next()).filter(|s| !s.is_empty()));
        } else {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            out.push(&rest[..end]);
        }
    }
    out
}

#[test]
fn modules_use_only_what_stands_to_their_left() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), src.display());
    let mut wrong = Vec::new();
    for f in &files {
        let Some(own) = layer_of(&src, f) else { continue };
        let text = std::fs::read_to_string(f).expect("a readable source file");
        for m in named_modules(&text) {
            if let Some(other) = LAYERS.iter().position(|l| *l == m)
                && other > own
            {
                wrong.push(format!("{} uses crate::{m}", f.strip_prefix(&src).unwrap().display()));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports against the data flow ({}):\n{}", LAYERS.join(" → "), wrong.join("\n"));
}

/// The two engines stand side by side: neither names the other.
const SIBLINGS: [(&str, &str); 2] = [("vk", "cpu"), ("cpu", "vk")];

/// The modules above `engine` that compare the engines stage by stage, and so
/// drive each engine's stage API directly (docs/architecture.md, "The engine's
/// surface"). Every other module above `engine` reaches the engines only
/// through `engine` (its `Engine`, `engine::gpu` and `engine::reference`).
const STAGE_LEVEL: [&str; 2] = ["ladder", "triage"];

/// The first module that stands above the engines.
const ABOVE: &str = "engine";

#[test]
fn the_engines_are_reached_through_engine_and_never_name_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let above = LAYERS.iter().position(|l| *l == ABOVE).expect("engine is a layer");
    let mut wrong = Vec::new();
    for f in &files {
        let Some(own) = layer_of(&src, f) else { continue };
        let text = std::fs::read_to_string(f).expect("a readable source file");
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        for m in named_modules(&text) {
            if SIBLINGS.iter().any(|(a, b)| LAYERS[own] == *a && m == *b) {
                wrong.push(format!("{rel} uses crate::{m} (the engines never name each other)"));
            }
            let engine_internal = m == "vk" || m == "cpu";
            if own > above && engine_internal && !STAGE_LEVEL.contains(&LAYERS[own]) {
                wrong.push(format!("{rel} uses crate::{m} (go through crate::engine)"));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports past the engine's surface:\n{}", wrong.join("\n"));
}

#[test]
fn the_architecture_map_names_every_module_and_exception() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let missing: Vec<String> = LAYERS
        .iter()
        .filter(|l| !doc.contains(&format!("`{l}`")))
        .map(|l| format!("module `{l}`"))
        .chain(
            STAGE_LEVEL
                .iter()
                .filter(|m| !doc.contains(&format!("`{m}` (stage level)")))
                .map(|m| format!("exception `{m}` (stage level)")),
        )
        .chain(["docs/model.md", "## Where to add"].iter().filter(|t| !doc.contains(**t)).map(|t| t.to_string()))
        .collect();
    assert!(missing.is_empty(), "docs/architecture.md does not name: {}", missing.join(", "));
}

/// The `.rs` files under `root` (relative to the package) longer than
/// [`MAX_LINES`], each as `path: N lines`, and how many files were looked at.
fn over_the_limit(root: &str) -> (Vec<String>, usize) {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&package.join(root), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).expect("a readable source file").lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", f.strip_prefix(package).unwrap().display()))
        })
        .collect();
    long.sort();
    (long, files.len())
}

#[test]
fn no_source_file_is_over_the_limit() {
    let (long, _) = over_the_limit("src");
    assert!(long.is_empty(), "files over {MAX_LINES} lines:\n{}", long.join("\n"));
}

/// The tests keep to the same limit, their folders' files (`tests/common/`,
/// `tests/gui/`, …) included.
#[test]
fn no_test_file_is_over_the_limit() {
    let (long, n) = over_the_limit("tests");
    assert!(n > 40, "found only {n} test files under tests/");
    assert!(long.is_empty(), "test files over {MAX_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn the_import_scan_sees_groups_and_paths() {
    let text = "use crate::{dataset::Batch, vk};\nlet x = crate::ui::run();";
    assert_eq!(named_modules(text), ["dataset", "vk", "ui"]);
}

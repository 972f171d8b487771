//! The generator over every real kernel: each operator finds something,
//! every mutant applies, none touches a comment or a preprocessor line, ids
//! are unique.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::assert_applies;
use crate::mutate::syntax::Syntax;
use crate::mutate::{Operator, generate};

/// Every `shaders/*.comp` and `shaders/include/*.glsl`, as (name under
/// `shaders/`, source).
fn kernels() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut out = Vec::new();
    for (dir, prefix, ext) in [(root.clone(), "", "comp"), (root.join("include"), "include/", "glsl")] {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == ext) {
                let name = format!("{prefix}{}", path.file_name().unwrap().to_str().unwrap());
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Which bytes of `src` are comments or preprocessor lines (with their `\`
/// continuations), worked out here apart from the scanner.
fn not_code(src: &str) -> Vec<bool> {
    let mut mask = vec![false; src.len()];
    let (mut offset, mut continued) = (0, false);
    for line in src.split_inclusive('\n') {
        let directive = continued || line.trim_start().starts_with('#');
        if directive {
            mask[offset..offset + line.len()].fill(true);
        }
        continued = directive && line.trim_end().ends_with('\\');
        offset += line.len();
    }
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let end = if b[i..].starts_with(b"//") {
            b[i..].iter().position(|c| *c == b'\n').map_or(b.len(), |k| i + k)
        } else if b[i..].starts_with(b"/*") {
            b[i + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |k| i + 2 + k + 2)
        } else {
            i += 1;
            continue;
        };
        mask[i..end].fill(true);
        i = end;
    }
    mask
}

/// The byte offset of a mutant's place in `src`.
fn offset_of(src: &str, line: usize, column: usize) -> usize {
    let start: usize = src.split_inclusive('\n').take(line - 1).map(str::len).sum();
    start + src[start..].char_indices().nth(column - 1).unwrap().0
}

#[test]
fn every_real_kernel_mutates_cleanly() {
    let kernels = kernels();
    assert!(kernels.len() >= 40, "found only {} kernels", kernels.len());
    let mut counts: BTreeMap<Operator, usize> = Operator::ALL.into_iter().map(|o| (o, 0)).collect();
    let mut ids = BTreeSet::new();
    for (name, src) in &kernels {
        let mask = not_code(src);
        let mutants = generate(name, src, &Operator::ALL);
        let mut places = BTreeSet::new();
        for m in &mutants {
            assert!(ids.insert(m.id.clone()), "two mutants are {}", m.id);
            assert!(places.insert((m.line, m.column, &m.original, &m.replacement)), "{} twice", m.id);
            *counts.get_mut(&m.operator).unwrap() += 1;
            assert_applies(m, src);
            let at = offset_of(src, m.line, m.column);
            assert!(!mask[at..at + m.original.len()].contains(&true), "{} touches a comment or a # line", m.id);
            assert!(!m.replacement.contains("//") && !m.replacement.contains("/*"), "{}", m.id);
        }
    }
    eprintln!("mutants over {} kernels: {} in all", kernels.len(), ids.len());
    for (op, n) in &counts {
        eprintln!("  {:<20} {n}", op.name());
    }
    let none: Vec<&str> = counts.iter().filter(|(_, n)| **n == 0).map(|(op, _)| op.name()).collect();
    assert!(none.is_empty(), "operators with no mutant in any kernel: {none:?}");
}

#[test]
fn every_real_kernel_has_matched_delimiters() {
    for (name, src) in kernels() {
        let syn = Syntax::new(&src);
        let open: Vec<String> = (0..syn.tokens().len())
            .filter(|i| matches!(syn.text(*i), "(" | "[" | "{" | ")" | "]" | "}") && syn.partner[*i].is_none())
            .map(|i| format!("{} at line {}", syn.text(i), syn.scan.position(syn.tokens()[i].start).0))
            .collect();
        assert!(open.is_empty(), "{name}: unmatched {open:?}");
        let mains = (0..syn.tokens().len()).filter(|i| syn.text(*i) == "main").count();
        assert_eq!(syn.main_body.is_some(), name.ends_with(".comp") && mains > 0, "{name}: main's body");
    }
}

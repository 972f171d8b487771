//! Mutants of the GLSL kernels: how much a green ladder means.
//!
//! A mutant is the source of one kernel (`shaders/*.comp` or
//! `shaders/include/*.glsl`) with one single-point change, of a kind an
//! [`Operator`] names: an operator swapped, a literal moved by one, an index
//! shifted, a barrier or a statement deleted, an accumulation forgotten,
//! operands swapped, a constant changed, an early return. A ladder that
//! stays green on a mutant that changes the numbers has a gap; `dualscope
//! mutate` builds each mutant, runs the ladder on it and reports the ones
//! that survive.
//!
//! `campaign.rs` builds and runs them (the ladder in a child process per
//! mutant, with a timeout) and classifies each, `plan.rs` picks them and
//! resumes a campaign, `report.rs` counts the score, `folder.rs` writes the
//! mutated shader folders, `read.rs` reads a campaign back (the GUI's view). The rest of this module is the generator: [`generate`] lists every mutant of one
//! source, [`Mutant::apply`] makes the mutated source (refusing a source
//! other than the one the mutant was made from), [`Mutant::diff`] shows the
//! change, [`sample`] draws a fixed, stratified subset for CI, and
//! [`parse_id`] / [`find`] find a mutant again by its id (the scheme is in
//! `id.rs`: readable, and stable when lines are added elsewhere).
//!
//! Mutants are made only in code: a small scanner (`scan.rs`) skips
//! comments and preprocessor lines (so `#version`, `#define`d names and
//! bodies and `#include`s stay as they are), but the code between `#if` and
//! `#endif` is mutated, every branch of it. Inside `layout(...)` (local
//! sizes, bindings, sets, locations), attributes `[[...]]`, template
//! arguments (`coopmat<…, 16, 16, …>`) and declared arrays' sizes nothing
//! changes: those make a kernel that does not build or does not run (or
//! one that computes the same) rather than one that computes wrong.

pub mod campaign;
pub mod folder;
mod id;
mod operator;
pub mod plan;
pub mod read;
pub mod report;
mod rules;
mod sample;
mod scan;
mod syntax;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

pub use id::{MutantId, find, parse_id};
pub use operator::Operator;
pub use sample::sample;

/// Why a mutant could not be named, found or applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutateError {
    #[error("unknown mutation operator `{0}` (the operators: {names})", names = Operator::ALL.map(Operator::name).join(", "))]
    UnknownOperator(String),
    #[error("`{id}` is not a mutant id ({reason}); an id reads KERNEL:OPERATOR:LINE:COLUMN:K:HASH-CONTEXT")]
    BadId { id: String, reason: String },
    /// The source is not the one the mutant was made from: the replaced
    /// text is not at its place, or its line or a neighbour reads otherwise.
    #[error(
        "mutant {id} does not fit this {kernel}: line {line} should hold `{original}` at column {column}, it and its \
         neighbours reading as in the source the mutant was made from; it reads `{found}`"
    )]
    NotAtPlace { id: String, kernel: String, line: usize, column: usize, original: String, found: String },
}

/// One single-point change to one kernel's source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutant {
    /// `KERNEL:OPERATOR:LINE:COLUMN:K:HASH-CONTEXT` (see [`MutantId`]).
    pub id: String,
    /// The file under `shaders/`: `gru_fwd_seq.comp`, `include/common.glsl`.
    pub kernel: String,
    pub operator: Operator,
    /// Where the replaced text starts: 1-based line and 1-based column (in
    /// characters).
    pub line: usize,
    pub column: usize,
    /// The replaced text, exactly as in the source.
    pub original: String,
    pub replacement: String,
}

impl Mutant {
    /// The mutated source: `source` with `original` at (line, column)
    /// replaced, nothing else changed. A source where the original text is
    /// not at that place, or whose line or its neighbours read otherwise
    /// than in the source the mutant was made from, is refused.
    pub fn apply(&self, source: &str) -> Result<String, MutateError> {
        let start = self.locate(source)?;
        let end = start + self.original.len();
        Ok([&source[..start], self.replacement.as_str(), &source[end..]].concat())
    }

    /// A plain-text unified diff of the change (the changed line or lines
    /// with one line of context either side), or the reason the mutant does
    /// not apply to `source`.
    pub fn diff(&self, source: &str) -> String {
        let mutated = match self.apply(source) {
            Ok(m) => m,
            Err(e) => return format!("{e}\n"),
        };
        let (old, new) = (split_lines(source), split_lines(&mutated));
        let first = self.line - 1;
        let old_n = 1 + self.original.matches('\n').count();
        let new_n = 1 + self.replacement.matches('\n').count();
        let before = usize::from(first > 0);
        let after = usize::from(first + old_n < old.len());
        let from = first - before;
        let mut out = format!("--- a/{k}\n+++ b/{k}\n", k = self.kernel);
        let old_len = before + old_n + after;
        let new_len = before + new_n + after;
        out += &format!("@@ -{},{old_len} +{},{new_len} @@ {}\n", from + 1, from + 1, self.id);
        let mut line = |mark: char, text: &str| out += &format!("{mark}{text}\n");
        old[from..first].iter().for_each(|l| line(' ', l));
        old[first..first + old_n].iter().for_each(|l| line('-', l));
        new[first..first + new_n].iter().for_each(|l| line('+', l));
        old[first + old_n..first + old_n + after].iter().for_each(|l| line(' ', l));
        out
    }

    /// The byte offset of the replaced text in `source`, checked.
    fn locate(&self, source: &str) -> Result<usize, MutateError> {
        let id = parse_id(&self.id)?;
        let refuse = |found: &str| MutateError::NotAtPlace {
            id: self.id.clone(),
            kernel: self.kernel.clone(),
            line: self.line,
            column: self.column,
            original: self.original.clone(),
            found: found.trim().to_string(),
        };
        let line_start = match self.line {
            0 => return Err(refuse("(no line 0)")),
            1 => 0,
            n => source.match_indices('\n').nth(n - 2).map(|(k, _)| k + 1).ok_or_else(|| refuse("(past the end)"))?,
        };
        let line_text = lines_at(source, line_start);
        let offset = match self.column.checked_sub(1).and_then(|c| line_text.char_indices().nth(c)) {
            Some((k, _)) => line_start + k,
            None => return Err(refuse(line_text)),
        };
        if !source[offset..].starts_with(&self.original) {
            return Err(refuse(line_text));
        }
        let lines = id::lines_around(source, offset, offset + self.original.len());
        let hash = id::fingerprint(&self.kernel, self.operator, lines, self.column, &self.original, &self.replacement);
        if hash != id.hash || id::context(source, offset, offset + self.original.len()) != id.context {
            return Err(refuse(line_text));
        }
        Ok(offset)
    }
}

/// The lines of `text`, without their line breaks (and without the empty
/// one after a final line break).
fn split_lines(text: &str) -> Vec<&str> {
    text.strip_suffix('\n').unwrap_or(text).split('\n').map(|l| l.trim_end_matches('\r')).collect()
}

/// The line of `source` starting at byte `start`, without its line break.
fn lines_at(source: &str, start: usize) -> &str {
    let rest = &source[start..];
    rest[..rest.find('\n').unwrap_or(rest.len())].trim_end_matches('\r')
}

/// Every single-point mutant of `source` (the kernel file `kernel`, named as
/// under `shaders/`) for the given operators, in source order (by place,
/// then in the order of [`Operator::ALL`]), each change once.
pub fn generate(kernel: &str, source: &str, operators: &[Operator]) -> Vec<Mutant> {
    let syn = syntax::Syntax::new(source);
    let mut edits = Vec::new();
    for op in Operator::ALL.into_iter().filter(|o| operators.contains(o)) {
        rules::edits(&syn, op, &mut edits);
    }
    edits.retain(|e| !syn.scan.touches_skipped(e.start, e.end) && source[e.start..e.end] != e.replacement);
    edits.sort_by_key(|e| (e.start, e.operator.index()));
    let mut seen = HashSet::new();
    edits.retain(|e| seen.insert((e.start, e.end, e.replacement.clone())));
    let stem = id::stem(kernel);
    let mut mutants: Vec<Mutant> = Vec::with_capacity(edits.len());
    let mut k = 0;
    for (i, e) in edits.iter().enumerate() {
        let same_place = i > 0 && edits[i - 1].start == e.start && edits[i - 1].operator == e.operator;
        k = if same_place { k + 1 } else { 0 };
        let (line, column) = syn.scan.position(e.start);
        let original = &source[e.start..e.end];
        let lines = id::lines_around(source, e.start, e.end);
        let hash = id::fingerprint(kernel, e.operator, lines, column, original, &e.replacement);
        let context = id::context(source, e.start, e.end);
        let id = MutantId { kernel: stem.to_string(), operator: e.operator, line, column, k, hash, context };
        mutants.push(Mutant {
            id: id.to_string(),
            kernel: kernel.to_string(),
            operator: e.operator,
            line,
            column,
            original: original.to_string(),
            replacement: e.replacement.clone(),
        });
    }
    mutants
}

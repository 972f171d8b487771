//! The generator's tests: each operator on hand-written GLSL (exact mutants),
//! the scanner's edge cases, ids, `apply`, `diff`, `sample`, and every real
//! kernel under `shaders/`.

mod ids;
mod operators;
mod scanner;
mod shaders;

use super::campaign::{MutantResult, Outcome};
use super::{Mutant, Operator, generate};

/// A result of `outcome` for a made-up mutant of `add.comp` named `id`, for
/// the tests of the campaign's counts and of reading a campaign back.
pub(super) fn result(id: &str, outcome: Outcome) -> MutantResult {
    let mutant = Mutant {
        id: id.into(),
        kernel: "add.comp".into(),
        operator: Operator::ArithmeticSwap,
        line: 1,
        column: 1,
        original: "+".into(),
        replacement: "-".into(),
    };
    MutantResult { mutant, outcome, diff: "-a + b\n+a - b\n".into(), seconds: 1.0 }
}

/// The mutants of `src` for `op` as (line, column, original, replacement).
fn found(src: &str, op: Operator) -> Vec<(usize, usize, String, String)> {
    generate("t.comp", src, &[op]).into_iter().map(|m| (m.line, m.column, m.original, m.replacement)).collect()
}

/// Asserts that `op` makes exactly `want` of `src`, in that order, and that
/// each applies to give `src` with that one change.
fn expect(src: &str, op: Operator, want: &[(usize, usize, &str, &str)]) {
    let got = found(src, op);
    let want: Vec<(usize, usize, String, String)> =
        want.iter().map(|(l, c, o, r)| (*l, *c, o.to_string(), r.to_string())).collect();
    assert_eq!(got, want, "{op} over\n{src}");
    for m in generate("t.comp", src, &[op]) {
        assert_applies(&m, src);
    }
}

/// Asserts that `m` applies to `src` and changes exactly its original text
/// at its place.
fn assert_applies(m: &Mutant, src: &str) {
    let out = m.apply(src).unwrap_or_else(|e| panic!("{e}"));
    let line_start: usize = src.split_inclusive('\n').take(m.line - 1).map(str::len).sum();
    let line = &src[line_start..];
    let offset = line_start + line.char_indices().nth(m.column - 1).expect("the column is on its line").0;
    assert_eq!(&src[offset..offset + m.original.len()], m.original, "{}", m.id);
    let expected = format!("{}{}{}", &src[..offset], m.replacement, &src[offset + m.original.len()..]);
    assert_eq!(out, expected, "{}", m.id);
    assert_ne!(out, src, "{} changes nothing", m.id);
}

//! Each operator's edits over one source's tokens: the byte range it
//! replaces and what replaces it. `generate` (mod.rs) drops any edit that
//! would touch a comment or a preprocessor line, deduplicates and names them.

use super::Operator;
use super::scan::{Kind, split_suffix};
use super::syntax::{CONTROL, Syntax};

/// One replacement of the source bytes `start..end`.
#[derive(Clone, Debug)]
pub(crate) struct Edit {
    pub operator: Operator,
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

/// The built-in barriers, as statements: deleting one is `DeleteBarrier`.
const BARRIERS: [&str; 12] = [
    "barrier",
    "memoryBarrier",
    "memoryBarrierShared",
    "memoryBarrierBuffer",
    "memoryBarrierImage",
    "memoryBarrierAtomicCounter",
    "groupMemoryBarrier",
    "controlBarrier",
    "subgroupBarrier",
    "subgroupMemoryBarrier",
    "subgroupMemoryBarrierShared",
    "subgroupMemoryBarrierBuffer",
];

/// Assignment operators, plain and compound.
const ASSIGN: [&str; 11] = ["=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="];

/// Operators that bind looser than `+`: an index holding one at its top level
/// is parenthesized before `+ 1` is added to it.
const LOOSER_THAN_ADD: [&str; 28] = [
    "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "&", "^", "|", "&&", "||", "^^", "?", ":", ",", "=", "+=", "-=",
    "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=",
];

/// Appends the edits of `op` over `syn`'s source to `out`, in source order.
pub(crate) fn edits(syn: &Syntax, op: Operator, out: &mut Vec<Edit>) {
    let mut push =
        |start: usize, end: usize, replacement: String| out.push(Edit { operator: op, start, end, replacement });
    let toks = syn.tokens();
    for i in 0..toks.len() {
        if syn.frozen[i] {
            continue;
        }
        let tok = toks[i];
        match op {
            Operator::ArithmeticSwap => {
                let swapped = match tok.text {
                    "+" | "-" if !binary(syn, i) => continue,
                    "+" => "-",
                    "-" => "+",
                    "*" => "/",
                    "/" => "*",
                    _ => continue,
                };
                push(tok.start, tok.end, swapped.to_string());
            }
            Operator::RelationalSwap => {
                let swaps: &[&str] = match tok.text {
                    "<" => &["<=", ">"],
                    ">" => &[">=", "<"],
                    "<=" => &["<"],
                    ">=" => &[">"],
                    "==" => &["!="],
                    "!=" => &["=="],
                    _ => continue,
                };
                swaps.iter().for_each(|s| push(tok.start, tok.end, s.to_string()));
            }
            Operator::IntegerLiteral if tok.kind == Kind::Int => {
                integer_steps(tok.text).into_iter().for_each(|r| push(tok.start, tok.end, r));
            }
            Operator::FloatConstant if tok.kind == Kind::Float => {
                float_changes(tok.text).into_iter().for_each(|r| push(tok.start, tok.end, r));
            }
            Operator::IndexShift if tok.text == "[" => {
                if let Some((first, last, shifted)) = index_shift(syn, i) {
                    let (start, end) = (toks[first].start, toks[last].end);
                    shifted.into_iter().for_each(|r| push(start, end, r));
                }
            }
            Operator::DeleteBarrier | Operator::DeleteStatement | Operator::DeleteAccumulation => {
                if let Some((start, end, replacement)) = statement_edit(syn, i, op) {
                    push(start, end, replacement);
                }
            }
            Operator::SwapOperands if matches!(tok.text, "-" | "/") && (tok.text == "/" || binary(syn, i)) => {
                if let Some((first, last, swapped)) = swap_operands(syn, i) {
                    push(toks[first].start, toks[last].end, swapped);
                }
            }
            Operator::EarlyReturn if matches!(tok.text, "for" | "while" | "if") => {
                if let Some((first, last, replacement)) = early_return(syn, i) {
                    push(toks[first].start, toks[last].end, replacement);
                }
            }
            _ => {}
        }
    }
}

/// Whether the `+` or `-` at `i` is binary (an operand stands before it).
fn binary(syn: &Syntax, i: usize) -> bool {
    i > 0 && syn.ends_operand(i - 1)
}

/// An integer literal one more and one less, in its own notation (decimal or
/// hex with the same digit count and case) and suffix. Not below zero, not
/// past the largest `int` (no suffix) or `uint` (`u`); octal literals and
/// unknown suffixes are left alone.
fn integer_steps(text: &str) -> Vec<String> {
    let (digits, suffix) = split_suffix(text, Kind::Int);
    if !matches!(suffix, "" | "u" | "U") {
        return Vec::new();
    }
    let limit = if suffix.is_empty() { i32::MAX as u64 } else { u32::MAX as u64 };
    let hex = digits.len() > 2 && (digits.starts_with("0x") || digits.starts_with("0X"));
    let value = if hex {
        u64::from_str_radix(&digits[2..], 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        return Vec::new();
    } else {
        digits.parse::<u64>()
    };
    let Ok(v) = value else { return Vec::new() };
    let write = |x: u64| {
        if hex {
            let width = digits.len() - 2;
            let body = format!("{x:0width$x}");
            let upper = digits[2..].bytes().any(|c| c.is_ascii_uppercase());
            format!("{}{}{suffix}", &digits[..2], if upper { body.to_ascii_uppercase() } else { body })
        } else {
            format!("{x}{suffix}")
        }
    };
    let mut out = Vec::new();
    if v < limit {
        out.push(write(v + 1));
    }
    if v > 0 && v <= limit {
        out.push(write(v - 1));
    }
    out
}

/// A float constant's replacements: `1.0` → `0.0`, `2.0`; `0.5` → `1.0`;
/// `0.0` → `1.0`; any other doubled and halved. The suffix (`f`, `lf`, `hf`)
/// stays; an unknown one leaves the literal alone.
fn float_changes(text: &str) -> Vec<String> {
    let (number, suffix) = split_suffix(text, Kind::Float);
    if !matches!(suffix, "" | "f" | "F" | "lf" | "LF" | "hf" | "HF") {
        return Vec::new();
    }
    let Ok(v) = number.parse::<f64>() else { return Vec::new() };
    if !v.is_finite() {
        return Vec::new();
    }
    let targets = if v == 1.0 {
        vec![0.0, 2.0]
    } else if v == 0.5 || v == 0.0 {
        vec![1.0]
    } else {
        vec![v * 2.0, v * 0.5]
    };
    targets.into_iter().filter(|x| x.is_finite() && *x != v).map(|x| format!("{}{suffix}", float_literal(x))).collect()
}

/// A GLSL float literal for `x`: the shortest text that reads back as `x`,
/// with a `.` or an exponent so that it stays a float (`2.0`, `0.05`, `1e-7`).
fn float_literal(x: f64) -> String {
    let s = format!("{x:?}");
    if s.contains(['.', 'e', 'E']) { s } else { format!("{s}.0") }
}

/// The index inside the `[` at `open` (first and last token) and its two
/// shifted forms, when it is an index (after a name, a `]` or a `)`; not a
/// declaration's size, which is frozen, nor an attribute): not empty, not a
/// lone literal, on one line.
fn index_shift(syn: &Syntax, open: usize) -> Option<(usize, usize, Vec<String>)> {
    let close = syn.partner[open]?;
    let (first, last) = (open + 1, close.checked_sub(1)?);
    let after_operand =
        open > 0 && (matches!(syn.text(open - 1), "]" | ")") || syn.tokens()[open - 1].kind == Kind::Ident);
    if first > last || !after_operand || syn.declares_array(open) || !syn.one_line(first, last) {
        return None;
    }
    let toks = syn.tokens();
    if first == last && toks[first].kind == Kind::Int {
        return None;
    }
    let loose = (first..=last).any(|j| syn.enclosing[j] == Some(open) && LOOSER_THAN_ADD.contains(&toks[j].text));
    let expr = syn.span(first, last);
    let base = if loose { format!("({expr})") } else { expr.to_string() };
    Some((first, last, vec![format!("{base} + 1"), format!("{base} - 1")]))
}

/// The edit of a deleting operator for the statement starting at `i`, if
/// it is one the operator deletes: its byte range and replacement.
fn statement_edit(syn: &Syntax, i: usize, op: Operator) -> Option<(usize, usize, String)> {
    if !syn.starts_statement(i) || syn.is_declaration(i) || CONTROL.contains(&syn.text(i)) {
        return None;
    }
    let end = syn.statement_end(i)?;
    let toks = syn.tokens();
    let call = toks[i].kind == Kind::Ident && syn.text(i + 1) == "(" && syn.partner[i + 1] == Some(end - 1);
    let barrier = call && BARRIERS.contains(&syn.text(i));
    let level = syn.enclosing[i];
    let assign = (i..end).find(|j| syn.enclosing[*j] == level && ASSIGN.contains(&toks[*j].text));
    let increment = matches!(syn.text(i), "++" | "--") || matches!(syn.text(end - 1), "++" | "--");
    // A statement that is a control structure's whole body leaves an empty
    // statement behind, so that the next one does not become the body.
    let empty = if matches!(syn.text(i - 1), ")" | "else" | "do") { ";" } else { "" };
    let whole = (toks[i].start, toks[end].end, empty.to_string());
    match op {
        Operator::DeleteBarrier if barrier => Some(whole),
        Operator::DeleteStatement if !barrier && (call || assign.is_some() || increment) => Some(whole),
        Operator::DeleteAccumulation => {
            let j = assign.filter(|j| matches!(syn.text(*j), "+=" | "-="))?;
            Some((toks[j].start, toks[j].end, "=".to_string()))
        }
        _ => None,
    }
}

/// The operands of the binary `-` or `/` at `op` swapped: the first and last
/// token of `a - b` and the text `b - a` (`b - (c - a)` where the left
/// operand is itself a difference). Both operands on one line, not equal.
fn swap_operands(syn: &Syntax, op: usize) -> Option<(usize, usize, String)> {
    let (first, compound) = syn.left_operand(op)?;
    let last = syn.right_operand(op)?;
    if !syn.one_line(first, last) {
        return None;
    }
    let toks = syn.tokens();
    let (left, right) = (syn.span(first, op - 1), syn.span(op + 1, last));
    if left == right {
        return None;
    }
    let middle = &syn.scan.source[toks[op - 1].end..toks[op + 1].start];
    let left = if compound { format!("({left})") } else { left.to_string() };
    Some((first, last, format!("{right}{middle}{left}")))
}

/// `return;` first in the body of the `for`, `while` or `if` at `kw`, if it
/// stands in `main`: a braced body's `{` becomes `{ return;`, a one-statement
/// body `s;` becomes `{ return; s; }`. Not where the body is empty, already
/// returns, or is itself a control structure (which gets its own).
fn early_return(syn: &Syntax, kw: usize) -> Option<(usize, usize, String)> {
    let (open, close) = syn.main_body?;
    if kw <= open || kw >= close || syn.text(kw + 1) != "(" {
        return None;
    }
    let body = syn.partner[kw + 1]? + 1;
    let first = syn.text(body);
    if first == "{" {
        let inner = syn.text(body + 1);
        return (inner != "}" && inner != "return").then(|| (body, body, "{ return;".to_string()));
    }
    if first == ";" || (CONTROL.contains(&first) && !matches!(first, "break" | "continue" | "discard")) {
        return None;
    }
    let end = syn.statement_end(body)?;
    Some((body, end, format!("{{ return; {} }}", syn.span(body, end))))
}

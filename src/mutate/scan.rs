//! A small GLSL-aware scanner: the code tokens of a shader source, and the
//! byte ranges that are not code (comments and preprocessor lines), so that
//! no mutant is ever made in either.
//!
//! GLSL has no strings outside preprocessor lines (`#include "x"`), so
//! comments and directives are all there is to skip. A preprocessor line is
//! any line whose first non-blank character is `#`, with its `\` line
//! continuations (a multi-line `#define` is one directive); the code inside
//! `#if` … `#endif` blocks is ordinary code and is scanned, every branch of it.

use std::ops::Range;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A name: letters, digits and `_`, not starting with a digit (`vec4`,
    /// `f16vec2` and `l1` are names, not literals).
    Ident,
    /// An integer literal: decimal or `0x` hexadecimal, with its suffix.
    Int,
    /// A float literal: `1.0`, `1.`, `.5`, `1e-6`, `1.0e+3`, with its suffix.
    Float,
    /// An operator or punctuation, the longest one that matches (`++`, `+=`,
    /// `<<=`, `->`, … are one token each).
    Punct,
}

/// One code token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// Byte offsets of the token in the source.
    pub start: usize,
    pub end: usize,
}

/// The operators and punctuation longer than one character, longest first.
const LONG_PUNCT: [&str; 23] = [
    "<<=", ">>=", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>", "<=", ">=", "==", "!=", "&&",
    "||", "^^", "->", "::",
];

/// A scanned source: its code tokens in order and what was skipped.
#[derive(Debug)]
pub(crate) struct Scan<'a> {
    pub source: &'a str,
    pub tokens: Vec<Token<'a>>,
    /// Comments and preprocessor lines, in source order, not overlapping.
    pub skipped: Vec<Range<usize>>,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl<'a> Scan<'a> {
    /// The 1-based line and 1-based character column of a byte offset.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|s| *s <= offset);
        let start = self.line_starts[line - 1];
        (line, self.source[start..offset].chars().count() + 1)
    }

    /// Whether the byte range `[start, end)` overlaps a comment or a
    /// preprocessor line.
    pub fn touches_skipped(&self, start: usize, end: usize) -> bool {
        let i = self.skipped.partition_point(|r| r.end <= start);
        self.skipped.get(i).is_some_and(|r| r.start < end.max(start + 1))
    }
}

/// Scans `source` into code tokens, skipping comments and preprocessor lines.
pub(crate) fn scan(source: &str) -> Scan<'_> {
    let b = source.as_bytes();
    let n = b.len();
    let mut tokens = Vec::new();
    let mut skipped = Vec::new();
    // Nothing but blanks and comments since the start of the line: a `#` here
    // starts a directive.
    let mut line_blank = true;
    let mut i = 0;
    while i < n {
        let c = b[i];
        if c == b'\n' {
            line_blank = true;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            let end = line_end(b, i);
            skipped.push(i..end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let end = block_comment_end(b, i);
            skipped.push(i..end);
            i = end;
        } else if c == b'#' && line_blank {
            let end = directive_end(b, i);
            skipped.push(i..end);
            i = end;
        } else {
            line_blank = false;
            let (kind, end) = token_at(source, i);
            tokens.push(Token { kind, text: &source[i..end], start: i, end });
            i = end;
        }
    }
    let line_starts = std::iter::once(0).chain(source.match_indices('\n').map(|(k, _)| k + 1)).collect();
    Scan { source, tokens, skipped, line_starts }
}

/// The end of a `//` comment: its line's end, past `\` continuations.
fn line_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    loop {
        match b[i..].iter().position(|c| *c == b'\n') {
            None => return b.len(),
            Some(k) => {
                let nl = i + k;
                if continued(b, nl) {
                    i = nl + 1;
                } else {
                    return nl;
                }
            }
        }
    }
}

/// Whether the line ending at the newline `nl` ends in a `\` (a continuation).
fn continued(b: &[u8], nl: usize) -> bool {
    let body = &b[..nl];
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    body.last() == Some(&b'\\')
}

/// The end of the `/* */` comment starting at `from` (the end of the source if
/// it is never closed).
fn block_comment_end(b: &[u8], from: usize) -> usize {
    b[from + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |k| from + 2 + k + 2)
}

/// The end of the directive starting at `from`: its line's end, past `\`
/// continuations and past block comments that run over a line's end.
fn directive_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            i = block_comment_end(b, i);
        } else if b[i..].starts_with(b"//") {
            return line_end(b, i);
        } else if b[i] == b'\n' {
            if !continued(b, i) {
                return i;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The token starting at byte `i` (not a blank, comment or directive): its
/// kind and end.
fn token_at(source: &str, i: usize) -> (Kind, usize) {
    let b = source.as_bytes();
    let c = b[i];
    let digit_at = |k: usize| b.get(k).is_some_and(u8::is_ascii_digit);
    if c.is_ascii_alphabetic() || c == b'_' {
        (Kind::Ident, word_end(b, i))
    } else if c.is_ascii_digit() || (c == b'.' && digit_at(i + 1)) {
        number_at(b, i)
    } else if let Some(p) = LONG_PUNCT.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
        (Kind::Punct, i + p.len())
    } else {
        let width = source[i..].chars().next().map_or(1, char::len_utf8);
        (Kind::Punct, i + width)
    }
}

/// The end of the run of letters, digits and `_` from `i`.
fn word_end(b: &[u8], i: usize) -> usize {
    i + b[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count()
}

/// The number starting at `i`: an integer (`12`, `12u`, `0x7fc00000u`) or a
/// float (`1.0`, `1.`, `.5`, `1e-6`, `1.0e+3`, `2.0f`, `1.0lf`, `0.5hf`). Its
/// suffix is the letters after the number, whatever they are; the operators
/// only change literals whose suffix they know.
fn number_at(b: &[u8], i: usize) -> (Kind, usize) {
    let digits = |k: usize| k + b[k..].iter().take_while(|c| c.is_ascii_digit()).count();
    if b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit) {
        let k = i + 2 + b[i + 2..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        return (Kind::Int, word_end(b, k));
    }
    let mut k = digits(i);
    let mut float = false;
    if b.get(k) == Some(&b'.') {
        float = true;
        k = digits(k + 1);
    }
    if matches!(b.get(k), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(k + 1), Some(b'+' | b'-')));
        if b.get(k + 1 + sign).is_some_and(u8::is_ascii_digit) {
            float = true;
            k = digits(k + 1 + sign);
        }
    }
    (if float { Kind::Float } else { Kind::Int }, word_end(b, k))
}

/// A literal's digits and its suffix (the trailing letters; for a hex
/// integer, the letters after the hex digits).
pub(crate) fn split_suffix(text: &str, kind: Kind) -> (&str, &str) {
    let cut = if kind == Kind::Int && (text.starts_with("0x") || text.starts_with("0X")) {
        2 + text[2..].bytes().take_while(u8::is_ascii_hexdigit).count()
    } else {
        text.len() - text.bytes().rev().take_while(u8::is_ascii_alphabetic).count()
    };
    text.split_at(cut)
}

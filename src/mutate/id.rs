//! Mutant ids: readable, and stable under edits elsewhere in the file.
//!
//! An id reads `KERNEL:OPERATOR:LINE:COLUMN:K:HASH-CONTEXT`, for example
//! `gru_fwd_seq:relational_swap:57:23:1:3fa2c07e-9b1d`:
//!
//! - `KERNEL` is the kernel's file name without its extension, with its
//!   folder under `shaders/` (`gru_fwd_seq`, `include/common`);
//! - `OPERATOR` is [`Operator::name`];
//! - `LINE` and `COLUMN` (1-based, in characters) are where the replaced
//!   text starts;
//! - `K` counts the operator's replacements at that place from 0 (`0` is
//!   `<` → `<=`, `1` is `<` → `>`);
//! - `HASH` is 32 bits of FNV-1a, in hex, over the kernel's file name, the
//!   operator, the full text of the line(s) the replaced text spans, the
//!   column, the replaced text and the replacement;
//! - `CONTEXT` is 16 bits, in hex: FNV-1a folded to 8 bits over the two
//!   lines before, then 8 bits over the two lines after. It tells identical
//!   lines apart (a kernel has many `barrier();`).
//!
//! What is stable: neither hash depends on anything but the mutated line
//! and its neighbours, so a line added or removed elsewhere moves `LINE`
//! and keeps `HASH-CONTEXT`. [`find`] looks a mutant up by kernel, operator
//! and `HASH`; where identical lines give several, by `CONTEXT` (both halves
//! matching, else one: a line added just above or just below still finds
//! it), and then by the nearest `LINE`. An old id therefore finds its
//! mutation again after its line moved (also after its neighbours changed,
//! if its line is the only one of its text), and finds nothing, rather than
//! another mutation, once its line changed or when it cannot tell identical
//! lines apart. Over the kernels under `shaders/` no two mutants of one
//! kernel share both hashes; where two did, `LINE` alone would tell them
//! apart, and after lines above them moved `find` would pick the nearer.
//! [`Mutant::apply`](super::Mutant::apply) is strict: the line and its
//! neighbours must read as when the mutant was made.

use super::{Mutant, MutateError, Operator};

/// An id taken apart (see the module's documentation for its fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutantId {
    /// The kernel's file name without its extension (`include/common`).
    pub kernel: String,
    pub operator: Operator,
    pub line: usize,
    pub column: usize,
    pub k: usize,
    pub hash: u32,
    pub context: u16,
}

impl std::fmt::Display for MutantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let MutantId { kernel, operator, line, column, k, hash, context } = self;
        write!(f, "{kernel}:{operator}:{line}:{column}:{k}:{hash:08x}-{context:04x}")
    }
}

/// Takes an id apart; an id that does not read
/// `KERNEL:OPERATOR:LINE:COLUMN:K:HASH-CONTEXT` is an error.
pub fn parse_id(id: &str) -> Result<MutantId, MutateError> {
    let bad = |reason: &str| MutateError::BadId { id: id.to_string(), reason: reason.to_string() };
    let mut parts = id.rsplitn(6, ':');
    let mut next = |what: &str| parts.next().filter(|s| !s.is_empty()).ok_or_else(|| bad(&format!("no {what}")));
    let hashes = next("hash")?;
    let k = next("replacement number")?;
    let column = next("column")?;
    let line = next("line")?;
    let operator = next("operator")?;
    let kernel = next("kernel")?;
    let number = |s: &str, what: &str| s.parse::<usize>().map_err(|_| bad(&format!("{what} `{s}` is not a number")));
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|c| c.is_ascii_hexdigit());
    let (hash, context) = match hashes.split_once('-') {
        Some((h, c)) if hex(h, 8) && hex(c, 4) => (h, c),
        _ => return Err(bad(&format!("`{hashes}` is not 8 hex digits, `-` and 4 hex digits"))),
    };
    let parsed = MutantId {
        kernel: kernel.to_string(),
        operator: Operator::parse(operator)?,
        line: number(line, "line")?,
        column: number(column, "column")?,
        k: number(k, "replacement number")?,
        hash: u32::from_str_radix(hash, 16).map_err(|_| bad("hash is not hex"))?,
        context: u16::from_str_radix(context, 16).map_err(|_| bad("context is not hex"))?,
    };
    if parsed.line == 0 || parsed.column == 0 {
        return Err(bad("lines and columns count from 1"));
    }
    Ok(parsed)
}

/// The mutant `id` names among `mutants`: the one with the same kernel,
/// operator and hash; of several (identical lines), the one whose context
/// matches best (both halves, else one), and of several of those the
/// nearest to the id's line. `None` when none matches or the id cannot tell
/// which (see the module's documentation).
pub fn find<'a>(mutants: &'a [Mutant], id: &str) -> Result<Option<&'a Mutant>, MutateError> {
    let want = parse_id(id)?;
    let same: Vec<(MutantId, &Mutant)> = mutants
        .iter()
        .filter_map(|m| Some((parse_id(&m.id).ok()?, m)))
        .filter(|(p, _)| p.kernel == want.kernel && p.operator == want.operator && p.hash == want.hash)
        .collect();
    if let [(_, m)] = same.as_slice() {
        return Ok(Some(*m));
    }
    let halves = |c: u16| usize::from(c >> 8 == want.context >> 8) + usize::from(c & 0xff == want.context & 0xff);
    let best = same.iter().map(|(p, _)| halves(p.context)).max().unwrap_or(0);
    if best == 0 {
        return Ok(None);
    }
    let mut near: Vec<(usize, &Mutant)> =
        same.iter().filter(|(p, _)| halves(p.context) == best).map(|(p, m)| (p.line.abs_diff(want.line), *m)).collect();
    near.sort_by_key(|(d, _)| *d);
    Ok(match near.as_slice() {
        [(_, m)] => Some(*m),
        [(d0, m), (d1, _), ..] if d0 < d1 => Some(*m),
        _ => None,
    })
}

/// The kernel's name in ids: its file name without the extension.
pub(crate) fn stem(kernel: &str) -> &str {
    let name_at = kernel.rfind('/').map_or(0, |k| k + 1);
    match kernel[name_at..].rfind('.') {
        Some(dot) if dot > 0 => &kernel[..name_at + dot],
        _ => kernel,
    }
}

/// The text of the whole lines that bytes `start..end` of `source` touch,
/// without the final line break.
pub(crate) fn lines_around(source: &str, start: usize, end: usize) -> &str {
    let from = source[..start].rfind('\n').map_or(0, |k| k + 1);
    let to = source[end..].find('\n').map_or(source.len(), |k| end + k);
    source[from..to].trim_end_matches('\r')
}

/// Lines either side of the mutated line(s) that the context covers.
const CONTEXT_LINES: usize = 2;

/// The id's context: 8 bits over the [`CONTEXT_LINES`] lines before the
/// lines that bytes `start..end` of `source` touch, then 8 bits over the ones
/// after (fewer at either end of the file).
pub(crate) fn context(source: &str, start: usize, end: usize) -> u16 {
    let from = source[..start].rfind('\n').map_or(0, |k| k + 1);
    let to = source[end..].find('\n').map_or(source.len(), |k| end + k);
    let mut before: Vec<&str> = source[..from].lines().rev().take(CONTEXT_LINES).collect();
    before.reverse();
    let after: Vec<&str> = source.get(to + 1..).unwrap_or("").lines().take(CONTEXT_LINES).collect();
    let byte = |lines: Vec<&str>| {
        let lines: Vec<&str> = lines.into_iter().map(|l| l.trim_end_matches('\r')).collect();
        fnv(&lines).to_le_bytes().iter().fold(0u8, |a, b| a ^ b)
    };
    u16::from(byte(before)) << 8 | u16::from(byte(after))
}

/// The id's hash (see the module's documentation).
pub(crate) fn fingerprint(
    kernel: &str,
    operator: Operator,
    lines: &str,
    column: usize,
    original: &str,
    replacement: &str,
) -> u32 {
    let h = fnv(&[kernel, operator.name(), lines, &column.to_string(), original, replacement]);
    (h ^ (h >> 32)) as u32
}

/// 64-bit FNV-1a over `parts`, each followed by a 0xff byte (which no UTF-8
/// text holds) so that moving text from one part to the next changes it.
pub(crate) fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

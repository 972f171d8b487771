//! The JSON-lines index: where each document's line lies in the file, how long
//! its decoded text is, and where it starts in the documents joined by `\n`.
//!
//! Every line is parsed once at open so that a bad line is reported up front;
//! afterwards a document is decoded again on demand, borrowing straight from the
//! file when its `text` has no escapes.

use std::borrow::Cow;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_json::error::Category;

use super::error::DatasetError;

/// One document: the byte range of its line and the place of its text in the
/// joined stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Doc {
    /// Byte range of the line in the file, without its `\n`.
    pub start: usize,
    pub end: usize,
    /// Offset of the document's first byte in the documents joined by `\n`.
    pub text_start: usize,
    /// Length of the decoded text in bytes (UTF-8).
    pub text_len: usize,
}

/// The documents of a JSON-lines file.
#[derive(Clone, Debug, Default)]
pub(super) struct Index {
    pub docs: Vec<Doc>,
    /// Indices of the documents with at least 2 bytes (those that make a row).
    pub usable: Vec<usize>,
    /// Length of all documents joined by `\n`.
    pub stream_len: usize,
}

/// What a line must hold; other fields are ignored.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    text: Cow<'a, str>,
}

/// The text of one line as bytes, borrowed from `line` when it has no escapes.
pub(super) fn decode(line: &[u8]) -> Result<Cow<'_, [u8]>, serde_json::Error> {
    let parsed: Line = serde_json::from_slice(line)?;
    Ok(match parsed.text {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    })
}

/// Blank lines (only JSON whitespace) are not documents.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// Parses and indexes every line of `bytes`; `path` names the file in errors.
pub(super) fn build_index(path: &Path, bytes: &[u8]) -> Result<Index, DatasetError> {
    let mut index = Index::default();
    let mut pos = 0;
    let mut line_no = 0;
    while pos < bytes.len() {
        line_no += 1;
        let end = bytes[pos..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| pos + i);
        let line = &bytes[pos..end];
        if !is_blank(line) {
            let text_len = decode(line).map_err(|e| line_error(path, line_no, line, e))?.len();
            if !index.docs.is_empty() {
                index.stream_len += 1; // the joining '\n'
            }
            if text_len >= 2 {
                index.usable.push(index.docs.len());
            }
            index.docs.push(Doc { start: pos, end, text_start: index.stream_len, text_len });
            index.stream_len += text_len;
        }
        pos = end + 1;
    }
    if index.docs.is_empty() {
        return Err(DatasetError::NoDocuments { path: path.to_path_buf() });
    }
    if index.usable.is_empty() {
        return Err(DatasetError::DocumentsTooShort { path: path.to_path_buf(), documents: index.docs.len() });
    }
    Ok(index)
}

/// Turns a failed parse of line `line_no` into `BadJson` (not JSON at all) or
/// `NoText` (JSON, but without a string `text`).
fn line_error(path: &Path, line_no: usize, line: &[u8], err: serde_json::Error) -> DatasetError {
    let path = path.to_path_buf();
    match err.classify() {
        Category::Data => DatasetError::NoText { path, line: line_no, problem: no_text_problem(line, &err) },
        Category::Syntax | Category::Eof | Category::Io => {
            // serde_json says "at line 1 column N" of the single line it saw.
            let mut message = err.to_string();
            if let Some(at) = message.rfind(" at line ") {
                message.truncate(at);
            }
            message = format!("{message} at column {}", err.column());
            DatasetError::BadJson { path, line: line_no, message }
        }
    }
}

/// Why a well-formed JSON line is not a document (only on the error path).
fn no_text_problem(line: &[u8], err: &serde_json::Error) -> String {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => match map.get("text") {
            None => "the object has no `text` field".to_string(),
            Some(v) if !v.is_string() => format!("`text` is {}, not a string", kind_of(v)),
            Some(_) => err.to_string(),
        },
        Ok(v) => format!("the line is {}, not an object", kind_of(&v)),
        Err(_) => err.to_string(),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(s: &str) -> Result<Index, DatasetError> {
        build_index(Path::new("t.jsonl"), s.as_bytes())
    }

    #[test]
    fn indexes_documents_and_skips_blank_lines() {
        let ix = index("{\"text\":\"ab\"}\n\n  \r\n{\"id\":3,\"text\":\"cde\"}\r\n{\"text\":\"\"}").unwrap();
        let lens: Vec<_> = ix.docs.iter().map(|d| d.text_len).collect();
        assert_eq!(lens, [2, 3, 0]);
        let starts: Vec<_> = ix.docs.iter().map(|d| d.text_start).collect();
        assert_eq!(starts, [0, 3, 7]);
        assert_eq!(ix.stream_len, 7);
        assert_eq!(ix.usable, [0, 1]);
    }

    #[test]
    fn decodes_escapes_and_borrows_plain_text() {
        let line = br#"{"text": "a\nb\u00e9\"c"}"#;
        assert_eq!(&*decode(line).unwrap(), "a\nb\u{e9}\"c".as_bytes());
        assert!(matches!(decode(br#"{"text":"plain"}"#).unwrap(), Cow::Borrowed(b"plain")));
    }

    #[test]
    fn explains_bad_lines() {
        let msg = |s: &str| index(s).unwrap_err().to_string();
        assert_eq!(
            msg("{\"text\":\"ok\"}\n{\"text\": \"ab\"\n"),
            "t.jsonl: line 2: bad JSON: EOF while parsing an object at column 13"
        );
        assert_eq!(msg("\n[1]"), "t.jsonl: line 2: no string `text` field (the line is an array, not an object)");
        assert_eq!(msg("{\"txt\":1}"), "t.jsonl: line 1: no string `text` field (the object has no `text` field)");
        assert_eq!(msg("{\"text\":5}"), "t.jsonl: line 1: no string `text` field (`text` is a number, not a string)");
        assert!(msg("{\"text\":\"a\"} x").contains("line 1: bad JSON: trailing characters"));
    }
}

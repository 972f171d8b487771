//! Sessions: the [`State`] as RON with a `format_version`. Reading never
//! panics: a bad file is an error that says what is wrong and where.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checkpoint::{CheckpointError, write_atomic};

use super::state::{FORMAT_VERSION, State};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session {path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("session{}: not UTF-8 text (byte {at})", where_(.path))]
    NotUtf8 { path: Option<PathBuf>, at: usize },
    #[error("session{}: {message}", where_(.path))]
    Parse { path: Option<PathBuf>, message: String },
    #[error(
        "session{}: format version {found}, this build reads version {expected}",
        where_(.path)
    )]
    Version { path: Option<PathBuf>, found: u32, expected: u32 },
    #[error("session {path}: cannot write: {source}")]
    Write { path: PathBuf, source: CheckpointError },
    #[error("session: cannot serialise: {0}")]
    Serialise(String),
}

fn where_(path: &Option<PathBuf>) -> String {
    path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default()
}

impl SessionError {
    fn at(self, p: &Path) -> Self {
        let path = Some(p.to_path_buf());
        match self {
            SessionError::NotUtf8 { at, .. } => SessionError::NotUtf8 { path, at },
            SessionError::Parse { message, .. } => SessionError::Parse { path, message },
            SessionError::Version { found, expected, .. } => SessionError::Version { path, found, expected },
            other => other,
        }
    }
}

/// Only the version, read first so that a newer or older format is named as
/// such instead of failing on its first unfamiliar field.
#[derive(Deserialize)]
struct VersionProbe {
    /// 0 when absent: no session was ever written with version 0.
    #[serde(default)]
    format_version: u32,
}

/// The RON text of a session.
pub fn to_ron(state: &State) -> Result<String, SessionError> {
    let cfg = ron::ser::PrettyConfig::new().depth_limit(4);
    ron::ser::to_string_pretty(state, cfg).map_err(|e| SessionError::Serialise(e.to_string()))
}

/// Parses a session from any bytes.
pub fn parse(bytes: &[u8]) -> Result<State, SessionError> {
    let text = std::str::from_utf8(bytes).map_err(|e| SessionError::NotUtf8 { path: None, at: e.valid_up_to() })?;
    let parse_err = |e: ron::error::SpannedError| SessionError::Parse { path: None, message: e.to_string() };
    let probe: VersionProbe = ron::from_str(text).map_err(parse_err)?;
    match probe.format_version {
        FORMAT_VERSION => {}
        0 => {
            return Err(SessionError::Parse { path: None, message: "no `format_version` field".to_string() });
        }
        found => return Err(SessionError::Version { path: None, found, expected: FORMAT_VERSION }),
    }
    ron::from_str(text).map_err(parse_err)
}

pub fn load(path: &Path) -> Result<State, SessionError> {
    let bytes = std::fs::read(path).map_err(|source| SessionError::Read { path: path.to_path_buf(), source })?;
    parse(&bytes).map_err(|e| e.at(path))
}

/// Writes the session atomically (a temporary file renamed over the target).
pub fn save(path: &Path, state: &State) -> Result<(), SessionError> {
    let text = to_ron(state)?;
    write_atomic(path, text.as_bytes()).map_err(|source| SessionError::Write { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::state::ConfigName;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let mut s =
            State { config: ConfigName::Tiny, seed: 7, offset: 10, len: 99, cursor: 5, head: 1, ..State::default() };
        s.dataset.path = Some(PathBuf::from("/tmp/x.txt"));
        s.dataset.hash = Some("0123456789abcdef".into());
        s.panels.gru = false;
        let text = to_ron(&s).unwrap();
        assert_eq!(parse(text.as_bytes()).unwrap(), s);
    }

    #[test]
    fn other_version_is_named() {
        let text = to_ron(&State { format_version: 99, ..State::default() }).unwrap();
        let e = parse(text.as_bytes()).unwrap_err();
        assert!(matches!(e, SessionError::Version { found: 99, expected: FORMAT_VERSION, .. }), "{e}");
        assert!(e.to_string().contains("format version 99"), "{e}");
    }

    #[test]
    fn corrupt_file_says_where() {
        let e = parse(b"(format_version: 1, seed: \"x\")").unwrap_err();
        assert!(matches!(e, SessionError::Parse { .. }), "{e}");
        assert!(e.to_string().contains("1:"), "position missing: {e}");
    }

    #[test]
    fn missing_fields_take_defaults() {
        let s = parse(b"(format_version: 1, seed: 3)").unwrap();
        assert_eq!(s, State { seed: 3, ..State::default() });
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn ron_like_text_never_panics(text in "[(),:a-z_0-9\"\\[\\] ]{0,200}") {
            let _ = parse(format!("(format_version: 1, {text}").as_bytes());
            let _ = parse(text.as_bytes());
        }
    }
}

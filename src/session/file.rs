//! The session file: the [`State`] as RON with a `format_version`, and its
//! side file of tensors ([`super::side`]). Reading never panics: a bad file is
//! an error that says what is wrong and where (the RON error's line:column).
//!
//! Versions: the version is read first; each version this build knows has a
//! loader that turns it into today's [`State`]. Only version 1 exists; a
//! format change bumps [`FORMAT_VERSION`] and adds a `parse_v1` → `State`
//! conversion beside the new loader, so that old sessions keep loading.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checkpoint::{CheckpointError, write_atomic};

use super::results::SavedLadder;
use super::side::{self, SideTensorRef, SideTensors};
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
    #[error("session {path}: cannot write the tensors' side file: {message}")]
    SideFile { path: PathBuf, message: String },
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

// A new format version needs its own loader arm in `parse` (and the old one kept).
const _: () = assert!(FORMAT_VERSION == 1, "add a loader for the new session format version to `parse`");

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
        1 => ron::from_str(text).map_err(parse_err),
        0 => Err(SessionError::Parse { path: None, message: "no `format_version` field".to_string() }),
        found => Err(SessionError::Version { path: None, found, expected: FORMAT_VERSION }),
    }
}

/// Reads the session file at `path` (not its side file: [`load_side_file`]).
pub fn load(path: &Path) -> Result<State, SessionError> {
    let bytes = std::fs::read(path).map_err(|source| SessionError::Read { path: path.to_path_buf(), source })?;
    parse(&bytes).map_err(|e| e.at(path))
}

/// Writes the session atomically (a temporary file renamed over the target).
pub fn save(path: &Path, state: &State) -> Result<(), SessionError> {
    let text = to_ron(state)?;
    write_atomic(path, text.as_bytes()).map_err(|source| SessionError::Write { path: path.to_path_buf(), source })
}

/// Writes the session with ladder results and, when there are tensors, their
/// side file next to it (`x.ron` → `x.tensors.safetensors`), both atomically;
/// the side file first, so that a session never names a side file that was
/// not written.
pub fn save_with_ladder(
    path: &Path,
    state: &State,
    ladder: Option<SavedLadder>,
    tensors: &[SideTensorRef<'_>],
) -> Result<(), SessionError> {
    let mut s = State { ladder, tensors_file: None, ..state.clone() };
    if s.ladder.is_some() && !tensors.is_empty() {
        let side = side::side_path(path);
        side::save(&side, tensors).map_err(|message| SessionError::SideFile { path: path.to_path_buf(), message })?;
        s.tensors_file = side.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    save(path, &s)
}

/// The side file a loaded session names, read: `Ok(None)` when it names none;
/// an error (missing, corrupt) says what is wrong, and the rest of the session still loads.
pub fn load_side_file(session: &Path, state: &State) -> Result<Option<SideTensors>, String> {
    let Some(name) = &state.tensors_file else { return Ok(None) };
    // Only a file name next to the session: a path in the field is not followed.
    let file = Path::new(name);
    if file.components().count() != 1 || file.file_name().is_none() {
        return Err(format!("the side file name {name:?} is not a plain file name"));
    }
    let dir = session.parent().unwrap_or(Path::new("."));
    side::load(&dir.join(file)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::results::SavedLadder;
    use crate::session::state::ConfigName;
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
    fn planted_faults_round_trip_and_an_unknown_one_is_reported() {
        use crate::session::results::Planted;
        use crate::step::Fault;
        let mut s = State { ladder_fault: Some(Fault::WindowOffByOne), ..State::default() };
        s.audit_fault = Fault::parse("f16_stage_skip_slice=head.bwd");
        let text = to_ron(&s).unwrap();
        assert!(text.contains("\"window_off_by_one\"") && text.contains("\"f16_stage_skip_slice=head.bwd\""), "{text}");
        assert_eq!(parse(text.as_bytes()).unwrap(), s);
        // A name the catalogue lacks is an error naming it, not a fault dropped.
        let e = parse(b"(format_version: 1, ladder_fault: Some(\"no_such_fault\"))").unwrap_err();
        assert!(matches!(e, SessionError::Parse { .. }) && e.to_string().contains("no_such_fault"), "{e}");
        // The ladder's planted fault: the catalogue's by name, or words kept as they are.
        for p in [Planted::Engine(Fault::MaskDropped), Planted::Described("a weight += 0.5".into())] {
            let back: Planted = ron::from_str(&ron::to_string(&p).unwrap()).unwrap();
            assert_eq!(back, p);
        }
        assert!(ron::from_str::<Planted>("\"engine fault nothing_like_it\"").is_err());
    }

    #[test]
    fn missing_fields_take_defaults() {
        let s = parse(b"(format_version: 1, seed: 3)").unwrap();
        // Except `model`: a session without it meant the seed's initialisation.
        let model = super::super::state::ModelSource::Seeded;
        assert_eq!(s, State { seed: 3, model, ..State::default() });
    }

    proptest! {
        /// A valid session with a few bytes changed, or cut short, never panics.
        #[test]
        fn corrupted_sessions_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
            let mut s = State { selected_rung: Some("gru_fwd".into()), ..State::default() };
            s.ladder = Some(SavedLadder::default());
            let mut bytes = to_ron(&s).unwrap().into_bytes();
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] = v;
            }
            let _ = parse(&bytes);
            let n = bytes.len();
            let _ = parse(&bytes[..cut % n]);
        }

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

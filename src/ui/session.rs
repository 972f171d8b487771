//! Sessions: the [`State`] as RON with a `format_version`. Reading never
//! panics: a bad file is an error that says what is wrong and where.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::checkpoint::{CheckpointError, write_atomic};

use super::saved::{self, RungTensors, SavedLadder};
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

/// Writes the session with ladder results and, when there are tensors, their
/// side file next to it (`x.ron` → `x.tensors.safetensors`), both atomically;
/// the side file first, so that a session never names a side file that was
/// not written.
pub fn save_with_ladder(
    path: &Path,
    state: &State,
    ladder: Option<SavedLadder>,
    tensors: &RungTensors,
) -> Result<(), SessionError> {
    let mut s = State { ladder, tensors_file: None, ..state.clone() };
    if s.ladder.is_some() && !tensors.is_empty() {
        let side = saved::side_path(path);
        saved::save_tensors(&side, tensors)
            .map_err(|message| SessionError::SideFile { path: path.to_path_buf(), message })?;
        s.tensors_file = side.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    save(path, &s)
}

/// The side file a loaded session names, read: `Ok(None)` when it names none;
/// an error (missing, corrupt) says what is wrong, and the rest of the session still loads.
pub fn load_side_file(session: &Path, state: &State) -> Result<Option<RungTensors>, String> {
    let Some(name) = &state.tensors_file else { return Ok(None) };
    // Only a file name next to the session: a path in the field is not followed.
    let file = Path::new(name);
    if file.components().count() != 1 || file.file_name().is_none() {
        return Err(format!("the side file name {name:?} is not a plain file name"));
    }
    let dir = session.parent().unwrap_or(Path::new("."));
    saved::load_tensors(&dir.join(file)).map(Some)
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

    /// A session with ladder results (one failing rung, one error, NaN and
    /// infinite values) and tensors round-trips through its two files.
    #[test]
    fn ladder_results_and_side_file_round_trip() {
        use crate::ladder::{CaseResult, Precision, RungResult, Status};
        use crate::ui::inspect::InspectedTensor;
        use crate::ui::saved::{LadderInput, SavedRung};
        let case = CaseResult {
            name: "gru.l1.h".into(),
            params: "[7, 1, 5]".into(),
            status: Status::Fail,
            rel_l2: 0.5,
            rel_l2_cpu_f32: 1e-7,
            rel_l2_gpu_f64: Some(f64::NAN),
            max_abs_err: f64::INFINITY,
            max_abs_index: 3,
            non_finite_cpu: 0,
            non_finite_gpu: 2,
            sentinel_ok: true,
            tolerance: 2e-5,
            gpu_ms: None,
            cpu_ms: 0.25,
            notes: vec!["2 new non-finite".into()],
        };
        let rung = RungResult::from_cases("gru_fwd", Precision::F32, vec![case]);
        let mut ladder = SavedLadder {
            input: LadderInput {
                config: ConfigName::Tiny,
                seed: 2,
                len: 40,
                fault: Some("x".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        ladder.rungs.insert("gru_fwd".into(), Ok(SavedRung::from(&rung)));
        ladder.rungs.insert("attn_fwd".into(), Err("no GPU engine".into()));
        let t = InspectedTensor::new(
            "gru.l1.h".into(),
            vec![2, 1, 2],
            vec![1., 2., 3., 4.],
            vec![1., 2., f32::NAN, 4.],
            vec![1., 2., 3., 4.],
        );
        let mut tensors = RungTensors::new();
        tensors.insert("gru_fwd".into(), std::sync::Arc::new(vec![t]));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.ron");
        let state = State { selected_rung: Some("gru_fwd".into()), cursor: 4, ..State::default() };
        save_with_ladder(&path, &state, Some(ladder.clone()), &tensors).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.tensors_file.as_deref(), Some("s.tensors.safetensors"));
        let got = back.ladder.clone().unwrap();
        assert_eq!(got.input, ladder.input);
        assert_eq!(got.rungs["attn_fwd"], ladder.rungs["attn_fwd"]);
        let r = RungResult::from(got.rungs["gru_fwd"].as_ref().unwrap());
        assert_eq!(r.status, Status::Fail);
        assert!(r.cases[0].rel_l2_gpu_f64.unwrap().is_nan());
        assert_eq!(r.cases[0].max_abs_err, f64::INFINITY);
        assert_eq!(r.cases[0].notes, ["2 new non-finite"]);
        let side = load_side_file(&path, &back).unwrap().unwrap();
        assert!(side["gru_fwd"][0].gpu.data[2].is_nan());

        // The side file gone: the session still parses, the side file is an error of its own.
        std::fs::remove_file(dir.path().join("s.tensors.safetensors")).unwrap();
        let back = load(&path).unwrap();
        assert!(load_side_file(&path, &back).unwrap_err().contains("s.tensors.safetensors"));
        // A side file name that climbs out of the session's folder is refused.
        let sneaky = State { tensors_file: Some("../x.safetensors".into()), ..State::default() };
        assert!(load_side_file(&path, &sneaky).unwrap_err().contains("not a plain file name"));
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

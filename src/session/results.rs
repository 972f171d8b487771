//! Ladder results as a session keeps them: what the ladder ran on and the
//! ladder's own result types ([`RungResult`], [`EndToEnd`]), which read the
//! spellings older sessions wrote (`status: Pass`, `precision: F32`, no
//! `gemm_path`; see `ladder/serde_compat.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::config::ConfigName;
use crate::ladder::{EndToEnd, RungResult};

/// What the ladder ran on, so that a loaded result is not mistaken for one of
/// the sequence on screen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LadderInput {
    pub config: ConfigName,
    pub seed: u64,
    pub dataset_hash: Option<String>,
    pub offset: usize,
    pub len: usize,
    /// The checkpoint the parameters came from (`None`: initialised from `seed`).
    pub checkpoint: Option<std::path::PathBuf>,
    /// What was planted before the run, if anything.
    pub fault: Option<Planted>,
    /// The capture whose batch and weights the ladder ran on, described
    /// (`None`: the sequence above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
}

impl LadderInput {
    pub fn describe(&self) -> String {
        let mut s = match &self.capture {
            Some(c) => c.clone(),
            None => format!(
                "{} · seed {} · tokens {}..{}",
                self.config.label(),
                self.seed,
                self.offset,
                self.offset + self.len
            ),
        };
        if let Some(f) = &self.fault {
            s += &format!(" · injected fault: {f}");
        }
        s
    }
}

/// What was planted before a ladder run: a fault of the engine's catalogue,
/// or a change described in words (the example sessions' edited weight).
/// Saved as text: `engine fault NAME` for the first, the words for the second;
/// an `engine fault` whose name the catalogue lacks does not load.
#[derive(Clone, Debug, PartialEq)]
pub enum Planted {
    Engine(crate::step::Fault),
    Described(String),
}

/// How a planted catalogue fault reads in a session file and on screen.
const ENGINE_FAULT: &str = "engine fault ";

impl std::fmt::Display for Planted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Planted::Engine(fault) => write!(f, "{ENGINE_FAULT}{fault}"),
            Planted::Described(s) => f.write_str(s),
        }
    }
}

impl Planted {
    /// The catalogue fault, if that is what was planted.
    pub fn engine(&self) -> Option<crate::step::Fault> {
        match self {
            Planted::Engine(f) => Some(*f),
            Planted::Described(_) => None,
        }
    }
}

impl Serialize for Planted {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Planted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Planted, D::Error> {
        let text = String::deserialize(d)?;
        match text.strip_prefix(ENGINE_FAULT) {
            None => Ok(Planted::Described(text)),
            Some(name) => crate::step::Fault::parse(name).map(Planted::Engine).ok_or_else(|| {
                serde::de::Error::custom(format!("unknown engine fault {name:?} (see `dualscope faults`)"))
            }),
        }
    }
}

/// A ladder run as a session saves it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedLadder {
    pub input: LadderInput,
    /// Every rung run, by id: its result or why it could not run.
    pub rungs: BTreeMap<String, Result<RungResult, String>>,
    pub end_to_end: Option<Result<EndToEnd, String>>,
}

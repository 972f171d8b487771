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
    /// A fault deliberately injected before the run (example sessions), if any.
    pub fault: Option<String>,
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

/// A ladder run as a session saves it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedLadder {
    pub input: LadderInput,
    /// Every rung run, by id: its result or why it could not run.
    pub rungs: BTreeMap<String, Result<RungResult, String>>,
    pub end_to_end: Option<Result<EndToEnd, String>>,
}

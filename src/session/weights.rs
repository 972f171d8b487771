//! Where a GUI job's parameters come from: the seed's initialisation, the
//! embedded trained model, a checkpoint file, or parameters trained in this
//! session ("Train N steps here"). The saved choice is
//! [`ModelSource`](super::state::ModelSource) with `State::checkpoint`; the app
//! turns it (and any parameters it trained) into a [`Weights`] for each job.

use std::path::PathBuf;
use std::sync::Arc;

use crate::model::Params;

use super::config::ConfigName;

/// The parameters a job runs with.
#[derive(Clone, Debug, Default)]
pub enum Weights {
    /// Initialised from the job's seed.
    #[default]
    Seeded,
    /// The embedded trained model (`small` only: another config is refused).
    Embedded,
    /// A checkpoint file of the job's config.
    File(PathBuf),
    /// Parameters trained in this session, shared by every job that uses them.
    Live(Arc<Params<f32>>),
}

impl Weights {
    /// A few words for the sequence view's heading: `seed N`, `embedded
    /// trained`, `checkpoint NAME` or `trained here`.
    pub fn describe(&self, seed: u64) -> String {
        match self {
            Weights::Seeded => format!("seed {seed}"),
            Weights::Embedded => "embedded trained".to_string(),
            Weights::File(p) => {
                format!("checkpoint {}", p.file_name().map_or(p.display().to_string(), |n| n.display().to_string()))
            }
            Weights::Live(_) => "trained here".to_string(),
        }
    }

    /// `config`'s parameters from this source. A checkpoint or embedded model
    /// of another config is an error that says so.
    pub fn params(&self, config: ConfigName, seed: u64) -> Result<Params<f32>, String> {
        let cfg = config.config();
        let (got, params, from) = match self {
            Weights::Seeded => return Ok(Params::<f32>::init(&cfg, seed)),
            Weights::Live(p) => return Ok(Params::clone(p)),
            Weights::Embedded => {
                let (got, p) = crate::checkpoint::embedded_default().map_err(|e| e.to_string())?;
                (got, p, crate::checkpoint::EMBEDDED_NAME.to_string())
            }
            Weights::File(path) => {
                // The GUI is where non-finite weights get debugged: it loads them.
                let opts = crate::checkpoint::LoadOptions::DEBUG;
                let (got, p) = crate::checkpoint::load_params_opts(path, opts).map_err(|e| e.to_string())?;
                (got, p, path.display().to_string())
            }
        };
        if got != cfg {
            return Err(format!("checkpoint {from} holds another configuration than {} ({got:?})", config.label()));
        }
        Ok(params)
    }
}

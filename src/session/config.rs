//! The model configurations a session may name (its own module so that both
//! the [`super::state::State`] and the saved ladder results use it without
//! importing each other).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::{Config, Params};

/// The model configurations the GUI offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigName {
    #[default]
    Small,
    Bench,
    Tiny,
}

impl ConfigName {
    pub const ALL: [ConfigName; 3] = [ConfigName::Small, ConfigName::Bench, ConfigName::Tiny];

    pub fn label(self) -> &'static str {
        match self {
            ConfigName::Small => "small",
            ConfigName::Bench => "bench",
            ConfigName::Tiny => "tiny",
        }
    }

    pub fn config(self) -> Config {
        match self {
            ConfigName::Small => Config::small(),
            ConfigName::Bench => Config::bench(),
            ConfigName::Tiny => Config::tiny(),
        }
    }

    /// The parameters a GUI job runs with: the checkpoint's, or the seed's
    /// initialisation. A checkpoint of another config is an error that says so.
    pub fn initial_params(self, seed: u64, checkpoint: Option<&Path>) -> Result<Params<f32>, String> {
        let cfg = self.config();
        let Some(p) = checkpoint else { return Ok(Params::<f32>::init(&cfg, seed)) };
        // The GUI is where non-finite weights get debugged: it loads them.
        let opts = crate::checkpoint::LoadOptions::DEBUG;
        let (got, params) = crate::checkpoint::load_params_opts(p, opts).map_err(|e| e.to_string())?;
        if got != cfg {
            return Err(format!(
                "checkpoint {} holds another configuration than {} ({got:?})",
                p.display(),
                self.label()
            ));
        }
        Ok(params)
    }
}

//! The model configurations a session may name (its own module so that both
//! the [`super::state::State`] and the saved ladder results use it without
//! importing each other).

use serde::{Deserialize, Serialize};

use crate::model::Config;

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
}

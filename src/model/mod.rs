//! The dual-stream model's definition: configuration and parameters.
//! Engines (`cpu`, later `vk`) compute it; nothing here computes.

mod config;
mod params;

pub use config::{Config, ConfigError};
pub use params::{GruLayer, Params, decays, param_specs};

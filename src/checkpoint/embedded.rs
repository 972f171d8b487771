//! The GUI's default model: a `small` checkpoint trained on the embedded
//! corpus (docs/default-model.md), built into the binary and read by the same
//! checks as any checkpoint file.

use std::path::Path;

use super::{CheckpointError, params_from_bytes};
use crate::model::{Config, Params};

/// How errors and the GUI name the embedded checkpoint.
pub const EMBEDDED_NAME: &str = "embedded:default-small";

/// The file's bytes (`assets/default-small.safetensors`).
pub const EMBEDDED_BYTES: &[u8] = include_bytes!("../../assets/default-small.safetensors");

/// The embedded trained model's configuration and parameters, through the
/// normal reader (checksum, shapes, finite values).
pub fn embedded_default() -> Result<(Config, Params<f32>), CheckpointError> {
    let (cfg, params, _) = params_from_bytes(Path::new(EMBEDDED_NAME), EMBEDDED_BYTES)?;
    Ok((cfg, params))
}

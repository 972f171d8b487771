//! The engine options the commands share: `--engine` as an [`EngineKind`],
//! the precision check, and the Vulkan device (exit 2 without it).

use super::common::CliError;
use super::{EngineArg, PrecisionArg};
use crate::engine::EngineKind;
use crate::engine::gpu::Context;

/// Opens the Vulkan device (`device`, else `DUALSCOPE_VK_DEVICE`, else the
/// best one); any failure to do so is an engine error (exit 2).
pub fn open_context(device: Option<usize>) -> Result<Context, CliError> {
    Ok(crate::engine::open_context(device)?)
}

/// The Vulkan engine computes in float32 only.
pub fn check_precision(engine: EngineArg, precision: PrecisionArg) -> Result<(), CliError> {
    match (engine, precision) {
        (EngineArg::Gpu, PrecisionArg::F64) => Err(CliError::Usage(
            "--engine gpu computes in float32 only: use --precision f32, or --engine cpu for float64".into(),
        )),
        _ => Ok(()),
    }
}

impl EngineArg {
    pub fn kind(self) -> EngineKind {
        match self {
            EngineArg::Cpu => EngineKind::Cpu,
            EngineArg::Gpu => EngineKind::Vulkan,
        }
    }
}

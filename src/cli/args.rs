//! Flags that several commands share, defined once and flattened into each
//! command's arguments (`#[command(flatten)]`), so their names, defaults and
//! help read the same everywhere.

use std::path::PathBuf;

use clap::Args;

use crate::checkpoint::LoadOptions;

/// The Vulkan device a GPU command runs on.
#[derive(Args, Debug, Clone, Default)]
pub struct DeviceArg {
    /// Device index in the ranked list (default: DUALSCOPE_VK_DEVICE, else 0).
    #[arg(long)]
    pub device: Option<usize>,
}

/// The model a GPU diagnostic (ladder, bisect, audit) runs: a seeded
/// initialisation of a config, or a checkpoint's parameters.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// small, bench, tiny, or a JSON config file: the shapes to check.
    #[arg(long, default_value = "small")]
    pub config: String,
    /// Parameters from this checkpoint (its config wins) instead of a seeded init.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// Seed of the random inputs (GEMM operands, parameters, batch windows).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub trust: NonFiniteArg,
}

/// Whether a checkpoint with NaN or infinite weights loads (commands that
/// read checkpoints refuse one by default).
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct NonFiniteArg {
    /// Load a checkpoint even if its weights hold NaN or infinite values (for debugging).
    #[arg(long)]
    pub allow_non_finite: bool,
}

impl NonFiniteArg {
    pub fn options(self) -> LoadOptions {
        LoadOptions { allow_non_finite: self.allow_non_finite }
    }
}

/// One row of a text: what bisect and audit run on.
#[derive(Args, Debug, Clone)]
pub struct RowArgs {
    /// The text (default: the embedded dataset); one row from --offset.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The row's first token in the text.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
}

/// `--precision-map`: each stage's precision over `--precision`'s step
/// (`ladder`, `train`, `bench`, `replay`, `precision-bisect`).
#[derive(Args, Debug, Clone, Default)]
pub struct PrecisionMapArg {
    /// Each stage's precision, applied over --precision's step: STAGE=f16|f32|bf16,… with the stages
    /// embed, gru.l{l}.input, gru.l{l}.rec, attn, head, each also with .bwd, and the groups all, fwd,
    /// bwd, gru.input, gru.rec, gru.input.bwd, gru.rec.bwd; later ones win (docs/precision.md).
    #[arg(long, value_name = "MAP")]
    pub precision_map: Option<String>,
}

impl PrecisionMapArg {
    /// The map: the flag's assignments over `base` (today's step of the
    /// precision); None without the flag. A bad token is a usage error naming it.
    pub fn over(
        &self,
        base: impl FnOnce() -> Result<crate::step::PrecisionMap, crate::cli::common::CliError>,
    ) -> Result<Option<crate::step::PrecisionMap>, crate::cli::common::CliError> {
        let Some(text) = &self.precision_map else { return Ok(None) };
        let map =
            base()?.with(text).map_err(|e| crate::cli::common::CliError::Usage(format!("--precision-map: {e}")))?;
        Ok(Some(map))
    }
}

/// A planted bug of the GPU engine (ladder, bisect, audit).
#[derive(Args, Debug, Clone, Default)]
pub struct FaultArg {
    /// Plant one bug of the fault catalogue in the GPU engine (see `dualscope faults`).
    #[arg(long)]
    pub fault: Option<String>,
}

//! How the GPU commands (and `train`, `bench`) turn `--gemm-path` into the
//! engine's kernel choice. The flag values themselves are the library's enums
//! (`Precision`, `GemmChoice`, `ladder::Mode`), so the CLI keeps no copies.

use crate::cli::common::CliError;
use crate::step::GemmChoice;
use crate::step::Precision;

/// [`choice`] for a step in `precision`: the f32 step has one kernel, so
/// without the flag it ignores `DUALSCOPE_GEMM_PATH` (which picks among the
/// f16 kernels); with the flag, a cooperative-matrix choice in f32 is still an
/// error.
pub(in crate::cli) fn choice_for(arg: Option<GemmChoice>, precision: Precision) -> Result<GemmChoice, CliError> {
    match arg {
        None if !precision.is_mixed() => Ok(GemmChoice::Auto),
        arg => choice(arg),
    }
}

/// The flag when given, else `DUALSCOPE_GEMM_PATH`, else auto.
pub(in crate::cli) fn choice(arg: Option<GemmChoice>) -> Result<GemmChoice, CliError> {
    match arg {
        Some(c) => Ok(c),
        None => GemmChoice::from_env().map_err(|e| CliError::Usage(e.to_string())),
    }
}

//! The flag values the GPU commands share with `train` and `bench`: the
//! precision, the GEMM kernel and the ladder's mode.

use clap::ValueEnum;

use crate::cli::common::CliError;
use crate::ladder::{self, Precision};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LadderPrecision {
    F32,
    /// The mixed-precision step: products with f16 inputs and f32
    /// accumulation, a dynamic loss scale (`mixed` is the same).
    #[value(alias = "mixed")]
    F16,
    /// The mixed-precision step with bfloat16 inputs (tiled kernel).
    Bf16,
}

impl LadderPrecision {
    pub fn precision(self) -> Precision {
        match self {
            LadderPrecision::F32 => Precision::F32,
            LadderPrecision::F16 => Precision::F16,
            LadderPrecision::Bf16 => Precision::Bf16,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GemmPathArg {
    /// Cooperative matrices where the device has them (f16), else tiled.
    Auto,
    Tiled,
    /// Force the 128×128 cooperative-matrix kernel (an error where it cannot run).
    Coopmat,
    /// Force the older 64×64 cooperative-matrix kernel (for comparison).
    Coopmat64,
}

impl GemmPathArg {
    /// [`GemmPathArg::choice`] for a step in `precision`: the f32 step has one
    /// kernel, so without the flag it ignores `DUALSCOPE_GEMM_PATH` (which
    /// picks among the f16 kernels); with the flag, a cooperative-matrix
    /// choice in f32 is still an error.
    pub(in crate::cli) fn choice_for(
        arg: Option<GemmPathArg>,
        precision: Precision,
    ) -> Result<crate::vk::ops::GemmChoice, CliError> {
        match arg {
            None if !precision.is_mixed() => Ok(crate::vk::ops::GemmChoice::Auto),
            arg => Self::choice(arg),
        }
    }

    /// The flag when given, else `DUALSCOPE_GEMM_PATH`, else auto.
    pub(in crate::cli) fn choice(arg: Option<GemmPathArg>) -> Result<crate::vk::ops::GemmChoice, CliError> {
        use crate::vk::ops::GemmChoice;
        match arg {
            Some(GemmPathArg::Auto) => Ok(GemmChoice::Auto),
            Some(GemmPathArg::Tiled) => Ok(GemmChoice::Tiled),
            Some(GemmPathArg::Coopmat) => Ok(GemmChoice::CoopMat),
            Some(GemmPathArg::Coopmat64) => Ok(GemmChoice::CoopMat64),
            None => GemmChoice::from_env().map_err(|e| CliError::Usage(format!("DUALSCOPE_GEMM_PATH: {e}"))),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Isolated,
    Chained,
}

impl ModeArg {
    pub fn mode(self) -> ladder::Mode {
        match self {
            ModeArg::Isolated => ladder::Mode::Isolated,
            ModeArg::Chained => ladder::Mode::Chained,
        }
    }
}

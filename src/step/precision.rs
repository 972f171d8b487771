//! The precision of a step's products and the user's choice of GEMM path:
//! the step's vocabulary, shared by both engines and every front end.

/// A name that is not one of a closed set's (a precision, a GEMM path, a
/// stage, a fault), with what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// The precision of a step's matrix products (everything else is f32): `F32`
/// is the f32 step; `F16` and `Bf16` are the mixed-precision step, products
/// with f16 (or bfloat16) inputs and f32 accumulation. It is also the value
/// of the command line's `--precision` (the variants' docs are its help).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    /// The mixed-precision step: products with f16 inputs and f32
    /// accumulation, a dynamic loss scale (`mixed` is the same).
    #[value(alias = "mixed")]
    F16,
    /// The mixed-precision step with bfloat16 inputs (tiled kernel).
    Bf16,
}

impl Precision {
    /// `f32`; `f16` or `mixed`; `bf16` or `mixed-bf16`.
    pub fn parse(s: &str) -> Result<Precision, ParseError> {
        match s {
            "f32" => Ok(Precision::F32),
            "f16" | "mixed" => Ok(Precision::F16),
            "bf16" | "mixed-bf16" => Ok(Precision::Bf16),
            other => Err(ParseError(format!("precision {other:?}: expected f32, f16 (mixed) or bf16"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }

    /// Whether this is a mixed-precision step (products in f16 or bf16).
    pub fn is_mixed(self) -> bool {
        self != Precision::F32
    }

    /// The unit roundoff of the products' inputs: 2^-24, 2^-11, 2^-8.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Precision::F32 => 2f64.powi(-24),
            Precision::F16 => 2f64.powi(-11),
            Precision::Bf16 => 2f64.powi(-8),
        }
    }
}

/// What the user asked for; `DUALSCOPE_GEMM_PATH` or `--gemm-path` (the
/// variants' docs are the flag's help).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GemmChoice {
    /// Cooperative matrices where the device has them (f16), else tiled.
    Auto,
    Tiled,
    /// Force the 128×128 cooperative-matrix kernel (an error where it cannot run).
    #[value(name = "coopmat")]
    CoopMat,
    /// Force the older 64×64 cooperative-matrix kernel (for comparison).
    #[value(name = "coopmat64")]
    CoopMat64,
}

impl GemmChoice {
    pub fn parse(s: &str) -> Result<GemmChoice, ParseError> {
        match s {
            "auto" => Ok(GemmChoice::Auto),
            "tiled" => Ok(GemmChoice::Tiled),
            "coopmat" => Ok(GemmChoice::CoopMat),
            "coopmat64" => Ok(GemmChoice::CoopMat64),
            other => Err(ParseError(format!("gemm path {other:?}: expected auto, tiled, coopmat or coopmat64"))),
        }
    }
}

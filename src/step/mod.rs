//! The training step's shared vocabulary, below both engines: what a step is
//! asked to do (precision, precision map, GEMM path, AdamW's options, the
//! loss scale, a planted fault, a carried state) and what it reports. The CPU
//! reference, the Vulkan engine and every front end speak these types; none
//! of them depends on an engine.

mod carry;
mod fault;
mod optim;
mod precision;
mod precision_map;

pub use carry::{Carry, CarryError, cast as cast_carry};
pub use fault::{Fault, STAGE_FAULT, fault_name};
pub use optim::{LossScale, OptimOutcome, OptimState, SkipReason, StepOptions, StepReport};
pub use precision::{GemmChoice, ParseError, Precision};
pub use precision_map::{GROUPS as PRECISION_MAP_GROUPS, MapStage, PrecisionMap, StageKind};

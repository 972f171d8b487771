//! Which kernel computes a product: the path ([`GemmPath`]), the step's
//! precision ([`Precision`]), what the user asked for ([`GemmChoice`]) and
//! the choice of one from the others on a device.

use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult};
use crate::vk::kernel::KernelSpec;
use crate::vk::shaders;

use super::specs::*;
use crate::step::GemmChoice;
use crate::step::Precision;

/// Which kernel computes a product. Serialised as its [`GemmPath::name`]
/// (the string the ladder's results and the CLI's JSON carry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPath {
    /// f32 inputs, f32 accumulation, tiled through shared memory (128×64
    /// tiles, `gemm_f32.comp`).
    TiledF32,
    /// The same on 128×128 tiles of 256 threads (`gemm_f32_big.comp`): the
    /// f32 step's kernel where the device's shared memory holds it.
    TiledF32Big,
    /// The f32 tiled kernel with its inputs' mantissas rounded to f16 (f16's
    /// precision, f32's range).
    TiledF16In,
    /// The tiled kernel with its inputs rounded to bfloat16.
    TiledBf16In,
    /// f16 inputs with f16's precision and range (overflow to Inf, subnormals),
    /// f32 accumulation, tiled (`gemm_f16_tiled.comp`): the f16 path on
    /// devices without cooperative matrices.
    TiledF16,
    /// `VK_KHR_cooperative_matrix` 16×16×16, f16 inputs, f32 accumulation,
    /// 64×64 tiles (`gemm_f16_coopmat.comp`), never split.
    CoopMatF16,
    /// The same on 128×128 tiles, split along K (`gemm_f16_coopmat_big.comp`):
    /// the f16 path on devices with cooperative matrices.
    CoopMatF16Big,
    /// Planted bug: no bounds check on the staged loads (fault catalogue).
    FaultNoBounds,
    /// Planted bug: f16 accumulation without a clamp (fault catalogue).
    FaultF16Accum,
    /// Planted bug of one precision-map stage's f16 kernel: f16-rounded
    /// inputs, the first K slice skipped (`f16_stage_skip_slice`).
    FaultF16SkipSlice,
}

impl GemmPath {
    /// Every path, in declaration order.
    pub const ALL: [GemmPath; 10] = [
        GemmPath::TiledF32,
        GemmPath::TiledF32Big,
        GemmPath::TiledF16In,
        GemmPath::TiledBf16In,
        GemmPath::TiledF16,
        GemmPath::CoopMatF16,
        GemmPath::CoopMatF16Big,
        GemmPath::FaultNoBounds,
        GemmPath::FaultF16Accum,
        GemmPath::FaultF16SkipSlice,
    ];

    /// The path whose [`GemmPath::name`] is `name`.
    pub fn from_name(name: &str) -> Option<GemmPath> {
        GemmPath::ALL.into_iter().find(|p| p.name() == name)
    }

    pub(crate) fn spec(self) -> &'static KernelSpec {
        match self {
            GemmPath::TiledF32 => &GEMM_F32,
            GemmPath::TiledF32Big => &GEMM_F32_BIG,
            GemmPath::TiledF16In => &GEMM_F16IN_TILED,
            GemmPath::TiledBf16In => &GEMM_BF16IN_TILED,
            GemmPath::TiledF16 => &GEMM_F16_TILED,
            GemmPath::CoopMatF16 => &GEMM_F16_COOPMAT,
            GemmPath::CoopMatF16Big => coopmat_big_spec(),
            GemmPath::FaultNoBounds => &GEMM_F32_FAULT_NO_BOUNDS,
            GemmPath::FaultF16Accum => &GEMM_F32_FAULT_F16_ACCUM,
            GemmPath::FaultF16SkipSlice => &GEMM_F16IN_FAULT_SKIP_SLICE,
        }
    }

    /// Bytes of shared memory one workgroup of the kernel uses.
    pub fn shared_bytes(self) -> u32 {
        self.spec().shared_bytes
    }

    pub fn name(self) -> &'static str {
        match self {
            GemmPath::TiledF32 => "tiled f32",
            GemmPath::TiledF32Big => "tiled f32 128x128",
            GemmPath::TiledF16In => "tiled f16-in",
            GemmPath::TiledBf16In => "tiled bf16-in",
            GemmPath::TiledF16 => "tiled f16",
            GemmPath::CoopMatF16 => "coopmat f16",
            GemmPath::CoopMatF16Big => "coopmat f16 128x128",
            GemmPath::FaultNoBounds => "tiled f32, fault: no bounds check",
            GemmPath::FaultF16Accum => "tiled f32, fault: f16 accumulation",
            GemmPath::FaultF16SkipSlice => "tiled f16-in, fault: first K slice skipped",
        }
    }

    /// Whether the kernel takes a K range per workgroup (split-K): all but
    /// the 64×64 cooperative-matrix kernel do.
    pub fn splits(self) -> bool {
        self != GemmPath::CoopMatF16
    }

    /// The output tile (rows, columns) and K-slice of the kernel.
    pub fn tile(self) -> (usize, usize, usize) {
        match self {
            GemmPath::TiledF16 => F16_TILED_TILE,
            GemmPath::TiledF32Big => GEMM_BIG_TILE,
            GemmPath::CoopMatF16 => (64, 64, 32),
            GemmPath::CoopMatF16Big => COOPMAT_BIG_TILE,
            _ => (GEMM_TILE_M, GEMM_TILE_N, GEMM_TILE_K),
        }
    }

    /// Whether the kernel needs cooperative matrices.
    pub fn coopmat(self) -> bool {
        matches!(self, GemmPath::CoopMatF16 | GemmPath::CoopMatF16Big)
    }

    /// What the inputs are rounded to before they are multiplied.
    pub fn input_precision(self) -> Precision {
        match self {
            GemmPath::TiledF32 | GemmPath::TiledF32Big | GemmPath::FaultNoBounds | GemmPath::FaultF16Accum => {
                Precision::F32
            }
            GemmPath::TiledBf16In => Precision::Bf16,
            GemmPath::TiledF16In
            | GemmPath::TiledF16
            | GemmPath::CoopMatF16
            | GemmPath::CoopMatF16Big
            | GemmPath::FaultF16SkipSlice => Precision::F16,
        }
    }
}

impl serde::Serialize for GemmPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for GemmPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<GemmPath, D::Error> {
        let name = String::deserialize(d)?;
        GemmPath::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown gemm path {name:?}")))
    }
}

impl GemmChoice {
    /// `DUALSCOPE_GEMM_PATH`, default `auto`; an error naming a switch set
    /// to a value it does not take.
    pub fn from_env() -> VkResult<GemmChoice> {
        Ok(crate::vk::switches::switches().check()?.gemm_path.unwrap_or(GemmChoice::Auto))
    }
}

/// Which kernel the f32 products run on: [`F32Kernel::Auto`], or in a `lab`
/// build what `DUALSCOPE_GEMM_F32` asks for (the 128×64 kernel stays
/// reachable so that one run can time both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F32Kernel {
    /// The 128×128 kernel where the device's shared memory holds it, else
    /// the 128×64 one (unset).
    Auto,
    /// `tiled`: the 128×64 kernel (`gemm_f32.comp`).
    Tiled,
    /// `big`: the 128×128 kernel (an error where it cannot run).
    Big,
}

impl F32Kernel {
    pub fn parse(s: &str) -> VkResult<F32Kernel> {
        match s.trim() {
            "auto" => Ok(F32Kernel::Auto),
            "tiled" => Ok(F32Kernel::Tiled),
            "big" => Ok(F32Kernel::Big),
            other => Err(VkError::Invalid(format!("DUALSCOPE_GEMM_F32={other:?}: expected tiled, big or auto"))),
        }
    }

    /// The kernel asked for: `DUALSCOPE_GEMM_F32` in a `lab` build, else `auto`.
    fn asked() -> F32Kernel {
        #[cfg(feature = "lab")]
        {
            crate::vk::switches::switches().lab.gemm_f32
        }
        #[cfg(not(feature = "lab"))]
        {
            F32Kernel::Auto
        }
    }

    /// The path on `ctx`.
    pub fn path(self, ctx: &Context) -> VkResult<GemmPath> {
        let need = GemmPath::TiledF32Big.shared_bytes();
        let have = ctx.report().max_shared_memory;
        match self {
            F32Kernel::Tiled => Ok(GemmPath::TiledF32),
            F32Kernel::Auto => Ok(if need <= have { GemmPath::TiledF32Big } else { GemmPath::TiledF32 }),
            F32Kernel::Big if need <= have => Ok(GemmPath::TiledF32Big),
            F32Kernel::Big => Err(VkError::Unsupported(format!(
                "DUALSCOPE_GEMM_F32=big: the 128x128 kernel needs {need} bytes of shared memory; {} has {have}",
                ctx.report().name
            ))),
        }
    }
}

/// Why a cooperative-matrix kernel cannot run here, if it cannot.
pub fn coopmat_unavailable(ctx: &Context, path: GemmPath) -> Option<String> {
    let r = ctx.report();
    let built = match path {
        GemmPath::CoopMatF16Big => shaders::GEMM_F16_COOPMAT_BIG.is_some(),
        _ => shaders::GEMM_F16_COOPMAT.is_some(),
    };
    if let Some(why) = &r.coopmat_off {
        Some(format!("cooperative matrices on {}: {why}", r.name))
    } else if !built {
        Some(
            "this build has no cooperative-matrix shader (glslang 13 was missing at build time: run scripts/setup.sh)"
                .into(),
        )
    } else if !r.features.coopmat_f16_16x16x16 {
        Some(format!("{} offers no subgroup 16×16×16 f16×f16→f32 cooperative matrix", r.name))
    } else if r.subgroup_size != 32 {
        Some(format!("the kernel needs subgroup size 32; {} has {}", r.name, r.subgroup_size))
    } else if (path.spec().shared_bytes as usize) > r.max_shared_memory as usize {
        Some(format!(
            "{} needs {} bytes of shared memory; {} has {}",
            path.name(),
            path.spec().shared_bytes,
            r.name,
            r.max_shared_memory
        ))
    } else {
        None
    }
}

/// Why the cooperative-matrix kernels cannot run here, if they cannot.
pub fn coopmat_f16_unavailable(ctx: &Context) -> Option<String> {
    coopmat_unavailable(ctx, GemmPath::CoopMatF16Big)
}

/// The kernel for products in f16 (`f16`) or f32 precision under `choice`.
pub fn pick_path(ctx: &Context, f16: bool, choice: GemmChoice) -> VkResult<GemmPath> {
    path_for(ctx, if f16 { Precision::F16 } else { Precision::F32 }, choice)
}

/// The kernel for products in `precision` under `choice`: f32 → the f32
/// tiled kernel [`F32Kernel`] picks (`tiled` gives the 128×64 one and
/// `auto` the 128×128 one where it fits, unless a `lab` build's
/// `DUALSCOPE_GEMM_F32` asks otherwise); f16 → the 128×128 cooperative-matrix kernel where the device
/// has cooperative matrices (`auto`, `coopmat`), the 64×64 one with
/// `coopmat64`, else the f16 tiled kernel; bf16 → the tiled kernel with
/// bfloat16 inputs.
pub fn path_for(ctx: &Context, precision: Precision, choice: GemmChoice) -> VkResult<GemmPath> {
    let forced = |path: GemmPath| match coopmat_unavailable(ctx, path) {
        None => Ok(path),
        Some(why) => Err(VkError::Unsupported(why)),
    };
    match (precision, choice) {
        (Precision::F32, GemmChoice::CoopMat | GemmChoice::CoopMat64) => {
            Err(VkError::Invalid("the cooperative-matrix path takes f16 inputs: use precision f16".into()))
        }
        // `tiled` names the 128×64 kernel (unless DUALSCOPE_GEMM_F32 says
        // otherwise), so a capture of an f32 step on "tiled f32" replays on
        // its own kernel.
        (Precision::F32, GemmChoice::Tiled) => match F32Kernel::asked() {
            F32Kernel::Auto => Ok(GemmPath::TiledF32),
            k => k.path(ctx),
        },
        (Precision::F32, _) => F32Kernel::asked().path(ctx),
        (Precision::Bf16, GemmChoice::CoopMat | GemmChoice::CoopMat64) => Err(VkError::Unsupported(
            "there is no bfloat16 cooperative-matrix kernel (glslang 13 has no bfloat16 types); use --gemm-path tiled"
                .into(),
        )),
        (Precision::Bf16, _) => Ok(GemmPath::TiledBf16In),
        (Precision::F16, GemmChoice::Tiled) => Ok(GemmPath::TiledF16),
        (Precision::F16, GemmChoice::Auto) => Ok(if coopmat_unavailable(ctx, GemmPath::CoopMatF16Big).is_none() {
            GemmPath::CoopMatF16Big
        } else {
            GemmPath::TiledF16
        }),
        (Precision::F16, GemmChoice::CoopMat) => forced(GemmPath::CoopMatF16Big),
        (Precision::F16, GemmChoice::CoopMat64) => forced(GemmPath::CoopMatF16),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both serde forms are the names the JSON outputs carry, and read back.
    #[test]
    fn serde_forms_are_the_names() {
        for p in [Precision::F32, Precision::F16, Precision::Bf16] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Precision>(&json).unwrap(), p);
        }
        for p in GemmPath::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, serde_json::to_string(p.name()).unwrap());
            assert_eq!(serde_json::from_str::<GemmPath>(&json).unwrap(), p);
        }
        assert!(serde_json::from_str::<GemmPath>("\"tiled f64\"").is_err());
    }
}

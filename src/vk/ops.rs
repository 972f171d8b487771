//! Operations on device buffers, and host-side conveniences around them.

use super::buffer::Buffer;
use super::context::Context;
use super::error::{VkError, VkResult};
use super::kernel::{Access, KernelSpec, PushConstants};
use super::recorder::{Sequence, Timings};
use super::shaders;

/// An optional shader's SPIR-V, or none (the kernel then reports it was not built).
pub(crate) const fn optional(spirv: Option<&'static [u8]>) -> &'static [u8] {
    match spirv {
        Some(s) => s,
        None => &[],
    }
}

/// The push-constant block of `shaders/gemm_f32.comp` (16 × u32), shared by
/// `gemm_splitk_reduce.comp` and `gemm_f16_coopmat.comp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GemmPush {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    pub a_off: u32,
    pub b_off: u32,
    pub c_off: u32,
    pub ta: u32,
    pub tb: u32,
    pub accumulate: u32,
    /// Workgroup `z` of the tiled kernel covers `k` in `[z·k_chunk, (z+1)·k_chunk)`.
    pub k_chunk: u32,
    /// Elements between the output planes of successive `z` (split-K partials).
    pub c_stride: u32,
    /// The reduce kernel: how many partial planes it adds.
    pub slices: u32,
    pub reserved: u32,
}
const _: () = assert!(std::mem::size_of::<GemmPush>() == 64);
// SAFETY: `repr(C)`, sixteen `u32` fields, no padding; matches the shaders' block.
unsafe impl PushConstants for GemmPush {}

/// The tiled kernel's output tile (rows × columns) and K-slice.
pub const GEMM_TILE_M: usize = 128;
pub const GEMM_TILE_N: usize = 64;
pub const GEMM_TILE_K: usize = 16;

/// 128×64 output tile per workgroup of 128 threads (8×8 values per thread);
/// A and B slices of 16×(128+4) and 16×(64+4) floats in shared memory, two
/// of each (double-buffered): 25 KiB.
pub static GEMM_F32: KernelSpec = KernelSpec {
    name: "gemm_f32",
    spirv: shaders::GEMM_F32,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [GEMM_TILE_N as u32, GEMM_TILE_M as u32, 1],
    shared_bytes: (2 * GEMM_TILE_K * (GEMM_TILE_M + 4) + 2 * GEMM_TILE_K * (GEMM_TILE_N + 4)) as u32 * 4,
};

/// The second pass of a split-K product: adds the partial planes in order
/// (grid-stride over the `m×n` outputs).
pub static GEMM_SPLITK_REDUCE: KernelSpec = KernelSpec {
    name: "gemm_splitk_reduce",
    spirv: shaders::GEMM_SPLITK_REDUCE,
    bindings: &[Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [256, 1, 1],
    items_per_group: [256, 1, 1],
    shared_bytes: 0,
};

/// The tiled kernel with every staged input rounded to f16 (f32 accumulation):
/// the f16 precision on devices without cooperative matrices.
pub static GEMM_F16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_f16in_tiled", spirv: shaders::GEMM_F16IN_TILED, ..GEMM_F32 };

/// The tiled kernel with every staged input rounded to bfloat16.
pub static GEMM_BF16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_bf16in_tiled", spirv: shaders::GEMM_BF16IN_TILED, ..GEMM_F32 };

/// 64×64 output tile per workgroup of 4 subgroups of 32; A and B staged as f16
/// (64×40 and 32×72 halves), C through a 64×64 f32 block. Never split along K.
pub static GEMM_F16_COOPMAT: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat",
    spirv: optional(shaders::GEMM_F16_COOPMAT),
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [64, 64, 1],
    shared_bytes: 64 * 40 * 2 + 32 * 72 * 2 + 64 * 64 * 4,
};

/// The 128×128 cooperative-matrix kernel's output tile and K-slice.
pub const COOPMAT_BIG_TILE: (usize, usize, usize) = (128, 128, 32);

/// 128×128 output tile per workgroup of 4 subgroups of 32 (each a 64×64 block
/// of 4×4 accumulators); A and B staged as f16 in their memory order, 16 bytes
/// per load, two stages of 32-deep slices; fragments wholly inside C stored
/// directly, the edges through a 16×16 f32 block per subgroup; split along K
/// like the tiled kernel.
pub static GEMM_F16_COOPMAT_BIG: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG),
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [128, 1, 1],
    items_per_group: [COOPMAT_BIG_TILE.1 as u32, COOPMAT_BIG_TILE.0 as u32, 1],
    shared_bytes: (2 * 2 * 1280 * 8 + 4 * 256 * 4) as u32,
};

/// The 128×128 kernel with its multiply-adds alone (fragments loaded once)
/// or without its global loads: `DUALSCOPE_COOPMAT_PROBE=mma|no_global`
/// (timing only; the results are wrong on purpose).
pub static GEMM_F16_COOPMAT_BIG_PROBE_MMA: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big_probe_mma",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG_PROBE_MMA),
    ..GEMM_F16_COOPMAT_BIG
};
pub static GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat_big_probe_no_global",
    spirv: optional(shaders::GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL),
    ..GEMM_F16_COOPMAT_BIG
};

fn coopmat_big_spec() -> &'static KernelSpec {
    match std::env::var("DUALSCOPE_COOPMAT_PROBE").as_deref() {
        Ok("mma") => &GEMM_F16_COOPMAT_BIG_PROBE_MMA,
        Ok("no_global") => &GEMM_F16_COOPMAT_BIG_PROBE_NO_GLOBAL,
        _ => &GEMM_F16_COOPMAT_BIG,
    }
}

/// The f16 tiled kernel's output tile and K-slice.
pub const F16_TILED_TILE: (usize, usize, usize) = (64, 64, 16);

/// f16 inputs (precision and range, as a conversion to float16_t gives them),
/// f32 accumulation, on any device: 64×64 tile per 16×16 workgroup.
pub static GEMM_F16_TILED: KernelSpec = KernelSpec {
    name: "gemm_f16_tiled",
    spirv: shaders::GEMM_F16_TILED,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 64,
    local_size: [16, 16, 1],
    items_per_group: [F16_TILED_TILE.1 as u32, F16_TILED_TILE.0 as u32, 1],
    shared_bytes: (16 * 65 * 2 * 4) as u32,
};

/// The f32 kernel with the `gemm_no_bounds` fault planted.
pub static GEMM_F32_FAULT_NO_BOUNDS: KernelSpec =
    KernelSpec { name: "gemm_f32_fault_no_bounds", spirv: shaders::GEMM_F32_FAULT_NO_BOUNDS, ..GEMM_F32 };

/// The f32 kernel with the `f16_accum_no_scale` fault planted.
pub static GEMM_F32_FAULT_F16_ACCUM: KernelSpec =
    KernelSpec { name: "gemm_f32_fault_f16_accum", spirv: shaders::GEMM_F32_FAULT_F16_ACCUM, ..GEMM_F32 };

/// Which kernel computes a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmPath {
    /// f32 inputs, f32 accumulation, tiled through shared memory.
    TiledF32,
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
}

impl GemmPath {
    fn spec(self) -> &'static KernelSpec {
        match self {
            GemmPath::TiledF32 => &GEMM_F32,
            GemmPath::TiledF16In => &GEMM_F16IN_TILED,
            GemmPath::TiledBf16In => &GEMM_BF16IN_TILED,
            GemmPath::TiledF16 => &GEMM_F16_TILED,
            GemmPath::CoopMatF16 => &GEMM_F16_COOPMAT,
            GemmPath::CoopMatF16Big => coopmat_big_spec(),
            GemmPath::FaultNoBounds => &GEMM_F32_FAULT_NO_BOUNDS,
            GemmPath::FaultF16Accum => &GEMM_F32_FAULT_F16_ACCUM,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GemmPath::TiledF32 => "tiled f32",
            GemmPath::TiledF16In => "tiled f16-in",
            GemmPath::TiledBf16In => "tiled bf16-in",
            GemmPath::TiledF16 => "tiled f16",
            GemmPath::CoopMatF16 => "coopmat f16",
            GemmPath::CoopMatF16Big => "coopmat f16 128x128",
            GemmPath::FaultNoBounds => "tiled f32, fault: no bounds check",
            GemmPath::FaultF16Accum => "tiled f32, fault: f16 accumulation",
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
            GemmPath::TiledF32 | GemmPath::FaultNoBounds | GemmPath::FaultF16Accum => Precision::F32,
            GemmPath::TiledBf16In => Precision::Bf16,
            GemmPath::TiledF16In | GemmPath::TiledF16 | GemmPath::CoopMatF16 | GemmPath::CoopMatF16Big => {
                Precision::F16
            }
        }
    }
}

/// The precision of a step's matrix products (everything else is f32): `F32`
/// is the f32 step; `F16` and `Bf16` are the mixed-precision step, products
/// with f16 (or bfloat16) inputs and f32 accumulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    /// f16 inputs, f32 accumulation (cooperative matrices where available).
    F16,
    /// bfloat16 inputs, f32 accumulation (tiled kernel only).
    Bf16,
}

impl Precision {
    /// `f32`; `f16` or `mixed`; `bf16` or `mixed-bf16`.
    pub fn parse(s: &str) -> VkResult<Precision> {
        match s {
            "f32" => Ok(Precision::F32),
            "f16" | "mixed" => Ok(Precision::F16),
            "bf16" | "mixed-bf16" => Ok(Precision::Bf16),
            other => Err(VkError::Invalid(format!("precision {other:?}: expected f32, f16 (mixed) or bf16"))),
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

/// What the user asked for; `DUALSCOPE_GEMM_PATH` or `--gemm-path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmChoice {
    /// Cooperative matrices where the device has them (f16 precision only).
    Auto,
    Tiled,
    /// The 128×128 cooperative-matrix kernel (an error where it cannot run).
    CoopMat,
    /// The 64×64 cooperative-matrix kernel, kept for comparison.
    CoopMat64,
}

impl GemmChoice {
    pub fn parse(s: &str) -> VkResult<GemmChoice> {
        match s {
            "auto" => Ok(GemmChoice::Auto),
            "tiled" => Ok(GemmChoice::Tiled),
            "coopmat" => Ok(GemmChoice::CoopMat),
            "coopmat64" => Ok(GemmChoice::CoopMat64),
            other => Err(VkError::Invalid(format!("gemm path {other:?}: expected auto, tiled, coopmat or coopmat64"))),
        }
    }

    /// `DUALSCOPE_GEMM_PATH`, default `auto`.
    pub fn from_env() -> VkResult<GemmChoice> {
        std::env::var("DUALSCOPE_GEMM_PATH").map_or(Ok(GemmChoice::Auto), |s| GemmChoice::parse(&s))
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
/// tiled kernel; f16 → the 128×128 cooperative-matrix kernel where the device
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
        (Precision::F32, _) => Ok(GemmPath::TiledF32),
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

/// The shape of one matrix product `C[m×n] (+)= op(A)·op(B)`, all row-major
/// and packed (as `crate::tensor::gemm`): A is `[m,k]` (`[k,m]` when `ta`),
/// B is `[k,n]` (`[n,k]` when `tb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub ta: bool,
    pub tb: bool,
    pub accumulate: bool,
}

/// A matrix inside a buffer: the buffer and the offset of element 0, in f32 values.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub buf: &'a Buffer,
    pub offset: usize,
}

impl<'a> MatRef<'a> {
    pub fn whole(buf: &'a Buffer) -> Self {
        MatRef { buf, offset: 0 }
    }
}

fn fits(what: &str, m: &MatRef<'_>, len: usize) -> VkResult<u32> {
    if m.offset + len > m.buf.len_f32() {
        return Err(VkError::Invalid(format!(
            "gemm: {what} needs {len} values at offset {}, buffer {:?} holds {}",
            m.offset,
            m.buf.name(),
            m.buf.len_f32()
        )));
    }
    u32::try_from(m.offset + len)
        .map(|_| m.offset as u32)
        .map_err(|_| VkError::Limit(format!("gemm: {what} reaches past 2^32 values")))
}

fn dim(what: &str, x: usize) -> VkResult<u32> {
    u32::try_from(x).map_err(|_| VkError::Limit(format!("gemm: {what} = {x} does not fit in 32 bits")))
}

/// Workgroups a split product aims for: about four per multiprocessor of a
/// 132-SM GPU, two waves at two resident workgroups each. A property of the
/// shape only, so that the summation order (and so every bit of the result)
/// is the same on every device.
pub const SPLIT_K_TARGET_GROUPS: usize = 512;
/// The shortest K range a slice gets.
pub const SPLIT_K_MIN_SLICE: usize = 256;

/// How a product's K is cut: `slices` ranges of `chunk` (a multiple of the
/// kernel's K-slice; the last may be shorter). `slices == 1`: not split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitK {
    pub slices: usize,
    pub chunk: usize,
}

/// The split of `s` on `path` when the scratch holds `max_scratch` values:
/// as many slices as bring the workgroups to about
/// [`SPLIT_K_TARGET_GROUPS`], each at least [`SPLIT_K_MIN_SLICE`] long, and no
/// more than the scratch holds (`slices·m·n` values). Products with enough
/// output tiles, short K, or on the 64×64 cooperative-matrix kernel are not
/// split. The output tiles and the chunk's alignment are the path's.
pub fn split_k_plan(path: GemmPath, s: &GemmShape, max_scratch: usize) -> SplitK {
    let whole = SplitK { slices: 1, chunk: s.k };
    let (tm, tn, tk) = path.tile();
    let tiles = s.m.div_ceil(tm) * s.n.div_ceil(tn);
    if !path.splits() || tiles == 0 {
        return whole;
    }
    let want = (SPLIT_K_TARGET_GROUPS / tiles).min(s.k / SPLIT_K_MIN_SLICE).min(max_scratch / (s.m * s.n));
    if want < 2 {
        return whole;
    }
    let chunk = s.k.div_ceil(want).next_multiple_of(tk);
    let slices = s.k.div_ceil(chunk);
    if slices < 2 { whole } else { SplitK { slices, chunk } }
}

/// Scratch values (f32) that `gemm_split` needs to split `s` as planned with
/// unbounded scratch (0 when it is not split). Never more than
/// `SPLIT_K_TARGET_GROUPS` times the path's output tile, whatever the shape.
pub fn split_k_scratch_len(path: GemmPath, s: &GemmShape) -> usize {
    let plan = split_k_plan(path, s, usize::MAX);
    if plan.slices > 1 { plan.slices * s.m * s.n } else { 0 }
}

/// Records `c (+)= op(a)·op(b)` into `seq` with the f32 tiled kernel.
pub fn gemm<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
) -> VkResult<()> {
    gemm_with(ctx, seq, GemmPath::TiledF32, s, a, b, c)
}

/// Records `c (+)= op(a)·op(b)` into `seq` with the kernel of `path`, in one
/// dispatch (never split).
pub fn gemm_with<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
) -> VkResult<()> {
    gemm_split(ctx, seq, path, s, a, b, c, None)
}

/// The dispatch label of a product, `gemm MxNxK[ ta][ tb][ acc]`.
fn label(s: &GemmShape) -> String {
    format!(
        "gemm {}x{}x{}{}{}{}",
        s.m,
        s.n,
        s.k,
        if s.ta { " ta" } else { "" },
        if s.tb { " tb" } else { "" },
        if s.accumulate { " acc" } else { "" }
    )
}

/// Records `c (+)= op(a)·op(b)` into `seq` with the kernel of `path`, split
/// along K where [`split_k_plan`] says so and `scratch` (read from its start)
/// has room: then the tiled kernel writes one partial product per K range
/// into `scratch` (`[slices, m, n]`), and `gemm_splitk_reduce` adds them in
/// slice order into `c` (adding the old `c` last with `accumulate`). No
/// atomics: the result depends only on the shape, not on scheduling.
///
/// Dispatch labels: `gemm MxNxK[ ta][ tb][ acc]` for the product (split or
/// not), and the same followed by ` splitk-reduce S` for the second pass.
#[allow(clippy::too_many_arguments)]
pub fn gemm_split<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
    scratch: Option<&'a Buffer>,
) -> VkResult<()> {
    if path.coopmat()
        && let Some(why) = coopmat_unavailable(ctx, path)
    {
        return Err(VkError::Unsupported(why));
    }
    let push = GemmPush {
        m: dim("m", s.m)?,
        n: dim("n", s.n)?,
        k: dim("k", s.k)?,
        lda: dim("lda", if s.ta { s.m } else { s.k })?,
        ldb: dim("ldb", if s.tb { s.k } else { s.n })?,
        ldc: dim("ldc", s.n)?,
        a_off: fits("A", &a, s.m * s.k)?,
        b_off: fits("B", &b, s.k * s.n)?,
        c_off: fits("C", &c, s.m * s.n)?,
        ta: s.ta as u32,
        tb: s.tb as u32,
        accumulate: s.accumulate as u32,
        k_chunk: dim("k", s.k)?,
        c_stride: 0,
        slices: 1,
        reserved: 0,
    };
    let kernel = ctx.kernel(path.spec())?;
    let label = label(s);
    let plan = match scratch {
        Some(buf) => split_k_plan(path, s, buf.len_f32()),
        None => SplitK { slices: 1, chunk: s.k },
    };
    let Some(scratch) = scratch.filter(|_| plan.slices > 1) else {
        return seq.dispatch(&kernel, &[a.buf, b.buf, c.buf], &push, [s.n as u64, s.m as u64, 1], &label);
    };
    let plane = s.m * s.n;
    fits("the split-K scratch", &MatRef::whole(scratch), plan.slices * plane)?;
    let partial = GemmPush {
        ldc: push.n,
        c_off: 0,
        accumulate: 0,
        k_chunk: dim("k_chunk", plan.chunk)?,
        c_stride: dim("m·n", plane)?,
        ..push
    };
    let work = [s.n as u64, s.m as u64, plan.slices as u64];
    seq.dispatch(&kernel, &[a.buf, b.buf, scratch], &partial, work, &label)?;
    let reduce = GemmPush { slices: plan.slices as u32, c_stride: partial.c_stride, ..push };
    let kernel = ctx.kernel(&GEMM_SPLITK_REDUCE)?;
    let items = plane.clamp(1, 65535 * 256) as u64;
    let label = format!("{label} splitk-reduce {}", plan.slices);
    seq.dispatch(&kernel, &[scratch, c.buf], &reduce, [items, 1, 1], &label)
}

/// Staging buffers holding `a` and `b`, and device buffers of their sizes:
/// `[a upload, b upload, a device, b device]`, named `{label}.a…`.
fn operands(ctx: &Context, label: &str, a: &[f32], b: &[f32]) -> VkResult<[Buffer; 4]> {
    Ok([
        Buffer::upload_f32(ctx, &format!("{label}.a.upload"), a)?,
        Buffer::upload_f32(ctx, &format!("{label}.b.upload"), b)?,
        Buffer::device_f32(ctx, &format!("{label}.a"), a.len())?,
        Buffer::device_f32(ctx, &format!("{label}.b"), b.len())?,
    ])
}

/// A scratch buffer for `s` split as [`split_k_plan`] wants (None if it is not split).
pub fn split_scratch(ctx: &Context, name: &str, path: GemmPath, s: &GemmShape) -> VkResult<Option<Buffer>> {
    match split_k_scratch_len(path, s) {
        0 => Ok(None),
        len => Buffer::device_f32(ctx, name, len).map(Some),
    }
}

/// Uploads `a` and `b`, computes `op(a)·op(b)` on the device (split along K
/// where the engine would split it), and reads the `m×n` result back, with the
/// device time of the product.
#[allow(clippy::too_many_arguments)]
pub fn gemm_host_timed(
    ctx: &Context,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
) -> VkResult<(Vec<f32>, Timings)> {
    if a.len() != m * k || b.len() != k * n {
        return Err(VkError::Invalid(format!(
            "gemm_host: a has {} values (want {}), b has {} (want {})",
            a.len(),
            m * k,
            b.len(),
            k * n
        )));
    }
    let [a_up, b_up, a_dev, b_dev] = operands(ctx, "gemm", a, b)?;
    let c_dev = Buffer::device_f32(ctx, "gemm.c", m * n)?;
    let c_back = Buffer::readback_f32(ctx, "gemm.c.readback", m * n)?;
    let shape = GemmShape { m, n, k, ta, tb, accumulate: false };
    let scratch = split_scratch(ctx, "gemm.splitk", GemmPath::TiledF32, &shape)?;
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        let (a, b, c) = (MatRef::whole(&a_dev), MatRef::whole(&b_dev), MatRef::whole(&c_dev));
        gemm_split(ctx, &mut seq, GemmPath::TiledF32, &shape, a, b, c, scratch.as_ref())?;
        seq.copy(&c_dev, 0, &c_back, 0, c_dev.bytes())?;
        seq.submit()?
    };
    let mut c = c_back.read_f32()?;
    c.truncate(m * n);
    Ok((c, timings))
}

/// `op(a)·op(b)` computed on the device: upload, run, read back.
#[allow(clippy::too_many_arguments)]
pub fn gemm_host(
    ctx: &Context,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
) -> VkResult<Vec<f32>> {
    gemm_host_timed(ctx, m, n, k, a, ta, b, tb).map(|r| r.0)
}

/// Device milliseconds of each of `reps` identical `m×n×k` products recorded
/// into one sequence (random inputs; the outputs are not read back). A split
/// product counts both of its passes.
pub fn gemm_throughput(ctx: &Context, path: GemmPath, s: &GemmShape, reps: usize) -> VkResult<Vec<f64>> {
    let mut rng = crate::rng::Rng::new(42);
    let a: Vec<f32> = (0..s.m * s.k).map(|_| rng.normal() as f32).collect();
    let b: Vec<f32> = (0..s.k * s.n).map(|_| rng.normal() as f32).collect();
    let [a_up, b_up, a_dev, b_dev] = operands(ctx, "gemm_bench", &a, &b)?;
    let c_dev = Buffer::device_f32(ctx, "gemm_bench.c", s.m * s.n)?;
    let scratch = split_scratch(ctx, "gemm_bench.splitk", path, s)?;
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        for _ in 0..reps {
            let (a, b, c) = (MatRef::whole(&a_dev), MatRef::whole(&b_dev), MatRef::whole(&c_dev));
            gemm_split(ctx, &mut seq, path, s, a, b, c, scratch.as_ref())?;
        }
        seq.submit()?
    };
    // One product is one dispatch, or two when it is split (product, reduce).
    let per = if split_k_scratch_len(path, s) > 0 { 2 } else { 1 };
    let ns: Option<Vec<f64>> = timings.dispatches.iter().map(|d| d.1).collect();
    let ms: Vec<f64> = ns.unwrap_or_default().chunks(per).map(|c| c.iter().sum::<f64>() / 1e6).collect();
    if ms.is_empty() {
        return Err(VkError::Invalid("the device reported no timestamps for the products".into()));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape { m, n, k, ta: true, tb: false, accumulate: false }
    }

    #[test]
    fn split_k_plans_cover_k_with_aligned_slices() {
        for m in [1, 7, 64, 128, 129, 256, 1536, 8192] {
            for n in [1, 3, 64, 65, 512] {
                for k in [0, 1, 255, 256, 511, 512, 513, 1000, 4100, 8160, 8192, 131072] {
                    let s = shape(m, n, k);
                    let p = split_k_plan(GemmPath::TiledF32, &s, usize::MAX);
                    if p.slices == 1 {
                        assert_eq!(p.chunk, k);
                        assert_eq!(split_k_scratch_len(GemmPath::TiledF32, &s), 0);
                        continue;
                    }
                    let tiles = m.div_ceil(GEMM_TILE_M) * n.div_ceil(GEMM_TILE_N);
                    assert!(p.chunk.is_multiple_of(GEMM_TILE_K), "{s:?} {p:?}");
                    // Every slice is non-empty and together they cover K.
                    assert!((p.slices - 1) * p.chunk < k && p.slices * p.chunk >= k, "{s:?} {p:?}");
                    assert!(p.chunk >= SPLIT_K_MIN_SLICE, "{s:?} {p:?}");
                    assert!(p.slices * tiles <= SPLIT_K_TARGET_GROUPS, "{s:?} {p:?}");
                    let scratch = split_k_scratch_len(GemmPath::TiledF32, &s);
                    assert_eq!(scratch, p.slices * m * n);
                    assert!(scratch <= SPLIT_K_TARGET_GROUPS * GEMM_TILE_M * GEMM_TILE_N);
                    // Less scratch: fewer slices, never more than it holds.
                    let q = split_k_plan(GemmPath::TiledF32, &s, scratch - 1);
                    assert!(q.slices < p.slices && (q.slices == 1 || q.slices * m * n < scratch), "{s:?} {q:?}");
                }
            }
        }
        assert_eq!(split_k_plan(GemmPath::CoopMatF16, &shape(256, 512, 8192), usize::MAX).slices, 1);
    }

    /// The mixed step's kernels split on their own tiles: the 128×128
    /// cooperative-matrix kernel's chunks are multiples of its K-slice of 32,
    /// and its long-K weight gradients get about as many workgroups as the
    /// f32 kernel's.
    #[test]
    fn split_k_plans_follow_the_path_tiles() {
        for (m, n, k) in [(256, 512, 8192), (1536, 512, 8160), (1536, 256, 8192), (37, 70, 1500)] {
            for path in [GemmPath::CoopMatF16Big, GemmPath::TiledF16] {
                let s = shape(m, n, k);
                let p = split_k_plan(path, &s, usize::MAX);
                let (tm, tn, tk) = path.tile();
                assert!(p.slices >= 2 && p.chunk.is_multiple_of(tk), "{path:?} {s:?} {p:?}");
                assert!((p.slices - 1) * p.chunk < k && p.slices * p.chunk >= k);
                let groups = p.slices * m.div_ceil(tm) * n.div_ceil(tn);
                assert!(groups <= SPLIT_K_TARGET_GROUPS, "{path:?} {s:?}: {groups}");
                assert!(m * n < 10_000 || groups >= 256, "{path:?} {s:?}: {groups} workgroups");
            }
        }
    }

    /// The bench configuration's weight gradients get enough workgroups.
    #[test]
    fn the_weight_gradients_of_bench_are_split() {
        for (m, n, k) in [(256, 512, 8192), (1536, 512, 8160), (1536, 512, 8192), (1536, 256, 8192), (256, 256, 8192)] {
            let p = split_k_plan(GemmPath::TiledF32, &shape(m, n, k), usize::MAX);
            let groups = p.slices * m.div_ceil(GEMM_TILE_M) * n.div_ceil(GEMM_TILE_N);
            assert!(groups >= 256, "{m}x{n}x{k}: {p:?}, {groups} workgroups");
        }
        // A product with enough tiles is left whole.
        assert_eq!(split_k_plan(GemmPath::TiledF32, &shape(8192, 1536, 512), usize::MAX).slices, 1);
    }
}

//! Operations on device buffers, and host-side conveniences around them.

use super::buffer::Buffer;
use super::context::Context;
use super::error::{VkError, VkResult};
use super::kernel::{Access, KernelSpec, PushConstants};
use super::recorder::{Sequence, Timings};
use super::shaders;

/// The push-constant block of `shaders/gemm_f32.comp` (12 × u32).
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
}
const _: () = assert!(std::mem::size_of::<GemmPush>() == 48);
// SAFETY: `repr(C)`, twelve `u32` fields, no padding; matches the shader's block.
unsafe impl PushConstants for GemmPush {}

/// 64×64 output tile per 16×16 workgroup, A and B slices of 16×(64+1) floats in shared memory.
pub static GEMM_F32: KernelSpec = KernelSpec {
    name: "gemm_f32",
    spirv: shaders::GEMM_F32,
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 48,
    local_size: [16, 16, 1],
    items_per_group: [64, 64, 1],
    shared_bytes: 2 * 16 * 65 * 4,
};

/// The tiled kernel with every staged input rounded to f16 (f32 accumulation):
/// the f16 precision on devices without cooperative matrices.
pub static GEMM_F16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_f16in_tiled", spirv: shaders::GEMM_F16IN_TILED, ..GEMM_F32 };

/// The tiled kernel with every staged input rounded to bfloat16.
pub static GEMM_BF16IN_TILED: KernelSpec =
    KernelSpec { name: "gemm_bf16in_tiled", spirv: shaders::GEMM_BF16IN_TILED, ..GEMM_F32 };

/// 64×64 output tile per workgroup of 4 subgroups of 32; A and B staged as f16
/// (64×40 and 32×72 halves), C through a 64×64 f32 block.
pub static GEMM_F16_COOPMAT: KernelSpec = KernelSpec {
    name: "gemm_f16_coopmat",
    spirv: match shaders::GEMM_F16_COOPMAT {
        Some(s) => s,
        None => &[],
    },
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    push_size: 48,
    local_size: [128, 1, 1],
    items_per_group: [64, 64, 1],
    shared_bytes: 64 * 40 * 2 + 32 * 72 * 2 + 64 * 64 * 4,
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
    /// The tiled kernel with its inputs rounded to f16.
    TiledF16In,
    /// The tiled kernel with its inputs rounded to bfloat16.
    TiledBf16In,
    /// `VK_KHR_cooperative_matrix` 16×16×16, f16 inputs, f32 accumulation.
    CoopMatF16,
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
            GemmPath::CoopMatF16 => &GEMM_F16_COOPMAT,
            GemmPath::FaultNoBounds => &GEMM_F32_FAULT_NO_BOUNDS,
            GemmPath::FaultF16Accum => &GEMM_F32_FAULT_F16_ACCUM,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GemmPath::TiledF32 => "tiled f32",
            GemmPath::TiledF16In => "tiled f16-in",
            GemmPath::TiledBf16In => "tiled bf16-in",
            GemmPath::CoopMatF16 => "coopmat f16",
            GemmPath::FaultNoBounds => "tiled f32, fault: no bounds check",
            GemmPath::FaultF16Accum => "tiled f32, fault: f16 accumulation",
        }
    }
}

/// What the user asked for; `DUALSCOPE_GEMM_PATH` or `--gemm-path`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmChoice {
    /// Cooperative matrices where the device has them (f16 precision only).
    Auto,
    Tiled,
    CoopMat,
}

impl GemmChoice {
    pub fn parse(s: &str) -> VkResult<GemmChoice> {
        match s {
            "auto" => Ok(GemmChoice::Auto),
            "tiled" => Ok(GemmChoice::Tiled),
            "coopmat" => Ok(GemmChoice::CoopMat),
            other => Err(VkError::Invalid(format!("gemm path {other:?}: expected auto, tiled or coopmat"))),
        }
    }

    /// `DUALSCOPE_GEMM_PATH`, default `auto`.
    pub fn from_env() -> VkResult<GemmChoice> {
        std::env::var("DUALSCOPE_GEMM_PATH").map_or(Ok(GemmChoice::Auto), |s| GemmChoice::parse(&s))
    }
}

/// Why the cooperative-matrix kernel cannot run here, if it cannot.
pub fn coopmat_f16_unavailable(ctx: &Context) -> Option<String> {
    let r = ctx.report();
    if let Some(why) = &r.coopmat_off {
        Some(format!("cooperative matrices on {}: {why}", r.name))
    } else if shaders::GEMM_F16_COOPMAT.is_none() {
        Some(
            "this build has no cooperative-matrix shader (glslang 13 was missing at build time: run scripts/setup.sh)"
                .into(),
        )
    } else if !r.features.coopmat_f16_16x16x16 {
        Some(format!("{} offers no subgroup 16×16×16 f16×f16→f32 cooperative matrix", r.name))
    } else if r.subgroup_size != 32 {
        Some(format!("the kernel needs subgroup size 32; {} has {}", r.name, r.subgroup_size))
    } else {
        None
    }
}

/// The kernel for products in f16 (`f16`) or f32 precision under `choice`.
pub fn pick_path(ctx: &Context, f16: bool, choice: GemmChoice) -> VkResult<GemmPath> {
    match (f16, choice) {
        (false, GemmChoice::CoopMat) => {
            Err(VkError::Invalid("the cooperative-matrix path takes f16 inputs: use precision f16".into()))
        }
        (false, _) => Ok(GemmPath::TiledF32),
        (true, GemmChoice::Tiled) => Ok(GemmPath::TiledF16In),
        (true, GemmChoice::Auto) => {
            Ok(if coopmat_f16_unavailable(ctx).is_none() { GemmPath::CoopMatF16 } else { GemmPath::TiledF16In })
        }
        (true, GemmChoice::CoopMat) => match coopmat_f16_unavailable(ctx) {
            None => Ok(GemmPath::CoopMatF16),
            Some(why) => Err(VkError::Unsupported(why)),
        },
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

/// Records `c (+)= op(a)·op(b)` into `seq` with the kernel of `path`.
pub fn gemm_with<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
) -> VkResult<()> {
    if path == GemmPath::CoopMatF16
        && let Some(why) = coopmat_f16_unavailable(ctx)
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
    };
    let kernel = ctx.kernel(path.spec())?;
    let label = format!(
        "gemm {}x{}x{}{}{}{}",
        s.m,
        s.n,
        s.k,
        if s.ta { " ta" } else { "" },
        if s.tb { " tb" } else { "" },
        if s.accumulate { " acc" } else { "" }
    );
    seq.dispatch(&kernel, &[a.buf, b.buf, c.buf], &push, [s.n as u64, s.m as u64, 1], &label)
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

/// Uploads `a` and `b`, computes `op(a)·op(b)` on the device, and reads the
/// `m×n` result back, with the device time of the product.
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
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        let shape = GemmShape { m, n, k, ta, tb, accumulate: false };
        gemm(ctx, &mut seq, &shape, MatRef::whole(&a_dev), MatRef::whole(&b_dev), MatRef::whole(&c_dev))?;
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
/// into one sequence (random inputs; the outputs are not read back).
pub fn gemm_throughput(ctx: &Context, path: GemmPath, s: &GemmShape, reps: usize) -> VkResult<Vec<f64>> {
    let mut rng = crate::rng::Rng::new(42);
    let a: Vec<f32> = (0..s.m * s.k).map(|_| rng.normal() as f32).collect();
    let b: Vec<f32> = (0..s.k * s.n).map(|_| rng.normal() as f32).collect();
    let [a_up, b_up, a_dev, b_dev] = operands(ctx, "gemm_bench", &a, &b)?;
    let c_dev = Buffer::device_f32(ctx, "gemm_bench.c", s.m * s.n)?;
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        for _ in 0..reps {
            gemm_with(ctx, &mut seq, path, s, MatRef::whole(&a_dev), MatRef::whole(&b_dev), MatRef::whole(&c_dev))?;
        }
        seq.submit()?
    };
    let ms: Vec<f64> =
        timings.dispatches.iter().filter_map(|(l, ns)| ns.filter(|_| l.starts_with("gemm")).map(|x| x / 1e6)).collect();
    if ms.is_empty() {
        return Err(VkError::Invalid("the device reported no timestamps for the products".into()));
    }
    Ok(ms)
}

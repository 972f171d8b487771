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

/// Records `c (+)= op(a)·op(b)` into `seq`.
pub fn gemm<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
) -> VkResult<()> {
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
    let kernel = ctx.kernel(&GEMM_F32)?;
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
    let a_up = Buffer::upload_f32(ctx, "gemm.a.upload", a)?;
    let b_up = Buffer::upload_f32(ctx, "gemm.b.upload", b)?;
    let a_dev = Buffer::device_f32(ctx, "gemm.a", a.len())?;
    let b_dev = Buffer::device_f32(ctx, "gemm.b", b.len())?;
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
pub fn gemm_throughput(ctx: &Context, s: &GemmShape, reps: usize) -> VkResult<Vec<f64>> {
    let mut rng = crate::rng::Rng::new(42);
    let a: Vec<f32> = (0..s.m * s.k).map(|_| rng.normal() as f32).collect();
    let b: Vec<f32> = (0..s.k * s.n).map(|_| rng.normal() as f32).collect();
    let a_up = Buffer::upload_f32(ctx, "gemm_bench.a.upload", &a)?;
    let b_up = Buffer::upload_f32(ctx, "gemm_bench.b.upload", &b)?;
    let a_dev = Buffer::device_f32(ctx, "gemm_bench.a", a.len())?;
    let b_dev = Buffer::device_f32(ctx, "gemm_bench.b", b.len())?;
    let c_dev = Buffer::device_f32(ctx, "gemm_bench.c", s.m * s.n)?;
    let timings = {
        let mut seq = Sequence::new(ctx)?;
        seq.copy(&a_up, 0, &a_dev, 0, a_dev.bytes())?;
        seq.copy(&b_up, 0, &b_dev, 0, b_dev.bytes())?;
        for _ in 0..reps {
            gemm(ctx, &mut seq, s, MatRef::whole(&a_dev), MatRef::whole(&b_dev), MatRef::whole(&c_dev))?;
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

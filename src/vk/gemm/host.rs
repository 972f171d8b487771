//! Host-side conveniences: a product from host slices (upload, run, read
//! back), and the throughput benchmark of one shape.

use crate::vk::buffer::Buffer;
use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult};
use crate::vk::recorder::{Sequence, Timings};

use super::path::GemmPath;
use super::record::gemm_split;
use super::split::{GemmShape, MatRef, split_k_scratch_len};

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

/// A scratch buffer for `s` split as [`super::split_k_plan`] wants (None if it is not split).
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
    let ns: Option<Vec<f64>> = timings.dispatches.iter().map(|d| d.ns).collect();
    let ms: Vec<f64> = ns.unwrap_or_default().chunks(per).map(|c| c.iter().sum::<f64>() / 1e6).collect();
    if ms.is_empty() {
        return Err(VkError::Invalid("the device reported no timestamps for the products".into()));
    }
    Ok(ms)
}

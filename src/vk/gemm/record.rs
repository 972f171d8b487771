//! Recording products into a sequence: one dispatch, or the split-K pair
//! (partial products, then their sum in slice order).

use crate::vk::buffer::Buffer;
use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult};
use crate::vk::recorder::Sequence;

use super::path::{GemmPath, coopmat_unavailable};
use super::specs::{GEMM_SPLITK_REDUCE, GemmPush};
use super::split::{GemmShape, MatRef, SplitK, dim, fits, split_k_plan};

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
    // The 64×64 cooperative-matrix kernel cannot split K, so its K loop is
    // bounded by refusing longer products (no driver's loop limit is relied on).
    if !path.splits() && s.k > super::split::SPLIT_K_MAX_CHUNK {
        return Err(VkError::Limit(format!(
            "{}: a product with K = {} is past the {} this kernel takes in one loop (it does not split K); \
             use another --gemm-path",
            path.name(),
            s.k,
            super::split::SPLIT_K_MAX_CHUNK
        )));
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

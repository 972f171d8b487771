//! Recording products into a sequence: one dispatch, or the split-K pair
//! (partial products, then their sum in slice order).

use crate::vk::buffer::Buffer;
use crate::vk::context::Context;
use crate::vk::error::{VkError, VkResult};
use crate::vk::recorder::{Bind, Sequence};

use super::path::{GemmPath, coopmat_unavailable};
use super::specs::{GEMM_SPLITK_REDUCE, GemmPush};
use super::split::{GemmShape, MatRef, SplitK, dim, part, split_k_plan};

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
    let reduce = gemm_split_later(ctx, seq, path, s, a, b, c, scratch.map(MatRef::whole))?;
    flush(seq, reduce)
}

/// Work recorded later into the same sequence: the second pass of a split
/// product (or of a column sum), kept back so that the first passes of
/// independent products can be recorded together, with no barrier between
/// them, before any of their second passes.
pub type Later<'a> = Box<dyn FnOnce(&mut Sequence<'a>) -> VkResult<()> + 'a>;

/// Records the work held back (a product's sum, a list of them), in order.
pub fn flush<'a>(seq: &mut Sequence<'a>, later: impl IntoIterator<Item = Later<'a>>) -> VkResult<()> {
    later.into_iter().try_for_each(|rest| rest(seq))
}

/// [`gemm_split`] with the split-K partials from `scratch`'s offset on and
/// their sum returned, to be recorded by the caller after other work
/// (`None`: the product was one dispatch, all done). Each operand is bound as
/// the part of its buffer that holds it ([`part`]), so products that write
/// disjoint parts of one buffer (the weight gradients) and partials in
/// disjoint parts of the scratch need no barrier between them.
#[allow(clippy::too_many_arguments)]
pub fn gemm_split_later<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
    scratch: Option<MatRef<'a>>,
) -> VkResult<Option<Later<'a>>> {
    let (binds, push) = product(ctx, path, s, a, b, c, None)?;
    let [a_bind, b_bind, c_bind] = binds;
    let kernel = ctx.kernel(path.spec())?;
    let label = label(s);
    let plan = match &scratch {
        Some(m) => split_k_plan(path, s, m.buf.len_f32().saturating_sub(m.offset)),
        None => SplitK { slices: 1, chunk: s.k },
    };
    let Some(scratch) = scratch.filter(|_| plan.slices > 1) else {
        seq.dispatch_bound(&kernel, &[a_bind, b_bind, c_bind], &push, [s.n as u64, s.m as u64, 1], &label)?;
        return Ok(None);
    };
    let plane = s.m * s.n;
    let (s_bind, s_off) = part(ctx, "the split-K scratch", &scratch, plan.slices * plane)?;
    let partial = GemmPush {
        ldc: push.n,
        c_off: s_off,
        accumulate: 0,
        k_chunk: dim("k_chunk", plan.chunk)?,
        c_stride: dim("m·n", plane)?,
        ..push
    };
    let work = [s.n as u64, s.m as u64, plan.slices as u64];
    seq.dispatch_bound(&kernel, &[a_bind, b_bind, s_bind], &partial, work, &label)?;
    let reduce = GemmPush { slices: plan.slices as u32, c_stride: partial.c_stride, a_off: s_off, ..push };
    let kernel = ctx.kernel(&GEMM_SPLITK_REDUCE)?;
    let items = plane.clamp(1, 65535 * 256) as u64;
    let label = format!("{label} splitk-reduce {}", plan.slices);
    Ok(Some(Box::new(move |seq: &mut Sequence<'a>| {
        seq.dispatch_bound(&kernel, &[s_bind, c_bind], &reduce, [items, 1, 1], &label)
    })))
}

/// Records `c (+)= op(a)·op(b) + 1·biasᵀ` in one dispatch, never split: the
/// row vector of `s.n` values at `bias` (an offset in `b`'s buffer) is added
/// to every row of the product by the kernel as it stores it, the same f32
/// addition that a pass of its own over `c` would make (the GRU's input bias:
/// a read and a write of `gi` fewer). Dispatch label as [`gemm_split`]'s with
/// ` bias`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_bias<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    bias: usize,
    c: MatRef<'a>,
) -> VkResult<()> {
    let (binds, push) = product(ctx, path, s, a, b, c, Some(bias))?;
    let kernel = ctx.kernel(path.spec())?;
    let label = format!("{} bias", label(s));
    seq.dispatch_bound(&kernel, &binds, &push, [s.n as u64, s.m as u64, 1], &label)
}

/// A product's checks, bindings and push constants, unsplit: B's binding
/// reaches to the end of the bias where there is one.
#[allow(clippy::too_many_arguments)]
fn product<'a>(
    ctx: &Context,
    path: GemmPath,
    s: &GemmShape,
    a: MatRef<'a>,
    b: MatRef<'a>,
    c: MatRef<'a>,
    bias: Option<usize>,
) -> VkResult<([Bind<'a>; 3], GemmPush)> {
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
    // B's binding covers the bias too, where it lies after B in the buffer.
    let b_len = match bias {
        Some(o) if o >= b.offset => (s.k * s.n).max(o - b.offset + s.n),
        Some(_) => {
            return Err(VkError::Invalid("gemm: a bias must lie after B in its buffer".into()));
        }
        None => s.k * s.n,
    };
    let (a_bind, a_off) = part(ctx, "A", &a, s.m * s.k)?;
    let (b_bind, b_off) = part(ctx, "B", &b, b_len)?;
    let (c_bind, c_off) = part(ctx, "C", &c, s.m * s.n)?;
    let bias = match bias {
        Some(o) => dim("the bias's offset", b_off as usize + (o - b.offset) + 1)?,
        None => 0,
    };
    let push = GemmPush {
        m: dim("m", s.m)?,
        n: dim("n", s.n)?,
        k: dim("k", s.k)?,
        lda: dim("lda", if s.ta { s.m } else { s.k })?,
        ldb: dim("ldb", if s.tb { s.k } else { s.n })?,
        ldc: dim("ldc", s.n)?,
        a_off,
        b_off,
        c_off,
        ta: s.ta as u32,
        tb: s.tb as u32,
        accumulate: s.accumulate as u32,
        k_chunk: dim("k", s.k)?,
        c_stride: 0,
        slices: 1,
        bias,
    };
    Ok(([a_bind, b_bind, c_bind], push))
}

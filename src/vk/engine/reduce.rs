//! Column sums (the bias gradients) as a deterministic parallel reduction.
//!
//! `out[j] = Σ_r x[r·d + j]` over `rows` rows. The rows are cut into chunks of
//! [`col_sum_chunks`] rows; `col_sum.comp` sums each (chunk, block of 32
//! columns) in one workgroup, whose 8 lanes each walk every 8th row of the
//! chunk in order and are then added in lane order; `col_sum_final.comp` adds
//! the chunks' sums in chunk order. With a single chunk the first pass writes
//! the result directly. The rows may lie further apart than `d` (a column
//! block), and the first sums may be written twice (two bias gradients that
//! are equal by the model, `Engine::record_gru_bwd`). Every addition happens
//! in an order fixed by `rows` and `d` alone, so the result is the same bit
//! for bit on every run.

use super::kernels::{COL_SUM, COL_SUM_FINAL, ModelPush};
use crate::vk::gemm::{Later, MatRef, flush, part};
use crate::vk::{Bind, Context, Sequence, VkError, VkResult};

/// Chunks a column sum is cut into at most (the second pass walks them all).
pub const COL_SUM_MAX_CHUNKS: usize = 256;
/// The fewest rows a chunk takes.
pub const COL_SUM_MIN_CHUNK: usize = 256;

/// Rows per chunk and the number of chunks for a column sum over `rows` rows.
/// A lane of the first pass walks `rows per chunk / 8` rows: at most 8192 for
/// any `rows < 2^24`, far from lavapipe's 65535-iteration loop guard.
pub fn col_sum_chunks(rows: usize) -> (usize, usize) {
    let per = rows.div_ceil(COL_SUM_MAX_CHUNKS).max(COL_SUM_MIN_CHUNK).next_multiple_of(32);
    (per, rows.div_ceil(per).max(1))
}

/// Scratch values a column sum of `rows × d` needs (0 with a single chunk).
pub fn col_sum_scratch_len(rows: usize, d: usize) -> usize {
    match col_sum_chunks(rows) {
        (_, 1) => 0,
        (_, chunks) => chunks * d,
    }
}

fn u32_of(x: usize, what: &str) -> VkResult<u32> {
    u32::try_from(x).map_err(|_| VkError::Limit(format!("col_sum: {what} = {x} does not fit in 32 bits")))
}

/// Records `out[j] = Σ_r x[r·d + j]` (`x` is `[rows, d]` row-major from its
/// offset, `out` takes `d` values from its offset); `scratch` holds the
/// chunks' sums (from its offset, [`col_sum_scratch_len`] values; unused with
/// one chunk). Each is bound as the part that holds it, so sums into
/// disjoint parts of one buffer need no barrier between them. Dispatch
/// labels: `label`, and `label (chunks)` for the second pass.
#[allow(clippy::too_many_arguments)]
pub fn record_col_sum<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    x: MatRef<'a>,
    rows: usize,
    d: usize,
    out: MatRef<'a>,
    scratch: MatRef<'a>,
    label: &str,
) -> VkResult<()> {
    let rest = record_col_sum_later(ctx, seq, x, ColSum::dense(rows, d), out, scratch, label)?;
    flush(seq, rest)
}

/// The shape of a column sum: `rows` rows of `d` columns, `stride` values
/// apart (a column block of a wider matrix), and the first `dup` of the `d`
/// sums written twice, at `out[j]` and at `out[d + j]` (`dup <= d`).
#[derive(Clone, Copy, Debug)]
pub struct ColSum {
    pub rows: usize,
    pub d: usize,
    pub stride: usize,
    pub dup: usize,
}

impl ColSum {
    /// `rows × d`, row-major and packed, each sum written once.
    pub fn dense(rows: usize, d: usize) -> Self {
        ColSum { rows, d, stride: d, dup: 0 }
    }
}

/// [`record_col_sum`] with its second pass (where it has one) returned, to
/// be recorded by the caller after other work.
#[allow(clippy::too_many_arguments)]
pub fn record_col_sum_later<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    x: MatRef<'a>,
    shape: ColSum,
    out: MatRef<'a>,
    scratch: MatRef<'a>,
    label: &str,
) -> VkResult<Option<Later<'a>>> {
    let ColSum { rows, d, stride, dup } = shape;
    if stride < d || dup > d {
        return Err(VkError::Invalid(format!("col_sum: {d} columns {stride} apart, {dup} written twice")));
    }
    let need = |what: &str, m: &MatRef<'a>, len: usize| -> VkResult<(Bind<'a>, u32)> {
        if m.offset + len > m.buf.len_f32() {
            return Err(VkError::Invalid(format!(
                "col_sum: {what} needs {len} values at offset {}, buffer {:?} holds {}",
                m.offset,
                m.buf.name(),
                m.buf.len_f32()
            )));
        }
        u32_of(m.offset + len, what)?;
        part(ctx, what, m, len)
    };
    if d == 0 {
        return Ok(None);
    }
    let (per, chunks) = col_sum_chunks(rows);
    let (x_bind, x_off) = need("x", &x, rows.saturating_sub(1) * stride + d)?;
    let (out_bind, out_off) = need("out", &out, if dup > 0 { d + dup } else { d })?;
    let push = ModelPush {
        n: u32_of(rows, "rows")?,
        d: u32_of(d, "columns")?,
        h: u32_of(stride, "row stride")?,
        off0: x_off,
        off1: out_off,
        off2: u32_of(dup, "columns written twice")?,
        t: u32_of(per, "rows per chunk")?,
        flag: chunks as u32,
        ..Default::default()
    };
    let first = ctx.kernel(&COL_SUM)?;
    if chunks == 1 {
        seq.dispatch_bound(&first, &[x_bind, out_bind], &push, [d as u64, 1, 1], label)?;
        return Ok(None);
    }
    let (s_bind, s_off) = need("scratch", &scratch, chunks * d)?;
    let partial = ModelPush { off1: s_off, off2: 0, ..push };
    seq.dispatch_bound(&first, &[x_bind, s_bind], &partial, [d as u64, chunks as u64, 1], label)?;
    let last = ctx.kernel(&COL_SUM_FINAL)?;
    let fin = ModelPush { off0: s_off, ..push };
    let label = format!("{label} (chunks)");
    Ok(Some(Box::new(move |seq: &mut Sequence<'a>| {
        seq.dispatch_bound(&last, &[s_bind, out_bind], &fin, [d as u64, 1, 1], &label)
    })))
}

//! Column sums (the bias gradients) as a deterministic parallel reduction.
//!
//! `out[j] = Σ_r x[r·d + j]` over `rows` rows. The rows are cut into chunks of
//! [`col_sum_chunks`] rows; `col_sum.comp` sums each (chunk, block of 32
//! columns) in one workgroup, whose 8 lanes each walk every 8th row of the
//! chunk in order and are then added in lane order; `col_sum_final.comp` adds
//! the chunks' sums in chunk order. With a single chunk the first pass writes
//! the result directly. Every addition happens in an order fixed by `rows` and
//! `d` alone, so the result is the same bit for bit on every run.

use super::kernels::{COL_SUM, COL_SUM_FINAL, ModelPush};
use crate::vk::gemm::MatRef;
use crate::vk::{Buffer, Context, Sequence, VkError, VkResult};

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
/// chunks' sums (from its start, [`col_sum_scratch_len`] values; unused with
/// one chunk). Dispatch labels: `label`, and `label (chunks)` for the second pass.
#[allow(clippy::too_many_arguments)]
pub fn record_col_sum<'a>(
    ctx: &Context,
    seq: &mut Sequence<'a>,
    x: MatRef<'a>,
    rows: usize,
    d: usize,
    out: MatRef<'a>,
    scratch: &'a Buffer,
    label: &str,
) -> VkResult<()> {
    let need = |what: &str, m: &MatRef<'_>, len: usize| -> VkResult<u32> {
        if m.offset + len > m.buf.len_f32() {
            return Err(VkError::Invalid(format!(
                "col_sum: {what} needs {len} values at offset {}, buffer {:?} holds {}",
                m.offset,
                m.buf.name(),
                m.buf.len_f32()
            )));
        }
        u32_of(m.offset + len, what).map(|_| m.offset as u32)
    };
    let (per, chunks) = col_sum_chunks(rows);
    let push = ModelPush {
        n: u32_of(rows, "rows")?,
        d: u32_of(d, "columns")?,
        off0: need("x", &x, rows * d)?,
        off1: need("out", &out, d)?,
        t: u32_of(per, "rows per chunk")?,
        flag: chunks as u32,
        ..Default::default()
    };
    if d == 0 {
        return Ok(());
    }
    let first = ctx.kernel(&COL_SUM)?;
    if chunks == 1 {
        return seq.dispatch(&first, &[x.buf, out.buf], &push, [d as u64, 1, 1], label);
    }
    need("scratch", &MatRef::whole(scratch), chunks * d)?;
    let partial = ModelPush { off1: 0, ..push };
    seq.dispatch(&first, &[x.buf, scratch], &partial, [d as u64, chunks as u64, 1], label)?;
    let last = ctx.kernel(&COL_SUM_FINAL)?;
    seq.dispatch(&last, &[scratch, out.buf], &push, [d as u64, 1, 1], &format!("{label} (chunks)"))
}

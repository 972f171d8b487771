//! The device buffers of one batch shape: the step's inputs (host-visible),
//! every forward and backward intermediate (device-local, the layouts of the
//! CPU trace), and the scratch of the reductions.

use crate::dataset::Batch;
use crate::model::Config;
use crate::vk::gemm::{GemmPath, GemmShape, split_k_scratch_len};
use crate::vk::{Buffer, Context, MemoryKind, VkError, VkResult};

use super::kernels::{GRID_CM_TILE, GRID_FLAG_WORDS, SUMSQ_CHUNK, WAVE_WIDE_MAX_GROUPS};
use super::reduce::col_sum_scratch_len;

/// One GRU layer's buffers, each `[T, B, ·]`.
pub struct LayerBufs {
    pub gi: Buffer,
    pub gh: Buffer,
    /// r, z, n one after the other: `[3][T, B, H]`.
    pub gates: Buffer,
    pub h: Buffer,
    /// Gradient arriving at h from above (not the recurrent path).
    pub d_h: Buffer,
    /// The whole gradient at h_t, recurrent path included.
    pub dh_tot: Buffer,
    pub d_gi: Buffer,
    pub d_gh: Buffer,
    /// f16 copies of `h` and `d_gh` with [`GRID_CM_TILE`] rows of padding,
    /// for the recurrent products on cooperative matrices (only where the
    /// engine can run them: `Engine::recurrence_on_coopmat`).
    pub h16: Option<Buffer>,
    pub d_gh16: Option<Buffer>,
    /// f16 copy of `d_gi` (the backward wavefront reads layer 1's).
    pub d_gi16: Option<Buffer>,
}

pub struct Workspace {
    pub t: usize,
    pub b: usize,
    /// T·B.
    pub rows: usize,
    /// Σ mask of the batch last written.
    pub n_targets: usize,
    pub tokens: Buffer,
    /// The R targets (u32), then N and 1/N (f32) for the loss kernel.
    pub targets: Buffer,
    pub mask: Buffer,
    /// V+1 starts, then the positions grouped by input token, then V+1
    /// first chunks of `EMB_CHUNK` positions (embedding gradient).
    pub csr: Buffer,
    /// The embedding gradient's chunk sums, [chunks, d_embed].
    pub emb_part: Buffer,
    pub emb: Buffer,
    pub layers: Vec<LayerBufs>,
    /// q, k and v side by side, `[T, B, 3A]`: one product computes them
    /// (`Engine::record_attn_fwd`).
    pub qkv: Buffer,
    pub attn: Buffer,
    pub c: Buffer,
    pub logits: Buffer,
    pub token_loss: Buffer,
    pub dlogits: Buffer,
    /// dlogits with the per-token guard applied (only with the guard on).
    pub dl_ctx: Buffer,
    pub token_norm: Buffer,
    pub d_s_head: Buffer,
    pub d_c: Buffer,
    pub ds: Buffer,
    /// Their gradients, `[T, B, 3A]` likewise.
    pub d_qkv: Buffer,
    pub d_s_ctx: Buffer,
    pub d_emb: Buffer,
    pub partials: Buffer,
    /// Scratch: a layer's W_hh transposed, `[H, 3H]`.
    pub wt: Buffer,
    /// The grid recurrence's barrier flags, one 128-byte line per workgroup.
    pub sync: Buffer,
    /// Scratch of the split-K products' partial sums and of the column sums'
    /// chunk sums: [`SCRATCH_REGIONS`] regions of `scratch_region` values
    /// ([`scratch_len`] rounded up), used in turn, so that consecutive
    /// products that need one can run at the same time.
    pub scratch: Buffer,
    pub scratch_region: usize,
    /// A carried state (docs/carry-state.md): each layer's `h_{-1}`, `[B, H]`,
    /// and the top layer's prefix states, `[W−1, B, H]` (both written by the
    /// host), the prefix's keys and values and their gradients, `[W−1, B, A]`.
    pub carry_h0: Vec<Buffer>,
    pub s_pre: Buffer,
    pub k_pre: Buffer,
    pub v_pre: Buffer,
    pub dk_pre: Buffer,
    pub dv_pre: Buffer,
}

/// `(m, n, k)` of every matrix product `Engine::record_stage` records for
/// `rows` positions of `b` rows. It sizes the split-K scratch; `Engine::mm`
/// checks (in debug builds) that each product it records is covered.
pub fn step_products(cfg: &Config, rows: usize, b: usize) -> Vec<(usize, usize, usize)> {
    let (h, a, v, g) = (cfg.hidden, cfg.attn_dim, cfg.vocab, 3 * cfg.hidden);
    let mut p = vec![
        (rows, 3 * a, h), // q, k, v
        (rows, v, h),     // logits from s
        (rows, v, a),     // logits += from c
        (v, h, rows),     // dW_tok
        (v, a, rows),     // dW_ctx
        (rows, h, v),     // d_s from the head
        (rows, a, v),     // d_c
        (3 * a, h, rows), // dW_q, dW_k, dW_v
        (rows, h, 3 * a), // d_s from the context stream
    ];
    // A carried state's products: the prefix's keys and values, their
    // weight gradients, and dW_hh's t = 0 term.
    let pb = cfg.window.saturating_sub(1).max(1) * b;
    p.extend([(pb, a, h), (a, h, pb), (g, h, b)]);
    for l in 0..cfg.layers {
        let n_in = cfg.gru_in(l);
        p.extend([
            (rows, g, n_in),                // input projection
            (g, n_in, rows),                // dW_ih
            (g, h, rows.saturating_sub(b)), // dW_hh (h at t-1)
            (rows, n_in, g),                // d_in
        ]);
    }
    p
}

/// Values the workspace's `scratch` holds for the f32 step: the largest
/// split-K scratch of the step's products and of its column sums (at least 1).
pub fn scratch_len(cfg: &Config, rows: usize, b: usize) -> usize {
    scratch_len_for(cfg, rows, b, GemmPath::TiledF32)
}

/// [`scratch_len`] for the products computed on `path` (its tiles set the
/// split), and at least the f32 kernel's (the planted GEMM bugs run on it).
pub fn scratch_len_for(cfg: &Config, rows: usize, b: usize, path: GemmPath) -> usize {
    let shape = |(m, n, k)| GemmShape { m, n, k, ta: false, tb: false, accumulate: false };
    let gemm = step_products(cfg, rows, b)
        .into_iter()
        .flat_map(|p| [path, GemmPath::TiledF32].map(|path| split_k_scratch_len(path, &shape(p))))
        .max()
        .unwrap_or(0);
    let sums = col_sum_scratch_len(rows, cfg.vocab).max(col_sum_scratch_len(rows, 3 * cfg.hidden));
    gemm.max(sums).max(1)
}

/// Regions of the workspace's scratch: the products and column sums that
/// need scratch take them in turn (`Engine::scratch_for`), so up to this many
/// in a row touch disjoint memory and need no barrier between them.
pub const SCRATCH_REGIONS: usize = 4;

/// Values per scratch region holding `len`: whole 256-byte blocks, so that
/// every region starts on any device's storage-buffer offset alignment.
pub fn scratch_region(len: usize) -> usize {
    len.next_multiple_of(64)
}

/// Positions per chunk of the embedding gradient's position lists
/// (`EMB_CHUNK` in embed_bwd.comp).
pub const EMB_CHUNK: usize = 128;

/// Chunks of the embedding gradient's position lists at most: every token
/// value's list rounds up to whole chunks.
pub fn emb_chunks_max(rows: usize, vocab: usize) -> usize {
    rows.div_ceil(EMB_CHUNK) + vocab
}

/// Bytes of device memory a workspace of `rows` positions takes.
pub fn workspace_bytes(cfg: &Config, rows: usize) -> u64 {
    let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
    let per_row = d
        + cfg.layers * (3 * h * 5 + h * 3)
        + 3 * a
        + 2 * cfg.heads * cfg.window
        + a
        + 3 * v
        + 2
        + h
        + a
        + 3 * a
        + h
        + d;
    let emb = emb_chunks_max(rows, v) * d + 2 * (v + 1);
    (rows as u64 * per_row as u64
        + 4 * rows as u64
        + emb as u64
        + (SCRATCH_REGIONS * scratch_region(scratch_len(cfg, rows, 0))) as u64)
        * 4
}

impl Workspace {
    /// Every buffer a step writes before it reads it: all but the batch's
    /// inputs (tokens, targets, mask, position lists) and the grid barriers'
    /// flags. `--poison` fills these with NaN before a step.
    pub fn written_by_step(&self) -> Vec<&Buffer> {
        let mut v = vec![&self.emb_part, &self.emb];
        for lb in &self.layers {
            v.extend([&lb.gi, &lb.gh, &lb.gates, &lb.h, &lb.d_h, &lb.dh_tot, &lb.d_gi, &lb.d_gh]);
            v.extend([&lb.h16, &lb.d_gh16, &lb.d_gi16].into_iter().flatten());
        }
        v.extend([
            &self.qkv,
            &self.attn,
            &self.c,
            &self.logits,
            &self.token_loss,
            &self.dlogits,
            &self.dl_ctx,
            &self.token_norm,
            &self.d_s_head,
            &self.d_c,
            &self.ds,
            &self.d_qkv,
            &self.d_s_ctx,
            &self.d_emb,
            &self.partials,
            &self.wt,
            &self.scratch,
            &self.k_pre,
            &self.v_pre,
            &self.dk_pre,
            &self.dv_pre,
        ]);
        v
    }

    /// The workspace of `t` positions of `b` rows; `path` computes the
    /// products; `f16_copies`: with the f16 copies of `h`, `d_gh` and `d_gi`.
    pub fn new(
        ctx: &Context,
        cfg: &Config,
        (t, b): (usize, usize),
        n_params: usize,
        path: GemmPath,
        f16_copies: bool,
    ) -> VkResult<Workspace> {
        let rows = t * b;
        if rows == 0 {
            return Err(VkError::Invalid("a batch of no positions".into()));
        }
        let guarded = super::kernels::loop_guarded(ctx);
        super::kernels::check_loop_bounds(cfg, (t, b), guarded).map_err(VkError::Limit)?;
        let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
        let dev = |name: &str, n: usize| Buffer::device_f32(ctx, name, n);
        // Rows of a carried prefix's buffers: W − 1 positions of B rows.
        let pre = cfg.window.saturating_sub(1).max(1) * b;
        let up = |name: &str, n: usize| Buffer::new(ctx, name, n as u64 * 4, MemoryKind::Upload);
        // `width` f16 values per row, rows + GRID_CM_TILE rows.
        let half = |name: String, width: usize| -> VkResult<Option<Buffer>> {
            if !f16_copies {
                return Ok(None);
            }
            let bytes = ((rows + GRID_CM_TILE) * width * 2).next_multiple_of(4) as u64;
            Buffer::new(ctx, &name, bytes, MemoryKind::Device).map(Some)
        };
        let layers = (0..cfg.layers)
            .map(|l| {
                Ok(LayerBufs {
                    gi: dev(&format!("gru.l{l}.gi"), rows * 3 * h)?,
                    gh: dev(&format!("gru.l{l}.gh"), rows * 3 * h)?,
                    gates: dev(&format!("gru.l{l}.gates"), 3 * rows * h)?,
                    h: dev(&format!("gru.l{l}.h"), rows * h)?,
                    d_h: dev(&format!("gru.l{l}.d_h"), rows * h)?,
                    dh_tot: dev(&format!("gru.l{l}.dh_tot"), rows * h)?,
                    d_gi: dev(&format!("gru.l{l}.d_gi"), rows * 3 * h)?,
                    d_gh: dev(&format!("gru.l{l}.d_gh"), rows * 3 * h)?,
                    h16: half(format!("gru.l{l}.h16"), h)?,
                    d_gh16: half(format!("gru.l{l}.d_gh16"), 3 * h)?,
                    d_gi16: half(format!("gru.l{l}.d_gi16"), 3 * h)?,
                })
            })
            .collect::<VkResult<Vec<_>>>()?;
        let window = rows * cfg.heads * cfg.window;
        let region = scratch_region(scratch_len_for(cfg, rows, b, path));
        Ok(Workspace {
            t,
            b,
            rows,
            n_targets: 0,
            tokens: up("batch.tokens", rows)?,
            targets: up("batch.targets", rows + 2)?,
            mask: up("batch.mask", rows)?,
            csr: up("batch.csr", 2 * (v + 1) + rows)?,
            emb_part: dev("embed.chunk_sums", emb_chunks_max(rows, v) * d)?,
            emb: dev("embed.out", rows * d)?,
            layers,
            qkv: dev("ctx.qkv", rows * 3 * a)?,
            attn: dev("ctx.attn", window)?,
            c: dev("ctx.c", rows * a)?,
            logits: dev("head.logits", rows * v)?,
            token_loss: dev("loss.token", rows)?,
            dlogits: dev("loss.dlogits", rows * v)?,
            dl_ctx: dev("head.dlogits_guarded", rows * v)?,
            token_norm: dev("ctx.token_norm", rows)?,
            d_s_head: dev("head.d_s", rows * h)?,
            d_c: dev("head.d_c", rows * a)?,
            ds: dev("ctx.d_scores", window)?,
            d_qkv: dev("ctx.d_qkv", rows * 3 * a)?,
            d_s_ctx: dev("ctx.d_s", rows * h)?,
            d_emb: dev("embed.d_out", rows * d)?,
            partials: dev("reduce.partials", n_params.div_ceil(SUMSQ_CHUNK).max(rows))?,
            wt: dev("gru.w_hh_t", 3 * h * h)?,
            sync: dev("grid.sync", WAVE_WIDE_MAX_GROUPS * GRID_FLAG_WORDS)?,
            scratch: dev("reduce.scratch", SCRATCH_REGIONS * region)?,
            scratch_region: region,
            carry_h0: (0..cfg.layers).map(|l| dev(&format!("carry.h0_l{l}"), b * h)).collect::<VkResult<_>>()?,
            s_pre: dev("carry.s_pre", pre * h)?,
            k_pre: dev("carry.k_pre", pre * a)?,
            v_pre: dev("carry.v_pre", pre * a)?,
            dk_pre: dev("carry.dk_pre", pre * a)?,
            dv_pre: dev("carry.dv_pre", pre * a)?,
        })
    }

    /// Writes the batch's tokens, targets, mask and the embedding gradient's
    /// position lists into the host-visible input buffers.
    pub fn write_batch(&mut self, cfg: &Config, batch: &Batch) -> VkResult<()> {
        if batch.t != self.t || batch.rows != self.b {
            return Err(VkError::Invalid(format!(
                "batch of {}×{} in a workspace of {}×{}",
                batch.rows, batch.t, self.b, self.t
            )));
        }
        let (t, b, v) = (self.t, self.b, cfg.vocab);
        let bits = |x: u32| f32::from_bits(x);
        let mut tokens = Vec::with_capacity(self.rows);
        let mut targets = Vec::with_capacity(self.rows);
        let mut mask = Vec::with_capacity(self.rows);
        let mut counts = vec![0u32; v + 1];
        for tt in 0..t {
            for bb in 0..b {
                let x = batch.input(bb, tt) as usize;
                tokens.push(bits(x as u32));
                targets.push(bits(batch.target(bb, tt) as u32));
                mask.push(bits(batch.mask(bb, tt) as u32));
                counts[x + 1] += 1;
            }
        }
        for i in 0..v {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut positions = vec![0u32; self.rows];
        for (row, &x) in tokens.iter().enumerate() {
            let x = x.to_bits() as usize;
            positions[fill[x] as usize] = row as u32;
            fill[x] += 1;
        }
        let mut chunks = vec![0u32; v + 1];
        for x in 0..v {
            let n = (counts[x + 1] - counts[x]) as usize;
            chunks[x + 1] = chunks[x] + n.div_ceil(EMB_CHUNK) as u32;
        }
        debug_assert!(chunks[v] as usize <= emb_chunks_max(self.rows, v));
        let csr: Vec<f32> = counts.iter().chain(&positions).chain(&chunks).map(|&x| bits(x)).collect();
        // After the targets: N and 1/N (f32), which the loss kernel reads.
        let n = batch.num_targets();
        targets.push(bits(n as u32));
        targets.push((1.0 / n as f64) as f32);
        self.tokens.write_f32(0, &tokens)?;
        self.targets.write_f32(0, &targets)?;
        self.mask.write_f32(0, &mask)?;
        self.csr.write_f32(0, &csr)?;
        self.n_targets = batch.num_targets();
        Ok(())
    }

    /// Where a trace tensor (the CPU trace's names) lies.
    pub fn slot(&self, cfg: &Config, name: &str) -> Option<Slot<'_>> {
        let (rows, a) = (self.rows, cfg.attn_dim);
        let block = |buf, i: usize| Slot { buf, off: i * a, len: rows * a, cols: Some((a, 3 * a)) };
        Some(match name {
            "ctx.q" => block(&self.qkv, 0),
            "ctx.k" => block(&self.qkv, 1),
            "ctx.v" => block(&self.qkv, 2),
            "ctx.d_q" => block(&self.d_qkv, 0),
            "ctx.d_k" => block(&self.d_qkv, 1),
            "ctx.d_v" => block(&self.d_qkv, 2),
            other => {
                let (buf, off, len) = self.range(cfg, other)?;
                Slot { buf, off, len, cols: None }
            }
        })
    }

    /// The buffer, offset and length of a trace tensor that lies in one piece.
    fn range(&self, cfg: &Config, name: &str) -> Option<(&Buffer, usize, usize)> {
        let (rows, d, h, a, v) = (self.rows, cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
        fn whole(b: &Buffer, n: usize) -> (&Buffer, usize, usize) {
            (b, 0, n)
        }
        Some(match name {
            "embed.out" => whole(&self.emb, rows * d),
            "embed.d_out" => whole(&self.d_emb, rows * d),
            "ctx.attn" => whole(&self.attn, rows * cfg.heads * cfg.window),
            "ctx.c" => whole(&self.c, rows * a),
            "head.logits" => whole(&self.logits, rows * v),
            "loss.token" => whole(&self.token_loss, rows),
            "loss.dlogits" => whole(&self.dlogits, rows * v),
            "head.d_s" => whole(&self.d_s_head, rows * h),
            "head.d_c" => whole(&self.d_c, rows * a),
            "ctx.d_s" => whole(&self.d_s_ctx, rows * h),
            "ctx.token_norm" => whole(&self.token_norm, rows),
            other => {
                let rest = other.strip_prefix("gru.l")?;
                let (l, field) = rest.split_once('.')?;
                let l: usize = l.parse().ok()?;
                let lb = self.layers.get(l)?;
                match field {
                    "gi" => whole(&lb.gi, rows * 3 * h),
                    "gh" => whole(&lb.gh, rows * 3 * h),
                    "r" => (&lb.gates, 0, rows * h),
                    "z" => (&lb.gates, rows * h, rows * h),
                    "n" => (&lb.gates, 2 * rows * h, rows * h),
                    "h" => whole(&lb.h, rows * h),
                    "d_h" => whole(&lb.d_h, rows * h),
                    "d_gi" => whole(&lb.d_gi, rows * 3 * h),
                    "d_gh" => whole(&lb.d_gh, rows * 3 * h),
                    "d_in" => {
                        if l == 0 {
                            whole(&self.d_emb, rows * d)
                        } else {
                            whole(&self.layers[l - 1].d_h, rows * h)
                        }
                    }
                    _ => return None,
                }
            }
        })
    }
}

/// Where a named tensor lies in a device buffer: `len` values from `off`, or
/// with `cols = Some((width, stride))` rows of `width` values, `stride` apart
/// (a column block of a wider tensor, as q is of `[T, B, 3A]`).
#[derive(Clone, Copy)]
pub struct Slot<'a> {
    pub buf: &'a Buffer,
    pub off: usize,
    pub len: usize,
    pub cols: Option<(usize, usize)>,
}

impl<'a> Slot<'a> {
    /// The one range that holds all of the tensor's values: `(buffer, offset, length)`.
    pub fn span(&self) -> (&'a Buffer, usize, usize) {
        (self.buf, self.off, span_len(self.len, self.cols))
    }

    /// The tensor's values out of its span's values.
    pub fn gather(&self, span: &[f32]) -> Vec<f32> {
        gather(self.cols, span)
    }

    /// Writes the tensor's values `data` into its span's values.
    pub fn scatter(&self, span: &mut [f32], data: &[f32]) {
        scatter(self.cols, span, data)
    }
}

/// The length of the span of `len` values laid out as `cols` says.
fn span_len(len: usize, cols: Option<(usize, usize)>) -> usize {
    match cols {
        Some((w, stride)) if len > 0 => (len / w - 1) * stride + w,
        _ => len,
    }
}

fn gather(cols: Option<(usize, usize)>, span: &[f32]) -> Vec<f32> {
    match cols {
        Some((w, stride)) => span.chunks(stride).flat_map(|r| &r[..w]).copied().collect(),
        None => span.to_vec(),
    }
}

fn scatter(cols: Option<(usize, usize)>, span: &mut [f32], data: &[f32]) {
    match cols {
        Some((w, stride)) => span.chunks_mut(stride).zip(data.chunks(w)).for_each(|(r, d)| r[..w].copy_from_slice(d)),
        None => span.copy_from_slice(data),
    }
}

#[cfg(test)]
mod tests {
    /// A column block's span runs from its first value to its last, and
    /// gather and scatter move exactly its values, leaving the others.
    #[test]
    fn a_column_block_reads_and_writes_only_its_columns() {
        // Two rows of q | k | v with A = 2: the block k starts at 2.
        let cols = Some((2, 6));
        assert_eq!(super::span_len(4, cols), 8);
        assert_eq!(super::span_len(6, None), 6);
        let mut span: Vec<f32> = (2..10).map(|x| x as f32).collect();
        assert_eq!(super::gather(cols, &span), vec![2.0, 3.0, 8.0, 9.0]);
        super::scatter(cols, &mut span, &[-1.0, -2.0, -3.0, -4.0]);
        assert_eq!(span, vec![-1.0, -2.0, 4.0, 5.0, 6.0, 7.0, -3.0, -4.0]);
    }
}

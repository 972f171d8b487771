//! Recording the backward stages: the head (with the token guard),
//! attention, the GRU layers (per-row, grid or wavefront recurrences) and
//! the embedding.

use super::kernels::*;
use super::policy::Recurrence;
use super::record::chunks_down;
use super::reduce::ColSum;
use super::{BWD_WAVE_LAG, Engine, Workspace, u, workspace};
use crate::step::{MapStage, StageKind};
use crate::vk::gemm::flush;
use crate::vk::{Sequence, VkResult};

impl Engine {
    /// The head's gradients, after the token guard caps each token's gradient.
    pub(super) fn record_head_bwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let base = self.push(ws);
        let rows = ws.rows;
        let (h, a, v) = (self.cfg.hidden, self.cfg.attn_dim, self.cfg.vocab);
        let pb = &self.params;
        let gb = &self.grads;
        let s = &ws.layers.last().expect("layers >= 1").h;
        let cap = self.opts.token_cap;
        let p = ModelPush { flag: cap.is_some() as u32, f0: cap.unwrap_or(0.0) as f32, ..base };
        let bufs = [&ws.dlogits, &ws.c, &ws.token_norm, &ws.dl_ctx, &self.state];
        self.dispatch(seq, &TOKEN_GUARD, &bufs, &p, rows, "token_guard")?;
        let dl_ctx = if cap.is_some() { &ws.dl_ctx } else { &ws.dlogits };
        let tok = self.off("head.tok.weight");
        let ctxw = self.off("head.ctx.weight");
        let st = MapStage::bwd(StageKind::Head, 0);
        // Five products and sums that depend on nothing of each other: their
        // first passes back to back, then the split ones' sums.
        let mut later = Vec::new();
        self.mm_later(seq, &mut later, st, (v, h, rows), (&ws.dlogits, 0, true), (s, 0, false), (gb, tok), false)?;
        self.mm_later(seq, &mut later, st, (v, a, rows), (dl_ctx, 0, true), (&ws.c, 0, false), (gb, ctxw), false)?;
        let (dl, head_bias) = ((&ws.dlogits, 0), self.off("head.bias"));
        self.col_sum_later(seq, &mut later, dl, ColSum::dense(rows, v), head_bias, "head.bias grad")?;
        let (d_s, d_c) = ((&ws.d_s_head, 0), (&ws.d_c, 0));
        self.mm_later(seq, &mut later, st, (rows, h, v), (&ws.dlogits, 0, false), (pb, tok, false), d_s, false)?;
        self.mm_later(seq, &mut later, st, (rows, a, v), (&ws.dlogits, 0, false), (pb, ctxw, false), d_c, false)?;
        flush(seq, later)
    }

    /// The attention's gradients and the projections' weight gradients.
    pub(super) fn record_attn_bwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let cfg = &self.cfg;
        let base = self.push(ws);
        let rows = ws.rows;
        let (h, a) = (self.cfg.hidden, self.cfg.attn_dim);
        let pb = &self.params;
        let gb = &self.grads;
        let s = &ws.layers.last().expect("layers >= 1").h;
        let np = self.carry_prefix().unwrap_or(0);
        let p = ModelPush { f0: (1.0 / (cfg.head_dim() as f64).sqrt()) as f32, off2: np as u32, ..base };
        let bufs = [&ws.qkv, &ws.qkv, &ws.attn, &ws.d_c, &ws.ds, &ws.d_qkv, &ws.k_pre, &ws.v_pre];
        let wide = self.attn_wide(ws);
        self.run_attn(seq, if wide { &ATTN_WIDE_BWD_Q } else { &ATTN_BWD_Q }, &bufs, &p, "attn_bwd_q")?;
        let bufs = [&ws.qkv, &ws.attn, &ws.ds, &ws.d_c, &ws.d_qkv, &ws.d_qkv, &ws.dk_pre, &ws.dv_pre];
        // One block of keys per 16 (64 wide) on the extended axis (the prefix's too).
        let kernel = self.ctx.kernel(if wide { &ATTN_WIDE_BWD_KV } else { &ATTN_BWD_KV })?;
        seq.dispatch(&kernel, &bufs, &p, [(ws.t + np) as u64, ws.b as u64, cfg.heads as u64], "attn_bwd_kv")?;
        // dW_q, dW_k, dW_v in one product, as q, k, v were computed.
        let (st, w) = (MapStage::bwd(StageKind::Attn, 0), self.qkv_weights());
        self.mm(seq, st, (3 * a, h, rows), (&ws.d_qkv, 0, true), (s, 0, false), (gb, w), false)?;
        // The prefix's keys and values are the current W_k, W_v times
        // constant states: their share of dW_k, dW_v (docs/carry-state.md).
        if np > 0 {
            for (name, dx) in [("ctx.k.weight", &ws.dk_pre), ("ctx.v.weight", &ws.dv_pre)] {
                let pb_rows = np * ws.b;
                self.mm(seq, st, (a, h, pb_rows), (dx, 0, true), (&ws.s_pre, 0, false), (gb, self.off(name)), true)?;
            }
        }
        self.mm(seq, st, (rows, h, 3 * a), (&ws.d_qkv, 0, false), (pb, w, false), (&ws.d_s_ctx, 0), false)?;
        Ok(())
    }

    /// Both GRU layers backward: the recurrences (one wavefront for both,
    /// the grid kernels, or one workgroup per row), then the weight, bias and
    /// input gradients of each layer.
    pub(super) fn record_gru_bwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let cfg = &self.cfg;
        let base = self.push(ws);
        let rows = ws.rows;
        let h = self.cfg.hidden;
        let pb = &self.params;
        let gb = &self.grads;
        let top = &ws.layers.last().expect("layers >= 1").d_h;
        let p = ModelPush { n: u(rows * h, "n")?, ..base };
        self.dispatch(seq, &ADD, &[&ws.d_s_head, &ws.d_s_ctx, top], &p, rows * h, "d_s")?;
        // Both layers' recurrences in one wavefront dispatch, which
        // also computes layer 0's gradient from above.
        let carrying = self.carry_prefix().is_some();
        let wave = self.backward_wave() && !carrying;
        if wave {
            let (p, bufs, groups) = self.wave_bwd_args(ws)?;
            let intervals = (0..ws.t + BWD_WAVE_LAG).map(|t| (t, 1));
            let label = "gru.l1 bwd recurrence, wavefront with l0";
            self.record_grid(seq, (self.wave_spec(false), groups), &bufs, &p, intervals, label)?;
        }
        for l in (0..cfg.layers).rev() {
            let lb = &ws.layers[l];
            let n_in = cfg.gru_in(l);
            let p = ModelPush { off0: self.off(&format!("gru.weight_hh_l{l}")) as u32, ..base };
            let label = format!("gru.l{l} bwd recurrence");
            if wave {
                // Recorded above.
            } else if let Some(spec) = self.wg_kernel(l, true) {
                self.record_wg(seq, ws, l, true, spec, 0)?;
            } else if self.recurrence != Recurrence::Seq && !carrying {
                let bufs = self.grid_bwd_bufs(ws, lb, l);
                let steps = (0..ws.t).rev().map(|t| (t, 1));
                let (spec, groups) = self.grid_kernel(ws, l, true)?;
                self.record_grid(seq, (spec, groups), &bufs, &p, steps, &label)?;
            } else {
                let bufs = [pb, &lb.gh, &lb.gates, &lb.h, &lb.d_h, &lb.dh_tot, &lb.d_gi, &lb.d_gh, &ws.carry_h0[l]];
                let spec = self.seq_kernels(l).1;
                for (t, n) in chunks_down(ws.t, bwd_chunk(h)) {
                    let p = ModelPush { t, n, flag: carrying as u32, ..p };
                    self.dispatch(seq, spec, &bufs, &p, ws.b, &label)?;
                }
            }
            let input = if l == 0 { &ws.emb } else { &ws.layers[l - 1].h };
            let w_ih = self.off(&format!("gru.weight_ih_l{l}"));
            let w_hh = self.off(&format!("gru.weight_hh_l{l}"));
            let st = MapStage::bwd(StageKind::GruInput, l);
            // The layer's weight and bias gradients and its input's gradient
            // depend on nothing of each other: their first passes back to
            // back, then the split ones' sums.
            let mut later = Vec::new();
            let d_gi = (&lb.d_gi, 0, true);
            self.mm_later(seq, &mut later, st, (3 * h, n_in, rows), d_gi, (input, 0, false), (gb, w_ih), false)?;
            // dW_hh pairs d_gh at t with h at t-1 (nothing at t = 0).
            let shifted = rows - ws.b;
            let d_gh = (&lb.d_gh, ws.b * 3 * h, true);
            self.mm_later(seq, &mut later, st, (3 * h, h, shifted), d_gh, (&lb.h, 0, false), (gb, w_hh), false)?;
            // The bias gradients: d_gi and d_gh hold the same r and z columns
            // (the gates' inputs from x and from h add), so one sum of d_gi
            // gives b_ih's gradient and b_hh's first 2H values, written twice
            // (b_hh follows b_ih in the flat buffers); b_hh's n values are the
            // sum of d_gh's n columns.
            let (b_ih, b_hh) = (self.off(&format!("gru.bias_ih_l{l}")), self.off(&format!("gru.bias_hh_l{l}")));
            debug_assert_eq!(b_hh, b_ih + 3 * h, "b_hh follows b_ih");
            let both = ColSum { dup: 2 * h, ..ColSum::dense(rows, 3 * h) };
            self.col_sum_later(seq, &mut later, (&lb.d_gi, 0), both, b_ih, &format!("gru.l{l} bias grads"))?;
            let n_cols = ColSum { rows, d: h, stride: 3 * h, dup: 0 };
            let label = format!("gru.bias_hh_l{l} grad, n");
            self.col_sum_later(seq, &mut later, (&lb.d_gh, 2 * h), n_cols, b_hh + 2 * h, &label)?;
            let d_in = if l == 0 { &ws.d_emb } else { &ws.layers[l - 1].d_h };
            if !(wave && l > 0) {
                let w = (pb, w_ih, false);
                self.mm_later(seq, &mut later, st, (rows, n_in, 3 * h), (&lb.d_gi, 0, false), w, (d_in, 0), false)?;
            }
            flush(seq, later)?;
            if carrying {
                // The t = 0 term of dW_hh, d_gh_0 · h0ᵀ, added after the rest.
                let h0 = &ws.carry_h0[l];
                self.mm(seq, st, (3 * h, h, ws.b), (&lb.d_gh, 0, true), (h0, 0, false), (gb, w_hh), true)?;
            }
        }
        Ok(())
    }

    /// The embedding's gradient.
    pub(super) fn record_embed_bwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let base = self.push(ws);
        let rows = ws.rows;
        let (d, v) = (self.cfg.d_embed, self.cfg.vocab);
        let gb = &self.grads;
        // Chunk sums of the position lists, then each token value's
        // chunks added in order (embed_bwd.comp).
        let bufs = [&ws.csr, &ws.d_emb, &ws.emb_part, gb];
        let chunks = workspace::emb_chunks_max(rows, v) * d;
        let p = ModelPush { n: u(chunks, "n")?, flag: 0, ..base };
        self.dispatch(seq, &EMBED_BWD, &bufs, &p, chunks, "embed_bwd chunks")?;
        let p = ModelPush { n: u(v * d, "n")?, flag: 1, off0: self.off("embed.weight") as u32, ..base };
        self.dispatch(seq, &EMBED_BWD, &bufs, &p, v * d, "embed_bwd")?;
        Ok(())
    }
}

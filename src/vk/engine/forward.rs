//! Recording the forward stages: embedding, the GRU layers (per-row,
//! grid or wavefront recurrences), attention, the head and the loss.

use super::kernels::*;
use super::policy::Recurrence;
use super::{Engine, FWD_WAVE_LAG, Workspace, u};
use crate::step::Fault;
use crate::step::{MapStage, StageKind};
use crate::vk::{Sequence, VkResult};

impl Engine {
    /// The embedding lookup.
    pub(super) fn record_embed_fwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let base = self.push(ws);
        let rows = ws.rows;
        let d = self.cfg.d_embed;
        let pb = &self.params;
        let p = ModelPush { n: u(rows * d, "n")?, off0: self.off("embed.weight") as u32, ..base };
        let spec = embed_spec(self.stage_precision(MapStage::fwd(StageKind::Embed, 0)));
        self.dispatch(seq, spec, &[&ws.tokens, pb, &ws.emb], &p, rows * d, "embed_fwd")?;
        Ok(())
    }

    /// Both GRU layers: the input products, then the recurrences (one
    /// wavefront for both layers, the grid kernels, or one workgroup per row).
    pub(super) fn record_gru_fwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let cfg = &self.cfg;
        let base = self.push(ws);
        let rows = ws.rows;
        let h = self.cfg.hidden;
        let pb = &self.params;
        let seq_fault = matches!(self.fault, Some(Fault::RecurrenceNoBarrier | Fault::ResetBeforeMatmul));
        // A carried state runs the per-row kernels, the ones that read h_{-1}.
        let carrying = self.carry_prefix().is_some();
        let wave = self.forward_wave() && !seq_fault && !carrying;
        for (l, lb) in ws.layers.iter().enumerate() {
            if wave && l > 0 {
                // Layer 1 runs inside the wavefront with layer 0.
                break;
            }
            let n_in = cfg.gru_in(l);
            let input = if l == 0 { &ws.emb } else { &ws.layers[l - 1].h };
            let w_ih = self.off(&format!("gru.weight_ih_l{l}"));
            let stage = MapStage::fwd(StageKind::GruInput, l);
            let (b_ih, label) = (self.off(&format!("gru.bias_ih_l{l}")), format!("gru.l{l} bias_ih"));
            let dims = (rows, 3 * h, n_in);
            self.mm_bias(seq, stage, dims, (input, 0, false), (pb, w_ih, true), b_ih, (&lb.gi, 0, false), &label)?;
            let w_hh = self.off(&format!("gru.weight_hh_l{l}"));
            let b_hh = self.off(&format!("gru.bias_hh_l{l}")) as u32;
            let label = format!("gru.l{l} fwd recurrence");
            if let Some(spec) = self.wg_kernel(l, false).filter(|_| !seq_fault) {
                self.record_wg(seq, ws, l, false, spec, 0)?;
                continue;
            }
            if wave {
                let (p, bufs, groups) = self.wave_fwd_args(ws)?;
                let intervals = (0..ws.t + FWD_WAVE_LAG).map(|t| (t, 1));
                let label = "gru.l0 fwd recurrence, wavefront with l1";
                self.record_grid(seq, (self.wave_spec(true), groups), &bufs, &p, intervals, label)?;
                continue;
            }
            if self.recurrence != Recurrence::Seq && !seq_fault && !carrying {
                let p = ModelPush { off0: w_hh as u32, off1: b_hh, ..base };
                let bufs = self.grid_fwd_bufs(ws, lb, l);
                let (spec, groups) = self.grid_kernel(ws, l, false)?;
                self.record_grid(seq, (spec, groups), &bufs, &p, (0..ws.t).map(|t| (t, 1)), &label)?;
                continue;
            }
            let p = ModelPush { n: u(3 * h * h, "n")?, d: h as u32, off0: w_hh as u32, ..base };
            self.dispatch(seq, &TRANSPOSE, &[pb, &ws.wt], &p, 3 * h * h, &format!("gru.l{l} W_hh^T"))?;
            let p = ModelPush { off1: b_hh, flag: carrying as u32, ..base };
            let spec = match self.fault {
                Some(Fault::RecurrenceNoBarrier) => &GRU_FWD_SEQ_FAULT_NO_BARRIER,
                Some(Fault::ResetBeforeMatmul) => &GRU_FWD_SEQ_FAULT_RESET_BEFORE,
                _ => self.seq_kernels(l).0,
            };
            let bufs = [pb, &lb.gi, &lb.gh, &lb.gates, &lb.h, &ws.wt, &ws.carry_h0[l]];
            let chunk = fwd_chunk(h, self.fault == Some(Fault::ResetBeforeMatmul));
            for t0 in (0..ws.t).step_by(chunk) {
                let p = ModelPush { t: t0 as u32, n: chunk as u32, ..p };
                self.dispatch(seq, spec, &bufs, &p, ws.b, &label)?;
            }
        }
        Ok(())
    }

    /// The attention projections and the windowed attention.
    pub(super) fn record_attn_fwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let cfg = &self.cfg;
        let base = self.push(ws);
        let rows = ws.rows;
        let (h, a) = (self.cfg.hidden, self.cfg.attn_dim);
        let pb = &self.params;
        let s = &ws.layers.last().expect("layers >= 1").h;
        // q, k and v in one product: W_q, W_k, W_v lie one after the other,
        // so together they are W_qkv, [3A, H], and the product is [T, B, 3A].
        let stage = MapStage::fwd(StageKind::Attn, 0);
        self.mm(seq, stage, (rows, 3 * a, h), (s, 0, false), (pb, self.qkv_weights(), true), (&ws.qkv, 0), false)?;
        // A carried prefix's keys and values, from its states with the current weights.
        let np = self.carry_prefix().unwrap_or(0);
        if np > 0 {
            for (name, out) in [("ctx.k.weight", &ws.k_pre), ("ctx.v.weight", &ws.v_pre)] {
                let (stage, w) = (MapStage::fwd(StageKind::Attn, 0), (pb, self.off(name), true));
                self.mm(seq, stage, (np * ws.b, a, h), (&ws.s_pre, 0, false), w, (out, 0), false)?;
            }
        }
        let p = ModelPush { f0: (1.0 / (cfg.head_dim() as f64).sqrt()) as f32, off2: np as u32, ..base };
        let bufs = [&ws.qkv, &ws.qkv, &ws.qkv, &ws.attn, &ws.c, &ws.k_pre, &ws.v_pre];
        let spec = match self.fault {
            Some(Fault::SoftmaxNoMax) => &ATTN_FWD_FAULT_NO_MAX,
            Some(Fault::WindowOffByOne) => &ATTN_FWD_FAULT_WINDOW,
            _ if self.attn_wide(ws) => &ATTN_WIDE_FWD,
            _ => &ATTN_FWD,
        };
        self.run_attn(seq, spec, &bufs, &p, "attn_fwd")?;
        Ok(())
    }

    /// Whether this batch's attention runs the wide kernels (blocks of 64).
    pub(super) fn attn_wide(&self, ws: &Workspace) -> bool {
        self.env.attn.wide_for(ws.t, ws.b, self.cfg.heads, self.cfg.window)
    }

    /// The head's logits.
    pub(super) fn record_head_fwd<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let rows = ws.rows;
        let (h, a, v) = (self.cfg.hidden, self.cfg.attn_dim, self.cfg.vocab);
        let pb = &self.params;
        let s = &ws.layers.last().expect("layers >= 1").h;
        let tok = self.off("head.tok.weight");
        let ctxw = self.off("head.ctx.weight");
        let stage = MapStage::fwd(StageKind::Head, 0);
        self.mm(seq, stage, (rows, v, h), (s, 0, false), (pb, tok, true), (&ws.logits, 0), false)?;
        let (w, bias) = ((pb, ctxw, true), self.off("head.bias"));
        self.mm_bias(seq, stage, (rows, v, a), (&ws.c, 0, false), w, bias, (&ws.logits, 0, true), "head bias")?;
        Ok(())
    }

    /// The loss, its gradient of the logits, and the loss value in the state.
    pub(super) fn record_loss<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let base = self.push(ws);
        let rows = ws.rows;
        // N and 1/N come with the batch (after the targets), not in
        // push constants: a recorded step replays on any batch.
        let bufs = [&ws.logits, &ws.targets, &ws.mask, &ws.token_loss, &ws.dlogits, &self.state];
        let spec = match self.fault {
            Some(Fault::MaskDropped) => &LOSS_FAULT_NO_MASK,
            Some(Fault::LossNoClear) => &LOSS_FAULT_NO_CLEAR,
            _ => &LOSS,
        };
        self.dispatch(seq, spec, &bufs, &base, rows, "loss")?;
        let p = ModelPush { flag: state_op::LOSS, n: rows as u32, ..base };
        self.dispatch(seq, &STATE, &[&self.state, &ws.token_loss], &p, 1, "loss value")?;
        Ok(())
    }
}

//! What every stage's recording shares: dispatching a kernel, a product,
//! a column sum, a grid recurrence, the wavefronts' and grids' bindings; and
//! the recording of a stage, a plan and a whole step.

use super::kernels::*;
use super::policy::Recurrence;
use super::reduce::{ColSum, record_col_sum_later};
use super::workspace::LayerBufs;
use super::workspace::SCRATCH_REGIONS;
use super::{Engine, Plan, Stage, Workspace, col_sum_scratch_len, u};
use crate::step::MapStage;
use crate::vk::gemm::{self, GemmShape, Later, MatRef, flush};
use crate::vk::kernel::KernelSpec;
use crate::vk::{Buffer, Sequence, VkError, VkResult};

/// A quiet NaN in f32 whose two 16-bit halves are each an f16 NaN.
pub const POISON_BITS: u32 = 0x7fc0_7fc0;

impl Engine {
    /// The push constants every kernel starts from: the batch's and the model's sizes.
    pub(super) fn push(&self, ws: &Workspace) -> ModelPush {
        let c = &self.cfg;
        ModelPush {
            t_len: ws.t as u32,
            b: ws.b as u32,
            d: c.d_embed as u32,
            h: c.hidden as u32,
            a: c.attn_dim as u32,
            nh: c.heads as u32,
            w: c.window as u32,
            v: c.vocab as u32,
            ..Default::default()
        }
    }

    /// Records `spec` over `items` work items along x.
    pub(super) fn dispatch<'a>(
        &self,
        seq: &mut Sequence<'a>,
        spec: &'static KernelSpec,
        bufs: &[&'a Buffer],
        push: &ModelPush,
        items: usize,
        label: &str,
    ) -> VkResult<()> {
        let kernel = self.ctx.kernel(spec)?;
        // Grid-stride kernels cover any count with at most 65535 groups.
        let cap = 65535 * spec.items_per_group[0] as usize;
        seq.dispatch(&kernel, bufs, push, [items.clamp(1, cap) as u64, 1, 1], label)
    }

    /// An attention kernel: one workgroup per block of `ATTN_BLOCK` positions
    /// of one (row, head), a grid of `[T / ATTN_BLOCK, B, NH]` workgroups.
    pub(super) fn run_attn<'a>(
        &self,
        seq: &mut Sequence<'a>,
        spec: &'static KernelSpec,
        bufs: &[&'a Buffer],
        push: &ModelPush,
        label: &str,
    ) -> VkResult<()> {
        let kernel = self.ctx.kernel(spec)?;
        let work = [push.t_len as u64, push.b as u64, push.nh as u64];
        seq.dispatch(&kernel, bufs, push, work, label)
    }

    /// Records a product, split along K where `gemm::split_k_plan` says so
    /// (the partial sums go through a region of the workspace's scratch).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mm<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        stage: MapStage,
        dims: (usize, usize, usize),
        a: (&'a Buffer, usize, bool),
        b: (&'a Buffer, usize, bool),
        c: (&'a Buffer, usize),
        accumulate: bool,
    ) -> VkResult<()> {
        let mut later = Vec::new();
        self.mm_later(seq, &mut later, stage, dims, a, b, c, accumulate)?;
        flush(seq, later)
    }

    /// `c (+)= op(a)·op(b) + 1·biasᵀ`, the bias a row vector in `b`'s buffer
    /// at `bias` (added after the old `c` with `accumulate`): by the
    /// product's kernel as it stores, or by a pass of its own over `c` where
    /// the product is split along K or the engine's `bias_pass` asks for the
    /// pass (`DUALSCOPE_BIAS_PASS=1` in a `lab` build). The same values either way.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mm_bias<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        stage: MapStage,
        (m, n, k): (usize, usize, usize),
        a: (&'a Buffer, usize, bool),
        b: (&'a Buffer, usize, bool),
        bias: usize,
        c: (&'a Buffer, usize, bool),
        label: &str,
    ) -> VkResult<()> {
        let shape = GemmShape { m, n, k, ta: a.2, tb: b.2, accumulate: c.2 };
        let path = self.stage_path(stage);
        if !self.env.bias_pass && gemm::split_k_scratch_len(path, &shape) == 0 {
            let (a, b, c) =
                (MatRef { buf: a.0, offset: a.1 }, MatRef { buf: b.0, offset: b.1 }, MatRef { buf: c.0, offset: c.1 });
            return gemm::gemm_bias(&self.ctx, seq, path, &shape, a, b, bias, c);
        }
        self.mm(seq, stage, (m, n, k), a, b, (c.0, c.1), c.2)?;
        let p = ModelPush { n: u(m * n, "n")?, d: n as u32, off0: c.1 as u32, off1: bias as u32, ..Default::default() };
        self.dispatch(seq, &BIAS_ADD, &[b.0, c.0], &p, m * n, label)
    }

    /// [`Engine::mm`] with a split product's sum pushed onto `later`: the
    /// caller records the first passes of independent products together,
    /// then [`flush`]es their sums.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mm_later<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        later: &mut Vec<Later<'a>>,
        stage: MapStage,
        (m, n, k): (usize, usize, usize),
        a: (&'a Buffer, usize, bool),
        b: (&'a Buffer, usize, bool),
        c: (&'a Buffer, usize),
        accumulate: bool,
    ) -> VkResult<()> {
        let shape = GemmShape { m, n, k, ta: a.2, tb: b.2, accumulate };
        let path = self.stage_path(stage);
        let ws = self.ws()?;
        let need = gemm::split_k_scratch_len(path, &shape);
        debug_assert!(
            need <= ws.scratch_region,
            "gemm {m}x{n}x{k}: its split-K scratch is missing from workspace::step_products"
        );
        let scratch = self.scratch_for(seq, later, ws, need > 0)?;
        let (a, b, c) =
            (MatRef { buf: a.0, offset: a.1 }, MatRef { buf: b.0, offset: b.1 }, MatRef { buf: c.0, offset: c.1 });
        later.extend(gemm::gemm_split_later(&self.ctx, seq, path, &shape, a, b, c, Some(scratch))?);
        Ok(())
    }

    /// Records the column sums of `x` (from its offset, as `shape` says)
    /// into the gradients at `out_off`, the second pass (if any) pushed onto
    /// `later`.
    pub(super) fn col_sum_later<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        later: &mut Vec<Later<'a>>,
        (x, x_off): (&'a Buffer, usize),
        shape: ColSum,
        out_off: usize,
        label: &str,
    ) -> VkResult<()> {
        let (x, out) = (MatRef { buf: x, offset: x_off }, MatRef { buf: &self.grads, offset: out_off });
        let ws = self.ws()?;
        let scratch = self.scratch_for(seq, later, ws, col_sum_scratch_len(shape.rows, shape.d) > 0)?;
        later.extend(record_col_sum_later(&self.ctx, seq, x, shape, out, scratch, label)?);
        Ok(())
    }

    /// Where a product or column sum puts its partial sums: where it `needs`
    /// scratch, the next of the workspace's regions, in turn, so that it
    /// shares none with the few before it and nothing orders it after them
    /// but its own inputs (each pending second pass holds one of the last
    /// regions handed out, so with all of them pending they are recorded
    /// first); else the whole scratch, unused.
    fn scratch_for<'a>(
        &self,
        seq: &mut Sequence<'a>,
        later: &mut Vec<Later<'a>>,
        ws: &'a Workspace,
        needs: bool,
    ) -> VkResult<MatRef<'a>> {
        if !needs {
            return Ok(MatRef::whole(&ws.scratch));
        }
        if later.len() >= SCRATCH_REGIONS {
            flush(seq, std::mem::take(later))?;
        }
        let i = self.scratch_next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SCRATCH_REGIONS;
        Ok(MatRef { buf: &ws.scratch, offset: i * ws.scratch_region })
    }

    /// The offset of parameter `name` in the flat buffers.
    pub(super) fn off(&self, name: &str) -> usize {
        self.layout.offset(name)
    }

    /// Where W_qkv = [W_q; W_k; W_v] starts: the three weights lie one after
    /// the other in the flat buffers (`model::param_specs` lists them so).
    pub(super) fn qkv_weights(&self) -> usize {
        let (q, n) = (self.off("ctx.q.weight"), self.cfg.attn_dim * self.cfg.hidden);
        debug_assert!(self.off("ctx.k.weight") == q + n && self.off("ctx.v.weight") == q + 2 * n);
        q
    }

    /// Records the beginning of a step: this step's loss scale, counters cleared.
    pub(super) fn record_begin<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let ws = self.ws()?;
        let p = ModelPush { flag: state_op::BEGIN, ..self.push(ws) };
        self.dispatch(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "state begin")
    }

    /// Records one stage, reading its inputs from where the previous stages
    /// (or an upload) left them.
    pub(super) fn record_stage<'a>(&'a self, seq: &mut Sequence<'a>, stage: Stage) -> VkResult<()> {
        let ws = self.ws()?;
        match stage {
            Stage::EmbedFwd => self.record_embed_fwd(seq, ws),
            Stage::GruFwd => self.record_gru_fwd(seq, ws),
            Stage::AttnFwd => self.record_attn_fwd(seq, ws),
            Stage::HeadFwd => self.record_head_fwd(seq, ws),
            Stage::Loss => self.record_loss(seq, ws),
            Stage::HeadBwd => self.record_head_bwd(seq, ws),
            Stage::AttnBwd => self.record_attn_bwd(seq, ws),
            Stage::GruBwd => self.record_gru_bwd(seq, ws),
            Stage::EmbedBwd => self.record_embed_bwd(seq, ws),
            Stage::Optim => self.record_optim(seq, ws),
        }
    }

    /// Records what `plan` runs: the step's beginning, its stages, and for
    /// [`Plan::Grads`] the gradients' unscale and norm; returns each stage's
    /// range of dispatches.
    pub(super) fn record_plan<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        plan: Plan<'_>,
    ) -> VkResult<Vec<(Stage, std::ops::Range<usize>)>> {
        if self.poison {
            self.record_poison(seq)?;
        }
        self.record_begin(seq)?;
        let stages: &[Stage] = match plan {
            Plan::Grads => Stage::FORWARD_BACKWARD,
            Plan::Step => &Stage::STEP,
            Plan::Stages(stages) => stages,
        };
        let mut ranges = Vec::with_capacity(stages.len());
        for &s in stages {
            let start = seq.dispatch_count();
            self.record_stage(seq, s)?;
            ranges.push((s, start..seq.dispatch_count()));
        }
        if let Plan::Grads = plan {
            self.record_unscale_and_norm(seq)?;
        }
        Ok(ranges)
    }

    /// Records NaN into every buffer a step writes and the gradients, but
    /// those the host wrote since the last plan (its inputs), and forgets
    /// those writes. The pattern is a NaN as f32 and as both halves in f16.
    fn record_poison<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let written = std::mem::take(&mut *self.host_written.lock().unwrap_or_else(|p| p.into_inner()));
        let mut bufs = self.ws()?.written_by_step();
        bufs.push(&self.grads);
        for b in bufs {
            if !written.contains(&(b as *const Buffer as usize)) {
                seq.fill(b, POISON_BITS)?;
            }
        }
        Ok(())
    }

    /// Records a whole training step (the batch set last) into `seq`, for
    /// [`Sequence::end`] and [`Sequence::replay`]: each replay is one more
    /// training step on the same batch, as a CUDA graph replays its kernels.
    pub fn record_step<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        self.record_plan(seq, Plan::Step).map(|_| ())
    }

    /// Records a grid recurrence kernel (`gru_*_grid`, `gru_*_grid_cm`) of
    /// `groups` workgroups:
    /// with [`Recurrence::Steps`], one dispatch per `(t, 1)` of `steps`; with
    /// [`Recurrence::Grid`], one dispatch walking them all (from the first
    /// `t`, forward or backward as `spec` does), its barrier counter zeroed first.
    ///
    /// On every device the grid's steps are cut into dispatches of
    /// [`grid_chunk`] steps, so that no dispatch's loops grow with the
    /// sequence; on a device with lavapipe's loop guard ([`loop_guarded`])
    /// each also gets its barriers' poll budget ([`GRID_POLL_BUDGET`]), and
    /// a batch whose one step would run past the guard is refused.
    pub(super) fn record_grid<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        (spec, groups): (&'static KernelSpec, usize),
        bufs: &[&'a Buffer],
        push: &ModelPush,
        steps: impl Iterator<Item = (usize, usize)>,
        label: &str,
    ) -> VkResult<()> {
        let ws = self.ws()?;
        let guarded = loop_guarded(&self.ctx);
        let push = ModelPush { f1: grid_poll_budget(&self.ctx), ..*push };
        if guarded && grid_step_loops(ws.b) > GRID_ARITH_BUDGET {
            return Err(VkError::Limit(format!(
                "a batch of {} rows: one step of the grid recurrence would run past this device's loop guard; \
                 run with DUALSCOPE_RECURRENCE=seq",
                ws.b
            )));
        }
        if self.recurrence == Recurrence::Grid {
            let steps: Vec<usize> = steps.map(|(t, _)| t).collect();
            // Cut on every device, not only where the guard is known: no
            // dispatch's loops grow with the sequence length.
            let chunk = grid_chunk(ws.b);
            for part in steps.chunks(chunk) {
                seq.fill(&ws.sync, 0)?;
                let p = ModelPush { t: part[0] as u32, n: part.len() as u32, ..push };
                self.dispatch(seq, spec, bufs, &p, groups, label)?;
            }
            return Ok(());
        }
        for (t, n) in steps {
            let p = ModelPush { t: t as u32, n: n as u32, ..push };
            self.dispatch(seq, spec, bufs, &p, groups, label)?;
        }
        Ok(())
    }

    /// The wavefront backward's push constants, buffers and workgroups.
    pub(super) fn wave_bwd_args<'a>(&'a self, ws: &'a Workspace) -> VkResult<(ModelPush, Vec<&'a Buffer>, usize)> {
        let [l0, l1] = &ws.layers[..] else {
            return Err(VkError::Invalid("the wavefront backward takes two layers".into()));
        };
        let missing = || VkError::Invalid("the wavefront backward needs the f16 copies of d_gh and d_gi".into());
        let (d_gh0s, d_gh1s, d_gi1s) = (
            l0.d_gh16.as_ref().ok_or_else(missing)?,
            l1.d_gh16.as_ref().ok_or_else(missing)?,
            l1.d_gi16.as_ref().ok_or_else(missing)?,
        );
        let off = |name: &str| self.off(name) as u32;
        let p = ModelPush {
            off0: off("gru.weight_hh_l0"),
            off1: off("gru.weight_hh_l1"),
            off2: off("gru.weight_ih_l1"),
            ..self.push(ws)
        };
        let bufs = vec![
            &self.params,
            &l0.gh,
            &l0.gates,
            &l0.h,
            &l0.d_h,
            &l0.dh_tot,
            &l0.d_gi,
            &l0.d_gh,
            &self.state,
            &ws.sync,
            d_gh0s,
            &l1.gh,
            &l1.gates,
            &l1.h,
            &l1.d_h,
            &l1.dh_tot,
            &l1.d_gi,
            &l1.d_gh,
            d_gh1s,
            d_gi1s,
        ];
        Ok((p, bufs, 2 * self.cm_groups(ws)))
    }

    /// The wavefront forward's push constants, buffers and workgroups.
    pub(super) fn wave_fwd_args<'a>(&'a self, ws: &'a Workspace) -> VkResult<(ModelPush, Vec<&'a Buffer>, usize)> {
        let [l0, l1] = &ws.layers[..] else {
            return Err(VkError::Invalid("the wavefront forward takes two layers".into()));
        };
        let (Some(h0s), Some(h1s)) = (l0.h16.as_ref(), l1.h16.as_ref()) else {
            return Err(VkError::Invalid("the wavefront forward needs the f16 copies of h".into()));
        };
        let off = |name: &str| self.off(name) as u32;
        let p = ModelPush {
            off0: off("gru.weight_hh_l0"),
            off1: off("gru.bias_hh_l0"),
            off2: off("gru.weight_ih_l1"),
            a: off("gru.bias_ih_l1"),
            nh: off("gru.weight_hh_l1"),
            w: off("gru.bias_hh_l1"),
            ..self.push(ws)
        };
        let bufs = vec![
            &self.params,
            &l0.gi,
            &l0.gh,
            &l0.gates,
            &l0.h,
            &self.state,
            &ws.sync,
            h0s,
            &l1.gi,
            &l1.gh,
            &l1.gates,
            &l1.h,
            h1s,
        ];
        Ok((p, bufs, 2 * self.cm_groups(ws)))
    }

    /// The forward grid kernel's buffers for layer `l` (`lb`), in binding order
    /// (the f16 copy of `h` last, for the cooperative-matrix kernel).
    pub(super) fn grid_fwd_bufs<'a>(&'a self, ws: &'a Workspace, lb: &'a LayerBufs, l: usize) -> Vec<&'a Buffer> {
        let mut bufs = vec![&self.params, &lb.gi, &lb.gh, &lb.gates, &lb.h, &self.state, &ws.sync];
        bufs.extend(lb.h16.as_ref().filter(|_| self.layer_rec_cm(l, false)));
        bufs
    }

    /// The backward grid kernel's buffers for layer `l` (`lb`), in binding order
    /// (the f16 copy of `d_gh` last, for the cooperative-matrix kernel).
    pub(super) fn grid_bwd_bufs<'a>(&'a self, ws: &'a Workspace, lb: &'a LayerBufs, l: usize) -> Vec<&'a Buffer> {
        let mut bufs = vec![
            &self.params,
            &lb.gh,
            &lb.gates,
            &lb.h,
            &lb.d_h,
            &lb.dh_tot,
            &lb.d_gi,
            &lb.d_gh,
            &self.state,
            &ws.sync,
        ];
        bufs.extend(lb.d_gh16.as_ref().filter(|_| self.layer_rec_cm(l, true)));
        bufs
    }

    /// Layer `l`'s recurrence, forward or backward, on the one-workgroup
    /// kernel `spec`: one dispatch per chunk of steps (the loop guard), with
    /// `flag` in the push constants (0 in a step; the parts a timing probe
    /// switches off in [`Engine::probe_wg`]).
    pub(super) fn record_wg<'a>(
        &'a self,
        seq: &mut Sequence<'a>,
        ws: &'a Workspace,
        l: usize,
        backward: bool,
        spec: &'static KernelSpec,
        flag: u32,
    ) -> VkResult<()> {
        let (lb, pb) = (&ws.layers[l], &self.params);
        let chunk = wg_chunk(self.cfg.hidden, super::policy::is_wg_fma(spec));
        let base = ModelPush { off0: self.off(&format!("gru.weight_hh_l{l}")) as u32, flag, ..self.push(ws) };
        let label = format!("gru.l{l} {} recurrence, one workgroup", if backward { "bwd" } else { "fwd" });
        if backward {
            let bufs = [pb, &lb.gh, &lb.gates, &lb.h, &lb.d_h, &lb.dh_tot, &lb.d_gi, &lb.d_gh];
            for (t, n) in chunks_down(ws.t, chunk) {
                self.dispatch(seq, spec, &bufs, &ModelPush { t, n, ..base }, 1, &label)?;
            }
        } else {
            let p = ModelPush { off1: self.off(&format!("gru.bias_hh_l{l}")) as u32, ..base };
            let bufs = [pb, &lb.gi, &lb.gh, &lb.gates, &lb.h];
            for t0 in (0..ws.t).step_by(chunk) {
                let n = chunk.min(ws.t - t0) as u32;
                self.dispatch(seq, spec, &bufs, &ModelPush { t: t0 as u32, n, ..p }, 1, &label)?;
            }
        }
        Ok(())
    }
}

/// The chunks of a backward walk over `t` steps, at most `chunk` each, from
/// the last step down: (the chunk's first step, which is its latest, and its
/// length), as the backward recurrence kernels take them in `pc.t` and `pc.n`.
pub(super) fn chunks_down(t: usize, chunk: usize) -> impl Iterator<Item = (u32, u32)> {
    let chunk = chunk.max(1);
    (0..t.div_ceil(chunk)).map(move |i| {
        let hi = t - i * chunk;
        ((hi - 1) as u32, chunk.min(hi) as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::chunks_down;

    /// The chunks cover every step once, latest first, none longer than asked.
    #[test]
    fn chunks_down_cover_the_steps_from_the_last() {
        assert_eq!(chunks_down(10, 4).collect::<Vec<_>>(), [(9, 4), (5, 4), (1, 2)]);
        assert_eq!(chunks_down(8, 4).collect::<Vec<_>>(), [(7, 4), (3, 4)]);
        assert_eq!(chunks_down(3, 100).collect::<Vec<_>>(), [(2, 3)]);
        assert_eq!(chunks_down(0, 4).count(), 0);
    }
}

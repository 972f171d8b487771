//! Recording the optimizer: unscale, the gradient norm and the guard, the
//! clip, AdamW, and the loss scale's update.

use super::kernels::*;
use super::{Engine, Workspace, u};
use crate::step::Fault;
use crate::vk::{Sequence, VkResult};

impl Engine {
    /// The gradients' sum of squares, then the norm and what `op` does with it.
    pub(super) fn record_norm<'a>(&'a self, seq: &mut Sequence<'a>, op: u32) -> VkResult<()> {
        let ws = self.ws()?;
        let base = self.push(ws);
        let total = self.layout.total;
        let p = ModelPush { n: total as u32, ..base };
        self.dispatch(seq, &SUMSQ, &[&self.grads, &ws.partials], &p, total, "grad sumsq")?;
        let p = ModelPush { flag: op, n: total.div_ceil(SUMSQ_CHUNK) as u32, ..base };
        self.dispatch(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "grad norm")
    }

    /// Unscales the gradients by this step's loss scale and takes their norm
    /// (and the guard's decision).
    pub(super) fn record_unscale_and_norm<'a>(&'a self, seq: &mut Sequence<'a>) -> VkResult<()> {
        let ws = self.ws()?;
        let p = ModelPush { flag: 0, n: self.layout.total as u32, ..self.push(ws) };
        if self.fault == Some(Fault::NormBeforeUnscale) {
            self.record_norm(seq, state_op::NORM)?;
            return self.dispatch(seq, &SCALE_GRADS, &[&self.state, &self.grads], &p, self.layout.total, "unscale");
        }
        self.dispatch(seq, &SCALE_GRADS, &[&self.state, &self.grads], &p, self.layout.total, "unscale")?;
        self.record_norm(seq, state_op::NORM)
    }

    /// The whole optimizer: unscale and norm, the clip, AdamW, the state's finish.
    pub(super) fn record_optim<'a>(&'a self, seq: &mut Sequence<'a>, ws: &'a Workspace) -> VkResult<()> {
        let base = self.push(ws);
        let pb = &self.params;
        let gb = &self.grads;
        self.record_unscale_and_norm(seq)?;
        let n = u(self.layout.total, "parameters")?;
        let p = ModelPush { flag: 1, n, ..base };
        self.dispatch(seq, &SCALE_GRADS, &[&self.state, gb], &p, self.layout.total, "clip")?;
        self.record_norm(seq, state_op::POST_CLIP)?;
        let p = ModelPush { off0: 0, n, ..base };
        let bufs = [&self.state, pb, gb, &self.m, &self.v, &self.decay_runs];
        self.dispatch(seq, &ADAMW, &bufs, &p, self.layout.total, "adamw")?;
        let p = ModelPush { flag: state_op::FINISH, ..base };
        self.dispatch(seq, &STATE, &[&self.state, &ws.partials], &p, 1, "state finish")?;
        Ok(())
    }
}

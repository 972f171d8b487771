//! Buffer I/O: uploads and read-backs through staging buffers, the flat
//! parameter-shaped buffers, named tensors, the state words (loss scale,
//! counters, hyper-parameters) and the batch's inputs.

use super::kernels::st;
use super::workspace::Slot;
use super::{Engine, FlatBuf, Workspace, u};
use crate::dataset::Batch;
use crate::model::Params;
use crate::step::{LossScale, OptimState, StepOptions};
use crate::vk::{Buffer, Sequence, VkError, VkResult};

/// The state words from their f32 image (bits kept).
pub(super) fn state_words(v: &[f32]) -> [u32; st::WORDS] {
    let mut w = [0u32; st::WORDS];
    w.iter_mut().zip(v).for_each(|(o, x)| *o = x.to_bits());
    w
}

impl Engine {
    pub(super) fn flat(&self, which: FlatBuf) -> &Buffer {
        match which {
            FlatBuf::Params => &self.params,
            FlatBuf::Grads => &self.grads,
            FlatBuf::M => &self.m,
            FlatBuf::V => &self.v,
        }
    }

    /// Copies `data` into `dst` at `offset` through a staging buffer (its own submit).
    pub fn upload(&self, dst: &Buffer, offset: usize, data: &[f32]) -> VkResult<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.poison {
            self.host_written.lock().unwrap_or_else(|p| p.into_inner()).push(dst as *const Buffer as usize);
        }
        let up = Buffer::upload_f32(&self.ctx, &format!("{}.upload", dst.name()), data)?;
        let mut seq = Sequence::new(&self.ctx)?;
        seq.copy(&up, 0, dst, offset as u64 * 4, data.len() as u64 * 4)?;
        seq.submit().map(|_| ())
    }

    /// Reads `(buffer, offset, len)` ranges back in one submit.
    pub fn download(&self, ranges: &[(&Buffer, usize, usize)]) -> VkResult<Vec<Vec<f32>>> {
        let backs = ranges
            .iter()
            .map(|(b, _, n)| Buffer::readback_f32(&self.ctx, &format!("{}.readback", b.name()), *n))
            .collect::<VkResult<Vec<_>>>()?;
        {
            let mut seq = Sequence::new(&self.ctx)?;
            for ((b, off, n), back) in ranges.iter().zip(&backs) {
                seq.copy(b, *off as u64 * 4, back, 0, *n as u64 * 4)?;
            }
            seq.submit()?;
        }
        backs
            .iter()
            .zip(ranges)
            .map(|(back, (_, _, n))| {
                let mut v = back.read_f32()?;
                v.truncate(*n);
                Ok(v)
            })
            .collect()
    }

    pub fn write_flat(&self, which: FlatBuf, data: &[f32]) -> VkResult<()> {
        if data.len() != self.layout.total {
            return Err(VkError::Invalid(format!("{} values for {} parameters", data.len(), self.layout.total)));
        }
        self.upload(self.flat(which), 0, data)
    }

    pub fn read_flat(&self, which: FlatBuf) -> VkResult<Vec<f32>> {
        Ok(self.download(&[(self.flat(which), 0, self.layout.total)])?.remove(0))
    }

    pub fn read_params(&self, which: FlatBuf) -> VkResult<Params<f32>> {
        Ok(self.layout.unflatten(&self.cfg, &self.read_flat(which)?))
    }

    pub fn set_params(&self, p: &Params<f32>) -> VkResult<()> {
        self.write_flat(FlatBuf::Params, &self.layout.flatten(p))
    }

    /// Writes one parameter-shaped tensor (`grad.`, `param.`, `adam.m.`, `adam.v.` + name).
    pub(super) fn flat_slot(&self, name: &str) -> Option<(&Buffer, usize, usize)> {
        let (which, rest) = if let Some(r) = name.strip_prefix("grad.") {
            (FlatBuf::Grads, r)
        } else if let Some(r) = name.strip_prefix("param.") {
            (FlatBuf::Params, r)
        } else if let Some(r) = name.strip_prefix("adam.m.") {
            (FlatBuf::M, r)
        } else if let Some(r) = name.strip_prefix("adam.v.") {
            (FlatBuf::V, r)
        } else {
            return None;
        };
        let e = self.layout.get(rest)?;
        Some((self.flat(which), e.offset, e.len))
    }

    /// Where a named tensor lies on the device: the CPU trace's names, plus
    /// `param.`, `adam.m.` and `adam.v.` + a parameter name.
    pub fn slot(&self, name: &str) -> Option<Slot<'_>> {
        match self.flat_slot(name) {
            Some((buf, off, len)) => Some(Slot { buf, off, len, cols: None }),
            None => self.ws.as_ref().and_then(|w| w.slot(&self.cfg, name)),
        }
    }

    fn slot_named(&self, name: &str) -> VkResult<Slot<'_>> {
        self.slot(name).ok_or_else(|| VkError::Invalid(format!("no device tensor named {name:?}")))
    }

    /// The named tensors' values, read back in one submit.
    pub fn read_named(&self, names: &[&str]) -> VkResult<Vec<Vec<f32>>> {
        let slots = names.iter().map(|n| self.slot_named(n)).collect::<VkResult<Vec<_>>>()?;
        let spans: Vec<_> = slots.iter().map(Slot::span).collect();
        let read = self.download(&spans)?;
        Ok(slots.iter().zip(&read).map(|(s, span)| s.gather(span)).collect())
    }

    /// Writes a named tensor (a column block by reading its span, writing
    /// the block into it and uploading the span back).
    pub fn write_named(&self, name: &str, data: &[f32]) -> VkResult<()> {
        let slot = self.slot_named(name)?;
        if data.len() != slot.len {
            return Err(VkError::Invalid(format!("{name}: {} values for a tensor of {}", data.len(), slot.len)));
        }
        if slot.cols.is_none() {
            return self.upload(slot.buf, slot.off, data);
        }
        let mut span = self.download(&[slot.span()])?.remove(0);
        slot.scatter(&mut span, data);
        self.upload(slot.buf, slot.off, &span)
    }

    /// The state words: loss scale, step counter, hyper-parameters.
    pub fn write_state(&self, scale: &LossScale, step: u64, skipped_total: u64) -> VkResult<()> {
        let o = &self.opts;
        let mut w = [0u32; st::WORDS];
        let f = |x: f64| (x as f32).to_bits();
        w[st::SCALE] = f(scale.scale);
        w[st::GROWTH] = scale.growth_tracker;
        w[st::STEP] = u32::try_from(step).map_err(|_| VkError::Limit("step counter past 2^32".into()))?;
        w[st::STEP_SCALE] = f(scale.scale);
        w[st::CLIP_FACTOR] = f(1.0);
        w[st::SKIPPED_TOTAL] = skipped_total.min(u32::MAX as u64) as u32;
        w[st::LR] = f(o.lr);
        w[st::BETA1] = f(o.beta1);
        w[st::BETA2] = f(o.beta2);
        w[st::EPS] = f(o.eps);
        w[st::WD] = f(o.weight_decay);
        w[st::CLIP] = f(o.clip);
        w[st::DYNAMIC] = scale.dynamic as u32;
        w[st::GROWTH_INTERVAL] = scale.growth_interval;
        w[st::GROWTH_FACTOR] = f(scale.growth_factor);
        w[st::BACKOFF] = f(scale.backoff_factor);
        let data: Vec<f32> = w.iter().map(|&x| f32::from_bits(x)).collect();
        self.upload(&self.state, 0, &data)
    }

    pub fn read_state(&self) -> VkResult<[u32; st::WORDS]> {
        Ok(state_words(&self.download(&[(&self.state, 0, st::WORDS)])?.remove(0)))
    }

    /// Changes the hyper-parameters (e.g. a learning-rate schedule), keeping
    /// the step counter, the loss scale and the moments.
    pub fn set_options(&mut self, opts: &StepOptions) -> VkResult<()> {
        // The token cap is recorded into the step; the rest lives in the state.
        if opts.token_cap != self.opts.token_cap {
            self.forget_replay();
        }
        self.opts = *opts;
        let (scale, step, skipped) = self.loss_scale_and_step()?;
        self.write_state(&scale, step, skipped)
    }

    /// The loss scale, the AdamW step counter and the skipped-step count.
    pub fn loss_scale_and_step(&self) -> VkResult<(LossScale, u64, u64)> {
        let w = self.read_state()?;
        let fl = |i: usize| f32::from_bits(w[i]) as f64;
        let scale = LossScale {
            dynamic: w[st::DYNAMIC] == 1,
            scale: fl(st::SCALE),
            growth_tracker: w[st::GROWTH],
            growth_interval: w[st::GROWTH_INTERVAL],
            growth_factor: fl(st::GROWTH_FACTOR),
            backoff_factor: fl(st::BACKOFF),
        };
        Ok((scale, w[st::STEP] as u64, w[st::SKIPPED_TOTAL] as u64))
    }

    pub fn set_optim_state(&self, s: &OptimState<f32>, scale: &LossScale) -> VkResult<()> {
        self.write_flat(FlatBuf::M, &self.layout.flatten(&s.m))?;
        self.write_flat(FlatBuf::V, &self.layout.flatten(&s.v))?;
        self.write_state(scale, s.step, 0)
    }

    pub fn optim_state(&self) -> VkResult<OptimState<f32>> {
        let (_, step, _) = self.loss_scale_and_step()?;
        Ok(OptimState { m: self.read_params(FlatBuf::M)?, v: self.read_params(FlatBuf::V)?, step })
    }

    /// Sizes the workspace for `batch` and writes its inputs.
    pub fn set_batch(&mut self, batch: &Batch) -> VkResult<()> {
        if batch.num_targets() == 0 {
            return Err(VkError::Invalid(
                "the batch has no target position (every row is shorter than 2 tokens)".into(),
            ));
        }
        u(batch.t * batch.rows * self.cfg.vocab.max(3 * self.cfg.hidden), "batch elements")?;
        let fits = self.ws.as_ref().is_some_and(|w| w.t == batch.t && w.b == batch.rows);
        if !fits {
            self.forget_replay();
            self.ws = None;
            let (path, copies) = (self.path, self.coopmat_recurrence_capable());
            let shape = (batch.t, batch.rows);
            self.ws = Some(Workspace::new(&self.ctx, &self.cfg, shape, self.layout.total, path, copies)?);
        }
        let ws = self.ws.as_mut().expect("set above");
        ws.write_batch(&self.cfg, batch)?;
        if let Some(c) = &self.carry {
            if c.rows != batch.rows || c.hidden != self.cfg.hidden || c.h0.len() != self.cfg.layers {
                return Err(VkError::Invalid(format!(
                    "the carried state is for {} rows; the batch has {}",
                    c.rows, batch.rows
                )));
            }
            let ws = self.ws()?;
            for (buf, h0) in ws.carry_h0.iter().zip(&c.h0) {
                self.upload(buf, 0, h0)?;
            }
            self.upload(&ws.s_pre, 0, &c.prefix)?;
        }
        self.settle_recurrence()
    }

    pub fn workspace(&self) -> Option<&Workspace> {
        self.ws.as_ref()
    }

    pub(super) fn ws(&self) -> VkResult<&Workspace> {
        self.ws.as_ref().ok_or_else(|| VkError::Invalid("no batch was set".into()))
    }
}

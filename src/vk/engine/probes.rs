//! Timing probes: the grid kernels with parts switched off (the barrier
//! alone, no product, no gates), the two wavefronts, the per-layer
//! cooperative-matrix grid kernels and the one-workgroup recurrences
//! likewise. What they write is meaningless; what they report is device time.

use super::kernels::*;
use super::policy::Recurrence;
use super::{BWD_WAVE_LAG, Engine, FWD_WAVE_LAG, u};
use crate::vk::{Buffer, KernelSpec, Sequence, VkError, VkResult};

impl Engine {
    /// Device milliseconds of `steps - 1` grid-wide barriers alone (the
    /// forward grid kernel with its arithmetic switched off): what the
    /// dependent steps of a recurrence cost at the least. `None` without
    /// timestamps.
    pub fn probe_grid_barrier(&self, steps: usize) -> VkResult<Option<f64>> {
        self.probe_grid(steps, 1)
    }

    /// Device milliseconds of the forward grid kernel over `steps` steps of
    /// layer 0 with parts switched off by `flag` (1: only the barriers; bits
    /// 2, 4, 8: no barrier, no product, no gates). A timing probe: what it
    /// writes is meaningless.
    pub fn probe_grid(&self, steps: usize, flag: u32) -> VkResult<Option<f64>> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        let p = ModelPush {
            flag,
            t: 0,
            n: u(steps, "steps")?,
            off0: self.off("gru.weight_hh_l0") as u32,
            off1: self.off("gru.bias_hh_l0") as u32,
            ..self.push(ws)
        };
        // The barrier alone on the kernel the step uses; the parts of a step
        // on the f32 kernel (the cooperative-matrix one has no such switches).
        let bufs = self.grid_fwd_bufs(ws, lb, 0);
        let (spec, groups, bufs) = match self.grid_kernel(ws, 0, false)? {
            (fwd, groups) if flag == 1 => (fwd, groups, &bufs[..]),
            _ => {
                let f32_kernel = grid_specs(self.cfg.hidden, self.grid_noncoherent(false)).0;
                (f32_kernel, self.cfg.hidden.div_ceil(GRID_UNITS), &bufs[..f32_kernel.bindings.len()])
            }
        };
        self.dispatch(&mut seq, spec, bufs, &p, groups, "grid barrier probe")?;
        let t = seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Invalid("the grid barrier gave up waiting: workgroups not resident at once".into()));
        }
        Ok(t.dispatches.last().and_then(|d| d.1).map(|ns| ns / 1e6))
    }

    /// Device milliseconds of the backward wavefront over the workspace's
    /// T + BWD_WAVE_LAG intervals with parts switched off by `flag` (gru_bwd_wave_cm:
    /// bits 2, 4, 8, 16: no operand loads, no products, no stores, no step
    /// inputs; 32: on the kernel variant whose operand loads are not
    /// `coherent`; 64: on the one whose products are FMAs, where it is
    /// built; 2048, or any of the products' parts 128-8192, on
    /// `gru_bwd_wave_cm_nc_probe`, where the step runs `gru_bwd_wave_cm_nc`).
    /// A timing probe: what it writes is meaningless. `None` where the step
    /// has no backward wavefront or no timestamps, or the kernel asked for
    /// does not run here. The time is the sum of the dispatches the
    /// intervals are cut into.
    pub fn probe_bwd_wave(&self, flag: u32) -> VkResult<Option<f64>> {
        if !self.backward_wave() || self.recurrence != Recurrence::Grid {
            return Ok(None);
        }
        let on_probe_variant = flag & (128 | 256 | 512 | 1024 | 2048 | 4096 | 8192) != 0;
        let spec = match flag & 96 {
            _ if on_probe_variant && !std::ptr::eq(self.wave_spec(false), &GRU_BWD_WAVE_CM_NC) => return Ok(None),
            _ if on_probe_variant && GRU_BWD_WAVE_CM_NC_PROBE.spirv.is_empty() => return Ok(None),
            _ if on_probe_variant => &GRU_BWD_WAVE_CM_NC_PROBE,
            0 => &GRU_BWD_WAVE_CM,
            32 => &GRU_BWD_WAVE_CM_NC,
            _ if GRU_BWD_WAVE_SC_NC.spirv.is_empty() => return Ok(None),
            _ => &GRU_BWD_WAVE_SC_NC,
        };
        let ws = self.ws()?;
        self.time_wave(spec, self.wave_bwd_args(ws)?, flag & !(96 | 2048), BWD_WAVE_LAG)
    }

    /// Device milliseconds of the forward wavefront over the workspace's
    /// T + FWD_WAVE_LAG intervals with parts switched off by `flag`: 1, only
    /// the barriers, on the kernel the step runs; else on
    /// `gru_fwd_wave_cm_nc_probe`, bits 2, 4, 8, 16: no operand loads, no
    /// products, no stores, no step inputs (0: the whole interval), and the
    /// products' parts, 128-8192 (the shader's header). A timing
    /// probe: what it writes is meaningless. `None` where the step has no
    /// forward wavefront or no timestamps, and for the parts where it does
    /// not run `gru_fwd_wave_cm_nc` (the probe's kernel is that one).
    pub fn probe_fwd_wave(&self, flag: u32) -> VkResult<Option<f64>> {
        if !self.forward_wave() || self.recurrence != Recurrence::Grid {
            return Ok(None);
        }
        let spec = match flag {
            1 => self.wave_spec(true),
            _ if std::ptr::eq(self.wave_spec(true), &GRU_FWD_WAVE_CM_NC)
                && !GRU_FWD_WAVE_CM_NC_PROBE.spirv.is_empty() =>
            {
                &GRU_FWD_WAVE_CM_NC_PROBE
            }
            _ => return Ok(None),
        };
        let ws = self.ws()?;
        self.time_wave(spec, self.wave_fwd_args(ws)?, flag, FWD_WAVE_LAG)
    }

    /// Device milliseconds of layer 0's per-layer grid kernel on cooperative
    /// matrices, forward or backward, over the workspace's T steps with parts
    /// switched off by `flag` (`gru_*_grid_cm_nc_probe`: bits 2, 4, 8, 16: no
    /// operand loads, no product, no stores, no step inputs; 0: the whole
    /// step). A timing probe: what it writes is meaningless. `None` where the
    /// step does not run `gru_*_grid_cm_nc` in that direction (the probe's
    /// kernel is that one) or has no timestamps.
    pub fn probe_grid_cm(&self, backward: bool, flag: u32) -> VkResult<Option<f64>> {
        let wave = if backward { self.backward_wave() } else { self.forward_wave() };
        if self.recurrence != Recurrence::Grid || wave || self.wg_kernel(0, backward).is_some() {
            return Ok(None);
        }
        let ws = self.ws()?;
        let (step, probe) = match backward {
            false => (&GRU_FWD_GRID_CM_NC, &GRU_FWD_GRID_CM_NC_PROBE),
            true => (&GRU_BWD_GRID_CM_NC, &GRU_BWD_GRID_CM_NC_PROBE),
        };
        let (spec, groups) = self.grid_kernel(ws, 0, backward)?;
        if !std::ptr::eq(spec, step) || probe.spirv.is_empty() {
            return Ok(None);
        }
        let lb = &ws.layers[0];
        // W_hh and (read by the forward kernel only) b_hh, as the step passes them.
        let off0 = self.off("gru.weight_hh_l0") as u32;
        let off1 = self.off("gru.bias_hh_l0") as u32;
        let p = ModelPush { off0, off1, ..self.push(ws) };
        let bufs = if backward { self.grid_bwd_bufs(ws, lb, 0) } else { self.grid_fwd_bufs(ws, lb, 0) };
        let steps: Vec<usize> = if backward { (0..ws.t).rev().collect() } else { (0..ws.t).collect() };
        self.time_grid(probe, (p, bufs, groups), flag, steps)
    }

    /// Device milliseconds of the wavefront `spec` with its arguments
    /// (push constants, buffers, workgroups) and `flag`, over the
    /// workspace's T + `lag` intervals.
    fn time_wave(
        &self,
        spec: &'static KernelSpec,
        args: (ModelPush, Vec<&Buffer>, usize),
        flag: u32,
        lag: usize,
    ) -> VkResult<Option<f64>> {
        self.time_grid(spec, args, flag, (0..self.ws()?.t + lag).collect())
    }

    /// Device milliseconds of the grid kernel `spec` with its arguments and
    /// `flag` over `steps` (intervals, in the order the kernel walks them):
    /// the sum of the dispatches they are cut into (not only the last one's).
    fn time_grid(
        &self,
        spec: &'static KernelSpec,
        (p, bufs, groups): (ModelPush, Vec<&Buffer>, usize),
        flag: u32,
        steps: Vec<usize>,
    ) -> VkResult<Option<f64>> {
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        let p = ModelPush { flag, ..p };
        self.record_grid(&mut seq, (spec, groups), &bufs, &p, steps.into_iter().map(|t| (t, 1)), spec.name)?;
        let t = seq.submit()?;
        let chunks = t.dispatches.iter().filter(|d| d.0 == spec.name);
        Ok(chunks.map(|d| d.1).sum::<Option<f64>>().map(|ns| ns / 1e6))
    }

    /// Device milliseconds of layer 0's one-workgroup recurrence, forward or
    /// backward, over the workspace's T steps with parts switched off by
    /// `flag` (`gru_*_wg_cm`: bits 2, 4, 8, 16: no product, no stores to
    /// memory, no loads of the steps' inputs, no barriers in the steps). A
    /// timing probe: what it writes is meaningless. `None` where the step
    /// does not run the one-workgroup kernels or has no timestamps.
    pub fn probe_wg(&self, backward: bool, flag: u32) -> VkResult<Option<f64>> {
        let Some(spec) = self.wg_kernel(0, backward) else {
            return Ok(None);
        };
        let ws = self.ws()?;
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        self.record_wg(&mut seq, ws, 0, backward, spec, flag)?;
        let t = seq.submit()?;
        let chunks = t.dispatches.iter().filter(|d| d.0.ends_with("one workgroup"));
        Ok(chunks.map(|d| d.1).sum::<Option<f64>>().map(|ns| ns / 1e6))
    }
}

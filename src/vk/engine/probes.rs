//! Timing probes of the `lab` feature: the grid kernels with parts switched
//! off (no barrier, no product, no gates), the two wavefronts, the per-layer
//! cooperative-matrix grid kernels and the one-workgroup recurrences
//! likewise, by the bits of `shaders/include/probe_bits.glsl`
//! ([`probe_bits`]); and the kernels' variants built for them. What a probe
//! writes is meaningless; what it reports is device time.

use super::kernels::*;
use super::policy::Recurrence;
use super::{BWD_WAVE_LAG, Engine, FWD_WAVE_LAG};
use crate::vk::shaders;
use crate::vk::{Buffer, KernelSpec, Sequence, VkResult};

/// `GRU_FWD_WAVE_CM_NC` with the probe's switches (`WAVE_PROBE`), which the
/// step's kernels do not carry.
pub static GRU_FWD_WAVE_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_fwd_wave_cm_nc_probe",
    spirv: shaders::optional(shaders::GRU_FWD_WAVE_CM_NC_PROBE),
    ..GRU_FWD_WAVE_CM
};
/// `GRU_BWD_WAVE_CM_NC` with the switches of the products' parts
/// (`WAVE_PROBE`), which the step's kernels do not carry.
pub static GRU_BWD_WAVE_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_bwd_wave_cm_nc_probe",
    spirv: shaders::optional(shaders::GRU_BWD_WAVE_CM_NC_PROBE),
    ..GRU_BWD_WAVE_CM
};
/// The `_nc` cooperative-matrix grid kernels with the probe's switches
/// (`GRID_PROBE`), which the step's kernels do not carry.
pub static GRU_FWD_GRID_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_fwd_grid_cm_nc_probe",
    spirv: shaders::optional(shaders::GRU_FWD_GRID_CM_NC_PROBE),
    ..GRU_FWD_GRID_CM
};
pub static GRU_BWD_GRID_CM_NC_PROBE: KernelSpec = KernelSpec {
    name: "gru_bwd_grid_cm_nc_probe",
    spirv: shaders::optional(shaders::GRU_BWD_GRID_CM_NC_PROBE),
    ..GRU_BWD_GRID_CM
};

/// Which build of the backward wavefront [`Engine::probe_bwd_wave`] times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveVariant {
    /// `gru_bwd_wave_cm`: coherent operand loads.
    Coherent,
    /// `gru_bwd_wave_cm_nc`: operand loads without `coherent`.
    Noncoherent,
    /// `gru_bwd_wave_fma_nc`: the products as FMAs, where it is built.
    Fma,
    /// `gru_bwd_wave_cm_nc_probe`, which also switches the products' own
    /// parts off, where the step runs `gru_bwd_wave_cm_nc`.
    Probe,
}

impl Engine {
    /// Device milliseconds of the f32 forward grid kernel over `steps` steps
    /// of layer 0 with parts switched off by `flag` (`probe_bits::GRID_*`;
    /// [`probe_bits::BARRIERS_ONLY`]: the barriers alone on the kernel the
    /// step runs, [`Engine::grid_barrier_ms`]). `None` without timestamps.
    pub fn probe_grid(&self, steps: usize, flag: u32) -> VkResult<Option<f64>> {
        self.time_grid_fwd(steps, flag, flag != probe_bits::BARRIERS_ONLY)
    }

    /// Device milliseconds of the backward wavefront's `variant` over the
    /// workspace's T + BWD_WAVE_LAG intervals with parts switched off by
    /// `flag` (`probe_bits`: the wavefronts' bits; the products' own parts
    /// on [`WaveVariant::Probe`] only). `None` where the step has no backward
    /// wavefront or no timestamps, or the variant does not run here. The
    /// time is the sum of the dispatches the intervals are cut into.
    pub fn probe_bwd_wave(&self, variant: WaveVariant, flag: u32) -> VkResult<Option<f64>> {
        if !self.backward_wave() || self.recurrence != Recurrence::Grid {
            return Ok(None);
        }
        let spec = match variant {
            WaveVariant::Coherent => &GRU_BWD_WAVE_CM,
            WaveVariant::Noncoherent => &GRU_BWD_WAVE_CM_NC,
            WaveVariant::Fma => &GRU_BWD_WAVE_FMA_NC,
            WaveVariant::Probe if std::ptr::eq(self.wave_spec(false), &GRU_BWD_WAVE_CM_NC) => &GRU_BWD_WAVE_CM_NC_PROBE,
            WaveVariant::Probe => return Ok(None),
        };
        if spec.spirv.is_empty() {
            return Ok(None);
        }
        let ws = self.ws()?;
        self.time_wave(spec, self.wave_bwd_args(ws)?, flag, BWD_WAVE_LAG)
    }

    /// Device milliseconds of the forward wavefront over the workspace's
    /// T + FWD_WAVE_LAG intervals with parts switched off by `flag`:
    /// [`probe_bits::BARRIERS_ONLY`] on the kernel the step runs; any other
    /// (the wavefronts' bits, the products' own parts included; 0: the whole
    /// interval) on `gru_fwd_wave_cm_nc_probe`. `None` where the step has no
    /// forward wavefront or no timestamps, and for the parts where it does
    /// not run `gru_fwd_wave_cm_nc` (the probe's kernel is that one).
    pub fn probe_fwd_wave(&self, flag: u32) -> VkResult<Option<f64>> {
        if !self.forward_wave() || self.recurrence != Recurrence::Grid {
            return Ok(None);
        }
        let spec = match flag {
            probe_bits::BARRIERS_ONLY => self.wave_spec(true),
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
    /// switched off by `flag` (`gru_*_grid_cm_nc_probe`, the wavefronts'
    /// bits [`probe_bits::NO_OPERAND_LOADS`] to [`probe_bits::NO_STEP_INPUTS`];
    /// 0: the whole step). `None` where the step does not run
    /// `gru_*_grid_cm_nc` in that direction (the probe's kernel is that one)
    /// or has no timestamps.
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
        Ok(kernel_ms(&seq.submit()?, spec))
    }

    /// Device milliseconds of layer 0's one-workgroup recurrence, forward or
    /// backward, over the workspace's T steps with parts switched off by
    /// `flag` (`probe_bits::WG_*`). `None` where the step does not run the
    /// one-workgroup kernels or has no timestamps.
    pub fn probe_wg(&self, backward: bool, flag: u32) -> VkResult<Option<f64>> {
        let Some(spec) = self.wg_kernel(0, backward) else {
            return Ok(None);
        };
        let ws = self.ws()?;
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        self.record_wg(&mut seq, ws, 0, backward, spec, flag)?;
        Ok(kernel_ms(&seq.submit()?, spec))
    }
}

/// The milliseconds of `timings`' dispatches of `spec` (None if one was untimed).
fn kernel_ms(timings: &crate::vk::Timings, spec: &KernelSpec) -> Option<f64> {
    let chunks = timings.dispatches.iter().filter(|d| d.kernel == spec.name);
    chunks.map(|d| d.ns).sum::<Option<f64>>().map(|ns| ns / 1e6)
}

//! How the GRU recurrences run: the [`Recurrence`] mode, its checks and
//! default, the fallback from the grid when its workgroups are not resident
//! together, and whether the cooperative-matrix and wavefront kernels run.

use super::env::EngineEnv;
use super::kernels::*;
use super::{Engine, Workspace};
use crate::vk::kernel::KernelSpec;
use crate::vk::{Context, Sequence, VkError, VkResult};

/// How the GRU recurrences run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recurrence {
    /// One workgroup per batch row walks the timesteps (`gru_*_seq`): any
    /// device, any width up to [`MAX_HIDDEN`].
    Seq,
    /// The grid kernels (`gru_*_grid`: the units spread over ceil(H/4)
    /// workgroups), one dispatch per timestep.
    Steps,
    /// The grid kernels walking every timestep in one dispatch, with a
    /// grid-wide barrier between steps: needs all workgroups resident at once (GPUs).
    Grid,
}

impl Recurrence {
    pub fn parse(s: &str) -> Result<Recurrence, String> {
        match s {
            "seq" => Ok(Recurrence::Seq),
            "steps" => Ok(Recurrence::Steps),
            "grid" => Ok(Recurrence::Grid),
            _ => Err(format!("unknown recurrence {s:?} (seq, steps or grid)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Recurrence::Seq => "seq",
            Recurrence::Steps => "steps",
            Recurrence::Grid => "grid",
        }
    }

    /// Whether `ctx` can run this mode for layers of width `h`, and if not, why.
    pub fn check(self, ctx: &Context, h: usize) -> VkResult<()> {
        if self == Recurrence::Seq {
            return Ok(());
        }
        if !ctx.report().features.subgroup_ops {
            return Err(VkError::Unsupported(format!(
                "the {} recurrence needs subgroup arithmetic and shuffles in compute shaders, which this device lacks",
                self.name()
            )));
        }
        if h > GRID_MAX_HIDDEN {
            return Err(VkError::Limit(format!(
                "hidden = {h}: the {} recurrence keeps its W_hh slice in shared memory and takes at most {GRID_MAX_HIDDEN}",
                self.name()
            )));
        }
        Ok(())
    }

    /// The default for `ctx` and width `h`: `DUALSCOPE_RECURRENCE` if set;
    /// else the grid on GPUs that can run it, and the per-row kernel on CPU
    /// devices (lavapipe), where a spinning barrier would starve the threads
    /// that run the other workgroups. See [`EngineEnv::recurrence_for`].
    pub fn default_for(ctx: &Context, h: usize) -> VkResult<Recurrence> {
        EngineEnv::from_env()?.recurrence_for(ctx, h)
    }
}

/// Whether grid recurrences of width `h` can take their products on
/// cooperative matrices when the f16 products run on `f16_path` (see
/// [`Engine::recurrence_on_coopmat`]).
pub(super) fn coopmat_recurrence_capable(f16_path: crate::vk::gemm::GemmPath, env: &EngineEnv, h: usize) -> bool {
    f16_path.coopmat()
        && !env.recurrence_product_f32
        && h.is_multiple_of(GRID_CM_TILE)
        && h <= GRID_MAX_HIDDEN
        && !GRU_FWD_GRID_CM.spirv.is_empty()
        && !GRU_BWD_GRID_CM.spirv.is_empty()
}

impl Engine {
    /// Chooses how the GRU recurrences run (an error where the device or the width cannot).
    pub fn set_recurrence(&mut self, r: Recurrence) -> VkResult<()> {
        r.check(&self.ctx, self.cfg.hidden)?;
        let old = self.recurrence;
        self.recurrence = r;
        if let Some(m) = self.pmap.clone()
            && let Err(e) = self.check_map(&m)
        {
            self.recurrence = old;
            return Err(e);
        }
        self.forget_replay();
        self.recurrence_auto = false;
        Ok(())
    }

    /// The grid recurrence where this device keeps all its workgroups
    /// resident, else [`Recurrence::Steps`] (the same kernels, one dispatch
    /// per timestep): checked at the next batch, as the default choice is.
    pub fn prefer_grid(&mut self) -> VkResult<()> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        self.forget_replay();
        self.recurrence = Recurrence::Grid;
        self.recurrence_auto = true;
        self.grid_checked = false;
        self.fallback = None;
        Ok(())
    }

    /// Why the default grid recurrence was given up for one dispatch per
    /// timestep (its barrier gave up waiting: this device did not run all
    /// the workgroups at once), if it was.
    pub fn recurrence_fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Whether this engine's grid recurrences can take their products on
    /// cooperative matrices (`gru_*_grid_cm`): the mixed step on the
    /// cooperative-matrix GEMM path, H a multiple of 16 up to
    /// [`GRID_MAX_HIDDEN`], the kernels built, and not switched off with
    /// `DUALSCOPE_RECURRENCE_PRODUCT=f32`.
    pub(super) fn coopmat_recurrence_capable(&self) -> bool {
        coopmat_recurrence_capable(self.f16_path, &self.env, self.cfg.hidden)
    }

    /// Workgroups of one layer's cooperative-matrix recurrence for `ws`'s
    /// batch: 16 rows × 16 units each.
    pub(super) fn cm_groups(&self, ws: &Workspace) -> usize {
        ws.b.div_ceil(GRID_CM_TILE) * (self.cfg.hidden / GRID_CM_TILE)
    }

    /// Whether the current batch's recurrences run on the cooperative-matrix
    /// grid kernels: where the device and shape allow cooperative-matrix recurrences, with the
    /// grid kernels (not `seq`), and at most `GRID_MAX_GROUPS` workgroups
    /// of 16 rows × 16 units; under a precision map, every layer's in both
    /// directions (one layer's: [`Engine::layer_rec_cm`]).
    pub fn recurrence_on_coopmat(&self) -> bool {
        (0..self.cfg.layers).all(|l| self.layer_rec_cm(l, false) && self.layer_rec_cm(l, true))
    }

    /// Whether the current batch's forward runs both layers in one wavefront
    /// dispatch (`gru_fwd_wave_cm`): on cooperative matrices, two layers, at
    /// most `GRID_MAX_GROUPS` workgroups for both, and not switched off
    /// with `DUALSCOPE_WAVE=0`.
    pub fn forward_wave(&self) -> bool {
        self.wave_fits(&GRU_FWD_WAVE_CM, false)
    }

    /// The same for the backward (`gru_bwd_wave_cm`).
    pub fn backward_wave(&self) -> bool {
        self.wave_fits(&GRU_BWD_WAVE_CM, true)
    }

    /// Whether the wavefront kernel of that direction runs and may read its
    /// operands (the f16 copies) without `coherent` (`*_wave_cm_nc`, see
    /// their headers): where rows are whole 128-byte lines (H % 64 == 0).
    /// `DUALSCOPE_WAVE_COHERENT=1` keeps the coherent loads everywhere.
    pub fn wave_noncoherent(&self, forward: bool) -> bool {
        let wave = if forward { self.forward_wave() } else { self.backward_wave() };
        wave && self.cfg.hidden.is_multiple_of(64) && !self.env.wave_coherent
    }

    /// The wavefront kernel of that direction: the variant without
    /// `coherent` operand loads where [`Engine::wave_noncoherent`] allows it.
    pub(super) fn wave_spec(&self, forward: bool) -> &'static KernelSpec {
        match (forward, self.wave_noncoherent(forward)) {
            (true, true) => &GRU_FWD_WAVE_CM_NC,
            (true, false) => &GRU_FWD_WAVE_CM,
            (false, true) => &GRU_BWD_WAVE_CM_NC,
            (false, false) => &GRU_BWD_WAVE_CM,
        }
    }

    /// Whether the wavefront `spec` of that direction runs: both layers'
    /// recurrences of the direction on cooperative matrices (a precision map
    /// with the layers in different precisions runs them one grid each).
    pub(super) fn wave_fits(&self, spec: &KernelSpec, backward: bool) -> bool {
        let Some(ws) = self.ws.as_ref() else { return false };
        (0..self.cfg.layers).all(|l| self.layer_rec_cm(l, backward))
            && self.cfg.layers == 2
            && 2 * self.cm_groups(ws) <= GRID_MAX_GROUPS
            && !spec.spirv.is_empty()
            && !self.env.wave_off
            && ws.layers.iter().all(|lb| lb.d_gi16.is_some())
    }

    /// Runs both grid kernels with their arithmetic switched off (a few
    /// grid barriers each, on the layer-0 buffers of the current batch):
    /// an error if a barrier gave up waiting, that is, if this device does
    /// not keep all the workgroups of a grid dispatch resident at once.
    pub(super) fn check_grid_residency(&self) -> VkResult<()> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let ((fwd, fwd_groups), (bwd, groups)) = (self.grid_kernel(ws, 0, false)?, self.grid_kernel(ws, 0, true)?);
        let f1 = grid_poll_budget(&self.ctx);
        let p = ModelPush { flag: 1, t: 0, n: 4, f1, ..self.push(ws) };
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        let bufs = self.grid_fwd_bufs(ws, lb, 0);
        self.dispatch(&mut seq, fwd, &bufs, &p, fwd_groups, "grid residency (forward)")?;
        seq.fill(&ws.sync, 0)?;
        let bufs = self.grid_bwd_bufs(ws, lb, 0);
        self.dispatch(&mut seq, bwd, &bufs, &p, groups, "grid residency (backward)")?;
        if self.forward_wave() {
            let (wp, bufs, groups) = self.wave_fwd_args(ws)?;
            let wp = ModelPush { flag: 1, t: 0, n: 4, f1, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.dispatch(&mut seq, &GRU_FWD_WAVE_CM, &bufs, &wp, groups, "grid residency (forward wavefront)")?;
        }
        if self.backward_wave() {
            let (wp, bufs, groups) = self.wave_bwd_args(ws)?;
            let wp = ModelPush { flag: 1, t: 0, n: 4, f1, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.dispatch(&mut seq, &GRU_BWD_WAVE_CM, &bufs, &wp, groups, "grid residency (backward wavefront)")?;
        }
        seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Unsupported(format!(
                "the grid recurrence's barrier gave up waiting: {} does not keep all {groups} workgroups of a \
                 grid dispatch resident at once",
                self.ctx.report().name
            )));
        }
        Ok(())
    }

    /// At the first batch, checks that a default grid recurrence can run
    /// here, and falls back to one dispatch per timestep where it cannot.
    pub(super) fn settle_recurrence(&mut self) -> VkResult<()> {
        if self.recurrence != Recurrence::Grid || !self.recurrence_auto || self.grid_checked {
            return Ok(());
        }
        self.grid_checked = true;
        match self.check_grid_residency() {
            Ok(()) => Ok(()),
            Err(VkError::Unsupported(why)) => {
                self.forget_replay();
                self.recurrence = Recurrence::Steps;
                self.fallback = Some(format!("{why}; the recurrences run one dispatch per timestep instead"));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

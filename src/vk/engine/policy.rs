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

/// Whether the small layers' recurrences run in one workgroup each
/// (`gru_*_wg_cm`, `gru_*_wg_fma`; [`Engine::set_wg`], `DUALSCOPE_WG` in a
/// `lab` build). Off by default: on the
/// H200 the cooperative-matrix kernels took 9–10 µs a step at `small`,
/// against 2.7–3.5 µs per interval of the wavefronts (docs/results/ab.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WgChoice {
    /// The cooperative-matrix kernels wherever the recurrences run on
    /// cooperative matrices and the shape fits (B ≤ 16, H ≤ 128, H % 16 == 0;
    /// `DUALSCOPE_WG=1`).
    Auto,
    /// Never (`DUALSCOPE_WG=0`, the default): the grid kernels and wavefronts.
    #[default]
    Off,
    /// The FMA variant wherever the shape fits and the recurrence stage is
    /// f16, with or without cooperative matrices (`DUALSCOPE_WG=fma`).
    Fma,
}

impl WgChoice {
    pub fn parse(s: &str) -> Result<WgChoice, String> {
        match s {
            "" | "1" | "auto" => Ok(WgChoice::Auto),
            "0" | "off" => Ok(WgChoice::Off),
            "fma" => Ok(WgChoice::Fma),
            _ => Err(format!("unknown value {s:?} (0, 1 or fma)")),
        }
    }
}

/// Whether `spec` is a one-workgroup recurrence with its product as FMAs
/// (`gru_*_wg_fma`), not on cooperative matrices.
pub(super) fn is_wg_fma(spec: &KernelSpec) -> bool {
    std::ptr::eq(spec, &GRU_FWD_WG_FMA) || std::ptr::eq(spec, &GRU_BWD_WG_FMA)
}

/// Whether layers of width `h` fit the one-workgroup recurrences (the batch
/// must also have at most [`WG_MAX_ROWS`] rows).
pub(super) fn wg_width_fits(h: usize) -> bool {
    h.is_multiple_of(GRID_CM_TILE) && h <= WG_MAX_HIDDEN
}

/// The wavefront kernel of that direction with its products as FMAs.
fn wave_fma_spec(forward: bool) -> &'static KernelSpec {
    if forward { &GRU_FWD_WAVE_FMA_NC } else { &GRU_BWD_WAVE_FMA_NC }
}

/// Whether grid recurrences of width `h` can take their products on
/// cooperative matrices when the f16 products run on `f16_path` (see
/// [`Engine::recurrence_on_coopmat`]).
pub(super) fn coopmat_recurrence_capable(f16_path: crate::vk::gemm::GemmPath, env: &EngineEnv, h: usize) -> bool {
    f16_path.coopmat()
        && !env.recurrence_product_f32()
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
    /// [`GRID_MAX_HIDDEN`], the kernels built, and not switched off with a
    /// `lab` build's `DUALSCOPE_RECURRENCE_PRODUCT=f32`.
    pub(super) fn coopmat_recurrence_capable(&self) -> bool {
        coopmat_recurrence_capable(self.f16_path, &self.env, self.cfg.hidden)
    }

    /// Chooses where the one-workgroup recurrences run (what a `lab` build's
    /// `DUALSCOPE_WG` sets when the engine is built).
    pub fn set_wg(&mut self, c: WgChoice) {
        self.forget_replay();
        self.env.wg = c;
    }

    /// Chooses whether the wavefronts take their products as FMAs (what a
    /// `lab` build's `DUALSCOPE_WAVE_SCALAR` sets when the engine is built;
    /// None: by the batch's rows, see [`Engine::wave_scalar`]).
    pub fn set_wave_scalar(&mut self, on: Option<bool>) {
        self.forget_replay();
        self.env.wave_scalar = on;
    }

    /// Layer `l`'s one-workgroup recurrence kernel of that direction for the
    /// current batch, if it runs: the shape fits (B ≤ [`WG_MAX_ROWS`], H ≤
    /// [`WG_MAX_HIDDEN`], H % 16 == 0), no carried state (the per-row kernels
    /// read h_{-1}), and either the cooperative-matrix kernel where this layer's
    /// recurrence runs on cooperative matrices ([`WgChoice::Auto`]) or the FMA
    /// kernel where the stage is f16 ([`WgChoice::Fma`]).
    pub(super) fn wg_kernel(&self, l: usize, backward: bool) -> Option<&'static KernelSpec> {
        let ws = self.ws.as_ref()?;
        if !wg_width_fits(self.cfg.hidden) || ws.b > WG_MAX_ROWS || self.carry_prefix().is_some() {
            return None;
        }
        let stage = crate::step::MapStage { kind: crate::step::StageKind::GruRec, layer: l, backward };
        match self.env.wg {
            WgChoice::Off => None,
            WgChoice::Auto => {
                let spec = if backward { &GRU_BWD_WG_CM } else { &GRU_FWD_WG_CM };
                (self.layer_rec_cm(l, backward) && !spec.spirv.is_empty()).then_some(spec)
            }
            WgChoice::Fma => (self.precision_map().get(stage) == crate::step::Precision::F16).then_some(if backward {
                &GRU_BWD_WG_FMA
            } else {
                &GRU_FWD_WG_FMA
            }),
        }
    }

    /// The one-workgroup kernels of the current batch's recurrences, if any
    /// layer runs one: `"cm"` (cooperative matrices) or `"fma"`.
    pub fn recurrence_wg(&self) -> Option<&'static str> {
        let specs = (0..self.cfg.layers).flat_map(|l| [self.wg_kernel(l, false), self.wg_kernel(l, true)]);
        specs.flatten().next().map(|s| if is_wg_fma(s) { "fma" } else { "cm" })
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
    /// with a `lab` build's `DUALSCOPE_WAVE=0`.
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
    /// A `lab` build's `DUALSCOPE_WAVE_COHERENT=1` keeps the coherent loads everywhere.
    pub fn wave_noncoherent(&self, forward: bool) -> bool {
        let wave = if forward { self.forward_wave() } else { self.backward_wave() };
        wave && self.cfg.hidden.is_multiple_of(64) && !self.env.wave_coherent()
    }

    /// Whether the grid kernels read their operands (`h_{t-1}`, `d_gh[t+1]`)
    /// without `coherent` (`gru_*_grid_nc`, `gru_*_grid_cm_nc`, see their
    /// headers): where rows are whole 128-byte lines (H % 32 == 0 in f32; the
    /// cooperative-matrix kernels' f16 copies also need H % 64 == 0).
    /// A `lab` build's `DUALSCOPE_WAVE_COHERENT=1` keeps the coherent loads here too.
    pub fn grid_noncoherent(&self, coopmat: bool) -> bool {
        self.cfg.hidden.is_multiple_of(if coopmat { 64 } else { 32 }) && !self.env.wave_coherent()
    }

    /// Whether the wavefront of that direction takes its products as f32
    /// FMAs (`gru_*_wave_fma_nc`): where it reads its operands without
    /// `coherent`, the kernel is built, and [`Engine::set_wave_scalar`] says so
    /// or (unset) the batch has at most [`WAVE_SCALAR_ROWS`] rows.
    pub fn wave_scalar(&self, forward: bool) -> bool {
        let few = self.ws.as_ref().is_some_and(|ws| ws.b <= WAVE_SCALAR_ROWS);
        self.wave_noncoherent(forward)
            && !wave_fma_spec(forward).spirv.is_empty()
            && self.env.wave_scalar.unwrap_or(few)
    }

    /// The wavefront kernel of that direction: the variant without
    /// `coherent` operand loads where [`Engine::wave_noncoherent`] allows it,
    /// its products as FMAs where [`Engine::wave_scalar`] says so.
    pub(super) fn wave_spec(&self, forward: bool) -> &'static KernelSpec {
        if self.wave_scalar(forward) {
            return wave_fma_spec(forward);
        }
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
            && 2 * self.cm_groups(ws) <= if self.env.wave_wide() { WAVE_WIDE_MAX_GROUPS } else { GRID_MAX_GROUPS }
            && !spec.spirv.is_empty()
            && !self.env.wave_off()
            && ws.layers.iter().all(|lb| lb.d_gi16.is_some())
            && (0..self.cfg.layers).all(|l| self.wg_kernel(l, backward).is_none())
    }

    /// Runs both grid kernels with their arithmetic switched off (a few
    /// grid barriers each, on the layer-0 buffers of the current batch):
    /// an error if a barrier gave up waiting, that is, if this device does
    /// not keep all the workgroups of a grid dispatch resident at once.
    pub(super) fn check_grid_residency(&self) -> VkResult<()> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let ((fwd, fwd_groups), (bwd, bwd_groups)) = (self.grid_kernel(ws, 0, false)?, self.grid_kernel(ws, 0, true)?);
        let f1 = grid_poll_budget(&self.ctx);
        let p = ModelPush { flag: probe_bits::BARRIERS_ONLY, t: 0, n: 4, f1, ..self.push(ws) };
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        let bufs = self.grid_fwd_bufs(ws, lb, 0);
        self.dispatch(&mut seq, fwd, &bufs, &p, fwd_groups, "grid residency (forward)")?;
        seq.fill(&ws.sync, 0)?;
        let bufs = self.grid_bwd_bufs(ws, lb, 0);
        self.dispatch(&mut seq, bwd, &bufs, &p, bwd_groups, "grid residency (backward)")?;
        // The most workgroups one of these dispatches needs resident at once.
        let mut most = fwd_groups.max(bwd_groups);
        if self.forward_wave() {
            let (wp, bufs, groups) = self.wave_fwd_args(ws)?;
            let wp = ModelPush { flag: probe_bits::BARRIERS_ONLY, t: 0, n: 4, f1, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.dispatch(&mut seq, &GRU_FWD_WAVE_CM, &bufs, &wp, groups, "grid residency (forward wavefront)")?;
            most = most.max(groups);
        }
        if self.backward_wave() {
            let (wp, bufs, groups) = self.wave_bwd_args(ws)?;
            let wp = ModelPush { flag: probe_bits::BARRIERS_ONLY, t: 0, n: 4, f1, ..wp };
            seq.fill(&ws.sync, 0)?;
            self.dispatch(&mut seq, &GRU_BWD_WAVE_CM, &bufs, &wp, groups, "grid residency (backward wavefront)")?;
            most = most.max(groups);
        }
        seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Unsupported(format!(
                "the grid recurrence's barrier gave up waiting: {} does not keep all the workgroups of its grid \
                 dispatches (up to {most}) resident at once",
                self.ctx.report().name
            )));
        }
        Ok(())
    }

    /// Device milliseconds of `steps - 1` grid-wide barriers alone: layer
    /// 0's forward grid kernel, the one the step runs, with its arithmetic
    /// switched off ([`probe_bits::BARRIERS_ONLY`]). What the dependent steps
    /// of a recurrence cost at the least (the bench's floor); `None` without
    /// timestamps.
    pub fn grid_barrier_ms(&self, steps: usize) -> VkResult<Option<f64>> {
        self.time_grid_fwd(steps, probe_bits::BARRIERS_ONLY, false)
    }

    /// Device milliseconds of layer 0's forward grid kernel (the step's, or
    /// with `f32_kernel` the f32 one, whose other switches a lab probe
    /// times) over `steps` steps with `flag` in its push constants, in one
    /// dispatch; an error where the grid barrier gave up waiting.
    pub(super) fn time_grid_fwd(&self, steps: usize, flag: u32, f32_kernel: bool) -> VkResult<Option<f64>> {
        Recurrence::Grid.check(&self.ctx, self.cfg.hidden)?;
        let ws = self.ws()?;
        let lb = &ws.layers[0];
        let mut seq = Sequence::new(&self.ctx)?;
        self.record_begin(&mut seq)?;
        seq.fill(&ws.sync, 0)?;
        let p = ModelPush {
            flag,
            t: 0,
            n: super::u(steps, "steps")?,
            off0: self.off("gru.weight_hh_l0") as u32,
            off1: self.off("gru.bias_hh_l0") as u32,
            ..self.push(ws)
        };
        let bufs = self.grid_fwd_bufs(ws, lb, 0);
        let (spec, groups, bufs) = if f32_kernel {
            let spec = grid_specs(self.cfg.hidden, self.grid_noncoherent(false)).0;
            (spec, self.cfg.hidden.div_ceil(GRID_UNITS), &bufs[..spec.bindings.len()])
        } else {
            let (spec, groups) = self.grid_kernel(ws, 0, false)?;
            (spec, groups, &bufs[..])
        };
        self.dispatch(&mut seq, spec, bufs, &p, groups, "grid kernel timed alone")?;
        let t = seq.submit()?;
        if self.read_state()?[st::GRID_FAIL] != 0 {
            return Err(VkError::Invalid("the grid barrier gave up waiting: workgroups not resident at once".into()));
        }
        Ok(t.dispatches.last().and_then(|d| d.ns).map(|ns| ns / 1e6))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// [`WgChoice`]'s values, a bad one refused with the value named; the
    /// widths the one-workgroup kernels take; their chunks stay under the
    /// loop guard and the cooperative-matrix variant takes `small`'s 128
    /// steps in one dispatch.
    #[test]
    fn wg_choice_widths_and_chunks() {
        assert_eq!(WgChoice::parse("0"), Ok(WgChoice::Off));
        assert_eq!(WgChoice::parse("fma"), Ok(WgChoice::Fma));
        assert_eq!(WgChoice::parse("1"), Ok(WgChoice::Auto));
        assert!(WgChoice::parse("yes").unwrap_err().contains("\"yes\""));
        assert!(wg_width_fits(16) && wg_width_fits(48) && wg_width_fits(128));
        assert!(!wg_width_fits(40) && !wg_width_fits(144));
        for fma in [false, true] {
            let h = WG_MAX_HIDDEN;
            assert!(wg_chunk(h, fma) * wg_step_loops(h, fma) + 2000 <= LOOP_BUDGET);
        }
        assert!(wg_chunk(128, false) >= 128);
    }
}

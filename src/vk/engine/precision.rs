//! The precision of each stage ([`PrecisionMap`]): which kernel each product,
//! recurrence and the embedding's gather run on, the checks that refuse a map
//! a stage has no kernel for, and the loss scale a map needs.
//!
//! Without a map (`--precision` alone) every product takes the engine's one
//! path and the recurrences take the cooperative-matrix kernels wherever they
//! can: today's step, unchanged. [`Engine::precision_map`] says what that
//! step does, stage by stage.

use super::kernels::*;
use super::policy::Recurrence;
use super::{Engine, EngineEnv, Workspace};
use crate::model::Config;
use crate::step::Fault;
use crate::step::{GemmChoice, MapStage, Precision, PrecisionMap, StageKind};
use crate::vk::gemm::{self, GemmPath};
use crate::vk::kernel::KernelSpec;
use crate::vk::{Context, VkError, VkResult};

/// What each stage of today's step in `precision` runs in on `ctx` for
/// `cfg` under `choice` (the map [`Engine::precision_map`] gives an engine
/// built so, before its first batch): the base a `--precision-map` applies to.
pub fn default_map(ctx: &Context, cfg: &Config, precision: Precision, choice: GemmChoice) -> VkResult<PrecisionMap> {
    let path = gemm::path_for(ctx, precision, choice)?;
    let env = EngineEnv::from_env()?;
    let cm = (super::policy::coopmat_recurrence_capable(path, &env, cfg.hidden)
        && env.recurrence_for(ctx, cfg.hidden)? != Recurrence::Seq)
        || wg_forced(&env, precision, cfg.hidden);
    Ok(PrecisionMap::default_for(precision, cfg.layers, cm))
}

/// Whether the one-workgroup FMA recurrences are asked for (`DUALSCOPE_WG=fma`)
/// and the mixed step's layers of width `h` fit them: their recurrences then
/// round like the cooperative-matrix ones (f16), with or without cooperative
/// matrices.
fn wg_forced(env: &EngineEnv, precision: Precision, h: usize) -> bool {
    env.wg == super::policy::WgChoice::Fma && precision == Precision::F16 && super::policy::wg_width_fits(h)
}

impl Engine {
    /// What each stage of this engine's step runs in: the map set with
    /// [`Engine::set_precision_map`], or today's step for the engine's
    /// precision ([`PrecisionMap::default_for`]; the recurrences in f16 where
    /// they run on cooperative matrices).
    pub fn precision_map(&self) -> PrecisionMap {
        match &self.pmap {
            Some(m) => m.clone(),
            None => {
                let cm = (self.coopmat_recurrence_capable() && self.recurrence != Recurrence::Seq)
                    || wg_forced(&self.env, self.precision(), self.cfg.hidden);
                PrecisionMap::default_for(self.precision(), self.cfg.layers, cm)
            }
        }
    }

    /// The map set with [`Engine::set_precision_map`], if one was.
    pub fn precision_map_set(&self) -> Option<&PrecisionMap> {
        self.pmap.as_ref()
    }

    /// Runs each stage in the precision `map` gives it (None: today's step,
    /// every product on the engine's path). f16 stages take the device's f16
    /// kernel under `choice`, bf16 ones the tiled bfloat16 kernel. An error
    /// (`VkError::Unsupported`, naming the stage) where a stage has no kernel
    /// in its precision here; to be set before the first batch (the
    /// workspace's f16 copies depend on it).
    pub fn set_precision_map(&mut self, map: Option<PrecisionMap>, choice: GemmChoice) -> VkResult<()> {
        let f16_path = match &map {
            Some(m) if m.iter().any(|(_, p)| p == Precision::F16) && self.path.input_precision() != Precision::F16 => {
                gemm::path_for(&self.ctx, Precision::F16, choice)?
            }
            _ => self.path,
        };
        let old = (self.f16_path, self.pmap.take());
        self.f16_path = f16_path;
        if let Some(m) = &map
            && let Err(e) = self.check_map(m)
        {
            (self.f16_path, self.pmap) = old;
            return Err(e);
        }
        if let Some(ws) = &self.ws {
            let has = ws.layers.iter().all(|lb| lb.h16.is_some());
            if has != self.coopmat_recurrence_capable() {
                (self.f16_path, self.pmap) = old;
                return Err(VkError::Invalid("set the precision map before the first batch".into()));
            }
        }
        self.forget_replay();
        self.pmap = map;
        Ok(())
    }

    /// Why `map` cannot run on this engine, if it cannot.
    pub(super) fn check_map(&self, map: &PrecisionMap) -> VkResult<()> {
        if map.layers() != self.cfg.layers {
            return Err(VkError::Invalid(format!(
                "the precision map has {} GRU layers, the model {}",
                map.layers(),
                self.cfg.layers
            )));
        }
        for (s, p) in map.iter() {
            if p == Precision::F32 {
                continue;
            }
            let refuse = |why: String| Err(VkError::Unsupported(format!("precision map: {s}={}: {why}", p.name())));
            match s.kind {
                StageKind::Embed if s.backward => {
                    return refuse(
                        "the embedding's backward is a scatter-add of gradient rows (no product) and has only an f32 kernel"
                            .into(),
                    );
                }
                StageKind::GruRec if self.recurrence != Recurrence::Seq => {
                    let name = self.recurrence.name();
                    if p == Precision::Bf16 {
                        return refuse(format!(
                            "the {name} recurrence has no bfloat16 kernel; DUALSCOPE_RECURRENCE=seq runs the per-row kernel's"
                        ));
                    }
                    if !self.coopmat_recurrence_capable() {
                        return refuse(format!(
                            "the {name} recurrence has f16 products only on cooperative matrices ({}), which cannot run \
                             here; DUALSCOPE_RECURRENCE=seq runs the per-row kernel's f16 variant",
                            self.coopmat_recurrence_why()
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Why the cooperative-matrix recurrences are off, in a few words.
    fn coopmat_recurrence_why(&self) -> String {
        let h = self.cfg.hidden;
        if !self.f16_path.coopmat() {
            format!("the f16 products run on {}", self.f16_path.name())
        } else if self.env.recurrence_product_f32() {
            "DUALSCOPE_RECURRENCE_PRODUCT=f32".into()
        } else if !h.is_multiple_of(GRID_CM_TILE) || h > GRID_MAX_HIDDEN {
            format!("hidden = {h} is not a multiple of {GRID_CM_TILE} up to {GRID_MAX_HIDDEN}")
        } else {
            "this build has no cooperative-matrix recurrence kernels".into()
        }
    }

    /// The precision stage `s` runs in: the map's, or without one the
    /// engine's products' (the embedding and the per-row recurrences in f32).
    pub(super) fn stage_precision(&self, s: MapStage) -> Precision {
        match &self.pmap {
            Some(m) => m.get(s),
            None if s.kind == StageKind::Embed || s.kind == StageKind::GruRec => Precision::F32,
            None => self.precision(),
        }
    }

    /// The kernel stage `s`'s products run on: a planted GEMM bug's for every
    /// product; a planted stage bug's for that stage's when it is not f32;
    /// else the map's precision's (without a map, the engine's path).
    pub(super) fn stage_path(&self, s: MapStage) -> GemmPath {
        match self.fault {
            Some(Fault::GemmNoBounds) => return GemmPath::FaultNoBounds,
            Some(Fault::F16AccumNoScale) => return GemmPath::FaultF16Accum,
            Some(Fault::F16StageSkipSlice(t)) if t == s && self.stage_precision(s) != Precision::F32 => {
                return GemmPath::FaultF16SkipSlice;
            }
            _ => {}
        }
        if self.pmap.is_none() {
            return self.path;
        }
        match self.stage_precision(s) {
            Precision::F32 => GemmPath::TiledF32,
            Precision::F16 => self.f16_path,
            Precision::Bf16 => GemmPath::TiledBf16In,
        }
    }

    /// Whether layer `l`'s recurrence of that direction runs on the
    /// cooperative-matrix grid kernel for the current batch: where
    /// [`Engine::recurrence_on_coopmat`]'s conditions hold and the map (if
    /// any) has that stage in f16.
    pub(super) fn layer_rec_cm(&self, l: usize, backward: bool) -> bool {
        let Some(ws) = self.ws.as_ref() else { return false };
        let stage = MapStage { kind: StageKind::GruRec, layer: l, backward };
        self.coopmat_recurrence_capable()
            && self.recurrence != Recurrence::Seq
            && self.cm_groups(ws) <= GRID_MAX_GROUPS
            && ws.layers.iter().all(|lb| lb.h16.is_some() && lb.d_gh16.is_some())
            && self.pmap.as_ref().is_none_or(|m| m.get(stage) == Precision::F16)
    }

    /// Layer `l`'s grid kernel of that direction for the current batch and
    /// its workgroups; an error where the map asks for a precision the grid
    /// cannot give this batch (more workgroups than the cooperative-matrix
    /// grid takes).
    pub(super) fn grid_kernel(
        &self,
        ws: &Workspace,
        l: usize,
        backward: bool,
    ) -> VkResult<(&'static KernelSpec, usize)> {
        if self.layer_rec_cm(l, backward) {
            let spec = match (backward, self.grid_noncoherent(true)) {
                (false, false) => &GRU_FWD_GRID_CM,
                (false, true) => &GRU_FWD_GRID_CM_NC,
                (true, false) => &GRU_BWD_GRID_CM,
                (true, true) => &GRU_BWD_GRID_CM_NC,
            };
            return Ok((spec, self.cm_groups(ws)));
        }
        let stage = MapStage { kind: StageKind::GruRec, layer: l, backward };
        if self.pmap.is_some() && self.stage_precision(stage) != Precision::F32 {
            return Err(VkError::Unsupported(format!(
                "precision map: {stage}={}: this batch needs {} workgroups of the cooperative-matrix grid, over its \
                 {GRID_MAX_GROUPS}; DUALSCOPE_RECURRENCE=seq runs the per-row kernel's f16 variant",
                self.stage_precision(stage).name(),
                self.cm_groups(ws)
            )));
        }
        let (fwd, bwd) = grid_specs(self.cfg.hidden, self.grid_noncoherent(false));
        Ok((if backward { bwd } else { fwd }, self.cfg.hidden.div_ceil(GRID_UNITS)))
    }

    /// The per-row recurrence kernels of layer `l` (forward, backward).
    pub(super) fn seq_kernels(&self, l: usize) -> (&'static KernelSpec, &'static KernelSpec) {
        let p = |backward| self.stage_precision(MapStage { kind: StageKind::GruRec, layer: l, backward });
        seq_specs(self.cfg.hidden, p(false), p(true))
    }
}

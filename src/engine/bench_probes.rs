//! The recurrences' timing probes of `bench` in a `lab` build, under
//! `DUALSCOPE_GRID_PROBE`: where a step's (or a wavefront interval's) time
//! goes, from the kernels with parts switched off one at a time and together
//! (their results are then meaningless; only the times are kept), µs per
//! step or interval, medians of 5.

use std::collections::BTreeMap;

use serde::Serialize;

use super::stats::percentiles;
use crate::vk::VkResult;
use crate::vk::engine::probe_bits::*;
use crate::vk::engine::{BWD_WAVE_LAG, Engine, FWD_WAVE_LAG, WaveVariant};
use crate::vk::switches::switches;

/// The probes' times, by part (in `bench`'s `recurrence` report).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecurrenceProbes {
    /// µs per step of the forward f32 grid kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fwd_step_probe: Option<BTreeMap<String, f64>>,
    /// µs per interval of the backward wavefront.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bwd_wave_probe: Option<BTreeMap<String, f64>>,
    /// µs per interval of the forward wavefront (its parts timed on the
    /// variant with the switches, `gru_fwd_wave_cm_nc_probe`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fwd_wave_probe: Option<BTreeMap<String, f64>>,
    /// µs per step of layer 0's per-layer cooperative-matrix grid kernels,
    /// where a direction runs them (`fwd_…`, `bwd_…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid_cm_probe: Option<BTreeMap<String, f64>>,
    /// µs per step of layer 0's one-workgroup recurrences (`fwd_…`, `bwd_…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wg_probe: Option<BTreeMap<String, f64>>,
}

/// The forward f32 grid kernel's parts.
const GRID_PARTS: [(&str, u32); 8] = [
    ("whole", 0),
    ("no_barrier", GRID_NO_BARRIER),
    ("no_product", GRID_NO_PRODUCT),
    ("no_gates", GRID_NO_GATES),
    ("product_only", GRID_NO_BARRIER | GRID_NO_GATES),
    ("barrier_and_loads_only", GRID_NO_PRODUCT | GRID_NO_GATES),
    ("gates_only", GRID_NO_BARRIER | GRID_NO_PRODUCT),
    ("nothing", GRID_NO_BARRIER | GRID_NO_PRODUCT | GRID_NO_GATES),
];

/// The parts both wavefronts' probes (and the per-layer cooperative-matrix
/// grid kernels') switch off.
const WAVE_PARTS: [(&str, u32); 9] = [
    ("whole", 0),
    ("no_operand_loads", NO_OPERAND_LOADS),
    ("no_products", NO_PRODUCTS),
    ("no_stores", NO_STORES),
    ("no_step_inputs", NO_STEP_INPUTS),
    ("no_loads_no_products", NO_OPERAND_LOADS | NO_PRODUCTS),
    ("barrier_and_gates_only", NO_PRODUCTS | NO_STEP_INPUTS),
    ("products_only", NO_STORES | NO_STEP_INPUTS),
    ("barrier_only", BARRIERS_ONLY),
];

/// `WAVE_PARTS`' baselines again, for the backward on its probe variant
/// (`WAVE_PARTS` time it on the coherent kernel; the forward's are on its
/// probe variant already).
const PROBE_BASELINES: [(&str, u32); 3] =
    [("probe_whole", 0), ("probe_no_operand_loads", NO_OPERAND_LOADS), ("probe_no_products", NO_PRODUCTS)];

/// The parts of the wavefronts' products (their probe variants only), most
/// on zero operands.
const PRODUCT_PARTS: [(&str, u32); 8] = [
    ("zeros_no_staging", NO_OPERAND_LOADS | NO_STAGING),
    ("zeros_no_staging_no_frag_loads", NO_OPERAND_LOADS | NO_STAGING | NO_FRAG_LOADS),
    ("zeros_no_mma", NO_OPERAND_LOADS | NO_MMA),
    ("zeros_no_frag_stores", NO_OPERAND_LOADS | NO_FRAG_STORES),
    ("zeros_frag_stores_only", NO_OPERAND_LOADS | NO_STAGING | NO_FRAG_LOADS | NO_MMA),
    ("zeros_mma_only", NO_OPERAND_LOADS | NO_STAGING | NO_FRAG_LOADS | NO_FRAG_STORES),
    ("direct_operand_loads", DIRECT_OPERAND_LOADS),
    ("operand_loads_only", NO_PRODUCTS | OPERAND_LOADS_ONLY),
];

/// The one-workgroup recurrences' parts.
const WG_PARTS: [(&str, u32); 8] = [
    ("whole", 0),
    ("no_product", WG_NO_PRODUCT),
    ("no_stores", WG_NO_STORES),
    ("no_inputs", WG_NO_INPUTS),
    ("no_barriers", WG_NO_BARRIERS),
    ("no_stores_no_inputs", WG_NO_STORES | WG_NO_INPUTS),
    ("product_only", WG_NO_STORES | WG_NO_INPUTS | WG_NO_BARRIERS),
    ("nothing", WG_NO_PRODUCT | WG_NO_STORES | WG_NO_INPUTS | WG_NO_BARRIERS),
];

impl RecurrenceProbes {
    /// With `DUALSCOPE_GRID_PROBE`, the one-workgroup recurrences' probe,
    /// where they run.
    pub fn add_wg(&mut self, e: &Engine, t: usize) {
        if !switches().lab.grid_probe || e.recurrence_wg().is_none() {
            return;
        }
        let mut probe = BTreeMap::new();
        for (dir, backward) in [("fwd", false), ("bwd", true)] {
            let parts = probe_parts(&WG_PARTS, t, |f| e.probe_wg(backward, f));
            probe.extend(parts.into_iter().map(|(k, v)| (format!("{dir}_{k}"), v)));
        }
        self.wg_probe = Some(probe);
    }

    /// With `DUALSCOPE_GRID_PROBE`, the grid recurrence's probes over `t`
    /// steps: the forward f32 grid kernel's parts, each wavefront's and the
    /// per-layer cooperative-matrix grid kernels' where they run.
    pub fn add_grid(&mut self, e: &Engine, t: usize) {
        if !switches().lab.grid_probe {
            return;
        }
        self.fwd_step_probe = Some(probe_parts(&GRID_PARTS, t, |f| e.probe_grid(t, f)));
        let coherent = WAVE_PARTS.iter().map(|&(n, f)| (n, (WaveVariant::Coherent, f)));
        let others = [("noncoherent_operands", (WaveVariant::Noncoherent, 0)), ("fma_products", (WaveVariant::Fma, 0))];
        let on_probe = PROBE_BASELINES.iter().chain(&PRODUCT_PARTS).map(|&(n, f)| (n, (WaveVariant::Probe, f)));
        let parts: Vec<_> = coherent.chain(others).chain(on_probe).collect();
        self.bwd_wave_probe = Some(probe_parts(&parts, t + BWD_WAVE_LAG, |(v, f)| e.probe_bwd_wave(v, f)));
        let parts: Vec<_> = WAVE_PARTS.iter().chain(&PRODUCT_PARTS).copied().collect();
        self.fwd_wave_probe = Some(probe_parts(&parts, t + FWD_WAVE_LAG, |f| e.probe_fwd_wave(f)));
        let mut cm = BTreeMap::new();
        for (dir, backward) in [("fwd", false), ("bwd", true)] {
            let parts = probe_parts(&WAVE_PARTS, t, |f| e.probe_grid_cm(backward, f));
            cm.extend(parts.into_iter().map(|(k, v)| (format!("{dir}_{k}"), v)));
        }
        self.grid_cm_probe = (!cm.is_empty()).then_some(cm);
    }
}

/// A probe, part by part: µs per step or interval over `intervals`,
/// medians of 5 runs of `probe` (device ms of the whole dispatch); parts
/// with no time left out.
fn probe_parts<P: Copy>(
    parts: &[(&str, P)],
    intervals: usize,
    probe: impl Fn(P) -> VkResult<Option<f64>>,
) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for &(name, part) in parts {
        let mut xs: Vec<f64> = (0..5).filter_map(|_| probe(part).ok().flatten()).collect();
        if !xs.is_empty() {
            out.insert(format!("{name}_us"), percentiles(&mut xs).0 * 1e3 / intervals as f64);
        }
    }
    out
}

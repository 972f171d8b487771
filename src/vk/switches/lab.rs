//! The `lab` feature's switches: A/B comparisons and timing probes, read
//! only by a build with the feature (see `docs/switches.md`).

use super::Reader;
use crate::vk::engine::{EngineEnv, EngineLab, WgChoice};
use crate::vk::gemm::{F32Kernel, SPLIT_K_PROBE_SLICES};

/// `DUALSCOPE_COOPMAT_PROBE`: the 128×128 cooperative-matrix GEMM with a
/// part switched off (its results are wrong on purpose).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoopmatProbe {
    /// `mma`: the multiply-adds alone, on fragments loaded once.
    MmaOnly,
    /// `no_global`: zeros staged instead of A and B.
    NoGlobal,
}

/// `DUALSCOPE_BARRIER_PROBE`: barriers other than the byte-range ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierProbe {
    /// `whole`: every binding counted as its whole buffer.
    Whole,
    /// `overlap`: a full barrier before and after each recurrence, none
    /// between other dispatches (timing only: the results are meaningless).
    Overlap,
}

/// The lab's switches outside the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lab {
    /// `DUALSCOPE_GEMM_F32`: the f32 products' kernel.
    pub gemm_f32: F32Kernel,
    /// `DUALSCOPE_SPLIT_FEW` (`0`: off): the finer split of products of few tiles.
    pub split_few: bool,
    /// `DUALSCOPE_SPLIT_MIN_SLICE`: the shortest split-K slice of every product.
    pub split_min_slice: Option<usize>,
    pub coopmat_probe: Option<CoopmatProbe>,
    pub barrier_probe: Option<BarrierProbe>,
    /// `DUALSCOPE_PIPELINE_STATS=1`.
    pub pipeline_stats: bool,
    /// `DUALSCOPE_GRID_PROBE` set: the bench's recurrence probes.
    pub grid_probe: bool,
}

impl Default for Lab {
    fn default() -> Lab {
        Lab {
            gemm_f32: F32Kernel::Auto,
            split_few: true,
            split_min_slice: None,
            coopmat_probe: None,
            barrier_probe: None,
            pipeline_stats: false,
            grid_probe: false,
        }
    }
}

/// Reads the lab's switches, the engine's into `engine`, in the table's order.
pub(super) fn read(r: &mut Reader<'_>, engine: &mut EngineEnv) -> Lab {
    let gemm_f32 = r.parse("DUALSCOPE_GEMM_F32", |v| F32Kernel::parse(v).map_err(|e| e.to_string()));
    let split_few = !r.is("DUALSCOPE_SPLIT_FEW", "0");
    let split_min_slice = r.parse("DUALSCOPE_SPLIT_MIN_SLICE", |v| match v.parse::<usize>() {
        Ok(n) if SPLIT_K_PROBE_SLICES.contains(&n) => Ok(n),
        _ => {
            let (lo, hi) = SPLIT_K_PROBE_SLICES.into_inner();
            Err(format!("DUALSCOPE_SPLIT_MIN_SLICE={v:?}: expected a slice of {lo} to {hi}"))
        }
    });
    let coopmat_probe = match r.choice("DUALSCOPE_COOPMAT_PROBE") {
        Some("mma") => Some(CoopmatProbe::MmaOnly),
        Some(_) => Some(CoopmatProbe::NoGlobal),
        None => None,
    };
    let barrier_probe = match r.choice("DUALSCOPE_BARRIER_PROBE") {
        Some("whole") => Some(BarrierProbe::Whole),
        Some(_) => Some(BarrierProbe::Overlap),
        None => None,
    };
    let pipeline_stats = r.is("DUALSCOPE_PIPELINE_STATS", "1");
    let recurrence_product_f32 = r.is("DUALSCOPE_RECURRENCE_PRODUCT", "f32");
    let wave_off = r.is("DUALSCOPE_WAVE", "0");
    let wave_coherent = r.is("DUALSCOPE_WAVE_COHERENT", "1");
    engine.wave_scalar = r.choice("DUALSCOPE_WAVE_SCALAR").map(|v| v == "1");
    let wave_wide = r.is("DUALSCOPE_WAVE_WIDE", "1");
    engine.wg =
        r.parse("DUALSCOPE_WG", |v| WgChoice::parse(v).map_err(|e| format!("DUALSCOPE_WG: {e}"))).unwrap_or_default();
    let host_profile = r.set("DUALSCOPE_HOST_PROFILE");
    let host_norms = r.is("DUALSCOPE_HOST_NORMS", "1");
    engine.lab = EngineLab { recurrence_product_f32, wave_off, wave_coherent, wave_wide, host_profile, host_norms };
    engine.bias_pass = r.is("DUALSCOPE_BIAS_PASS", "1");
    let grid_probe = r.set("DUALSCOPE_GRID_PROBE");
    Lab {
        gemm_f32: gemm_f32.unwrap_or(F32Kernel::Auto),
        split_few,
        split_min_slice,
        coopmat_probe,
        barrier_probe,
        pipeline_stats,
        grid_probe,
    }
}

#[cfg(test)]
mod tests {
    use crate::vk::switches::{SWITCHES, read_from as read};

    #[test]
    fn the_labs_switches_are_read() {
        let s = read(&[
            ("DUALSCOPE_WAVE", " 0 "),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "65536"),
            ("DUALSCOPE_BARRIER_PROBE", "overlap"),
            ("DUALSCOPE_WG", "fma"),
            ("DUALSCOPE_WAVE_SCALAR", "0"),
            ("DUALSCOPE_GRID_PROBE", "1"),
        ]);
        assert!(s.check().is_ok());
        assert!(s.engine.lab.wave_off && s.engine.wave_scalar == Some(false) && s.lab.grid_probe);
        assert_eq!(s.lab.split_min_slice, Some(65536));
        assert_eq!(s.lab.barrier_probe, Some(super::BarrierProbe::Overlap));
        assert_eq!(s.engine.wg, crate::vk::engine::WgChoice::Fma);
        let unset = read(&[]);
        assert!(unset.lab.split_few && unset.lab == super::Lab::default());
    }

    #[test]
    fn the_labs_values_outside_their_lists_are_refused_naming_the_switch() {
        for (name, bad) in [
            ("DUALSCOPE_WAVE", "off"),
            ("DUALSCOPE_HOST_NORMS", "yes"),
            ("DUALSCOPE_RECURRENCE_PRODUCT", "f64"),
            ("DUALSCOPE_BARRIER_PROBE", "none"),
            ("DUALSCOPE_COOPMAT_PROBE", "mmaa"),
            ("DUALSCOPE_GEMM_F32", "huge"),
            ("DUALSCOPE_WG", "yes"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "8"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "18446744073709551616"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "-1"),
        ] {
            let err = read(&[(name, bad)]).check().expect_err(bad).to_string();
            assert!(err.starts_with(name) && err.contains(bad), "{err}");
        }
        assert!(SWITCHES.iter().filter(|s| s.lab).count() >= 16);
    }
}

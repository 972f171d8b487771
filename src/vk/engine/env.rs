//! The engine's switches from the environment, read in one place
//! ([`EngineEnv::from_env`]) when an engine is built and kept in it.
//!
//! | variable | effect (default when unset) |
//! | --- | --- |
//! | `DUALSCOPE_RECURRENCE` | `seq`, `steps` or `grid`: how the GRU recurrences run (the device's default, see [`Recurrence::default_for`]) |
//! | `DUALSCOPE_RECURRENCE_PRODUCT` | `f32`: the mixed step's recurrences on the f32 grid kernels even where the cooperative-matrix ones can run |
//! | `DUALSCOPE_WAVE` | `0`: the layers' recurrences one after the other even where a wavefront kernel could run them together |
//! | `DUALSCOPE_WG` | `1`: the small layers' recurrences in one workgroup each (`gru_*_wg_cm`) where they run on cooperative matrices and B ≤ 16, H ≤ 128; `fma`: one workgroup with the product as f32 FMAs (`gru_*_wg_fma`) wherever the shape fits, cooperative matrices or not (the default, `0`: the grid kernels and wavefronts; the one-workgroup kernels were slower on the H200) |
//! | `DUALSCOPE_WAVE_SCALAR` | `1`: the wavefronts' products as f32 FMAs of their f16 values (`gru_*_wave_sc_nc`) wherever the wavefronts read their operands without `coherent`; `0`: on cooperative matrices at any B (the default: the FMAs where B ≤ [`super::kernels::WAVE_SCALAR_ROWS`]) |
//! | `DUALSCOPE_WAVE_COHERENT` | `1`: the wavefronts' operand loads stay `coherent` everywhere |
//! | `DUALSCOPE_HOST_PROFILE` | set: print where the host's time goes in each step (stderr) |
//! | `DUALSCOPE_HOST_NORMS` | `1`: the controller's step reads every gradient back and takes its norms on the host (the path before the device norms, kept for comparison) |
//! | `DUALSCOPE_ATTN` | `old`, `wide` or `auto`: the attention kernels in blocks of 16 queries, of 64, or the block [`AttnKernels::wide_for`] picks per shape (`auto`) |
//! | `DUALSCOPE_BIAS_PASS` | `1`: the GRU's input bias and the head's bias added by a pass of their own after the product, not by the product's kernel |
//! | `DUALSCOPE_POISON` | `1`: fill every buffer a step writes with NaN before it runs (reads of unwritten values turn non-finite) |
//!
//! A set switch whose value is not one it takes is an error naming it when an
//! engine is built ([`check_switch`]; an empty value counts as unset), for
//! the probes read elsewhere too.
//!
//! Read elsewhere, because they are not the engine's: `DUALSCOPE_GEMM_PATH`
//! ([`crate::step::GemmChoice::from_env`]), `DUALSCOPE_GEMM_F32`
//! (`tiled`: the f32 products on the 128×64 kernel, [`crate::vk::gemm::F32Kernel::from_env`]), `DUALSCOPE_COOPMAT_PROBE`
//! (the GEMM timing probes, in `vk::gemm`), `DUALSCOPE_SPLIT_MIN_SLICE` (the
//! shortest split-K slice, a timing probe, in `vk::gemm::split`), `DUALSCOPE_SPLIT_FEW`
//! (`0`: no finer split for products of few tiles, in `vk::gemm::split`),
//! `DUALSCOPE_BARRIER_PROBE` (`whole` or `overlap`: barriers as on whole buffers,
//! or only around the recurrences, in `vk::recorder`), `DUALSCOPE_VK_DEVICE` and
//! `DUALSCOPE_VK_VALIDATION` ([`crate::vk::ContextOptions`]),
//! `DUALSCOPE_PIPELINE_STATS` (`1`: the driver's statistics of each kernel, in
//! `vk::context`), `DUALSCOPE_GRID_PROBE` (the CLI's bench).

use super::kernels::AttnKernels;
use super::policy::{Recurrence, WgChoice};
use crate::vk::gemm::SPLIT_K_PROBE_SLICES;
use crate::vk::{Context, VkError, VkResult};

/// The engine's switches, as the environment set them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineEnv {
    /// `DUALSCOPE_RECURRENCE`: the recurrence asked for (None: the default).
    pub recurrence: Option<Recurrence>,
    /// `DUALSCOPE_RECURRENCE_PRODUCT=f32`.
    pub recurrence_product_f32: bool,
    /// `DUALSCOPE_WAVE=0`.
    pub wave_off: bool,
    /// `DUALSCOPE_WAVE_COHERENT=1`.
    pub wave_coherent: bool,
    /// `DUALSCOPE_WAVE_SCALAR`: `Some(true)` for `1`, `Some(false)` for `0`
    /// (None: the default by the batch's rows).
    pub wave_scalar: Option<bool>,
    /// `DUALSCOPE_WAVE_WIDE=1`: wavefronts of up to 256 workgroups (a probe).
    pub wave_wide: bool,
    /// `DUALSCOPE_WG`: the one-workgroup recurrences (`0`: off, `fma`: forced).
    pub wg: WgChoice,
    /// `DUALSCOPE_HOST_PROFILE` set.
    pub host_profile: bool,
    /// `DUALSCOPE_POISON=1`.
    pub poison: bool,
    /// `DUALSCOPE_HOST_NORMS=1`.
    pub host_norms: bool,
    /// `DUALSCOPE_ATTN`: which attention kernels run (default `auto`).
    pub attn: AttnKernels,
    /// `DUALSCOPE_BIAS_PASS=1`: biases by a pass of their own, not in the products.
    pub bias_pass: bool,
}

/// The switches whose values are a short list, the engine's and the probes
/// read elsewhere (an empty value counts as unset). [`EngineEnv::from_env`]
/// checks them all, so that a mistyped value is an error naming the
/// variable rather than a switch silently left at its default.
const CHOICES: &[(&str, &[&str])] = &[
    ("DUALSCOPE_RECURRENCE_PRODUCT", &["f32"]),
    ("DUALSCOPE_WAVE", &["0", "1"]),
    ("DUALSCOPE_WAVE_COHERENT", &["0", "1"]),
    ("DUALSCOPE_WAVE_SCALAR", &["0", "1"]),
    ("DUALSCOPE_WAVE_WIDE", &["0", "1"]),
    ("DUALSCOPE_POISON", &["0", "1"]),
    ("DUALSCOPE_HOST_NORMS", &["0", "1"]),
    ("DUALSCOPE_BIAS_PASS", &["0", "1"]),
    ("DUALSCOPE_PIPELINE_STATS", &["0", "1"]),
    ("DUALSCOPE_SPLIT_FEW", &["0", "1"]),
    ("DUALSCOPE_BARRIER_PROBE", &["whole", "overlap"]),
    ("DUALSCOPE_COOPMAT_PROBE", &["mma", "no_global"]),
];

/// Whether `value` (trimmed) is one that the switch `name` accepts; a name
/// this table does not know is not checked here.
pub fn check_switch(name: &str, value: &str) -> Result<(), String> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(());
    }
    if name == "DUALSCOPE_SPLIT_MIN_SLICE" {
        return match v.parse::<usize>() {
            Ok(n) if SPLIT_K_PROBE_SLICES.contains(&n) => Ok(()),
            _ => {
                let (lo, hi) = SPLIT_K_PROBE_SLICES.into_inner();
                Err(format!("{name}={v:?}: expected a slice of {lo} to {hi}"))
            }
        };
    }
    match CHOICES.iter().find(|(n, _)| *n == name) {
        Some((_, ok)) if !ok.contains(&v) => Err(format!("{name}={v:?}: expected {}", ok.join(" or "))),
        _ => Ok(()),
    }
}

/// Every switch of [`CHOICES`] and `DUALSCOPE_SPLIT_MIN_SLICE` that is set,
/// checked; a value that is not UTF-8 is refused too.
fn check_switches() -> VkResult<()> {
    let names = CHOICES.iter().map(|(n, _)| *n).chain(["DUALSCOPE_SPLIT_MIN_SLICE"]);
    for name in names {
        match std::env::var(name) {
            Ok(v) => check_switch(name, &v).map_err(VkError::Invalid)?,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(VkError::Invalid(format!("{name}: the value is not UTF-8")));
            }
            Err(std::env::VarError::NotPresent) => {}
        }
    }
    Ok(())
}

impl EngineEnv {
    /// The switches from the environment (values trimmed); an error for a
    /// `DUALSCOPE_RECURRENCE`, `DUALSCOPE_ATTN` or `DUALSCOPE_WG` that names
    /// nothing they know, and for a value [`check_switch`] refuses.
    pub fn from_env() -> VkResult<EngineEnv> {
        check_switches()?;
        let recurrence = match std::env::var("DUALSCOPE_RECURRENCE") {
            Ok(v) => {
                Some(Recurrence::parse(v.trim()).map_err(|e| VkError::Invalid(format!("DUALSCOPE_RECURRENCE: {e}")))?)
            }
            Err(_) => None,
        };
        let attn = match std::env::var("DUALSCOPE_ATTN") {
            Ok(v) => AttnKernels::parse(v.trim()).map_err(|e| VkError::Invalid(format!("DUALSCOPE_ATTN: {e}")))?,
            Err(_) => AttnKernels::Auto,
        };
        let wg = match std::env::var("DUALSCOPE_WG") {
            Ok(v) => WgChoice::parse(v.trim()).map_err(|e| VkError::Invalid(format!("DUALSCOPE_WG: {e}")))?,
            Err(_) => WgChoice::default(),
        };
        let is = |name: &str, value: &str| std::env::var(name).is_ok_and(|v| v.trim() == value);
        Ok(EngineEnv {
            recurrence,
            recurrence_product_f32: is("DUALSCOPE_RECURRENCE_PRODUCT", "f32"),
            wave_off: is("DUALSCOPE_WAVE", "0"),
            wave_coherent: is("DUALSCOPE_WAVE_COHERENT", "1"),
            wave_scalar: if is("DUALSCOPE_WAVE_SCALAR", "1") {
                Some(true)
            } else if is("DUALSCOPE_WAVE_SCALAR", "0") {
                Some(false)
            } else {
                None
            },
            wave_wide: is("DUALSCOPE_WAVE_WIDE", "1"),
            wg,
            host_profile: std::env::var_os("DUALSCOPE_HOST_PROFILE").is_some(),
            poison: is("DUALSCOPE_POISON", "1"),
            host_norms: is("DUALSCOPE_HOST_NORMS", "1"),
            attn,
            bias_pass: is("DUALSCOPE_BIAS_PASS", "1"),
        })
    }

    /// The recurrence for `ctx` and width `h`: the one asked for (an error
    /// where it cannot run here); else the grid on GPUs that can run it, and
    /// the per-row kernel on CPU devices (lavapipe), where a spinning barrier
    /// would starve the threads that run the other workgroups.
    pub fn recurrence_for(&self, ctx: &Context, h: usize) -> VkResult<Recurrence> {
        if let Some(r) = self.recurrence {
            r.check(ctx, h)?;
            return Ok(r);
        }
        let gpu = ctx.report().device_type != "cpu";
        Ok(if gpu && Recurrence::Grid.check(ctx, h).is_ok() { Recurrence::Grid } else { Recurrence::Seq })
    }
}

impl super::Engine {
    /// Switches the attention kernels the next steps record (what
    /// `DUALSCOPE_ATTN` sets when the engine is built); a kept replay of the
    /// step is dropped, so the next replayed step records them.
    pub fn set_attn_kernels(&mut self, attn: AttnKernels) {
        self.env.attn = attn;
        self.forget_replay();
    }
}

#[cfg(test)]
mod tests {
    use super::check_switch;

    #[test]
    fn switch_values_outside_their_lists_are_refused_naming_the_switch() {
        for (name, good) in [("DUALSCOPE_WAVE", "0"), ("DUALSCOPE_WAVE", " 1 "), ("DUALSCOPE_BARRIER_PROBE", "overlap")]
        {
            assert_eq!(check_switch(name, good), Ok(()), "{name}={good}");
        }
        assert_eq!(check_switch("DUALSCOPE_POISON", ""), Ok(()), "empty is unset");
        for (name, bad) in [
            ("DUALSCOPE_WAVE", "off"),
            ("DUALSCOPE_HOST_NORMS", "yes"),
            ("DUALSCOPE_RECURRENCE_PRODUCT", "f64"),
            ("DUALSCOPE_BARRIER_PROBE", "none"),
            ("DUALSCOPE_COOPMAT_PROBE", "mmaa"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "8"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "18446744073709551616"),
            ("DUALSCOPE_SPLIT_MIN_SLICE", "-1"),
        ] {
            let err = check_switch(name, bad).expect_err(bad);
            assert!(err.starts_with(name) && err.contains("expected"), "{err}");
        }
        assert_eq!(check_switch("DUALSCOPE_SPLIT_MIN_SLICE", "65536"), Ok(()));
        assert_eq!(check_switch("DUALSCOPE_SOMETHING_ELSE", "x"), Ok(()), "not this table's");
    }
}

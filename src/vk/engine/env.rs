//! The engine's switches: its part of the process's switches
//! ([`crate::vk::switches`], `docs/switches.md`), copied into each engine
//! when it is built, where the setters below and the tests change them.

use super::kernels::AttnKernels;
use super::policy::{Recurrence, WgChoice};
use crate::vk::switches::switches;
use crate::vk::{Context, VkResult};

/// The engine's switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineEnv {
    /// `DUALSCOPE_RECURRENCE`: the recurrence asked for (None: the default).
    pub recurrence: Option<Recurrence>,
    /// `DUALSCOPE_ATTN`: which attention kernels run (default `auto`).
    pub attn: AttnKernels,
    /// `DUALSCOPE_POISON=1`: every plan starts by filling what it writes with NaN.
    pub poison: bool,
    /// Where the one-workgroup recurrences run ([`super::Engine::set_wg`];
    /// `DUALSCOPE_WG` in a `lab` build).
    pub wg: WgChoice,
    /// Whether the wavefronts take their products as FMAs: `Some(true)`,
    /// `Some(false)`, None by the batch's rows
    /// ([`super::Engine::set_wave_scalar`]; `DUALSCOPE_WAVE_SCALAR` in a `lab` build).
    pub wave_scalar: Option<bool>,
    /// The biases added by a pass of their own, not in the products
    /// (`DUALSCOPE_BIAS_PASS=1` in a `lab` build).
    pub bias_pass: bool,
    /// The lab's A/B switches of the engine.
    #[cfg(feature = "lab")]
    pub lab: EngineLab,
}

/// The engine's A/B switches of the `lab` feature (docs/switches.md).
#[cfg(feature = "lab")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineLab {
    /// `DUALSCOPE_RECURRENCE_PRODUCT=f32`.
    pub recurrence_product_f32: bool,
    /// `DUALSCOPE_WAVE=0`.
    pub wave_off: bool,
    /// `DUALSCOPE_WAVE_COHERENT=1`.
    pub wave_coherent: bool,
    /// `DUALSCOPE_WAVE_WIDE=1`: wavefronts of up to 256 workgroups.
    pub wave_wide: bool,
    /// `DUALSCOPE_HOST_PROFILE` set.
    pub host_profile: bool,
    /// `DUALSCOPE_HOST_NORMS=1`.
    pub host_norms: bool,
}

/// The lab's switches of the engine as the policy reads them: false in a
/// build without the feature, where nothing sets them.
macro_rules! lab_switches {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        impl EngineEnv {
            $(
                $(#[$doc])*
                pub(super) fn $name(&self) -> bool {
                    #[cfg(feature = "lab")]
                    {
                        self.lab.$name
                    }
                    #[cfg(not(feature = "lab"))]
                    {
                        false
                    }
                }
            )*
        }
    };
}

lab_switches! {
    /// The mixed step's recurrences kept on the f32 grid kernels.
    recurrence_product_f32,
    /// No wavefronts: each layer's recurrence on a grid kernel of its own.
    wave_off,
    /// The operand loads `coherent` where the `_nc` variants could run.
    wave_coherent,
    /// Wavefronts of up to 256 workgroups.
    wave_wide,
    /// The host's time of each step on stderr.
    host_profile,
    /// The controller's step with its norms on the host.
    host_norms,
}

impl EngineEnv {
    /// The engine's switches from the environment; an error naming a switch
    /// set to a value it does not take ([`crate::vk::switches::Switches::check`]).
    pub fn from_env() -> VkResult<EngineEnv> {
        Ok(switches().check()?.engine)
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

//! Which checks the Khronos validation layer runs, chosen by
//! `DUALSCOPE_VK_VALIDATION`: `0`/`off`; `core` (API usage and SPIR-V);
//! `1`/`on`/`sync` (core plus synchronization validation: read-after-write and
//! write-after-write hazards between dispatches); `gpu` (core plus GPU-assisted
//! validation: out-of-bounds buffer accesses inside the shaders). Without the
//! variable, debug builds and tests validate (`sync`) and release builds do not.

use ash::vk;
use serde::Serialize;

use super::error::VkResult;
use super::switches::switches;

/// A validation mode; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Validation {
    Off,
    Core,
    Sync,
    Gpu,
}

impl Validation {
    /// Reads one spelling of `DUALSCOPE_VK_VALIDATION`.
    pub fn parse(s: &str) -> Option<Validation> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "0" | "off" | "false" => Validation::Off,
            "core" => Validation::Core,
            "1" | "on" | "true" | "sync" => Validation::Sync,
            "gpu" => Validation::Gpu,
            _ => return None,
        })
    }

    /// The mode the environment asks for; unset or empty means the build's default.
    pub fn from_env() -> VkResult<Validation> {
        Ok(switches().check()?.vk_validation.unwrap_or_else(Validation::default_for_build))
    }

    /// Whether `DUALSCOPE_VK_VALIDATION` names a mode by its word (`core`,
    /// `sync`, `gpu`) rather than switching validation on with `1`.
    pub fn named_in_env() -> bool {
        switches().vk_validation_named
    }

    /// `sync` in debug builds (tests), `off` in release builds.
    pub fn default_for_build() -> Validation {
        if cfg!(debug_assertions) { Validation::Sync } else { Validation::Off }
    }

    /// Resolves a caller's on/off wish against the environment: "on" keeps
    /// the environment's mode when it names one, else `sync`.
    pub fn resolve(wish: Option<bool>) -> VkResult<Validation> {
        let env = Validation::from_env()?;
        Ok(match wish {
            None => env,
            Some(false) => Validation::Off,
            Some(true) if env == Validation::Off => Validation::Sync,
            Some(true) => env,
        })
    }

    pub fn is_on(self) -> bool {
        self != Validation::Off
    }

    /// What the layer checks in this mode, for reports.
    pub fn label(self) -> &'static str {
        match self {
            Validation::Off => "off",
            Validation::Core => "core",
            Validation::Sync => "core+synchronization",
            Validation::Gpu => "core+gpu-assisted",
        }
    }

    /// The `VK_EXT_validation_features` switches this mode turns on.
    pub(crate) fn features(self) -> &'static [vk::ValidationFeatureEnableEXT] {
        match self {
            Validation::Off | Validation::Core => &[],
            Validation::Sync => &[vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION],
            Validation::Gpu => &[
                vk::ValidationFeatureEnableEXT::GPU_ASSISTED,
                vk::ValidationFeatureEnableEXT::GPU_ASSISTED_RESERVE_BINDING_SLOT,
            ],
        }
    }
}

/// What a context validated: printed when it closes, and part of `ladder --json`.
#[derive(Clone, Debug, Serialize)]
pub struct ValidationSummary {
    pub on: bool,
    pub mode: Validation,
    /// The layer's version (`1.4.309`), when it is on.
    pub layer: Option<String>,
    pub errors: u64,
    pub warnings: u64,
    /// Every kernel the context built, so every shader module the layer checked
    /// and every kernel whose dispatches it watched.
    pub kernels: Vec<&'static str>,
    /// Whether the cooperative-matrix kernels were among them.
    pub cooperative_matrix: bool,
}

impl ValidationSummary {
    /// One line for stderr.
    pub fn line(&self) -> String {
        if !self.on {
            return "validation off".into();
        }
        format!(
            "validation {} (layer {}): {} error(s), {} warning(s) over {} kernel(s){}",
            self.mode.label(),
            self.layer.as_deref().unwrap_or("?"),
            self.errors,
            self.warnings,
            self.kernels.len(),
            if self.cooperative_matrix { ", cooperative-matrix kernels included" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_reads_and_unknown_ones_do_not() {
        assert_eq!(Validation::parse("0"), Some(Validation::Off));
        assert_eq!(Validation::parse(" SYNC "), Some(Validation::Sync));
        assert_eq!(Validation::parse("1"), Some(Validation::Sync));
        assert_eq!(Validation::parse("core"), Some(Validation::Core));
        assert_eq!(Validation::parse("gpu"), Some(Validation::Gpu));
        assert_eq!(Validation::parse("gpu-av"), None);
        assert!(Validation::Gpu.features().contains(&vk::ValidationFeatureEnableEXT::GPU_ASSISTED));
        assert!(Validation::Core.features().is_empty());
        assert!(!Validation::Off.is_on());
    }
}

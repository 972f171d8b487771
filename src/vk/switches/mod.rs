//! The process's `DUALSCOPE_*` switches: read from the environment once
//! ([`switches`]) into one [`Switches`], each value checked against what its
//! row of [`SWITCHES`] says it takes (the table `docs/switches.md` is
//! generated from). An empty value counts as unset.
//!
//! A value a switch does not take is not used (the switch keeps its
//! default); [`Switches::check`], called when a Vulkan context is opened and
//! when an engine is built, turns the first such value into an error naming
//! the switch. The switches of the `lab` feature (A/B comparisons and timing
//! probes) are read only by a build with it: in any other build nothing
//! reads them, whatever they are set to.

#[cfg(feature = "lab")]
mod lab;
mod table;

#[cfg(feature = "lab")]
pub use lab::{BarrierProbe, CoopmatProbe, Lab};
pub use table::{SWITCHES, SwitchDoc, Values, markdown};

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::engine::{AttnKernels, EngineEnv, Recurrence};
use super::error::{VkError, VkResult};
use super::validation::Validation;
use crate::step::GemmChoice;

/// Every switch this build reads, as the environment set it.
#[derive(Clone, Debug, Default)]
pub struct Switches {
    /// `DUALSCOPE_VK_DEVICE`: the device's index in the ranked list.
    pub vk_device: Option<usize>,
    /// `DUALSCOPE_VK_VALIDATION`: the validation mode (None: the build's default).
    pub vk_validation: Option<Validation>,
    /// `DUALSCOPE_VK_VALIDATION` names its mode by a word (`core`, `sync`,
    /// `gpu`) rather than switching validation on with `1`.
    pub vk_validation_named: bool,
    /// `DUALSCOPE_GEMM_PATH`: the GEMM kernel of a command without `--gemm-path`.
    pub gemm_path: Option<GemmChoice>,
    /// The engine's: `DUALSCOPE_RECURRENCE`, `DUALSCOPE_ATTN`,
    /// `DUALSCOPE_POISON`, and in a `lab` build its A/B switches.
    pub engine: EngineEnv,
    /// `DUALSCOPE_DATA_DIR`: the GUI's data folder.
    pub data_dir: Option<PathBuf>,
    /// The lab's switches outside the engine.
    #[cfg(feature = "lab")]
    pub lab: Lab,
    /// The values set that their switches do not take, one line each, in
    /// the table's order.
    problems: Vec<String>,
}

/// This process's switches, read from the environment at the first call.
pub fn switches() -> &'static Switches {
    static READ: OnceLock<Switches> = OnceLock::new();
    READ.get_or_init(|| Switches::read(&|name| std::env::var_os(name)))
}

impl Switches {
    /// The switches as `get` gives their values (the environment's, or a test's).
    pub fn read(get: &dyn Fn(&str) -> Option<OsString>) -> Switches {
        let mut r = Reader { get, problems: Vec::new() };
        let vk_device = r.parse("DUALSCOPE_VK_DEVICE", |v| {
            v.parse().map_err(|_| format!("DUALSCOPE_VK_DEVICE={v:?} is not a device index (0, 1, …)"))
        });
        let vk_validation = r.parse("DUALSCOPE_VK_VALIDATION", |v| {
            Validation::parse(v).ok_or_else(|| {
                format!("DUALSCOPE_VK_VALIDATION={v:?} is not a validation mode (0, 1, core, sync or gpu)")
            })
        });
        let vk_validation_named = vk_validation.is_some()
            && r.text("DUALSCOPE_VK_VALIDATION")
                .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "core" | "sync" | "gpu"));
        let gemm_path =
            r.parse("DUALSCOPE_GEMM_PATH", |v| GemmChoice::parse(v).map_err(|e| format!("DUALSCOPE_GEMM_PATH: {e}")));
        #[allow(unused_mut)]
        let mut engine = EngineEnv {
            recurrence: r.parse("DUALSCOPE_RECURRENCE", |v| {
                Recurrence::parse(v).map_err(|e| format!("DUALSCOPE_RECURRENCE: {e}"))
            }),
            attn: r
                .parse("DUALSCOPE_ATTN", |v| AttnKernels::parse(v).map_err(|e| format!("DUALSCOPE_ATTN: {e}")))
                .unwrap_or_default(),
            poison: r.is("DUALSCOPE_POISON", "1"),
            ..EngineEnv::default()
        };
        let data_dir = (r.get)("DUALSCOPE_DATA_DIR").filter(|v| !v.is_empty()).map(PathBuf::from);
        #[cfg(feature = "lab")]
        let lab = lab::read(&mut r, &mut engine);
        Switches {
            vk_device,
            vk_validation,
            vk_validation_named,
            gemm_path,
            engine,
            data_dir,
            #[cfg(feature = "lab")]
            lab,
            problems: r.problems,
        }
    }

    /// These switches, or an error naming the first one set to a value it
    /// does not take.
    pub fn check(&self) -> VkResult<&Switches> {
        match self.problems.first() {
            Some(p) => Err(VkError::Invalid(p.clone())),
            None => Ok(self),
        }
    }
}

/// Reads switches through a getter, keeping what was wrong with their values.
struct Reader<'a> {
    get: &'a dyn Fn(&str) -> Option<OsString>,
    problems: Vec<String>,
}

impl Reader<'_> {
    /// The value of `name`, trimmed; None where it is unset, empty, or not
    /// UTF-8 (a problem).
    fn text(&mut self, name: &str) -> Option<String> {
        debug_assert!(SWITCHES.iter().any(|s| s.name == name), "{name} has no row in SWITCHES");
        match (self.get)(name)?.into_string() {
            Ok(v) => Some(v.trim().to_string()).filter(|v| !v.is_empty()),
            Err(_) => {
                let why = format!("{name}: the value is not UTF-8");
                if !self.problems.contains(&why) {
                    self.problems.push(why);
                }
                None
            }
        }
    }

    /// `name`'s value as `parse` reads it; where it does not, `parse`'s
    /// message (which names the switch) is a problem and the value None.
    fn parse<T>(&mut self, name: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Option<T> {
        let v = self.text(name)?;
        parse(&v).map_err(|why| self.problems.push(why)).ok()
    }

    /// `name`'s value, one of those its row lists ([`Values::OneOf`]).
    fn choice(&mut self, name: &str) -> Option<&'static str> {
        let Some(Values::OneOf(ok)) = SWITCHES.iter().find(|s| s.name == name).map(|s| &s.values) else {
            panic!("{name} is not a switch of a few values in SWITCHES");
        };
        self.parse(name, |v| {
            ok.iter().find(|o| **o == v).copied().ok_or_else(|| format!("{name}={v:?}: expected {}", ok.join(" or ")))
        })
    }

    /// Whether `name` is set to `value` (one of its row's values).
    fn is(&mut self, name: &str, value: &str) -> bool {
        self.choice(name) == Some(value)
    }

    /// Whether `name` is set to anything.
    #[cfg_attr(not(feature = "lab"), allow(dead_code))]
    fn set(&mut self, name: &str) -> bool {
        self.text(name).is_some()
    }
}

/// The switches as an environment of `vars` alone would set them (the tests').
#[cfg(test)]
pub(crate) fn read_from(vars: &[(&str, &str)]) -> Switches {
    let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
    Switches::read(&move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Switches {
        read_from(vars)
    }

    #[test]
    fn unset_switches_are_their_defaults() {
        let s = read(&[]);
        assert!(s.check().is_ok());
        assert_eq!((s.vk_device, s.vk_validation, s.gemm_path), (None, None, None));
        assert_eq!(s.engine, EngineEnv::default());
        assert_eq!(s.data_dir, None);
        let s = read(&[("DUALSCOPE_POISON", " "), ("DUALSCOPE_VK_DEVICE", ""), ("DUALSCOPE_DATA_DIR", "")]);
        assert!(
            s.check().is_ok() && !s.engine.poison && s.vk_device.is_none() && s.data_dir.is_none(),
            "empty is unset"
        );
    }

    #[test]
    fn set_switches_are_read_trimmed() {
        let s = read(&[
            ("DUALSCOPE_VK_DEVICE", " 1 "),
            ("DUALSCOPE_VK_VALIDATION", "Core"),
            ("DUALSCOPE_GEMM_PATH", "tiled"),
            ("DUALSCOPE_RECURRENCE", "seq"),
            ("DUALSCOPE_ATTN", "narrow"),
            ("DUALSCOPE_POISON", "1"),
            ("DUALSCOPE_DATA_DIR", "/tmp/d"),
        ]);
        assert!(s.check().is_ok(), "{:?}", s.problems);
        assert_eq!((s.vk_device, s.vk_validation, s.vk_validation_named), (Some(1), Some(Validation::Core), true));
        assert_eq!(s.gemm_path, Some(GemmChoice::Tiled));
        assert_eq!(
            (s.engine.recurrence, s.engine.attn, s.engine.poison),
            (Some(Recurrence::Seq), AttnKernels::Narrow, true)
        );
        assert_eq!(s.data_dir, Some(PathBuf::from("/tmp/d")));
        assert!(!read(&[("DUALSCOPE_VK_VALIDATION", "1")]).vk_validation_named);
    }

    /// A value a switch does not take is an error naming the switch and the
    /// value (the first of them, in the table's order), and is not used.
    #[test]
    fn values_a_switch_does_not_take_are_refused_naming_it() {
        for (name, bad) in [
            ("DUALSCOPE_VK_DEVICE", "first"),
            ("DUALSCOPE_VK_VALIDATION", "everything"),
            ("DUALSCOPE_GEMM_PATH", "fast"),
            ("DUALSCOPE_RECURRENCE", "fast"),
            ("DUALSCOPE_ATTN", "old"),
            ("DUALSCOPE_POISON", "yes"),
        ] {
            let s = read(&[(name, bad)]);
            let err = s.check().expect_err(bad).to_string();
            assert!(err.starts_with(name) && err.contains(&format!("{bad:?}")), "{err}");
        }
        let s = read(&[("DUALSCOPE_POISON", "yes"), ("DUALSCOPE_RECURRENCE", "fast")]);
        assert!(s.check().unwrap_err().to_string().starts_with("DUALSCOPE_RECURRENCE"), "the table's order");
        assert!(!s.engine.poison && s.engine.recurrence.is_none(), "not used");
    }

    /// The lab's switches are not read without the feature, whatever their values.
    #[cfg(not(feature = "lab"))]
    #[test]
    fn the_labs_switches_are_not_read_by_the_product() {
        let lab: Vec<(&str, &str)> = SWITCHES.iter().filter(|s| s.lab).map(|s| (s.name, "not a value")).collect();
        assert!(lab.len() > 10);
        let s = read(&lab);
        assert!(s.check().is_ok(), "{:?}", s.problems);
        assert_eq!(s.engine, EngineEnv::default());
    }
}

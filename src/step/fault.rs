//! The fault catalogue: bugs that GPU training engines really have, each a
//! switch on the Vulkan engine (off by default). Each is a separate shader
//! variant or a changed recording order, always built, so the tests can turn
//! it on and assert which rung of the ladder catches it first.

use serde::{Deserialize, Serialize};

use super::precision_map::{MapStage, StageKind};

/// Serialised as its catalogue name (`window_off_by_one`), the stage fault as
/// `{"f16_stage_skip_slice": STAGE}`; an unknown name does not deserialise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    GemmNoBounds,
    SoftmaxNoMax,
    F16AccumNoScale,
    RecurrenceNoBarrier,
    NormBeforeUnscale,
    ResetBeforeMatmul,
    MaskDropped,
    WindowOffByOne,
    LossNoClear,
    /// `f16_stage_skip_slice=STAGE`: one precision-map stage's products run,
    /// whenever that stage is in f16 or bf16, on an f16-input kernel whose K
    /// loop starts one slice late (f32 runs of it take the right kernel): a
    /// bug in one stage's low-precision kernel only, what `precision-bisect`
    /// should find. Not in [`Fault::ALL`]
    /// (the f32 ladder cannot catch it); listed by `dualscope faults`.
    F16StageSkipSlice(#[serde(serialize_with = "stage_name", deserialize_with = "stage_of_name")] MapStage),
}

fn stage_name<S: serde::Serializer>(s: &MapStage, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(&s.name())
}

fn stage_of_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MapStage, D::Error> {
    let name = String::deserialize(d)?;
    MapStage::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown precision-map stage {name:?}")))
}

/// A fault kept by its name (`Fault`'s `Display`), as saved sessions hold it:
/// `#[serde(with = "fault_name")]` on an `Option<Fault>`. An unknown name is an
/// error that names it, never a fault silently dropped.
pub mod fault_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Fault;

    pub fn serialize<S: Serializer>(f: &Option<Fault>, s: S) -> Result<S::Ok, S::Error> {
        match f {
            Some(f) => s.serialize_some(&f.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Fault>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(name) => Fault::parse(&name)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown fault {name:?} (see `dualscope faults`)"))),
        }
    }
}

/// The name of the stage fault, before its `=STAGE`.
pub const STAGE_FAULT: &str = "f16_stage_skip_slice";

impl Fault {
    pub const ALL: [Fault; 9] = [
        Fault::GemmNoBounds,
        Fault::SoftmaxNoMax,
        Fault::F16AccumNoScale,
        Fault::RecurrenceNoBarrier,
        Fault::NormBeforeUnscale,
        Fault::ResetBeforeMatmul,
        Fault::MaskDropped,
        Fault::WindowOffByOne,
        Fault::LossNoClear,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::GemmNoBounds => "gemm_no_bounds",
            Fault::SoftmaxNoMax => "softmax_no_max",
            Fault::F16AccumNoScale => "f16_accum_no_scale",
            Fault::RecurrenceNoBarrier => "recurrence_no_barrier",
            Fault::NormBeforeUnscale => "norm_before_unscale",
            Fault::ResetBeforeMatmul => "reset_before_matmul",
            Fault::MaskDropped => "mask_dropped",
            Fault::WindowOffByOne => "window_off_by_one",
            Fault::LossNoClear => "loss_no_clear",
            Fault::F16StageSkipSlice(_) => STAGE_FAULT,
        }
    }

    /// A fault by its name, or `f16_stage_skip_slice=STAGE` for a stage with
    /// products (`gru.l{l}.input`, `attn`, `head`, each with `.bwd`).
    pub fn parse(s: &str) -> Option<Fault> {
        if let Some(stage) = s.strip_prefix(STAGE_FAULT).and_then(|r| r.strip_prefix('=')) {
            let st = MapStage::parse(stage.trim())?;
            return matches!(st.kind, StageKind::GruInput | StageKind::Attn | StageKind::Head)
                .then_some(Fault::F16StageSkipSlice(st));
        }
        Fault::ALL.into_iter().find(|f| f.name() == s)
    }

    /// What the planted bug does.
    pub fn description(self) -> &'static str {
        match self {
            Fault::GemmNoBounds => {
                "GEMM tiles load past the matrix edge without a bounds check or zero padding (shapes that are not multiples of the 128×64×16 tile read neighbouring values)"
            }
            Fault::SoftmaxNoMax => {
                "attention softmax without the maximum subtracted: exp overflows to Inf once a score passes ~88"
            }
            Fault::F16AccumNoScale => {
                "GEMM partial sums kept in f16 (10-bit mantissa, no clamp: Inf past 65504), as a naive f16 kernel without loss scaling"
            }
            Fault::RecurrenceNoBarrier => {
                "the GRU forward recurrence has no barrier between timesteps: units read h_{t-1} before the units that own it wrote it"
            }
            Fault::NormBeforeUnscale => {
                "the gradient norm (and so the guard and the clip) is taken before dividing by the loss scale"
            }
            Fault::ResetBeforeMatmul => {
                "the GRU reset gate is applied before the recurrent matmul, n = tanh(W_in x + W_hn (r ⊙ h) + b), TensorFlow's convention instead of PyTorch's"
            }
            Fault::MaskDropped => "the loss ignores the mask: padded positions add to the loss and get gradients",
            Fault::LossNoClear => {
                "the loss leaves the logits' gradient of padded positions unwritten (a skipped clear): right only while the buffer holds zeros, which `--poison` takes away"
            }
            Fault::WindowOffByOne => {
                "the attention window drops its oldest key (J_t starts at t-W+2): only positions t ≥ W-1 are wrong"
            }
            Fault::F16StageSkipSlice(_) => {
                "=STAGE: whenever that precision-map stage runs in f16 or bf16, its products take an f16 kernel whose K loop starts one 16-wide slice late (an off-by-one: the first terms of every product are lost); in f32 it is right (STAGE: gru.l{l}.input, attn, head, each also .bwd)"
            }
        }
    }

    /// Whether only a poisoned run (`--poison`) shows the bug: it reads
    /// values never written, right while the buffer happens to hold zeros.
    pub fn needs_poison(self) -> bool {
        self == Fault::LossNoClear
    }

    /// The rung that should catch the bug first (isolated mode; with
    /// `--poison` where [`Fault::needs_poison`]).
    pub fn expected_rung(self) -> &'static str {
        match self {
            Fault::GemmNoBounds | Fault::F16AccumNoScale => "gemm",
            Fault::SoftmaxNoMax | Fault::WindowOffByOne => "attn_fwd",
            Fault::RecurrenceNoBarrier | Fault::ResetBeforeMatmul => "gru_fwd",
            Fault::NormBeforeUnscale => "optim",
            Fault::MaskDropped | Fault::LossNoClear => "loss",
            Fault::F16StageSkipSlice(s) => match (s.kind, s.backward) {
                (StageKind::Head, false) => "head_fwd",
                (StageKind::Head, true) => "head_bwd",
                (StageKind::Attn, false) => "attn_fwd",
                (StageKind::Attn, true) => "attn_bwd",
                (_, false) => "gru_fwd",
                (_, true) => "gru_bwd",
            },
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::F16StageSkipSlice(s) => write!(f, "{STAGE_FAULT}={s}"),
            _ => f.write_str(self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::{MapStage, StageKind};

    fn every_fault() -> Vec<Fault> {
        let mut all = Fault::ALL.to_vec();
        all.push(Fault::F16StageSkipSlice(MapStage::bwd(StageKind::Attn, 0)));
        all.push(Fault::F16StageSkipSlice(MapStage::fwd(StageKind::GruInput, 1)));
        all
    }

    #[test]
    fn every_fault_round_trips_through_json_and_by_name() {
        for f in every_fault() {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Fault>(&json).unwrap(), f, "{json}");
            assert_eq!(Fault::parse(&f.to_string()), Some(f));
            #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
            struct Saved(#[serde(with = "fault_name")] Option<Fault>);
            let ron = ron::to_string(&Saved(Some(f))).unwrap();
            assert_eq!(ron::from_str::<Saved>(&ron).unwrap(), Saved(Some(f)), "{ron}");
        }
        // The ladder's JSON keeps the spelling it always had.
        assert_eq!(serde_json::to_string(&Fault::WindowOffByOne).unwrap(), "\"window_off_by_one\"");
        let stage = Fault::F16StageSkipSlice(MapStage::bwd(StageKind::Attn, 0));
        assert_eq!(serde_json::to_string(&stage).unwrap(), r#"{"f16_stage_skip_slice":"attn.bwd"}"#);
    }

    #[test]
    fn an_unknown_fault_is_an_error_that_names_it() {
        assert!(serde_json::from_str::<Fault>("\"no_such_fault\"").is_err());
        assert!(serde_json::from_str::<Fault>(r#"{"f16_stage_skip_slice":"gru.l0.nothing"}"#).is_err());
        #[derive(serde::Deserialize, Debug)]
        struct Saved(
            #[allow(dead_code)]
            #[serde(with = "fault_name")]
            Option<Fault>,
        );
        let e = ron::from_str::<Saved>("(Some(\"no_such_fault\"))").unwrap_err().to_string();
        assert!(e.contains("no_such_fault"), "{e}");
    }
}

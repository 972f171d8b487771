//! What a replay concludes: the verdict, and the rules that pick it from the
//! facts the replay measured (`replay.rs`). The rules are a pure function of
//! those facts, so each can be tested without a device.

use serde::{Deserialize, Serialize};

/// Why a step went wrong (or that it did not): the answer of a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Both engines agree within the contract and the gradient is genuinely large.
    Data,
    /// The f32 GPU step leaves the contract against the f64 CPU reference.
    Engine,
    /// The mixed-precision step fails where the f32 GPU step passes.
    Precision,
    /// The GPU runs differ from each other, or the replays from the recorded step.
    Transient,
    /// The step reproduces and nothing in it is large.
    Clean,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Data => "data",
            Verdict::Engine => "engine",
            Verdict::Precision => "precision",
            Verdict::Transient => "transient",
            Verdict::Clean => "clean",
        }
    }

    /// The exit code of `dualscope replay`: 0 for what the engine did
    /// right (data, clean), 1 for a fault of the engine, its precision or
    /// the run (engine, precision, transient).
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Data | Verdict::Clean => 0,
            Verdict::Engine | Verdict::Precision | Verdict::Transient => 1,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the rules read: for each question, `Some(why)` (one line with the
/// numbers) when the answer is yes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// The two GPU runs in the captured precision differ (bit for bit).
    pub captured_runs_differ: Option<String>,
    /// The two f32 GPU runs differ (when the captured precision is mixed).
    pub f32_runs_differ: Option<String>,
    /// The f32 GPU step leaves the f32 contract against the f64 CPU.
    pub f32_out_of_contract: Option<String>,
    /// The captured precision is f16 or bf16 and its GPU step is non-finite
    /// or leaves the mixed contract against the f64 CPU.
    pub mixed_out_of_contract: Option<String>,
    /// The replays differ from what the run recorded.
    pub recorded_differs: Option<String>,
    /// The reference gradient is above the controller's running level (or
    /// non-finite in f64 itself).
    pub large: Option<String>,
}

/// The rules, first match wins:
///
/// 1. *transient*: the two GPU runs of one precision differ (the GPU step is
///    bit-deterministic, docs/determinism.md);
/// 2. *engine*: the f32 GPU step leaves the contract against the f64 CPU;
/// 3. *precision*: the mixed step is non-finite or out of its contract (the
///    f32 step passed rule 2);
/// 4. *transient*: everything replayed agrees, but not with the record;
/// 5. *data*: everything agrees and the gradient is large;
/// 6. *clean*.
///
/// Returns the verdict, the rule's number and its one-line reason.
pub fn classify(f: &Facts) -> (Verdict, u8, String) {
    if let Some(why) = f.captured_runs_differ.as_ref().or(f.f32_runs_differ.as_ref()) {
        return (Verdict::Transient, 1, format!("the two GPU runs of the same step differ: {why}"));
    }
    if let Some(why) = &f.f32_out_of_contract {
        return (Verdict::Engine, 2, format!("the f32 GPU step leaves the contract against the f64 CPU: {why}"));
    }
    if let Some(why) = &f.mixed_out_of_contract {
        return (Verdict::Precision, 3, format!("the mixed step fails where the f32 GPU step passes: {why}"));
    }
    if let Some(why) = &f.recorded_differs {
        return (Verdict::Transient, 4, format!("the replays agree with each other but not with the record: {why}"));
    }
    if let Some(why) = &f.large {
        return (Verdict::Data, 5, format!("both engines agree and the gradient is genuinely large: {why}"));
    }
    (Verdict::Clean, 6, "the step reproduces within the contract and nothing in it is large".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// Each rule fires on its fact, and an earlier rule wins over a later one.
    #[test]
    fn the_first_matching_rule_wins() {
        let mut f = Facts::default();
        assert_eq!(classify(&f).0, Verdict::Clean);
        f.large = yes("z 9.1");
        assert_eq!(classify(&f).0, Verdict::Data);
        f.recorded_differs = yes("recorded NaN");
        assert_eq!(classify(&f).0, Verdict::Transient);
        assert_eq!(classify(&f).1, 4);
        f.mixed_out_of_contract = yes("non-finite");
        assert_eq!(classify(&f).0, Verdict::Precision);
        f.f32_out_of_contract = yes("rel L2 0.3");
        assert_eq!(classify(&f).0, Verdict::Engine);
        f.f32_runs_differ = yes("3 values");
        let (v, rule, why) = classify(&f);
        assert_eq!((v, rule), (Verdict::Transient, 1));
        assert!(why.contains("3 values"), "{why}");
        let only_captured = Facts { captured_runs_differ: yes("loss"), ..Facts::default() };
        assert_eq!(classify(&only_captured).1, 1);
    }

    #[test]
    fn verdicts_have_their_exit_codes_and_names() {
        assert_eq!(Verdict::Data.exit_code(), 0);
        assert_eq!(Verdict::Clean.exit_code(), 0);
        for v in [Verdict::Engine, Verdict::Precision, Verdict::Transient] {
            assert_eq!(v.exit_code(), 1);
        }
        assert_eq!(serde_json::to_string(&Verdict::Precision).unwrap(), "\"precision\"");
        assert_eq!(Verdict::Transient.to_string(), "transient");
    }
}

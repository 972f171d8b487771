//! The run's logs in `--out`: `log.jsonl` (one [`LogEntry`] a step) and
//! `controller.jsonl` (one [`Action`] a line), appended and flushed line by
//! line, and read back (the GUI's training curves) by the same types.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use super::TrainError;
use super::controller::Action;
use crate::checkpoint::write_atomic;

/// The step log's file name in `--out`.
pub const LOG_FILE: &str = "log.jsonl";
/// The controller log's file name in `--out`.
pub const CONTROLLER_FILE: &str = "controller.jsonl";

/// One step of a training run, a line of `log.jsonl`. The loop writes it
/// with `A = Action`; the reader takes `A = ReadAction`, and every field but
/// `step` leniently (a missing or mistyped number is NaN or 0, an older
/// log's `"skipped": true` is a reason), as logs of older runs need.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "A: DeserializeOwned"))]
pub struct LogEntry<A = Action> {
    /// The training step (the data position).
    pub step: u64,
    /// NaN where not finite (written as null).
    #[serde(default = "nan", deserialize_with = "lenient::number")]
    pub loss: f64,
    /// Unscaled, before clipping.
    #[serde(default = "nan", deserialize_with = "lenient::number")]
    pub grad_norm: f64,
    /// Why the step was not applied (the engine's guard or the controller).
    #[serde(default, deserialize_with = "lenient::skipped")]
    pub skipped: Option<String>,
    #[serde(default, deserialize_with = "lenient::flag")]
    pub clipped: bool,
    #[serde(default, deserialize_with = "lenient::count")]
    pub capped_tokens: u64,
    /// The step's learning rate.
    #[serde(default = "nan", deserialize_with = "lenient::number")]
    pub lr: f64,
    /// The loss scale the step ran with.
    #[serde(default = "nan", deserialize_with = "lenient::number")]
    pub scale: f64,
    /// The AdamW step counter after the step.
    #[serde(default, deserialize_with = "lenient::count")]
    pub optim_step: u64,
    /// The controller's actions at this step.
    #[serde(default = "Vec::new", deserialize_with = "lenient::list")]
    pub actions: Vec<A>,
    /// Wall milliseconds of the step.
    #[serde(default = "nan", deserialize_with = "lenient::number")]
    pub ms: f64,
    /// The controller's largest deviation at this step and whose norm it was
    /// ([`super::Assessment::risk`]); absent without history or without the
    /// controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_z: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_of: Option<String>,
}

fn nan() -> f64 {
    f64::NAN
}

/// A logged action as read back: whatever of its fields are there.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReadAction {
    pub step: Option<u64>,
    pub action: Option<String>,
    pub reason: Option<String>,
}

impl<'de> Deserialize<'de> for ReadAction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let text = |k: &str| v.get(k).and_then(|s| s.as_str()).map(str::to_string);
        Ok(ReadAction { step: v.get("step").and_then(|s| s.as_u64()), action: text("action"), reason: text("reason") })
    }
}

/// Deserializers that never fail: what does not fit is the default.
mod lenient {
    use serde::de::DeserializeOwned;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Value::deserialize(d)?.as_f64().unwrap_or(f64::NAN))
    }

    pub fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok(Value::deserialize(d)?.as_u64().unwrap_or(0))
    }

    pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(Value::deserialize(d)?.as_bool().unwrap_or(false))
    }

    /// A reason, or an older log's `true`.
    pub fn skipped<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            Value::Bool(true) => Some("skipped".into()),
            _ => None,
        })
    }

    /// The elements of an array that deserialize as `A` (none if not an array).
    pub fn list<'de, D: Deserializer<'de>, A: DeserializeOwned>(d: D) -> Result<Vec<A>, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Array(xs) => xs.into_iter().filter_map(|x| serde_json::from_value(x).ok()).collect(),
            _ => Vec::new(),
        })
    }
}

/// One step of a training run's log, as the GUI plots it.
#[derive(Clone, Debug, PartialEq)]
pub struct LogStep {
    pub step: u64,
    /// NaN where the log has none (a non-finite loss is written as null).
    pub loss: f64,
    pub grad_norm: f64,
    /// Why the step was not applied, if it was not.
    pub skipped: Option<String>,
    pub lr: f64,
}

/// One controller action, as the GUI lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct LogAction {
    pub step: u64,
    /// The action's name (`?` where the log has none).
    pub action: String,
    pub reason: String,
}

/// A training run's `log.jsonl`, read.
#[derive(Clone, Debug, Default)]
pub struct TrainLog {
    pub path: PathBuf,
    pub steps: Vec<LogStep>,
    pub actions: Vec<LogAction>,
    /// Lines that did not parse (a line cut by a kill, say).
    pub bad_lines: usize,
}

/// Why a log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadLogError {
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} holds no training steps", .0.display())]
    Empty(PathBuf),
}

/// Reads `path`: a `log.jsonl`, or the `--out` directory holding one. Lines
/// that are not a JSON object with a whole-number `step` are counted, not fatal.
pub fn read_train_log(path: &Path) -> Result<TrainLog, ReadLogError> {
    let file = if path.is_dir() { path.join(LOG_FILE) } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file).map_err(|source| ReadLogError::Io { path: file.clone(), source })?;
    let mut log = TrainLog { path: file.clone(), ..Default::default() };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // An object first: a struct would also take a JSON array.
        let entry = match serde_json::from_str(line) {
            Ok(v @ serde_json::Value::Object(_)) => serde_json::from_value::<LogEntry<ReadAction>>(v).ok(),
            _ => None,
        };
        let Some(e) = entry else {
            log.bad_lines += 1;
            continue;
        };
        log.steps.push(LogStep { step: e.step, loss: e.loss, grad_norm: e.grad_norm, skipped: e.skipped, lr: e.lr });
        for a in e.actions {
            log.actions.push(LogAction {
                step: a.step.unwrap_or(e.step),
                action: a.action.unwrap_or_else(|| "?".into()),
                reason: a.reason.unwrap_or_default(),
            });
        }
    }
    if log.steps.is_empty() {
        return Err(ReadLogError::Empty(file));
    }
    Ok(log)
}

/// Appends JSON lines to a file in `--out`, flushed line by line (or nothing
/// without `--out`).
pub(super) struct JsonLog(Option<std::fs::File>);

impl JsonLog {
    pub(super) fn open(path: Option<PathBuf>) -> Result<Self, TrainError> {
        let Some(path) = path else { return Ok(JsonLog(None)) };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TrainError::Failed(format!("{}: cannot open for appending: {e}", path.display())))?;
        Ok(JsonLog(Some(f)))
    }

    /// One line: `x` as a JSON object (through `serde_json::Value`, so that
    /// its keys come sorted, as every log line so far).
    pub(super) fn push<T: Serialize>(&mut self, x: &T) -> Result<(), TrainError> {
        if let Some(f) = &mut self.0 {
            let v = serde_json::to_value(x).expect("plain data");
            writeln!(f, "{v}")
                .and_then(|_| f.flush())
                .map_err(|e| TrainError::Failed(format!("writing a log: {e}")))?;
        }
        Ok(())
    }

    pub(super) fn sync(&self) {
        if let Some(f) = &self.0 {
            let _ = f.sync_data();
        }
    }
}

/// The lines of `from` (a log of an earlier run) whose `step` is at most
/// `upto`, written atomically to `to`: the steps after a checkpoint are run
/// again on resume, and a line cut by a kill is dropped.
pub(super) fn keep_log_upto(from: &Path, to: &Path, upto: u64) -> Result<(), TrainError> {
    let text = match std::fs::read(from) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(TrainError::Failed(format!("{}: {e}", from.display()))),
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|k| k <= upto)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    write_atomic(to, kept.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::ActionKind;

    #[test]
    fn an_entry_round_trips_and_old_lines_are_read_leniently() {
        let e = LogEntry {
            step: 7,
            loss: f64::NAN,
            grad_norm: 1.5,
            skipped: Some("gradient norm is not finite".into()),
            clipped: false,
            capped_tokens: 2,
            lr: 3e-3,
            scale: 1.0,
            optim_step: 6,
            actions: vec![Action {
                step: 7,
                action: ActionKind::Skip,
                reason: "x".into(),
                lr_factor: None,
                scale: None,
                to_step: None,
            }],
            ms: 2.0,
            risk_z: Some(4.5),
            risk_of: Some("ctx.q.weight".into()),
        };
        let line = serde_json::to_value(&e).unwrap().to_string();
        assert!(line.contains(r#""loss":null"#) && line.contains(r#""action":"skip""#), "{line}");
        let back: LogEntry = serde_json::from_str(&line).unwrap();
        assert_eq!((back.step, back.actions.clone(), back.loss.is_nan()), (7, e.actions.clone(), true));
        let old: LogEntry<ReadAction> =
            serde_json::from_str(r#"{"step":3,"loss":"x","skipped":true,"actions":[5,{"action":"lr_cut"}]}"#).unwrap();
        assert_eq!((old.step, old.loss.is_nan(), old.skipped.as_deref()), (3, true, Some("skipped")));
        assert_eq!(old.actions.len(), 2);
        assert_eq!(old.actions[1].action.as_deref(), Some("lr_cut"));
    }

    #[test]
    fn the_reader_counts_lines_it_cannot_take() {
        let dir = tempfile::tempdir().unwrap();
        let text = "{\"step\":1,\"loss\":2.5,\"lr\":0.003,\"actions\":[{\"step\":1,\"action\":\"skip\",\"reason\":\"r\"}]}\n\
                    [1,2]\n{\"loss\":1}\n{\"step\":2,\"lo\n\n{\"step\":2,\"loss\":null}\n";
        std::fs::write(dir.path().join(LOG_FILE), text).unwrap();
        let log = read_train_log(dir.path()).unwrap();
        assert_eq!((log.steps.len(), log.bad_lines), (2, 3));
        assert_eq!(log.actions, vec![LogAction { step: 1, action: "skip".into(), reason: "r".into() }]);
        assert!(log.steps[1].loss.is_nan() && log.steps[1].grad_norm.is_nan());
        std::fs::write(dir.path().join(LOG_FILE), "oops\n").unwrap();
        assert!(read_train_log(dir.path()).unwrap_err().to_string().ends_with("holds no training steps"));
    }
}

//! Resumable training checkpoints: the parameters, the AdamW moments and the
//! run's state (step counter, loss scale, controller, data position, as JSON
//! the caller defines) in one safetensors file, written atomically, so that a
//! crash at any moment leaves either the previous checkpoint or the new one.
//!
//! Tensors are named `param.NAME`, `adam.m.NAME` and `adam.v.NAME` for each
//! parameter `NAME` of the contract; the metadata holds `config`, `format` =
//! [`TRAIN_FORMAT`], `train_state` (the caller's JSON) and the content
//! `checksum` that loading verifies (a changed byte is refused, not resumed).

use std::collections::BTreeSet;
use std::path::Path;

use super::{
    CONFIG_KEY, CheckpointError, FORMAT_KEY, LoadOptions, Metadata, check_finite, load_tensors, one_line, save_tensors,
    show,
};
use crate::model::{Config, ConfigError, Params, param_specs};
use crate::tensor::Tensor;

/// Value of the `format` metadata key of a training checkpoint.
pub const TRAIN_FORMAT: &str = "dualscope-train-v1";

/// Metadata key holding the caller's JSON state.
pub const TRAIN_STATE_KEY: &str = "train_state";

/// The tensor-name prefixes of the three parameter-shaped sets.
const PREFIXES: [&str; 3] = ["param.", "adam.m.", "adam.v."];

/// What a training checkpoint holds.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainCheckpoint {
    pub config: Config,
    pub params: Params<f32>,
    pub m: Params<f32>,
    pub v: Params<f32>,
    /// The caller's JSON (the `train_state` metadata).
    pub state: String,
}

/// Writes `ck` to `path` atomically.
pub fn save_train_checkpoint(path: &Path, ck: &TrainCheckpoint) -> Result<(), CheckpointError> {
    let invalid = |reason: String| CheckpointError::Invalid { path: show(path), reason };
    ck.config.validate().map_err(|e| match e {
        ConfigError::Invalid(msg) => invalid(format!("invalid config: {msg}")),
        other => invalid(other.to_string()),
    })?;
    let specs = param_specs(&ck.config);
    let mut named: Vec<(String, &Tensor<f32>)> = Vec::with_capacity(3 * specs.len());
    for (prefix, set) in PREFIXES.iter().zip([&ck.params, &ck.m, &ck.v]) {
        let tensors = set.tensors();
        if tensors.len() != specs.len() {
            return Err(invalid(format!("{prefix}*: {} tensors, the config needs {}", tensors.len(), specs.len())));
        }
        for ((name, shape), t) in specs.iter().zip(tensors) {
            if &t.shape != shape {
                return Err(CheckpointError::WrongShape {
                    path: show(path),
                    name: format!("{prefix}{name}"),
                    expected: shape.clone(),
                    found: t.shape.clone(),
                });
            }
            named.push((format!("{prefix}{name}"), t));
        }
    }
    let mut meta = Metadata::new();
    meta.insert(CONFIG_KEY.into(), ck.config.to_json());
    meta.insert(FORMAT_KEY.into(), TRAIN_FORMAT.into());
    meta.insert(TRAIN_STATE_KEY.into(), ck.state.clone());
    save_tensors(path, &named, &meta)
}

/// Reads a training checkpoint, checking it completely: the file and its
/// checksum, the config, the format, every tensor present with its shape,
/// none unexpected, the `train_state` entry present, and no non-finite value
/// in the parameters or the moments.
pub fn load_train_checkpoint(path: &Path) -> Result<TrainCheckpoint, CheckpointError> {
    load_train_checkpoint_with(path, LoadOptions::default())
}

/// [`load_train_checkpoint`] with `opts` (e.g. accepting non-finite values).
pub fn load_train_checkpoint_with(path: &Path, opts: LoadOptions) -> Result<TrainCheckpoint, CheckpointError> {
    let (mut tensors, meta) = load_tensors(path)?;
    let p = || show(path);
    let json = meta.get(CONFIG_KEY).ok_or_else(|| CheckpointError::MissingConfig { path: p() })?;
    let config = Config::from_json(json).map_err(|e| {
        let reason = match e {
            ConfigError::Invalid(msg) => msg,
            other => other.to_string(),
        };
        CheckpointError::BadConfig { path: p(), reason: one_line(&reason) }
    })?;
    match meta.get(FORMAT_KEY) {
        Some(f) if f == TRAIN_FORMAT => {}
        found => {
            let found = found.map_or("(none)".to_string(), |f| one_line(f));
            return Err(CheckpointError::Corrupt {
                path: p(),
                reason: format!("metadata format is \"{found}\", expected \"{TRAIN_FORMAT}\" (a training checkpoint)"),
            });
        }
    }
    let state = meta.get(TRAIN_STATE_KEY).cloned().ok_or_else(|| CheckpointError::Corrupt {
        path: p(),
        reason: format!("no `{TRAIN_STATE_KEY}` key in the safetensors metadata"),
    })?;
    let specs = param_specs(&config);
    let wanted: Vec<String> =
        PREFIXES.iter().flat_map(|pre| specs.iter().map(move |(n, _)| format!("{pre}{n}"))).collect();
    let missing: Vec<String> = wanted.iter().filter(|n| !tensors.contains_key(*n)).cloned().collect();
    if !missing.is_empty() {
        return Err(CheckpointError::MissingTensors { path: p(), names: missing });
    }
    let known: BTreeSet<&String> = wanted.iter().collect();
    let unexpected: Vec<String> = tensors.keys().filter(|n| !known.contains(n)).map(|n| one_line(n)).collect();
    if !unexpected.is_empty() {
        return Err(CheckpointError::UnexpectedTensors { path: p(), names: unexpected });
    }
    let mut take = |prefix: &str| -> Result<Params<f32>, CheckpointError> {
        let mut set = Vec::with_capacity(specs.len());
        for (name, shape) in &specs {
            let full = format!("{prefix}{name}");
            let t = tensors.remove(&full).expect("checked present");
            if &t.shape != shape {
                return Err(CheckpointError::WrongShape {
                    path: p(),
                    name: full,
                    expected: shape.clone(),
                    found: t.shape,
                });
            }
            set.push(t);
        }
        Ok(Params::from_iter_canonical(&config, &mut set.into_iter()))
    };
    let params = take(PREFIXES[0])?;
    let m = take(PREFIXES[1])?;
    let v = take(PREFIXES[2])?;
    let named = PREFIXES
        .iter()
        .zip([&params, &m, &v])
        .flat_map(|(prefix, set)| set.named(&config).into_iter().map(move |(name, t)| (format!("{prefix}{name}"), t)));
    check_finite(path, opts, named)?;
    Ok(TrainCheckpoint { config, params, m, v, state })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TrainCheckpoint {
        let config = Config::tiny();
        let params = Params::init(&config, 1);
        let mut m = Params::init(&config, 2);
        m.head_bias.data[3] = f32::NAN;
        TrainCheckpoint { v: Params::init(&config, 3), params, m, state: "{\"step\": 7}".into(), config }
    }

    #[test]
    fn round_trips_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.safetensors");
        let ck = sample();
        save_train_checkpoint(&path, &ck).unwrap();
        let back = load_train_checkpoint_with(&path, LoadOptions::DEBUG).unwrap();
        assert_eq!(back.state, ck.state);
        assert_eq!(back.config, ck.config);
        assert_eq!(back.params, ck.params);
        assert_eq!(back.v, ck.v);
        assert!(back.m.head_bias.data[3].is_nan());
        // A plain parameter checkpoint is not a training checkpoint.
        let plain = dir.path().join("plain.safetensors");
        super::super::save_params(&plain, &ck.config, &ck.params).unwrap();
        let err = load_train_checkpoint(&plain).unwrap_err().to_string();
        assert!(err.contains("expected \"dualscope-train-v1\""), "{err}");
    }

    #[test]
    fn truncated_or_edited_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.safetensors");
        save_train_checkpoint(&path, &sample()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
        let err = load_train_checkpoint(&cut).unwrap_err().to_string();
        assert!(err.starts_with(cut.to_str().unwrap()) && err.contains("truncated"), "{err}");
        let (mut tensors, meta) = load_tensors(&path).unwrap();
        tensors.remove("adam.v.head.bias");
        let named: Vec<(String, &Tensor<f32>)> = tensors.iter().map(|(k, v)| (k.clone(), v)).collect();
        let partial = dir.path().join("partial.safetensors");
        save_tensors(&partial, &named, &meta).unwrap();
        let err = load_train_checkpoint(&partial).unwrap_err().to_string();
        assert!(err.contains("missing tensor adam.v.head.bias"), "{err}");
    }
}

//! Serializing tensors and parameters to safetensors bytes, and saving them.

use std::any::Any;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use safetensors::{Dtype, View};

use super::checksum::{CHECKSUM_KEY, TensorBytes, content_checksum};
use super::{CONFIG_KEY, CheckpointError, FORMAT, FORMAT_KEY, Metadata, show, write_atomic};
use crate::model::{Config, ConfigError, Params, param_specs};
use crate::tensor::{Real, Tensor};

/// One tensor's little-endian bytes, as the serializer wants them.
pub(super) struct Encoded {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl View for &Encoded {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// `t`'s values as float32 little-endian bytes. f32 data is copied bit for bit
/// (NaN payloads included); f64 data is rounded to the nearest f32.
fn f32_le_bytes<T: Real>(t: &Tensor<T>) -> Vec<u8> {
    if let Some(data) = (&t.data as &dyn Any).downcast_ref::<Vec<f32>>() {
        return data.iter().flat_map(|x| x.to_le_bytes()).collect();
    }
    t.data.iter().flat_map(|x| (x.f64() as f32).to_le_bytes()).collect()
}

/// Serializes `tensors` (stored as F32 whatever `T` is) and `metadata` to the
/// bytes of a safetensors file; `label` names the file in error messages.
///
/// Refused: a tensor whose data length does not match its shape, a name given
/// twice, and the name `__metadata__` (safetensors reserves it).
pub fn encode_tensors<T: Real>(
    label: &Path,
    tensors: &[(String, &Tensor<T>)],
    metadata: &Metadata,
) -> Result<Vec<u8>, CheckpointError> {
    let invalid = |reason: String| CheckpointError::Invalid { path: show(label), reason };
    let mut seen = BTreeSet::new();
    let mut encoded = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        if name == "__metadata__" {
            return Err(invalid("the tensor name __metadata__ is reserved by safetensors".into()));
        }
        if !seen.insert(name.as_str()) {
            return Err(invalid(format!("tensor {name} is given twice")));
        }
        let needed = t.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if needed != Some(t.data.len()) {
            return Err(invalid(format!(
                "tensor {name} holds {} values, but its shape is {:?}",
                t.data.len(),
                t.shape
            )));
        }
        encoded.push((name.as_str(), Encoded { dtype: Dtype::F32, shape: t.shape.clone(), bytes: f32_le_bytes(t) }));
    }
    serialize(label, &encoded, metadata)
}

/// The bytes of a safetensors file of `encoded` tensors and `metadata`, with
/// the content checksum (see [`super::checksum`]) added to the metadata; a
/// `checksum` entry given in `metadata` is replaced.
pub(super) fn serialize(
    label: &Path,
    encoded: &[(&str, Encoded)],
    metadata: &Metadata,
) -> Result<Vec<u8>, CheckpointError> {
    let contents: BTreeMap<&str, TensorBytes<'_>> = encoded
        .iter()
        .map(|(name, e)| (*name, TensorBytes { dtype: e.dtype, shape: &e.shape, data: &e.bytes }))
        .collect();
    let mut meta: HashMap<String, String> = metadata.clone().into_iter().collect();
    meta.insert(CHECKSUM_KEY.into(), content_checksum(metadata, &contents));
    let views = encoded.iter().map(|(name, b)| (*name, b));
    safetensors::serialize(views, Some(meta))
        .map_err(|source| CheckpointError::Safetensors { path: show(label), source })
}

/// Saves `tensors` with `metadata` to `path` atomically (see [`write_atomic`]),
/// every tensor as F32. The generic counterpart of [`save_params`], for
/// gradient files, exports and anything else made of named float tensors.
pub fn save_tensors<T: Real>(
    path: &Path,
    tensors: &[(String, &Tensor<T>)],
    metadata: &Metadata,
) -> Result<(), CheckpointError> {
    let bytes = encode_tensors(path, tensors, metadata)?;
    write_atomic(path, &bytes)
}

/// Saves `params` for `cfg` to `path` as the contract's checkpoint: F32
/// tensors under their canonical names, metadata `config` (the config as
/// JSON) and `format` = [`FORMAT`]. Written atomically.
pub fn save_params<T: Real>(path: &Path, cfg: &Config, params: &Params<T>) -> Result<(), CheckpointError> {
    save_params_with(path, cfg, params, &[])
}

/// [`save_params`] with extra metadata entries, e.g. `kind` = `gradients`,
/// `step`, `loss`. The keys `config`, `format` and `checksum` are reserved, and no key
/// may be given twice.
///
/// Refuses a config that fails [`Config::validate`] and parameters whose
/// shapes do not match the config, as such a file could not be loaded.
pub fn save_params_with<T: Real>(
    path: &Path,
    cfg: &Config,
    params: &Params<T>,
    extra: &[(String, String)],
) -> Result<(), CheckpointError> {
    let invalid = |reason: String| CheckpointError::Invalid { path: show(path), reason };
    cfg.validate().map_err(|e| match e {
        ConfigError::Invalid(msg) => invalid(format!("invalid config: {msg}")),
        other => invalid(other.to_string()),
    })?;
    let specs = param_specs(cfg);
    let tensors = params.tensors();
    if tensors.len() != specs.len() {
        return Err(invalid(format!(
            "the parameters hold {} tensors, but the config needs {}",
            tensors.len(),
            specs.len()
        )));
    }
    for ((name, expected), t) in specs.iter().zip(&tensors) {
        if &t.shape != expected {
            return Err(CheckpointError::WrongShape {
                path: show(path),
                name: name.clone(),
                expected: expected.clone(),
                found: t.shape.clone(),
            });
        }
    }
    let mut metadata = Metadata::new();
    metadata.insert(CONFIG_KEY.into(), cfg.to_json());
    metadata.insert(FORMAT_KEY.into(), FORMAT.into());
    for (key, value) in extra {
        if key == CONFIG_KEY || key == FORMAT_KEY || key == CHECKSUM_KEY {
            return Err(invalid(format!("the metadata key `{key}` is reserved")));
        }
        if metadata.insert(key.clone(), value.clone()).is_some() {
            return Err(invalid(format!("the metadata key `{key}` is given twice")));
        }
    }
    let named: Vec<(String, &Tensor<T>)> = specs.into_iter().map(|(n, _)| n).zip(tensors).collect();
    save_tensors(path, &named, &metadata)
}

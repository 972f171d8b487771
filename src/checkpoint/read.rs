//! Reading safetensors files of float32 tensors, and checkpoints among them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::checksum::{self, CHECKSUM_KEY, TensorBytes};
use super::{CONFIG_KEY, CheckpointError, FORMAT, FORMAT_KEY, LoadOptions, Metadata, check_finite, one_line, show};
use crate::model::{Config, ConfigError, Params, param_specs};
use crate::tensor::Tensor;

/// Bytes of the header-length field that opens every safetensors file.
const LEN_FIELD: usize = 8;

/// The largest header the safetensors crate accepts.
const MAX_HEADER: u64 = 100_000_000;

/// One tensor of a parsed file: dtype, shape and raw bytes.
pub(super) struct RawTensor<'a> {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

/// A checked safetensors file: its metadata and its tensors by name.
pub(super) struct Parsed<'a> {
    pub metadata: Metadata,
    pub tensors: BTreeMap<String, RawTensor<'a>>,
}

/// Reads a whole file, telling a missing file and a directory apart from
/// other failures.
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    use crate::dataset::FileProblem;
    use std::io::Read;
    let io = |action: &str, source| CheckpointError::Io { path: show(path), action: action.into(), source };
    // A regular file (a FIFO or /dev/zero would block or never end), checked before any read.
    let (mut file, len) = crate::dataset::open_input_file(path, u64::MAX).map_err(|e| match e {
        FileProblem::NotFound => CheckpointError::NotFound { path: show(path) },
        FileProblem::IsDirectory => CheckpointError::IsDirectory { path: show(path) },
        FileProblem::Io(e) => io("cannot open", e),
        e => CheckpointError::NotSafetensors { path: show(path), reason: e.to_string() },
    })?;
    // The framing first: a file that is not safetensors is refused from its
    // first bytes, not read in full (a huge sparse file would be).
    let mut head = Vec::with_capacity(LEN_FIELD + 1);
    (&mut file).take(LEN_FIELD as u64 + 1).read_to_end(&mut head).map_err(|e| io("cannot read", e))?;
    if let Some(field) = head.first_chunk::<LEN_FIELD>() {
        let n = u64::from_le_bytes(*field);
        let after = len.saturating_sub(LEN_FIELD as u64);
        let opens_json = head.get(LEN_FIELD) == Some(&b'{');
        // The same verdicts as `parse`, for the cases that need no more bytes.
        let reason = if n > after && !((opens_json || after == 0) && n <= MAX_HEADER) {
            Some(format!("its first 8 bytes give a header length of {n}, past the end of the {len}-byte file"))
        } else if n <= after && !opens_json {
            Some("its header does not start with '{'".to_string())
        } else if n > MAX_HEADER {
            Some(format!("its header is {n} bytes, over the {MAX_HEADER}-byte limit of safetensors"))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(CheckpointError::NotSafetensors { path: show(path), reason });
        }
    }
    let limit = crate::memory::memory_limit();
    if len > limit {
        let reason =
            format!("the file is {len} bytes, over the {} MiB limit (70% of the memory available)", limit >> 20);
        return Err(CheckpointError::NotSafetensors { path: show(path), reason });
    }
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX)).map_err(|_| {
        let reason = format!("the file is {len} bytes, more than this machine can hold in memory");
        CheckpointError::NotSafetensors { path: show(path), reason }
    })?;
    bytes.extend_from_slice(&head);
    file.read_to_end(&mut bytes).map_err(|e| io("cannot read", e))?;
    Ok(bytes)
}

/// Checks the framing of `bytes` (length field, header, data extent) with
/// messages that say what is wrong, then lets the safetensors crate check the
/// rest. The offsets are checked against the file length before the crate
/// sees them, so that no header can make its arithmetic overflow.
pub(super) fn parse<'a>(label: &Path, bytes: &'a [u8]) -> Result<Parsed<'a>, CheckpointError> {
    let path = show(label);
    let len = bytes.len();
    if len == 0 {
        return Err(CheckpointError::Empty { path });
    }
    let Some(field) = bytes.first_chunk::<LEN_FIELD>() else {
        let reason = format!("the file is {len} bytes, shorter than the 8-byte header length field");
        return Err(CheckpointError::Truncated { path, reason });
    };
    let n = u64::from_le_bytes(*field);
    let after = (len - LEN_FIELD) as u64;
    let opens_json = bytes.get(LEN_FIELD) == Some(&b'{');
    if n > after {
        // A header that starts like JSON (or was cut right after the length
        // field) means a cut file; anything else is not safetensors at all.
        return Err(if (opens_json || after == 0) && n <= MAX_HEADER {
            let reason = format!("the header is {n} bytes, but only {after} bytes follow its length field");
            CheckpointError::Truncated { path, reason }
        } else {
            let reason = format!("its first 8 bytes give a header length of {n}, past the end of the {len}-byte file");
            CheckpointError::NotSafetensors { path, reason }
        });
    }
    // n <= after < usize::MAX, so this neither truncates nor overflows.
    let header_end = LEN_FIELD + n as usize;
    let header = &bytes[LEN_FIELD..header_end];
    if header.first() != Some(&b'{') {
        let reason = "its header does not start with '{'".to_string();
        return Err(CheckpointError::NotSafetensors { path, reason });
    }
    let data = &bytes[header_end..];
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(header) {
        check_extent(&path, &map, data.len())?;
    }
    let (_, meta) = SafeTensors::read_metadata(bytes)
        .map_err(|source| CheckpointError::Safetensors { path: path.clone(), source })?;
    let mut metadata: Metadata = meta.metadata().clone().unwrap_or_default().into_iter().collect();
    let mut tensors = BTreeMap::new();
    for (name, info) in meta.tensors() {
        let (start, end) = info.data_offsets;
        let Some(data) = data.get(start..end) else {
            // read_metadata has checked the offsets; this is a second guard.
            let reason = format!("tensor {} lies outside the file", one_line(&name));
            return Err(CheckpointError::Truncated { path, reason });
        };
        tensors.insert(name, RawTensor { dtype: info.dtype, shape: info.shape.clone(), data });
    }
    // The checksum is framing, not content: verified here, then left out.
    if let Some(stored) = metadata.remove(CHECKSUM_KEY) {
        verify_checksum(&path, &stored, &metadata, &tensors)?;
    }
    Ok(Parsed { metadata, tensors })
}

/// Checks the stored `checksum` entry against the contents (see
/// [`super::checksum`]).
fn verify_checksum(
    path: &str,
    stored: &str,
    metadata: &Metadata,
    tensors: &BTreeMap<String, RawTensor<'_>>,
) -> Result<(), CheckpointError> {
    if !checksum::well_formed(stored) {
        let reason = format!("`{CHECKSUM_KEY}` metadata \"{}\" is not crc32: and 8 hex digits", one_line(stored));
        return Err(CheckpointError::Corrupt { path: path.into(), reason });
    }
    let contents: BTreeMap<&str, TensorBytes<'_>> = tensors
        .iter()
        .map(|(name, t)| (name.as_str(), TensorBytes { dtype: t.dtype, shape: &t.shape, data: t.data }))
        .collect();
    let computed = checksum::content_checksum(metadata, &contents);
    if computed != stored {
        return Err(CheckpointError::ChecksumMismatch { path: path.into(), stored: stored.into(), computed });
    }
    Ok(())
}

/// Checks that the tensors' data, as the header `map` lays it out, ends
/// exactly at the end of the file's `data_len` data bytes. Entries whose end
/// offset cannot be read are left to the safetensors crate to report.
fn check_extent(
    path: &str,
    map: &serde_json::Map<String, serde_json::Value>,
    data_len: usize,
) -> Result<(), CheckpointError> {
    let ends: Vec<Option<(u64, &String)>> = map
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| Some((v.get("data_offsets")?.get(1)?.as_u64()?, k)))
        .collect();
    let last = ends.iter().flatten().max();
    if let Some(&(end, name)) = last
        && end > data_len as u64
    {
        let reason = format!(
            "tensor {} ends at data byte {end}, but only {data_len} data bytes follow the header",
            one_line(name),
        );
        return Err(CheckpointError::Truncated { path: path.into(), reason });
    }
    let end = last.map_or(0, |&(end, _)| end as usize);
    if ends.iter().all(Option::is_some) && end < data_len {
        let reason = format!("{} bytes follow the end of the last tensor's data", data_len - end);
        return Err(CheckpointError::Corrupt { path: path.into(), reason });
    }
    Ok(())
}

/// Converts one tensor, which must be F32.
fn to_f32(label: &Path, name: &str, raw: &RawTensor) -> Result<Tensor<f32>, CheckpointError> {
    if raw.dtype != Dtype::F32 {
        return Err(CheckpointError::WrongDtype {
            path: show(label),
            name: one_line(name),
            found: raw.dtype.to_string(),
        });
    }
    let data = raw.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(Tensor { shape: raw.shape.clone(), data })
}

/// Every tensor of the safetensors file `path` (all must be F32) by name, and
/// the file's metadata. For gradient files, exports, and any other file of
/// named float tensors.
pub fn load_tensors(path: &Path) -> Result<(BTreeMap<String, Tensor<f32>>, Metadata), CheckpointError> {
    tensors_from_bytes(path, &read_file(path)?)
}

/// [`load_tensors`] on bytes already in memory; `label` names them in errors.
pub fn tensors_from_bytes(
    label: &Path,
    bytes: &[u8],
) -> Result<(BTreeMap<String, Tensor<f32>>, Metadata), CheckpointError> {
    let parsed = parse(label, bytes)?;
    let mut out = BTreeMap::new();
    for (name, raw) in &parsed.tensors {
        out.insert(name.clone(), to_f32(label, name, raw)?);
    }
    Ok((out, parsed.metadata))
}

/// Loads a checkpoint: its configuration and parameters. See
/// [`load_params_with`] for what is checked; non-finite values are refused.
pub fn load_params(path: &Path) -> Result<(Config, Params<f32>), CheckpointError> {
    load_params_opts(path, LoadOptions::default())
}

/// [`load_params`] with `opts` (e.g. accepting non-finite values).
pub fn load_params_opts(path: &Path, opts: LoadOptions) -> Result<(Config, Params<f32>), CheckpointError> {
    let (cfg, params, _) = load_params_with(path, opts)?;
    Ok((cfg, params))
}

/// [`load_params_with`] with the default options, metadata included.
pub fn load_params_with_meta(path: &Path) -> Result<(Config, Params<f32>, Metadata), CheckpointError> {
    load_params_with(path, LoadOptions::default())
}

/// Loads a checkpoint with all of its metadata.
///
/// Checked, in this order: the file's framing and safetensors header; the
/// content checksum, when the file has one; the `config` metadata (present,
/// valid JSON, passing [`Config::validate`]; `batch` and `seq_len` may be
/// absent); the `format` metadata, when present, being [`FORMAT`]; no tensor
/// missing; no tensor unexpected; each tensor's dtype (F32) and shape; then,
/// unless `opts` allows them, that no value is NaN or infinite.
pub fn load_params_with(path: &Path, opts: LoadOptions) -> Result<(Config, Params<f32>, Metadata), CheckpointError> {
    params_from_bytes_with(path, &read_file(path)?, opts)
}

/// [`load_params_with_meta`] on bytes already in memory; `label` names them
/// in errors.
pub fn params_from_bytes(label: &Path, bytes: &[u8]) -> Result<(Config, Params<f32>, Metadata), CheckpointError> {
    params_from_bytes_with(label, bytes, LoadOptions::default())
}

/// [`load_params_with`] on bytes already in memory; `label` names them in
/// errors.
pub fn params_from_bytes_with(
    label: &Path,
    bytes: &[u8],
    opts: LoadOptions,
) -> Result<(Config, Params<f32>, Metadata), CheckpointError> {
    let path = || show(label);
    let parsed = parse(label, bytes)?;
    let Some(json) = parsed.metadata.get(CONFIG_KEY) else {
        return Err(CheckpointError::MissingConfig { path: path() });
    };
    let cfg = Config::from_json(json).map_err(|e| {
        let reason = match e {
            ConfigError::Invalid(msg) => msg,
            other => other.to_string(),
        };
        CheckpointError::BadConfig { path: path(), reason: one_line(&reason) }
    })?;
    if let Some(found) = parsed.metadata.get(FORMAT_KEY)
        && found != FORMAT
    {
        return Err(CheckpointError::WrongFormat { path: path(), found: one_line(found) });
    }

    let specs = param_specs(&cfg);
    let missing: Vec<String> =
        specs.iter().filter(|(name, _)| !parsed.tensors.contains_key(name)).map(|(name, _)| name.clone()).collect();
    if !missing.is_empty() {
        return Err(CheckpointError::MissingTensors { path: path(), names: missing });
    }
    let known: BTreeSet<&str> = specs.iter().map(|(name, _)| name.as_str()).collect();
    let unexpected: Vec<String> =
        parsed.tensors.keys().filter(|name| !known.contains(name.as_str())).map(|name| one_line(name)).collect();
    if !unexpected.is_empty() {
        return Err(CheckpointError::UnexpectedTensors { path: path(), names: unexpected });
    }

    let mut tensors = Vec::with_capacity(specs.len());
    for (name, expected) in &specs {
        let raw = &parsed.tensors[name];
        let t = to_f32(label, name, raw)?;
        if &t.shape != expected {
            return Err(CheckpointError::WrongShape {
                path: path(),
                name: name.clone(),
                expected: expected.clone(),
                found: t.shape,
            });
        }
        tensors.push(t);
    }
    check_finite(label, opts, specs.into_iter().map(|(name, _)| name).zip(&tensors))?;
    let params = Params::from_iter_canonical(&cfg, &mut tensors.into_iter());
    Ok((cfg, params, parsed.metadata))
}

//! Reading a capture folder back, checking every file and field, and
//! checking it against the dataset it was cut from.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::write::TEMP_PREFIX;
use super::{BATCH_FILE, CAPTURE_FORMAT, CARRY_FILE, Capture, CaptureMeta, LEAD_UP_FILE, META_FILE, STATE_FILE};
use crate::checkpoint::{CheckpointError, LoadOptions, load_train_checkpoint_with};
use crate::dataset::{Batch, Dataset, fnv1a64, open_input_file, show_path};
use crate::engine::TrainState;
use crate::step::{LossScale, OptimState};

/// What can be wrong with a capture; every message names the file, and the
/// field where one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{}: not a capture folder ({reason})", show_path(.dir))]
    NotACapture { dir: PathBuf, reason: String },
    #[error("{}: missing: the capture is incomplete", show_path(.file))]
    Missing { file: PathBuf },
    #[error("{}: {field}: {reason}", show_path(.file))]
    Invalid { file: PathBuf, field: String, reason: String },
    #[error("{}: format_version {found}: this dualscope reads version {CAPTURE_FORMAT}", show_path(.file))]
    Version { file: PathBuf, found: u64 },
    #[error("{}: dataset.{field}: {reason}", show_path(.file))]
    DatasetChanged { file: PathBuf, field: String, reason: String },
    #[error("{}: {action}: {source}", show_path(.path))]
    Io { path: PathBuf, action: String, source: std::io::Error },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

pub(super) fn io_err(path: &Path, action: &str) -> impl FnOnce(std::io::Error) -> CaptureError {
    let (path, action) = (path.to_path_buf(), action.to_string());
    move |source| CaptureError::Io { path, action, source }
}

/// The most bytes `capture.json` may have (its lead-up lists included).
const META_MAX: u64 = 64 << 20;

/// Reads `path` whole if it is a regular file of at most `max` bytes.
fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, CaptureError> {
    use crate::dataset::FileProblem;
    let (mut f, len) = open_input_file(path, max).map_err(|p| match p {
        FileProblem::NotFound => CaptureError::Missing { file: path.to_path_buf() },
        other => CaptureError::Invalid { file: path.to_path_buf(), field: "(file)".into(), reason: other.to_string() },
    })?;
    let mut bytes = Vec::with_capacity(len as usize);
    f.read_to_end(&mut bytes).map_err(io_err(path, "cannot read"))?;
    Ok(bytes)
}

/// Reads the capture folder `dir` (or the folder of its `capture.json`).
pub fn load(dir: &Path) -> Result<Capture, CaptureError> {
    let dir = if dir.file_name().is_some_and(|n| n == META_FILE) { dir.parent().unwrap_or(dir) } else { dir };
    if !dir.is_dir() {
        let reason = if dir.exists() { "not a folder" } else { "no such folder" };
        return Err(CaptureError::NotACapture { dir: dir.to_path_buf(), reason: reason.into() });
    }
    let meta_path = dir.join(META_FILE);
    let meta = parse_meta(&meta_path, &read_file(&meta_path, META_MAX)?)?;
    let field = |field: &str, reason: String| CaptureError::Invalid {
        file: meta_path.clone(),
        field: field.to_string(),
        reason,
    };
    let b = &meta.batch;
    if b.rows == 0 || b.lens.len() != b.rows {
        return Err(field("batch.lens", format!("{} lengths for {} rows", b.lens.len(), b.rows)));
    }
    if let Some((r, &l)) = b.lens.iter().enumerate().find(|&(_, &l)| l as u128 > b.t as u128 + 1) {
        return Err(field("batch.lens", format!("row {r} has {l} tokens, more than t + 1 = {}", b.t as u128 + 1)));
    }
    if !b.origins.is_empty() && b.origins.len() != b.rows {
        return Err(field("batch.origins", format!("{} origins for {} rows", b.origins.len(), b.rows)));
    }
    let size = (b.t as u64)
        .checked_add(1)
        .and_then(|t1| t1.checked_mul(b.rows as u64))
        .ok_or_else(|| field("batch.t", "overflows".into()))?;
    crate::memory::check_alloc(&format!("{}: batch", show_path(dir)), Some(size))
        .map_err(|e| field("batch", e.to_string()))?;
    let batch_path = dir.join(BATCH_FILE);
    let tokens = read_file(&batch_path, size)?;
    if tokens.len() as u64 != size {
        return Err(CaptureError::Invalid {
            file: batch_path,
            field: "(length)".into(),
            reason: format!("{} bytes, batch.rows × (batch.t + 1) = {size} expected", tokens.len()),
        });
    }
    if format!("{:016x}", fnv1a64(&tokens)) != b.tokens_hash {
        return Err(CaptureError::Invalid {
            file: batch_path,
            field: "(content)".into(),
            reason: format!("does not match batch.tokens_hash {} of {META_FILE}", b.tokens_hash),
        });
    }
    let batch = Batch { rows: b.rows, t: b.t, tokens, lens: b.lens.clone() };
    let lead_up = read_lead_up(dir, &meta)?;
    let state_path = dir.join(STATE_FILE);
    if !state_path.exists() {
        return Err(CaptureError::Missing { file: state_path });
    }
    // A capture is evidence: weights that went non-finite are loaded as they are.
    let ck = load_train_checkpoint_with(&state_path, LoadOptions { allow_non_finite: true })?;
    #[derive(serde::Deserialize)]
    struct Side {
        optim_step: u64,
        loss_scale: LossScale,
    }
    let side: Side = serde_json::from_str(&ck.state).map_err(|e| CaptureError::Invalid {
        file: state_path.clone(),
        field: "train_state".into(),
        reason: e.to_string(),
    })?;
    if side.optim_step != meta.optim_step {
        return Err(field("optim_step", format!("{} here, {} in {STATE_FILE}", meta.optim_step, side.optim_step)));
    }
    let state = TrainState {
        params: ck.params,
        optim: OptimState { m: ck.m, v: ck.v, step: side.optim_step },
        scale: side.loss_scale,
    };
    let carry = if meta.carry { Some(read_carry(dir, &ck.config, batch.rows, &meta)?) } else { None };
    Ok(Capture { meta, config: ck.config, state, batch, lead_up, carry })
}

/// Reads `carry.safetensors` (the state a carried step started from) and
/// checks it against the model, the batch's rows and `carry_prefix_len`.
fn read_carry(
    dir: &Path,
    cfg: &crate::model::Config,
    rows: usize,
    meta: &CaptureMeta,
) -> Result<crate::step::Carry<f32>, CaptureError> {
    let path = dir.join(CARRY_FILE);
    if !path.exists() {
        return Err(CaptureError::Missing { file: path });
    }
    let invalid =
        |field: &str, reason: String| CaptureError::Invalid { file: path.clone(), field: field.into(), reason };
    let (tensors, _) = crate::checkpoint::load_named(&path)?;
    let c = crate::step::Carry::from_named(&tensors, cfg, rows).map_err(|e| invalid("(state)", e))?;
    if let Some(p) = meta.carry_prefix_len.filter(|&p| p != c.prefix_len) {
        return Err(invalid("prefix", format!("{} positions, {META_FILE} says carry_prefix_len {p}", c.prefix_len)));
    }
    Ok(c)
}

/// Parses `capture.json`, its version first (so that a newer format says
/// so rather than failing on a field it changed).
fn parse_meta(path: &Path, bytes: &[u8]) -> Result<CaptureMeta, CaptureError> {
    let invalid = |field: &str, reason: String| CaptureError::Invalid {
        file: path.to_path_buf(),
        field: field.to_string(),
        reason,
    };
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| invalid("(json)", e.to_string()))?;
    match v.get("format_version").and_then(|x| x.as_u64()) {
        None => return Err(invalid("format_version", "missing or not a number".into())),
        Some(n) if n != CAPTURE_FORMAT as u64 => {
            return Err(CaptureError::Version { file: path.to_path_buf(), found: n });
        }
        Some(_) => {}
    }
    serde_json::from_value(v).map_err(|e| {
        // serde_json names the missing or mistyped field in its message.
        let msg = e.to_string();
        let field = msg.split('`').nth(1).unwrap_or("(json)").to_string();
        invalid(&field, msg)
    })
}

fn read_lead_up(dir: &Path, meta: &CaptureMeta) -> Result<Vec<Batch>, CaptureError> {
    if meta.lead_up.is_empty() {
        return Ok(Vec::new());
    }
    let path = dir.join(LEAD_UP_FILE);
    let meta_path = dir.join(META_FILE);
    let field = |i: usize, name: &str, reason: String| CaptureError::Invalid {
        file: meta_path.clone(),
        field: format!("lead_up[{i}].{name}"),
        reason,
    };
    // Every entry's shape is checked, in checked arithmetic, before its bytes are read.
    let mut sizes = Vec::with_capacity(meta.lead_up.len());
    let mut total = 0u64;
    for (i, l) in meta.lead_up.iter().enumerate() {
        if l.step >= meta.step {
            return Err(field(i, "step", format!("{} is not before the capture's step {}", l.step, meta.step)));
        }
        if l.lens.is_empty() {
            return Err(field(i, "lens", "no rows".into()));
        }
        if let Some((r, &n)) = l.lens.iter().enumerate().find(|&(_, &n)| n as u128 > l.t as u128 + 1) {
            return Err(field(i, "lens", format!("row {r} has {n} tokens, more than t + 1")));
        }
        let size = (l.t as u64)
            .checked_add(1)
            .and_then(|t1| t1.checked_mul(l.lens.len() as u64))
            .ok_or_else(|| field(i, "t", format!("{} rows of t = {} overflow", l.lens.len(), l.t)))?;
        total = total.checked_add(size).ok_or_else(|| field(i, "t", "the entries' sizes overflow".into()))?;
        sizes.push(size);
    }
    crate::memory::check_alloc(&format!("{}: lead_up", show_path(dir)), Some(total))
        .map_err(|e| field(0, "t", e.to_string()))?;
    let bytes = read_file(&path, total)?;
    if bytes.len() as u64 != total {
        return Err(CaptureError::Invalid {
            file: path,
            field: "(length)".into(),
            reason: format!("{} bytes, the lead_up entries of {META_FILE} need {total}", bytes.len()),
        });
    }
    let mut at = 0usize;
    let mut out = Vec::with_capacity(sizes.len());
    for (l, n) in meta.lead_up.iter().zip(sizes) {
        let tokens = bytes[at..at + n as usize].to_vec();
        at += n as usize;
        out.push(Batch { rows: l.lens.len(), t: l.t, tokens, lens: l.lens.clone() });
    }
    Ok(out)
}

/// The captures in `dir` (`step_NNNNNN` folders), by step; temporary
/// folders are not captures. A missing `dir` has none.
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, CaptureError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, "cannot list the captures")(e)),
    };
    let mut out: Vec<(u64, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                return None;
            }
            let step = name.strip_prefix("step_")?.parse().ok()?;
            e.path().is_dir().then(|| (step, e.path()))
        })
        .collect();
    out.sort();
    Ok(out)
}

pub(super) fn verify_dataset(c: &Capture, ds: &Dataset, shown: &str) -> Result<(), CaptureError> {
    let file = PathBuf::from(shown);
    let changed =
        |field: &str, reason: String| CaptureError::DatasetChanged { file: file.clone(), field: field.into(), reason };
    if ds.content_hash() != c.meta.dataset.content_hash {
        return Err(changed(
            "content_hash",
            format!(
                "the capture was cut from content {} ({} bytes), this file has {} ({} bytes): the dataset changed",
                c.meta.dataset.content_hash,
                c.meta.dataset.len_bytes,
                ds.content_hash(),
                ds.len_bytes()
            ),
        ));
    }
    for (r, o) in c.meta.batch.origins.iter().enumerate() {
        let again = ds.row_at(o).map_err(|e| changed("origins", format!("row {r}: {e}")))?;
        if again != c.batch.row(r) {
            return Err(changed(
                "origins",
                format!("row {r} cut again from document {} offset {} differs", o.document, o.offset),
            ));
        }
    }
    Ok(())
}

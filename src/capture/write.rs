//! Writing a capture folder atomically, and keeping a folder of them bounded.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::read::{CaptureError, io_err, list};
use super::{BATCH_FILE, CAPTURE_FORMAT, CARRY_FILE, Capture, LEAD_UP_FILE, META_FILE, STATE_FILE};
use crate::checkpoint::{TrainCheckpoint, save_train_checkpoint};
use crate::dataset::fnv1a64;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `step_000187`.
pub fn dir_name(step: u64) -> String {
    format!("step_{step:06}")
}

/// The prefix of a capture being written; [`list`] never shows such folders
/// and [`remove_stale`] removes those a crash left.
pub(super) const TEMP_PREFIX: &str = ".tmp.";

/// Writes `c` as `dir/step_NNNNNN/` (see [`write_hooked`]) and returns its path.
pub fn write(c: &Capture, dir: &Path) -> Result<PathBuf, CaptureError> {
    write_hooked(c, dir, |_| Ok(()))
}

/// [`write`] with `before_rename` run on the complete temporary folder just
/// before it is renamed into place (tests make it fail, as a crash would).
///
/// The files go into `dir/.tmp.step_NNNNNN.PID.N/`, each fsynced, then the
/// folder is renamed to `step_NNNNNN`. A capture already there (a step run
/// again after a resume) is moved aside first and removed after, so the name
/// holds the old capture, then nothing for an instant, then the new one —
/// never a mix.
pub fn write_hooked(
    c: &Capture,
    dir: &Path,
    before_rename: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<PathBuf, CaptureError> {
    if c.meta.format_version != CAPTURE_FORMAT {
        return Err(CaptureError::Invalid {
            file: dir.join(META_FILE),
            field: "format_version".into(),
            reason: format!("{} is not the version written here ({CAPTURE_FORMAT})", c.meta.format_version),
        });
    }
    fs::create_dir_all(dir).map_err(io_err(dir, "cannot create the captures folder"))?;
    let name = dir_name(c.meta.step);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{TEMP_PREFIX}{name}.{}.{n}", std::process::id()));
    fs::create_dir(&tmp).map_err(io_err(&tmp, "cannot create a temporary capture folder"))?;
    let guard = TempDir(Some(tmp.clone()));
    fill(c, &tmp)?;
    before_rename(&tmp).map_err(io_err(&tmp, "before renaming the temporary capture folder"))?;
    let target = dir.join(&name);
    let aside = dir.join(format!("{TEMP_PREFIX}old.{name}.{}.{n}", std::process::id()));
    let replaced = target.exists();
    if replaced {
        fs::rename(&target, &aside).map_err(io_err(&target, "cannot move the older capture aside"))?;
    }
    fs::rename(&tmp, &target).map_err(io_err(&target, "cannot rename the temporary capture folder into place"))?;
    guard.disarm();
    if replaced {
        let _ = fs::remove_dir_all(&aside);
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(target)
}

/// Writes every file of `c` into the (new, empty) folder `tmp`.
fn fill(c: &Capture, tmp: &Path) -> Result<(), CaptureError> {
    let ck = TrainCheckpoint {
        config: c.config.clone(),
        params: c.state.params.clone(),
        m: c.state.optim.m.clone(),
        v: c.state.optim.v.clone(),
        state: serde_json::json!({"optim_step": c.state.optim.step, "loss_scale": c.state.scale}).to_string(),
    };
    save_train_checkpoint(&tmp.join(STATE_FILE), &ck)?;
    let mut meta = c.meta.clone();
    meta.batch.tokens_hash = format!("{:016x}", fnv1a64(&c.batch.tokens));
    (meta.batch.rows, meta.batch.t, meta.batch.lens) = (c.batch.rows, c.batch.t, c.batch.lens.clone());
    meta.optim_step = c.state.optim.step;
    meta.loss_scale = c.state.scale.clone();
    meta.carry = c.carry.is_some();
    meta.carry_prefix_len = c.carry.as_ref().map(|k| k.prefix_len);
    if meta.carry_prefix_len.is_none() {
        meta.carry_windows = None;
    }
    if let Some(k) = &c.carry {
        let path = tmp.join(CARRY_FILE);
        k.check(&c.config, c.batch.rows).map_err(|e| CaptureError::Invalid {
            file: path.clone(),
            field: "(state)".into(),
            reason: e.to_string(),
        })?;
        let side: crate::checkpoint::Metadata = [("step".to_string(), c.meta.step.to_string())].into_iter().collect();
        k.save(&path, &side)?;
    }
    put(&tmp.join(BATCH_FILE), &c.batch.tokens)?;
    if !c.lead_up.is_empty() {
        let bytes: Vec<u8> = c.lead_up.iter().flat_map(|b| b.tokens.iter().copied()).collect();
        put(&tmp.join(LEAD_UP_FILE), &bytes)?;
    }
    let json = serde_json::to_vec_pretty(&meta).map_err(|e| CaptureError::Invalid {
        file: tmp.join(META_FILE),
        field: "(all)".into(),
        reason: format!("cannot encode: {e}"),
    })?;
    put(&tmp.join(META_FILE), &json)
}

/// Creates `path` with `bytes`, fsynced.
fn put(path: &Path, bytes: &[u8]) -> Result<(), CaptureError> {
    let mut f = File::create_new(path).map_err(io_err(path, "cannot create"))?;
    f.write_all(bytes).map_err(io_err(path, "cannot write"))?;
    f.sync_all().map_err(io_err(path, "cannot fsync"))
}

/// Removes the temporary folder unless the capture made it into place.
struct TempDir(Option<PathBuf>);

impl TempDir {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_dir_all(p);
        }
    }
}

/// Keeps at most `max` captures in `dir`: the first (lowest step) and the
/// `max − 1` most recent; returns the steps removed. `max == 0` removes all.
pub fn prune(dir: &Path, max: usize) -> Result<Vec<u64>, CaptureError> {
    let all = list(dir)?;
    if all.len() <= max {
        return Ok(Vec::new());
    }
    let keep_recent = max.saturating_sub(1);
    let mut removed = Vec::new();
    for (i, (step, path)) in all.iter().enumerate() {
        let keep = (max > 0 && i == 0) || i >= all.len() - keep_recent;
        if !keep {
            // Renamed first, so that no half-removed folder keeps the name.
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let aside = dir.join(format!("{TEMP_PREFIX}gone.{}.{}.{n}", dir_name(*step), std::process::id()));
            fs::rename(path, &aside).map_err(io_err(path, "cannot remove an old capture"))?;
            let _ = fs::remove_dir_all(&aside);
            removed.push(*step);
        }
    }
    Ok(removed)
}

/// Removes the temporary folders a crash left in `dir` (none when it does not exist).
pub fn remove_stale(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

//! A scan's state on disk (`DIR/scan_state.json`, written atomically), the
//! check that a re-run is the same scan, the results (`DIR/captures/` and
//! `DIR/scan.json`), and the merge of several shards' states.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::top::{Entry, Rank, TopK};
use super::windows::Shard;
use super::{Runner, ScanModel, ScanReport, ScanSpec};
use crate::capture::{self, BatchMeta, CAPTURE_FORMAT, CAPTURES_DIR, Capture, CaptureMeta, DatasetRef};
use crate::checkpoint::{LoadOptions, load_params_opts, write_atomic};
use crate::dataset::{Batch, Dataset, fnv1a64, show_path};
use crate::engine::TrainState;
use crate::model::{Config, Params};
use crate::step::Precision;
use crate::step::{LossScale, StepOptions};
use crate::triage::TriageError;

pub const STATE_FILE: &str = "scan_state.json";
pub const SUMMARY_FILE: &str = "scan.json";
/// The version of `scan_state.json` this code writes and reads.
pub const STATE_FORMAT: u32 = 1;

/// Where a scan's weights came from: a seeded initialisation of a config,
/// or a checkpoint file (by path and content hash).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ModelId {
    Config { name: String, config: Config, seed: u64 },
    Checkpoint { path: String, content_hash: String },
}

impl ModelId {
    /// The weights again (a merge writes captures without having scanned).
    pub fn load(&self) -> Result<(Config, Params<f32>), TriageError> {
        match self {
            ModelId::Config { config, seed, .. } => Ok((config.clone(), Params::init(config, *seed))),
            ModelId::Checkpoint { path, content_hash } => {
                let p = Path::new(path);
                let hash = file_hash(p)?;
                if &hash != content_hash {
                    return Err(TriageError::Failed(format!(
                        "{}: the checkpoint changed since the scan (content hash {hash}, the scan's {content_hash})",
                        show_path(p)
                    )));
                }
                load_params_opts(p, LoadOptions::default()).map_err(|e| TriageError::Failed(e.to_string()))
            }
        }
    }
}

/// FNV-1a 64 of a file's bytes, 16 hex digits.
pub fn file_hash(p: &Path) -> Result<String, TriageError> {
    let bytes = std::fs::read(p).map_err(|e| TriageError::Failed(format!("{}: cannot read: {e}", show_path(p))))?;
    Ok(format!("{:016x}", fnv1a64(&bytes)))
}

/// Everything `scan_state.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanState {
    pub format_version: u32,
    pub dataset: DatasetRef,
    pub model: ModelId,
    /// `cpu` or `gpu`, the precision, and the products' kernel.
    pub engine: String,
    pub precision: Precision,
    pub gemm_path: String,
    pub t: usize,
    pub batch: usize,
    pub shard: Shard,
    pub rank: Rank,
    pub top: usize,
    /// The shard's window indices `[from, to)`, and the file's window count.
    pub windows: (u64, u64),
    pub windows_total: u64,
    /// Windows of the shard done (in index order from `windows.0`).
    pub done: u64,
    /// Targets predicted, seconds spent (all runs), and seconds in the engine.
    pub tokens: u64,
    pub seconds: f64,
    pub engine_seconds: f64,
    /// The top `K` so far, riskiest first.
    pub entries: Vec<Entry>,
    pub written_by: String,
}

impl ScanState {
    pub(super) fn new(
        ds: &Dataset,
        model: &ScanModel,
        spec: &ScanSpec,
        runner: &Runner,
        (from, to, total): (u64, u64, u64),
    ) -> Result<ScanState, TriageError> {
        Ok(ScanState {
            format_version: STATE_FORMAT,
            dataset: DatasetRef {
                name: ds.name().to_string(),
                path: ds
                    .path()
                    .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()),
                content_hash: ds.content_hash(),
                len_bytes: ds.len_bytes() as u64,
            },
            model: model.id.clone(),
            engine: match spec.engine {
                crate::engine::EngineKind::Cpu => "cpu".into(),
                crate::engine::EngineKind::Vulkan => "gpu".into(),
            },
            precision: spec.precision,
            gemm_path: runner.gemm_path(),
            t: spec.t,
            batch: spec.batch,
            shard: spec.shard,
            rank: spec.rank,
            top: spec.top,
            windows: (from, to),
            windows_total: total,
            done: 0,
            tokens: 0,
            seconds: 0.0,
            engine_seconds: 0.0,
            entries: Vec::new(),
            written_by: env!("CARGO_PKG_VERSION").into(),
        })
    }

    /// What makes two states the same scan (the shard and top aside): each
    /// field's name and value.
    fn options(&self) -> Vec<(&'static str, String)> {
        let json = |v: &ModelId| serde_json::to_string(v).unwrap_or_default();
        vec![
            ("dataset.name", self.dataset.name.clone()),
            ("dataset.content_hash", self.dataset.content_hash.clone()),
            ("model", json(&self.model)),
            ("engine (--engine)", self.engine.clone()),
            ("precision (--precision)", self.precision.name().into()),
            ("t (--seq-len)", self.t.to_string()),
            ("batch (--batch)", self.batch.to_string()),
            ("rank (--rank)", self.rank.name().into()),
        ]
    }

    /// The first field in which `self` is another scan than `want`: its
    /// name, `self`'s value and `want`'s; `with_shard` also compares the
    /// shard, the top count and the window range (a resume must match them).
    fn differs(&self, want: &ScanState, with_shard: bool) -> Option<(&'static str, String, String)> {
        let (mut a, mut b) = (self.options(), want.options());
        if with_shard {
            for (x, s) in [(&mut a, self), (&mut b, want)] {
                x.push(("shard (--shard)", s.shard.to_string()));
                x.push(("top (--top)", s.top.to_string()));
                x.push(("windows", format!("{:?}", s.windows)));
            }
        }
        a.into_iter().zip(b).find(|(x, y)| x.1 != y.1).map(|(x, y)| (x.0, x.1, y.1))
    }
}

fn io(p: &Path, what: &str, e: impl std::fmt::Display) -> TriageError {
    TriageError::Failed(format!("{}: {what}: {e}", show_path(p)))
}

/// Reads `dir/scan_state.json`.
pub fn load(dir: &Path) -> Result<ScanState, TriageError> {
    let p = dir.join(STATE_FILE);
    let bytes = std::fs::read(&p).map_err(|e| io(&p, "cannot read", e))?;
    let st: ScanState = serde_json::from_slice(&bytes).map_err(|e| io(&p, "not a scan state", e))?;
    if st.format_version != STATE_FORMAT {
        return Err(io(&p, "format_version", format!("{} is not {STATE_FORMAT}", st.format_version)));
    }
    Ok(st)
}

/// The state to continue: `dir`'s when it is the same scan as `fresh`,
/// `fresh` when there is none; another scan there is refused, naming the field.
pub(super) fn resume_or(dir: &Path, fresh: ScanState) -> Result<ScanState, TriageError> {
    check_out_dir(dir)?;
    if !dir.join(STATE_FILE).exists() {
        return Ok(fresh);
    }
    let old = load(dir)?;
    if let Some((field, was, now)) = old.differs(&fresh, true) {
        return Err(TriageError::Failed(format!(
            "--out {}: holds another scan ({STATE_FILE}: {field} is {was}, this one's {now}); \
             give the same options to continue it, or another --out",
            show_path(dir)
        )));
    }
    Ok(old)
}

/// `--out` must be a folder (created if missing), not a file.
pub fn check_out_dir(dir: &Path) -> Result<(), TriageError> {
    if dir.exists() && !dir.is_dir() {
        return Err(TriageError::Usage(format!("--out {}: is a file, not a folder", show_path(dir))));
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, "cannot create the folder", e))
}

/// Writes the state atomically.
pub(super) fn save(dir: &Path, st: &ScanState) -> Result<(), TriageError> {
    let bytes = serde_json::to_vec_pretty(st).map_err(|e| TriageError::Failed(e.to_string()))?;
    write_atomic(&dir.join(STATE_FILE), &bytes).map_err(|e| TriageError::Failed(e.to_string()))
}

/// The top `K` as captures `dir/captures/step_NNNNNN/` and the ranking as
/// `dir/scan.json`; returns the capture folders, riskiest first.
pub(super) fn write_results(
    dir: &Path,
    ds: &Dataset,
    model: &ScanModel,
    st: &ScanState,
) -> Result<Vec<PathBuf>, TriageError> {
    let caps = dir.join(CAPTURES_DIR);
    capture::remove_stale(&caps);
    let scale = match st.precision {
        Precision::F16 => LossScale::dynamic(),
        _ => LossScale::fixed(),
    };
    let mut written = Vec::new();
    for (i, e) in st.entries.iter().enumerate() {
        let row = ds.row_at(&e.origin)?;
        let batch = Batch::from_rows(&[row])?;
        let reason = format!("scan: rank {} by {}: {}", i + 1, st.rank.name(), e.metrics.describe(st.rank, &e.origin));
        let meta = CaptureMeta {
            format_version: CAPTURE_FORMAT,
            step: e.window,
            triggers: vec!["scan".into()],
            reasons: vec![reason],
            engine: st.engine.clone(),
            precision: st.precision,
            gemm_path: st.gemm_path.clone(),
            optim: StepOptions::default(),
            seed: match &st.model {
                ModelId::Config { seed, .. } => *seed,
                ModelId::Checkpoint { .. } => 0,
            },
            loss_scale: scale.clone(),
            optim_step: 0,
            dataset: st.dataset.clone(),
            batch: BatchMeta {
                rows: 1,
                t: batch.t,
                lens: batch.lens.clone(),
                origins: vec![e.origin],
                tokens_hash: String::new(),
            },
            recorded: None,
            norm_levels: Vec::new(),
            planted: None,
            lead_up: Vec::new(),
            written_by: env!("CARGO_PKG_VERSION").into(),
            precision_map: None,
            carry: false,
            carry_windows: None,
            carry_prefix_len: None,
        };
        let state = TrainState::fresh(&model.config, model.params.clone(), scale.clone());
        let c = Capture { meta, config: model.config.clone(), state, batch, lead_up: Vec::new(), carry: None };
        written.push(capture::write(&c, &caps)?);
    }
    let summary = serde_json::json!({
        "dataset": st.dataset, "model": st.model, "engine": st.engine, "precision": st.precision,
        "t": st.t, "batch": st.batch, "shard": st.shard, "rank": st.rank, "top": st.top,
        "windows": st.windows.1 - st.windows.0, "windows_total": st.windows_total,
        "tokens": st.tokens, "seconds": st.seconds, "engine_seconds": st.engine_seconds,
        "ranking": st.entries, "captures": written,
    });
    let bytes = serde_json::to_vec_pretty(&summary).map_err(|e| TriageError::Failed(e.to_string()))?;
    write_atomic(&dir.join(SUMMARY_FILE), &bytes).map_err(|e| TriageError::Failed(e.to_string()))?;
    Ok(written)
}

/// Merges the complete states of disjoint shards of one scan (same dataset
/// and options) into `out`: their top `top` (default: theirs) as captures and
/// `scan.json`. `data` overrides the dataset path the states recorded.
pub fn merge(dirs: &[PathBuf], out: &Path, top: Option<usize>, data: Option<&Path>) -> Result<ScanReport, TriageError> {
    if dirs.len() < 2 {
        return Err(TriageError::Usage("--merge needs at least two scan folders".into()));
    }
    if top == Some(0) {
        return Err(TriageError::Usage("--top 0: must be at least 1".into()));
    }
    let states = dirs.iter().map(|d| load(d)).collect::<Result<Vec<_>, _>>()?;
    let first = &states[0];
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for (d, s) in dirs.iter().zip(&states) {
        if let Some((field, was, now)) = s.differs(first, false) {
            let p = d.join(STATE_FILE);
            return Err(TriageError::Failed(format!(
                "--merge {}: another scan than {}: {field} is {was}, not {now}",
                show_path(&p),
                show_path(&dirs[0].join(STATE_FILE))
            )));
        }
        if s.done < s.windows.1 - s.windows.0 {
            return Err(TriageError::Failed(format!(
                "--merge {}: shard {} is not finished ({} of {} windows); run it to the end first",
                show_path(&d.join(STATE_FILE)),
                s.shard,
                s.done,
                s.windows.1 - s.windows.0
            )));
        }
        if seen.iter().any(|&(a, b)| a < s.windows.1 && s.windows.0 < b) {
            return Err(TriageError::Failed(format!(
                "--merge {}: shard {} overlaps another shard given",
                show_path(&d.join(STATE_FILE)),
                s.shard
            )));
        }
        seen.push(s.windows);
    }
    let k = top.unwrap_or(first.top);
    let mut heap = TopK::new(k, first.rank);
    states.iter().flat_map(|s| s.entries.iter().cloned()).for_each(|e| heap.push(e));
    let path = data.map(Path::to_path_buf).or_else(|| first.dataset.path.as_ref().map(PathBuf::from));
    let path =
        path.ok_or_else(|| TriageError::Usage("--merge: the scans recorded no dataset path; give --data".into()))?;
    let ds = Dataset::open(&path).map_err(|e| TriageError::Failed(format!("--data {e}")))?;
    if ds.content_hash() != first.dataset.content_hash {
        return Err(TriageError::Failed(format!(
            "--data {}: content hash {} is not the scanned dataset's {}",
            show_path(&path),
            ds.content_hash(),
            first.dataset.content_hash
        )));
    }
    let (config, params) = first.model.load()?;
    let model = ScanModel { config, params, id: first.model.clone() };
    check_out_dir(out)?;
    let mut merged = first.clone();
    merged.top = k;
    merged.shard = Shard::ALL;
    let lo = seen.iter().map(|w| w.0).min().unwrap_or(0);
    let hi = seen.iter().map(|w| w.1).max().unwrap_or(0);
    merged.windows = (lo, hi);
    merged.done = states.iter().map(|s| s.done).sum();
    merged.tokens = states.iter().map(|s| s.tokens).sum();
    merged.seconds = states.iter().map(|s| s.seconds).sum();
    merged.engine_seconds = states.iter().map(|s| s.engine_seconds).sum();
    merged.entries = heap.sorted();
    let complete = merged.done == merged.windows_total;
    let captures = write_results(out, &ds, &model, &merged)?;
    Ok(super::report(&merged, 0, complete, captures))
}

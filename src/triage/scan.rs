//! `scan`: every window of a dataset through the forward and backward pass,
//! ranked by risk, the riskiest kept as captures.
//!
//! The windows ([`windows`]) are rows of `T + 1` tokens at stride `T`, so
//! every position is predicted once; a shard `I/N` takes the windows whose
//! raw byte position lies in the `I`-th of `N` equal byte ranges of the file.
//! Each batch of `B` windows runs once ([`metrics`]); its windows' figures
//! go into a bounded top-`K` ([`top`]), so memory does not grow with the file
//! (the dataset itself is memory-mapped). With an output folder the state is
//! written atomically every few seconds and a run with the same options
//! continues from it ([`state`]); at the end the top `K` become captures and
//! `scan.json`. [`merge`] joins the states of disjoint shards.

#[path = "scan_metrics.rs"]
pub mod metrics;
#[path = "scan_state.rs"]
pub mod state;
#[path = "scan_top.rs"]
pub mod top;
#[path = "scan_windows.rs"]
pub mod windows;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::TriageError;
use crate::dataset::{Batch, Dataset};
use crate::engine::EngineKind;
use crate::model::{Config, Params};
use crate::step::Precision;

pub use metrics::Runner;
pub use state::{ModelId, STATE_FILE, SUMMARY_FILE, ScanState, merge};
pub use top::{Entry, Metrics, Rank, TopK};
pub use windows::Shard;

/// What to scan and how.
#[derive(Clone, Debug)]
pub struct ScanSpec {
    /// Positions per window (`T`; a window holds `T + 1` tokens).
    pub t: usize,
    /// Windows per batch.
    pub batch: usize,
    /// How many windows to keep.
    pub top: usize,
    pub rank: Rank,
    pub shard: Shard,
    pub engine: EngineKind,
    pub precision: Precision,
    /// Testing aid: stop (state saved) once this many more windows are done,
    /// at a batch boundary.
    pub max_windows: Option<u64>,
    /// How often the state is written.
    pub save_every: Duration,
}

impl ScanSpec {
    /// Zero sizes are usage errors naming their flag.
    pub fn check(&self) -> Result<(), TriageError> {
        for (flag, v) in [("--seq-len", self.t), ("--batch", self.batch), ("--top", self.top)] {
            if v == 0 {
                return Err(TriageError::Usage(format!("{flag} 0: must be at least 1")));
            }
        }
        Ok(())
    }
}

/// The model a scan runs: its config, weights, and where they came from.
pub struct ScanModel {
    pub config: Config,
    pub params: Params<f32>,
    pub id: ModelId,
}

/// Where the scan is, for a progress line.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    /// Targets predicted per second over the whole scan (this run), and in
    /// the engine's forward and backward alone.
    pub tokens_per_s: f64,
    pub engine_tokens_per_s: f64,
    pub eta_s: Option<f64>,
}

/// What a scan (or a merge) found.
#[derive(Clone, Debug, Serialize)]
pub struct ScanReport {
    /// The riskiest windows, riskiest first.
    pub ranking: Vec<Entry>,
    pub rank: Rank,
    /// Windows of the shard done, and in the shard.
    pub done: u64,
    pub windows: u64,
    /// Windows this run did (the rest came from a saved state).
    pub this_run: u64,
    /// Whether every window of the shard is done (else it stopped early).
    pub complete: bool,
    /// Targets predicted, and the seconds spent, over every run of this scan.
    pub tokens: u64,
    pub seconds: f64,
    pub engine_seconds: f64,
    pub tokens_per_s: f64,
    pub engine_tokens_per_s: f64,
    /// The capture folders written (riskiest first).
    pub captures: Vec<PathBuf>,
}

fn per_s(tokens: u64, s: f64) -> f64 {
    if s > 0.0 { tokens as f64 / s } else { 0.0 }
}

/// Scans `ds` with `model` as `spec` says, continuing from `out`'s state
/// when it holds one of the same scan; `progress` is called after each batch.
pub fn scan(
    ds: &Dataset,
    model: &ScanModel,
    spec: &ScanSpec,
    out: Option<&Path>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ScanReport, TriageError> {
    spec.check()?;
    let (from, to, total) = windows::shard_range(ds, spec.t, spec.shard)?;
    if total == 0 {
        return Err(TriageError::Usage(format!(
            "--data {}: no document has 2 tokens (an input and its target)",
            ds.name()
        )));
    }
    let mut runner = Runner::open(spec.engine, &model.config, model.params.clone(), spec.precision)?;
    let fresh = ScanState::new(ds, model, spec, &runner, (from, to, total))?;
    let mut st = match out {
        Some(dir) => state::resume_or(dir, fresh)?,
        None => fresh,
    };
    let mut top = TopK::new(spec.top, spec.rank);
    st.entries.drain(..).for_each(|e| top.push(e));
    let mut cursor = windows::Cursor::new(ds, spec.t, from + st.done, to)?;
    let (run_start, mut last_save) = (Instant::now(), Instant::now());
    let (base_s, base_engine_s, base_tokens) = (st.seconds, st.engine_seconds, st.tokens);
    let mut this_run = 0u64;
    let mut doc = DocCache::default();
    let mut engine_time = Duration::ZERO;
    loop {
        if spec.max_windows.is_some_and(|m| this_run >= m) {
            break;
        }
        let mut rows = Vec::with_capacity(spec.batch);
        let mut origins = Vec::with_capacity(spec.batch);
        while rows.len() < spec.batch {
            let Some((i, o)) = cursor.next_window()? else { break };
            rows.push(doc.row(ds, &o)?);
            origins.push((i, o));
        }
        if rows.is_empty() {
            break;
        }
        let batch = Batch::from_rows(&rows)?;
        let (m, spent) = runner.run(&batch, spec.t)?;
        engine_time += spent;
        st.tokens += batch.num_targets() as u64;
        for ((window, origin), metrics) in origins.into_iter().zip(m) {
            top.push(Entry { window, origin, metrics });
        }
        st.done += rows.len() as u64;
        this_run += rows.len() as u64;
        st.seconds = base_s + run_start.elapsed().as_secs_f64();
        st.engine_seconds = base_engine_s + engine_time.as_secs_f64();
        let run_s = run_start.elapsed().as_secs_f64();
        let tokens_run = st.tokens - base_tokens;
        let rate = per_s(this_run, run_s);
        progress(&Progress {
            done: st.done,
            total: to - from,
            tokens_per_s: per_s(tokens_run, run_s),
            engine_tokens_per_s: per_s(tokens_run, engine_time.as_secs_f64()),
            eta_s: (rate > 0.0).then(|| (to - from - st.done) as f64 / rate),
        });
        if let Some(dir) = out
            && last_save.elapsed() >= spec.save_every
        {
            st.entries = top.sorted();
            state::save(dir, &st)?;
            last_save = Instant::now();
        }
    }
    st.entries = top.sorted();
    let complete = st.done >= to - from;
    let captures = match out {
        Some(dir) => {
            state::save(dir, &st)?;
            if complete { state::write_results(dir, ds, model, &st)? } else { Vec::new() }
        }
        None => Vec::new(),
    };
    Ok(report(&st, this_run, complete, captures))
}

/// The document the last window came from, decoded once: a JSON-lines
/// document with escapes is decoded anew by every `Dataset::document` call,
/// which per window would cost the document's length each time.
#[derive(Default)]
struct DocCache<'a> {
    doc: Option<(usize, std::borrow::Cow<'a, [u8]>)>,
}

impl<'a> DocCache<'a> {
    /// The tokens of the window `o`, as `Dataset::row_at` cuts them.
    fn row(&mut self, ds: &'a Dataset, o: &crate::dataset::RowOrigin) -> Result<Vec<u8>, TriageError> {
        if self.doc.as_ref().is_none_or(|d| d.0 != o.document) {
            self.doc = Some((o.document, ds.document(o.document)?));
        }
        let doc = &self.doc.as_ref().expect("set above").1;
        match doc.get(o.offset..o.offset + o.len) {
            Some(row) => Ok(row.to_vec()),
            None => Ok(ds.row_at(o)?),
        }
    }
}

/// The report of a state.
fn report(st: &ScanState, this_run: u64, complete: bool, captures: Vec<PathBuf>) -> ScanReport {
    ScanReport {
        ranking: st.entries.clone(),
        rank: st.rank,
        done: st.done,
        windows: st.windows.1 - st.windows.0,
        this_run,
        complete,
        tokens: st.tokens,
        seconds: st.seconds,
        engine_seconds: st.engine_seconds,
        tokens_per_s: per_s(st.tokens, st.seconds),
        engine_tokens_per_s: per_s(st.tokens, st.engine_seconds),
        captures,
    }
}

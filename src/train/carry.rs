//! `train --carry-state` (docs/carry-state.md): each batch row reads a long
//! stretch of the dataset window by window, carrying its hidden state from
//! one window to the next (truncated backpropagation through time).
//!
//! The run is cut into episodes of `windows` steps. Episode `e` draws, from
//! the seed and `e` alone, one stretch of `windows · T + 1` tokens per row (a
//! byte dataset's bytes; for JSON lines the documents joined by `\n`, as
//! `Dataset::window` addresses them). Step `i` of the episode trains on
//! tokens `i·T ..= i·T + T` of each stretch (the last token of a window is
//! the first of the next, as with any row), starting from the state the step
//! before left; the first step of an episode starts from zero. So every
//! batch is still a function of the seed and the step, every row is whole
//! (no row ends early: the batch-wide prefix length holds for every row),
//! and a resumed run needs only the state the last step left.

use std::path::Path;

use super::TrainError;
use crate::checkpoint::{Metadata, load_named};
use crate::dataset::{Batch, Dataset, DatasetKind, RowOrigin};
use crate::model::Config;
use crate::rng::Rng;
use crate::step::Carry;

/// The carried state of a run, beside `train_state.safetensors`.
pub const CARRY_FILE: &str = "carry_state.safetensors";

/// How a `--carry-state` run walks the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarryWalk {
    /// Steps (windows) per episode: the state is carried through this many
    /// windows, then every row starts a fresh stretch from zero.
    pub windows: u64,
}

impl CarryWalk {
    /// Step `step`'s (1-based) place: its episode and its window in it.
    pub fn place(&self, step: u64) -> (u64, u64) {
        ((step - 1) / self.windows, (step - 1) % self.windows)
    }

    /// Refuses a walk the dataset cannot hold: a stretch is `windows · T + 1` tokens.
    pub fn check(&self, ds: &Dataset, t: usize) -> Result<(), TrainError> {
        self.open(ds, t).map(|_| ())
    }

    /// The walk over `ds` with windows of `t` positions, its documents long
    /// enough to hold a stretch listed once (not at every step); refused as
    /// [`CarryWalk::check`] says.
    pub fn open(&self, ds: &Dataset, t: usize) -> Result<Walker, TrainError> {
        if self.windows == 0 {
            return Err(TrainError::Usage("--carry-windows must be at least 1".into()));
        }
        let need = (self.windows as usize).saturating_mul(t).saturating_add(1);
        let mut long = Vec::new();
        if ds.kind() == DatasetKind::Jsonl {
            long = long_documents(ds, need)?;
            if long.is_empty() {
                let longest = (0..ds.num_documents()).filter_map(|i| ds.document_len(i).ok()).max().unwrap_or(0);
                return Err(TrainError::Usage(format!(
                    "--carry-state: a stretch of {} windows of --seq-len {t} needs {need} tokens of one document; \
                     the longest document of {} has {longest} (lower --carry-windows or --seq-len)",
                    self.windows,
                    ds.name()
                )));
            }
        } else if ds.len_tokens() < need {
            return Err(TrainError::Usage(format!(
                "--carry-windows {}: a stretch of {} windows of --seq-len {t} needs {need} tokens; {} has {} \
                 (lower --carry-windows or --seq-len)",
                self.windows,
                self.windows,
                ds.name(),
                ds.len_tokens()
            )));
        }
        Ok(Walker { walk: *self, t, long })
    }

    /// The batch of `step` (see [`Walker::batch_at`]); lists the long
    /// documents anew, so a loop opens a [`Walker`] once instead.
    pub fn batch_at(
        &self,
        ds: &Dataset,
        seed: u64,
        step: u64,
        rows: usize,
        t: usize,
    ) -> Result<(Batch, Vec<RowOrigin>, bool), TrainError> {
        self.open(ds, t)?.batch_at(ds, seed, step, rows)
    }
}

/// A [`CarryWalk`] opened on one dataset and window length.
#[derive(Clone, Debug)]
pub struct Walker {
    pub walk: CarryWalk,
    t: usize,
    /// JSON lines: the documents holding a whole stretch (empty for a byte file).
    long: Vec<usize>,
}

impl Walker {
    /// The batch of `step`, its rows' origins (the document and the offset
    /// in it), and whether it starts an episode (the state is then zero).
    pub fn batch_at(
        &self,
        ds: &Dataset,
        seed: u64,
        step: u64,
        rows: usize,
    ) -> Result<(Batch, Vec<RowOrigin>, bool), TrainError> {
        let t = self.t;
        let (episode, i) = self.walk.place(step);
        let stretch = self.walk.windows as usize * t + 1;
        let mut rng = Rng::new(Rng::new(seed ^ 0xca77_5747).next_u64() ^ episode);
        let mut cut = Vec::with_capacity(rows);
        let mut origins = Vec::with_capacity(rows);
        // JSON lines: each row's stretch lies inside one document long enough
        // to hold it, so no state is carried from one document into the next.
        let long = &self.long;
        for _ in 0..rows {
            if ds.kind() == DatasetKind::Jsonl {
                let document = *long.get(rng.below(long.len() as u64) as usize).ok_or_else(|| {
                    TrainError::Usage(format!("--carry-state: no document of {} holds {stretch} tokens", ds.name()))
                })?;
                let room = (ds.document_len(document)? - stretch + 1) as u64;
                let offset = rng.below(room) as usize + i as usize * t;
                let origin = RowOrigin { document, offset, len: t + 1 };
                cut.push(ds.row_at(&origin)?);
                origins.push(origin);
            } else {
                let room = (ds.len_tokens() - stretch + 1) as u64;
                let offset = rng.below(room) as usize + i as usize * t;
                cut.push(ds.window(offset, t + 1)?);
                origins.push(RowOrigin { document: 0, offset, len: t + 1 });
            }
        }
        Ok((Batch::from_rows(&cut)?, origins, i == 0))
    }
}

/// The documents of a JSON-lines dataset with at least `need` tokens.
fn long_documents(ds: &Dataset, need: usize) -> Result<Vec<usize>, TrainError> {
    let mut v = Vec::new();
    for i in 0..ds.num_documents() {
        if ds.document_len(i)? >= need {
            v.push(i);
        }
    }
    Ok(v)
}

/// Writes `carry` (after step `step`) as `dir/carry_state.safetensors`.
pub fn save_carry(dir: &Path, step: u64, carry: &Carry<f32>) -> Result<(), TrainError> {
    let meta: Metadata = [("step".to_string(), step.to_string())].into_iter().collect();
    Ok(carry.save(&dir.join(CARRY_FILE), &meta)?)
}

/// Reads the state a run left after step `step` from `dir`; a file from
/// another step (a kill between the two writes) or of another shape is refused.
pub fn load_carry(dir: &Path, step: u64, cfg: &Config, rows: usize) -> Result<Carry<f32>, TrainError> {
    let path = dir.join(CARRY_FILE);
    let bad = |why: String| TrainError::Failed(format!("{}: {why}", path.display()));
    let (tensors, meta) = load_named(&path)?;
    let saved = meta.get("step").and_then(|s| s.parse::<u64>().ok());
    if saved != Some(step) {
        return Err(bad(format!(
            "holds the carried state of step {}, the run stopped at step {step}; the run cannot be resumed \
             with its state (start it again)",
            saved.map_or("?".to_string(), |s| s.to_string())
        )));
    }
    Carry::from_named(&tensors, cfg, rows).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consecutive steps of an episode read consecutive windows of one
    /// stretch (sharing a token); the next episode starts afresh.
    #[test]
    fn windows_follow_each_other_within_an_episode() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let ds = Dataset::from_bytes("seq", bytes).unwrap();
        let walk = CarryWalk { windows: 3 };
        let t = 10;
        walk.check(&ds, t).unwrap();
        let (b1, o1, first1) = walk.batch_at(&ds, 5, 1, 2, t).unwrap();
        let (b2, o2, first2) = walk.batch_at(&ds, 5, 2, 2, t).unwrap();
        let (_, o4, first4) = walk.batch_at(&ds, 5, 4, 2, t).unwrap();
        assert!(first1 && !first2 && first4);
        for r in 0..2 {
            assert_eq!(o2[r].offset, o1[r].offset + t);
            assert_eq!(b1.row(r)[t], b2.row(r)[0]);
            assert_eq!(b1.row(r).len(), t + 1);
        }
        assert_ne!(o4[0].offset, o1[0].offset + 3 * t);
        assert!(CarryWalk { windows: 600 }.check(&ds, t).is_err());
    }

    /// The saved state comes back bit for bit; one of another step is refused.
    /// On JSON lines every row's windows follow each other inside one
    /// document (never across a document boundary), with their origins.
    #[test]
    fn jsonl_stretches_stay_inside_one_document() {
        let mut text = String::new();
        for i in 0..12 {
            // Short documents (never long enough) and long ones.
            let body = if i % 3 == 0 { format!("doc {i} ").repeat(20) } else { format!("s{i}") };
            text += &format!("{{\"text\": \"{body}\"}}\n");
        }
        let ds = Dataset::from_bytes("docs.jsonl", text.into_bytes()).unwrap();
        assert_eq!(ds.kind(), DatasetKind::Jsonl);
        let walk = CarryWalk { windows: 4 };
        let t = 16;
        walk.check(&ds, t).unwrap();
        for step in 1..=8 {
            let (b, o, _) = walk.batch_at(&ds, 3, step, 3, t).unwrap();
            for r in 0..3 {
                assert_eq!(o[r].document % 3, 0, "step {step} row {r}: a short document {o:?}");
                let doc = ds.document(o[r].document).unwrap();
                assert!(o[r].offset + t < doc.len(), "{o:?}");
                assert_eq!(b.row(r), &doc[o[r].offset..o[r].offset + t + 1]);
            }
            if step % 4 != 1 {
                let (_, prev, _) = walk.batch_at(&ds, 3, step - 1, 3, t).unwrap();
                for r in 0..3 {
                    assert_eq!((o[r].document, o[r].offset), (prev[r].document, prev[r].offset + t));
                }
            }
        }
        let e = CarryWalk { windows: 40 }.check(&ds, t).unwrap_err().to_string();
        assert!(e.contains("one document") && e.contains("longest"), "{e}");
    }

    #[test]
    fn carried_state_round_trips() {
        let cfg = Config::tiny();
        let dir = std::env::temp_dir().join(format!("dualscope-carry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Carry::<f32>::zeros(&cfg, 2);
        c.h0[1][3] = 0.25;
        c.prefix = (0..2 * 2 * cfg.hidden).map(|i| i as f32 * 0.5).collect();
        c.prefix_len = 2;
        save_carry(&dir, 7, &c).unwrap();
        assert_eq!(load_carry(&dir, 7, &cfg, 2).unwrap(), c);
        let e = load_carry(&dir, 8, &cfg, 2).unwrap_err().to_string();
        assert!(e.contains("step 7") && e.contains("step 8"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Cutting training rows out of a [`Dataset`]: fixed windows, seeded random
//! windows, and whole documents, each padded into a [`Batch`].
//!
//! A row is `x[0..=T]`, `T + 1` bytes, so every `len` here counts the target
//! too and must be at least 2. Windows address a byte dataset's bytes; for JSON
//! lines they address the decoded documents joined by `\n` (see
//! [`Dataset::len_tokens`]).

use std::borrow::Cow;

use super::batch::Batch;
use super::error::DatasetError;
use super::source::{Dataset, DatasetKind};
use crate::rng::Rng;

impl Dataset {
    fn check_row(&self, rows: usize, len: usize) -> Result<(), DatasetError> {
        if rows == 0 {
            return Err(DatasetError::NoRows { name: self.name().to_string() });
        }
        if len < 2 {
            return Err(DatasetError::RowTooShort { name: self.name().to_string(), len });
        }
        Ok(())
    }

    /// The `len` tokens from `offset` on (see the module docs for what a JSON
    /// lines dataset's offsets address). Errors when `len < 2` or when the
    /// window runs past [`Dataset::len_tokens`].
    pub fn window(&self, offset: usize, len: usize) -> Result<Vec<u8>, DatasetError> {
        self.check_row(1, len)?;
        let total = self.len_tokens();
        let out_of_range = || DatasetError::WindowOutOfRange { name: self.name().to_string(), offset, len, total };
        let end = offset.checked_add(len).filter(|&e| e <= total).ok_or_else(out_of_range)?;
        match self.kind() {
            DatasetKind::Bytes => Ok(self.bytes()[offset..end].to_vec()),
            DatasetKind::Jsonl => self.joined_window(offset, len),
        }
    }

    /// A window over the documents joined by `\n`; bounds already checked.
    fn joined_window(&self, offset: usize, len: usize) -> Result<Vec<u8>, DatasetError> {
        let docs = &self.jsonl_index().docs;
        let first = docs.partition_point(|d| d.text_start <= offset);
        let mut i = first.checked_sub(1).ok_or_else(|| self.changed("empty index".into()))?;
        let mut at = offset - docs[i].text_start;
        let mut out = Vec::with_capacity(len);
        loop {
            let doc = self.document(i)?;
            let from = at.min(doc.len());
            let to = at.saturating_add(len - out.len()).min(doc.len());
            out.extend_from_slice(&doc[from..to]);
            if out.len() == len {
                return Ok(out);
            }
            out.push(b'\n');
            if out.len() == len {
                return Ok(out);
            }
            i += 1;
            at = 0;
            if i >= docs.len() {
                return Err(self.changed(format!("document {} is shorter than indexed", i - 1)));
            }
        }
    }

    /// `batch` rows of `len` tokens from random places, the same for the same
    /// seed. A byte dataset shorter than `len` gives its whole content in every
    /// row. For JSON lines each row picks a document uniformly among those of
    /// at least 2 bytes, then a window inside it; a document shorter than `len`
    /// is a whole, shorter row (padded and masked in the batch).
    pub fn random_windows(&self, seed: u64, batch: usize, len: usize) -> Result<Batch, DatasetError> {
        self.check_row(batch, len)?;
        let mut rng = Rng::new(seed);
        let mut rows = Vec::with_capacity(batch);
        for _ in 0..batch {
            rows.push(self.random_row(&mut rng, len)?);
        }
        Ok(Batch::from_rows(&rows)?)
    }

    fn random_row(&self, rng: &mut Rng, len: usize) -> Result<Cow<'_, [u8]>, DatasetError> {
        let doc = match self.kind() {
            DatasetKind::Bytes => Cow::Borrowed(self.bytes()),
            DatasetKind::Jsonl => {
                let usable = &self.jsonl_index().usable;
                self.document(usable[rng.below(usable.len() as u64) as usize])?
            }
        };
        if doc.len() <= len {
            return Ok(doc);
        }
        let offset = rng.below((doc.len() - len + 1) as u64) as usize;
        Ok(match doc {
            Cow::Borrowed(d) => Cow::Borrowed(&d[offset..offset + len]),
            Cow::Owned(d) => Cow::Owned(d[offset..offset + len].to_vec()),
        })
    }

    /// Documents `start..start + count`, whole (or cut to their first `max_len`
    /// bytes), padded into one batch. Documents of fewer than 2 bytes are
    /// skipped, so the batch may have fewer than `count` rows; it is an error
    /// when none is left.
    pub fn documents(&self, start: usize, count: usize, max_len: Option<usize>) -> Result<Batch, DatasetError> {
        self.check_row(count, max_len.unwrap_or(2))?;
        let total = self.num_documents();
        let end = start
            .checked_add(count)
            .filter(|&e| e <= total)
            .ok_or_else(|| DatasetError::DocumentsOutOfRange { name: self.name().to_string(), start, count, total })?;
        let mut rows = Vec::new();
        for i in start..end {
            let doc = self.document(i)?;
            if doc.len() < 2 {
                continue;
            }
            let keep = max_len.map_or(doc.len(), |m| m.min(doc.len()));
            rows.push(match doc {
                Cow::Borrowed(d) => Cow::Borrowed(&d[..keep]),
                Cow::Owned(mut d) => {
                    d.truncate(keep);
                    Cow::Owned(d)
                }
            });
        }
        if rows.is_empty() {
            return Err(DatasetError::NoUsableDocuments { name: self.name().to_string(), start, count });
        }
        Ok(Batch::from_rows(&rows)?)
    }
}

impl Dataset {
    /// The tokens of the row that `o` says where to cut (a capture's row, cut
    /// again to check that the dataset did not change).
    pub fn row_at(&self, o: &super::batch::RowOrigin) -> Result<Vec<u8>, DatasetError> {
        let doc = self.document(o.document)?;
        let end = o.offset.checked_add(o.len).filter(|&e| e <= doc.len()).ok_or(DatasetError::WindowOutOfRange {
            name: self.name().to_string(),
            offset: o.offset,
            len: o.len,
            total: doc.len(),
        })?;
        Ok(doc[o.offset..end].to_vec())
    }
}

/// Seeded random windows for a training run: step `k` always gets the same
/// batch, whatever steps came before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomWindows {
    pub seed: u64,
    /// Rows per batch.
    pub batch: usize,
    /// Tokens per row (`T + 1`).
    pub len: usize,
}

impl RandomWindows {
    pub fn new(seed: u64, batch: usize, len: usize) -> Self {
        RandomWindows { seed, batch, len }
    }

    /// The seed [`Dataset::random_windows`] gets at `step`. Distinct steps of
    /// one run get distinct seeds; the mapping is fixed across versions.
    pub fn step_seed(&self, step: u64) -> u64 {
        let run = Rng::new(self.seed).next_u64();
        Rng::new(run ^ step).next_u64()
    }

    /// The batch of training step `step`.
    pub fn at(&self, dataset: &Dataset, step: u64) -> Result<Batch, DatasetError> {
        dataset.random_windows(self.step_seed(step), self.batch, self.len)
    }

    /// The batches of steps 0, 1, 2, … (endless).
    pub fn iter<'a>(&self, dataset: &'a Dataset) -> impl Iterator<Item = Result<Batch, DatasetError>> + 'a {
        let this = *self;
        (0u64..).map(move |step| this.at(dataset, step))
    }
}

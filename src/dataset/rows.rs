//! Cutting training rows out of a [`Dataset`]: fixed windows, seeded random
//! windows, and whole documents, each padded into a [`Batch`].
//!
//! A row is `x[0..=T]`, `T + 1` bytes, so every `len` here counts the target
//! too and must be at least 2. Windows address a byte dataset's bytes; for JSON
//! lines they address the decoded documents joined by `\n` (see
//! [`Dataset::len_tokens`]).

use std::borrow::Cow;

use super::batch::{Batch, RowOrigin};
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
        Ok(self.random_windows_traced(seed, batch, len)?.0)
    }

    /// The same batch as [`Dataset::random_windows`]`(seed, batch, len)`,
    /// with each row's origin (so that a captured step names where its rows
    /// came from, and [`Dataset::row_at`] can cut them again).
    pub fn random_windows_traced(
        &self,
        seed: u64,
        batch: usize,
        len: usize,
    ) -> Result<(Batch, Vec<RowOrigin>), DatasetError> {
        self.check_row(batch, len)?;
        let mut rng = Rng::new(seed);
        let mut rows = Vec::with_capacity(batch);
        let mut origins = Vec::with_capacity(batch);
        for _ in 0..batch {
            let (row, origin) = self.random_row(&mut rng, len)?;
            rows.push(row);
            origins.push(origin);
        }
        Ok((Batch::from_rows(&rows)?, origins))
    }

    /// One random row and where it lies; draws from `rng` exactly as the
    /// untraced batches always did (the document, then the offset).
    fn random_row(&self, rng: &mut Rng, len: usize) -> Result<(Cow<'_, [u8]>, RowOrigin), DatasetError> {
        let (document, doc) = match self.kind() {
            DatasetKind::Bytes => (0, Cow::Borrowed(self.bytes())),
            DatasetKind::Jsonl => {
                let usable = &self.jsonl_index().usable;
                let i = usable[rng.below(usable.len() as u64) as usize];
                (i, self.document(i)?)
            }
        };
        if doc.len() <= len {
            let origin = RowOrigin { document, offset: 0, len: doc.len() };
            return Ok((doc, origin));
        }
        let offset = rng.below((doc.len() - len + 1) as u64) as usize;
        let row = match doc {
            Cow::Borrowed(d) => Cow::Borrowed(&d[offset..offset + len]),
            Cow::Owned(d) => Cow::Owned(d[offset..offset + len].to_vec()),
        };
        Ok((row, RowOrigin { document, offset, len }))
    }

    /// The tokens of `o` cut again from this dataset (to check that a
    /// captured row is still what the dataset holds there). Errors name the
    /// document or the window that is not there.
    pub fn row_at(&self, o: &RowOrigin) -> Result<Vec<u8>, DatasetError> {
        self.check_row(1, o.len)?;
        let doc = self.document(o.document)?;
        let out_of_range = || DatasetError::WindowOutOfRange {
            name: format!("{} (document {})", self.name(), o.document),
            offset: o.offset,
            len: o.len,
            total: doc.len(),
        };
        let end = o.offset.checked_add(o.len).filter(|&e| e <= doc.len()).ok_or_else(out_of_range)?;
        Ok(doc[o.offset..end].to_vec())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every traced row is what `row_at` cuts again at its origin, and the
    /// batch is `random_windows`'s, for a byte and a JSON-lines dataset
    /// (documents shorter than a row, one with escapes, one far longer).
    #[test]
    fn traced_rows_are_cut_again_from_their_origins() {
        let bytes: Vec<u8> = (0..500u32).map(|i| (i * 7 % 251) as u8).collect();
        let docs = ["ab", "x", "tab\there \"q\" é", "0123456789", &"long text ".repeat(30)];
        let lines: Vec<String> = docs.iter().map(|d| serde_json::json!({ "text": d }).to_string()).collect();
        let sets = [
            Dataset::from_bytes("b.bin", bytes).unwrap(),
            Dataset::from_bytes("d.jsonl", lines.join("\n").into_bytes()).unwrap(),
            Dataset::from_bytes("tiny.bin", b"abcde".to_vec()).unwrap(),
        ];
        for ds in &sets {
            let (batch, origins) = ds.random_windows_traced(11, 48, 12).unwrap();
            assert_eq!(batch, ds.random_windows(11, 48, 12).unwrap(), "{}", ds.name());
            assert_eq!(origins.len(), batch.rows);
            for (r, o) in origins.iter().enumerate() {
                assert_eq!(o.len, batch.lens[r]);
                assert_eq!(ds.row_at(o).unwrap(), batch.row(r), "{}: row {r} at {o:?}", ds.name());
            }
            if ds.kind() == DatasetKind::Jsonl {
                assert!(origins.iter().all(|o| o.document != 1), "\"x\" is too short to be a row");
                assert!(origins.iter().any(|o| o.document == 0 && o.len == 2), "{origins:?}");
                assert!(origins.iter().any(|o| o.document == 4 && o.offset > 0), "{origins:?}");
                assert!(origins.iter().any(|o| o.document == 2), "the escaped document: {origins:?}");
            }
        }
        // The whole content, shorter than a row, in every row.
        let (_, o) = sets[2].random_windows_traced(3, 2, 16).unwrap();
        assert_eq!(o, vec![RowOrigin { document: 0, offset: 0, len: 5 }; 2]);
    }

    #[test]
    fn origins_that_are_not_there_are_errors() {
        let ds = Dataset::from_bytes("d.jsonl", b"{\"text\": \"hello\"}\n{\"text\": \"world!\"}".to_vec()).unwrap();
        assert_eq!(ds.row_at(&RowOrigin { document: 1, offset: 2, len: 4 }).unwrap(), b"rld!");
        let e = ds.row_at(&RowOrigin { document: 2, offset: 0, len: 2 }).unwrap_err().to_string();
        assert!(e.contains("no document 2"), "{e}");
        let e = ds.row_at(&RowOrigin { document: 0, offset: 3, len: 4 }).unwrap_err().to_string();
        assert!(e.contains("document 0") && e.contains("offset 3") && e.contains("> 5 bytes"), "{e}");
        assert!(ds.row_at(&RowOrigin { document: 0, offset: usize::MAX, len: 4 }).is_err());
    }
}

//! The windows a scan predicts: every document cut into rows of `T + 1`
//! tokens with stride `T`, so that every position with a target is predicted
//! exactly once (the last window of a document is shorter, at least 2 tokens).
//! Windows are numbered in file order across documents; a shard `I/N` is the
//! windows whose key (the window's raw byte position) falls in
//! `[I·L/N, (I+1)·L/N)` of the file's `L` bytes. Keys grow with the window
//! index, so a shard is one contiguous range of window indices.

use serde::{Deserialize, Serialize};

use crate::dataset::{Dataset, DatasetError, RowOrigin};

/// `I/N`: the `I`-th of `N` byte ranges of the file (`0/1` is all of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// `I/N` with `I < N` and `N ≥ 1`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {s}: expected I/N with 0 ≤ I < N (e.g. 0/4)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.trim().parse::<u64>().map_err(|_| bad())?, n.trim().parse::<u64>().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard's byte range `[I·L/N, (I+1)·L/N)` of a file of `len` bytes.
    pub fn byte_range(self, len: usize) -> (u64, u64) {
        let l = len as u128;
        let at = |i: u64| (l * i as u128 / self.count as u128) as u64;
        (at(self.index), at(self.index + 1))
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Windows of a document of `len` tokens at stride `t`: starts `0, t, 2t, …`
/// while at least 2 tokens remain.
pub fn windows_in(len: usize, t: usize) -> u64 {
    if len < 2 { 0 } else { (len - 1).div_ceil(t) as u64 }
}

/// The raw byte position of window `j` of document `doc`: for a byte dataset
/// its offset in the file; for JSON lines the document's line start plus the
/// window's offset in the decoded text (below the line's end, since decoded
/// text is never longer than the JSON string it came from; clamped to be sure).
fn key(ds: &Dataset, doc: usize, offset: usize) -> u64 {
    let start = ds.document_file_offset(doc).unwrap_or(0);
    (start + offset).min(ds.len_bytes().saturating_sub(1)) as u64
}

/// Windows `j` of a document whose keys `base + j·t` lie in `[lo, hi)`, as a range of `j`.
fn in_range(base: u64, t: u64, count: u64, lo: u64, hi: u64) -> (u64, u64) {
    let first = |bound: u64| if bound <= base { 0 } else { (bound - base).div_ceil(t) };
    (first(lo).min(count), first(hi).min(count))
}

/// The global window indices `[from, to)` of `shard`, and the number of
/// windows in the whole file. One pass over the documents' lengths (the
/// dataset's index), nothing per window.
pub fn shard_range(ds: &Dataset, t: usize, shard: Shard) -> Result<(u64, u64, u64), DatasetError> {
    let (lo, hi) = shard.byte_range(ds.len_bytes());
    let (mut from, mut to, mut total) = (None, 0u64, 0u64);
    for doc in 0..ds.num_documents() {
        let n = windows_in(ds.document_len(doc)?, t);
        if n == 0 {
            continue;
        }
        let base = key(ds, doc, 0);
        let (a, b) = in_range(base, t as u64, n, lo, hi);
        if a < b {
            from.get_or_insert(total + a);
            to = total + b;
        }
        total += n;
    }
    let from = from.unwrap_or(to);
    Ok((from, to.max(from), total))
}

/// Walks windows in index order from a given index: each step gives the
/// window's index and origin (document, offset, length).
pub struct Cursor<'a> {
    ds: &'a Dataset,
    t: usize,
    doc: usize,
    /// The index of the first window of `doc`.
    doc_first: u64,
    doc_windows: u64,
    doc_len: usize,
    next: u64,
    end: u64,
}

impl<'a> Cursor<'a> {
    /// Windows `[from, end)`.
    pub fn new(ds: &'a Dataset, t: usize, from: u64, end: u64) -> Result<Cursor<'a>, DatasetError> {
        let mut c = Cursor { ds, t, doc: 0, doc_first: 0, doc_windows: 0, doc_len: 0, next: from, end };
        c.load_doc(0)?;
        while c.doc < ds.num_documents() && c.doc_first + c.doc_windows <= from {
            c.advance_doc()?;
        }
        Ok(c)
    }

    fn load_doc(&mut self, doc: usize) -> Result<(), DatasetError> {
        self.doc = doc;
        (self.doc_len, self.doc_windows) = (0, 0);
        if doc < self.ds.num_documents() {
            self.doc_len = self.ds.document_len(doc)?;
            self.doc_windows = windows_in(self.doc_len, self.t);
        }
        Ok(())
    }

    fn advance_doc(&mut self) -> Result<(), DatasetError> {
        self.doc_first += self.doc_windows;
        self.load_doc(self.doc + 1)
    }

    /// The next window, or `None` at the end.
    pub fn next_window(&mut self) -> Result<Option<(u64, RowOrigin)>, DatasetError> {
        if self.next >= self.end {
            return Ok(None);
        }
        while self.next >= self.doc_first + self.doc_windows {
            if self.doc >= self.ds.num_documents() {
                return Ok(None);
            }
            self.advance_doc()?;
        }
        let j = (self.next - self.doc_first) as usize;
        let offset = j * self.t;
        let len = (self.t + 1).min(self.doc_len - offset);
        let i = self.next;
        self.next += 1;
        Ok(Some((i, RowOrigin { document: self.doc, offset, len })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonl(docs: &[&str]) -> Dataset {
        let text: String = docs.iter().map(|d| format!("{{\"text\":\"{d}\"}}\n")).collect();
        Dataset::from_bytes("d.jsonl", text.into_bytes()).unwrap()
    }

    fn all(ds: &Dataset, t: usize, shard: Shard) -> Vec<(u64, RowOrigin)> {
        let (from, to, _) = shard_range(ds, t, shard).unwrap();
        let mut c = Cursor::new(ds, t, from, to).unwrap();
        std::iter::from_fn(|| c.next_window().unwrap()).collect()
    }

    /// Every position with a target is predicted once: windows overlap by
    /// exactly one token, and the last is shorter but has 2 tokens.
    #[test]
    fn windows_cover_every_target_once() {
        let ds = Dataset::from_bytes("b.bin", (0..=22u8).collect()).unwrap();
        let w = all(&ds, 5, Shard::ALL);
        let o: Vec<_> = w.iter().map(|(_, o)| (o.offset, o.len)).collect();
        assert_eq!(o, [(0, 6), (5, 6), (10, 6), (15, 6), (20, 3)]);
        let targets: usize = w.iter().map(|(_, o)| o.len - 1).sum();
        assert_eq!(targets, 22);
        // 21 bytes at stride 5: the window at 20 would hold 1 token, so none.
        let ds = Dataset::from_bytes("b.bin", vec![1; 21]).unwrap();
        assert_eq!(all(&ds, 5, Shard::ALL).len(), 4);
    }

    /// Documents are cut on their own, short ones skipped, indices run on.
    #[test]
    fn jsonl_documents_have_their_own_windows() {
        let ds = jsonl(&["abcdefgh", "x", "", "pqr"]);
        let w = all(&ds, 4, Shard::ALL);
        let got: Vec<_> = w.iter().map(|(i, o)| (*i, o.document, o.offset, o.len)).collect();
        assert_eq!(got, [(0, 0, 0, 5), (1, 0, 4, 4), (2, 3, 0, 3)]);
        for (_, o) in &w {
            assert_eq!(ds.row_at(o).unwrap().len(), o.len);
        }
    }

    /// Shards partition the windows, in order, for both kinds of dataset.
    #[test]
    fn shards_partition_the_windows() {
        let bytes = Dataset::from_bytes("b.bin", crate::dataset::corpus(1, 3000)).unwrap();
        let docs = jsonl(&["one two three four five", "six", "seven eight nine ten", "eleven twelve thirteen"]);
        for ds in [&bytes, &docs] {
            for t in [3, 7, 64] {
                let whole = all(ds, t, Shard::ALL);
                for n in [1, 2, 3, 7] {
                    let parts: Vec<_> = (0..n).flat_map(|i| all(ds, t, Shard { index: i, count: n })).collect();
                    assert_eq!(parts, whole, "t {t}, {n} shards of {}", ds.name());
                }
            }
        }
    }

    #[test]
    fn shard_parses() {
        assert_eq!(Shard::parse("1/4"), Ok(Shard { index: 1, count: 4 }));
        for bad in ["3/2", "2/2", "0/0", "1", "a/b", "-1/2"] {
            assert!(Shard::parse(bad).unwrap_err().contains(&format!("--shard {bad}")), "{bad}");
        }
    }
}

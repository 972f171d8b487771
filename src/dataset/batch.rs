//! A batch of training rows: byte tokens padded at the end, with lengths.

/// `rows` rows of `t + 1` token slots each (row-major, padded with 0 at the end).
/// Position `t` of row `b` reads `input(b, t)` and predicts `target(b, t)`;
/// it counts towards the loss only where `mask(b, t)`, i.e. `t + 1 < lens[b]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub rows: usize,
    pub t: usize,
    pub tokens: Vec<u8>,
    pub lens: Vec<usize>,
}

/// Where a row of a batch came from: its document, the offset of its first
/// token inside that document's tokens (a byte dataset's file offset; for JSON
/// lines, inside the decoded text), and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowOrigin {
    pub document: usize,
    pub offset: usize,
    pub len: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("a batch needs at least one row")]
    NoRows,
    #[error("no row has two tokens (one input and its target); the longest has {0}")]
    TooShort(usize),
}

impl Batch {
    /// Pads `rows` at the end into one batch; `t` is the longest row's length − 1.
    pub fn from_rows<R: AsRef<[u8]>>(rows: &[R]) -> Result<Batch, BatchError> {
        if rows.is_empty() {
            return Err(BatchError::NoRows);
        }
        let longest = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
        if longest < 2 {
            return Err(BatchError::TooShort(longest));
        }
        let t = longest - 1;
        let mut tokens = vec![0u8; rows.len() * (t + 1)];
        for (b, r) in rows.iter().enumerate() {
            let r = r.as_ref();
            tokens[b * (t + 1)..b * (t + 1) + r.len()].copy_from_slice(r);
        }
        Ok(Batch { rows: rows.len(), t, tokens, lens: rows.iter().map(|r| r.as_ref().len()).collect() })
    }

    #[inline]
    pub fn input(&self, b: usize, t: usize) -> u8 {
        self.tokens[b * (self.t + 1) + t]
    }

    #[inline]
    pub fn target(&self, b: usize, t: usize) -> u8 {
        self.tokens[b * (self.t + 1) + t + 1]
    }

    #[inline]
    pub fn mask(&self, b: usize, t: usize) -> bool {
        t + 1 < self.lens[b]
    }

    /// N in docs/model.md: the number of positions that count towards the loss.
    pub fn num_targets(&self) -> usize {
        self.lens.iter().map(|&l| l.saturating_sub(1)).sum()
    }

    /// The tokens of row `b` without padding.
    pub fn row(&self, b: usize) -> &[u8] {
        &self.tokens[b * (self.t + 1)..b * (self.t + 1) + self.lens[b]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_and_masks() {
        let b = Batch::from_rows(&[b"abcd".as_slice(), b"xy", b"q"]).unwrap();
        assert_eq!((b.rows, b.t), (3, 3));
        assert_eq!(b.num_targets(), 3 + 1);
        assert!(b.mask(0, 2) && !b.mask(0, 3));
        assert!(b.mask(1, 0) && !b.mask(1, 1));
        assert!(!b.mask(2, 0));
        assert_eq!((b.input(0, 1), b.target(0, 1)), (b'b', b'c'));
        assert_eq!(b.row(1), b"xy");
        assert_eq!(b.input(1, 2), 0);
    }

    #[test]
    fn rejects_degenerate() {
        assert_eq!(Batch::from_rows::<&[u8]>(&[]), Err(BatchError::NoRows));
        assert_eq!(Batch::from_rows(&[b"a".as_slice()]), Err(BatchError::TooShort(1)));
    }
}

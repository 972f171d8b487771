//! What a scan measures per window ([`Metrics`]), how windows are ranked
//! ([`Rank`]), and the bounded structure that keeps the riskiest `K`
//! ([`TopK`]): a heap of at most `K` entries whose top is the least risky,
//! so memory stays flat however many windows pass through it.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::dataset::RowOrigin;

/// What ranks the windows (riskiest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Rank {
    /// The largest per-token gradient norm `‖∂loss/∂e_t‖`.
    Grad,
    /// The largest |logit|.
    Logit,
    /// The smallest f16 headroom.
    Headroom,
    /// The window's mean loss.
    Loss,
}

impl Rank {
    pub fn name(self) -> &'static str {
        match self {
            Rank::Grad => "grad",
            Rank::Logit => "logit",
            Rank::Headroom => "headroom",
            Rank::Loss => "loss",
        }
    }
}

/// One window's risk figures. Non-finite values are stored as the riskiest
/// finite value (`f64::MAX`, or `-f64::MAX` for the headroom), so that the
/// state file stays JSON and such a window ranks first.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Mean cross-entropy over the window's targets.
    pub loss: f64,
    /// Largest |logit| over the window's predicted positions.
    pub max_logit: f64,
    /// `log2(65504 / max |x|)` over the forward's stored activations (see
    /// `scan_metrics.rs` for which).
    pub headroom: f64,
    /// Largest `‖∂loss/∂e_t‖` of the window's positions, with the window's
    /// own mean loss (loss scale 1).
    pub max_grad: f64,
    /// The position (in the window) of `max_grad`, and of `max_logit`.
    pub grad_pos: usize,
    pub logit_pos: usize,
}

impl Metrics {
    /// The value `rank` orders by, larger riskier.
    pub fn score(&self, rank: Rank) -> f64 {
        match rank {
            Rank::Grad => self.max_grad,
            Rank::Logit => self.max_logit,
            Rank::Headroom => -self.headroom,
            Rank::Loss => self.loss,
        }
    }

    /// `‖∂loss/∂e_t‖ 3.2e-2 at document 12 offset 4096` for `origin`.
    pub fn describe(&self, rank: Rank, origin: &RowOrigin) -> String {
        let at = |pos: usize| format!("document {} offset {}", origin.document, origin.offset + pos);
        match rank {
            Rank::Grad => format!("‖∂loss/∂e_t‖ {:.1e} at {}", self.max_grad, at(self.grad_pos)),
            Rank::Logit => format!("|logit| {:.1e} at {}", self.max_logit, at(self.logit_pos)),
            Rank::Headroom => format!("f16 headroom {:.2} bits at {}", self.headroom, at(0)),
            Rank::Loss => format!("loss {:.4} at {}", self.loss, at(0)),
        }
    }
}

/// A window and its figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The window's index in the whole file.
    pub window: u64,
    pub origin: RowOrigin,
    pub metrics: Metrics,
}

/// `a` before `b` when `a` is riskier by `rank`; ties go to the lower window
/// index, so the order is total and the same however the work was split.
pub fn riskier(rank: Rank, a: &Entry, b: &Entry) -> Ordering {
    b.metrics.score(rank).total_cmp(&a.metrics.score(rank)).then(a.window.cmp(&b.window))
}

/// An entry ordered by risk (greater = riskier).
struct Keyed(Rank, Entry);

impl PartialEq for Keyed {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Keyed {
    fn cmp(&self, o: &Self) -> Ordering {
        riskier(self.0, &o.1, &self.1)
    }
}

/// The `k` riskiest entries seen so far; at most `k` are ever held.
pub struct TopK {
    k: usize,
    rank: Rank,
    /// A min-heap by risk: its top is the entry to drop next.
    heap: BinaryHeap<Reverse<Keyed>>,
}

impl TopK {
    pub fn new(k: usize, rank: Rank) -> TopK {
        TopK { k, rank, heap: BinaryHeap::with_capacity(k + 1) }
    }

    /// Offers `e`; keeps it if it is among the `k` riskiest.
    pub fn push(&mut self, e: Entry) {
        self.heap.push(Reverse(Keyed(self.rank, e)));
        if self.heap.len() > self.k {
            self.heap.pop();
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The most entries it will hold.
    pub fn capacity_bound(&self) -> usize {
        self.k
    }

    /// The entries, riskiest first.
    pub fn sorted(&self) -> Vec<Entry> {
        let mut v: Vec<Entry> = self.heap.iter().map(|r| r.0.1.clone()).collect();
        v.sort_by(|a, b| riskier(self.rank, a, b));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(window: u64, grad: f64) -> Entry {
        let metrics = Metrics { loss: 1.0, max_logit: 1.0, headroom: 10.0, max_grad: grad, grad_pos: 0, logit_pos: 0 };
        Entry { window, origin: RowOrigin { document: 0, offset: window as usize * 4, len: 5 }, metrics }
    }

    /// A million windows through a top-16: it never holds more than 16, and
    /// it keeps exactly the 16 riskiest (ties to the lower index).
    #[test]
    fn holds_at_most_k_and_keeps_the_riskiest() {
        let mut top = TopK::new(16, Rank::Grad);
        let mut most = 0;
        let score = |i: u64| ((i * 7919) % 100_003) as f64;
        for i in 0..1_000_000u64 {
            top.push(entry(i, score(i)));
            most = most.max(top.len());
        }
        assert_eq!(most, 16);
        assert!(top.heap.capacity() <= 64, "the heap grew to {}", top.heap.capacity());
        let got: Vec<u64> = top.sorted().iter().map(|e| e.window).collect();
        let mut want: Vec<u64> = (0..1_000_000u64).collect();
        want.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
        assert_eq!(got, want[..16]);
    }

    /// Headroom ranks the smallest first.
    #[test]
    fn headroom_ranks_smallest_first() {
        let mut top = TopK::new(2, Rank::Headroom);
        for (i, h) in [(0, 9.0), (1, 2.0), (2, 5.0)] {
            let mut e = entry(i, 0.0);
            e.metrics.headroom = h;
            top.push(e);
        }
        assert_eq!(top.sorted().iter().map(|e| e.window).collect::<Vec<_>>(), [1, 2]);
    }
}

//! Multi-head sliding-window attention, forward and backward, on the CPU.
//!
//! Each (batch row, head) pair is one parallel task. It gathers its q, k, v
//! into contiguous `[T, dh]` blocks and walks the queries in blocks of
//! `QBLOCK`: the keys a block can see, `[t0 + 1 - W, t1)`, form one small GEMM
//! for the scores and one for the context, so the work is matrix products
//! rather than scattered dot products, and its cost grows as `T · (QBLOCK + W)`
//! however long the sequence. Every task writes only its own slice and sums
//! in a fixed order, so the result does not depend on the thread count.

use rayon::prelude::*;

use crate::model::Config;
use crate::tensor::{Real, gemm_serial};

const QBLOCK: usize = 32;

/// Geometry shared by forward and backward. Keys and values live on an
/// extended axis of `p + t` positions: the carried prefix's `p` (oldest
/// first), then the window's; query `t` sits at extended position `p + t`.
struct Layout {
    t: usize,
    b: usize,
    a: usize,
    nh: usize,
    w: usize,
    dh: usize,
    p: usize,
}

impl Layout {
    fn new(cfg: &Config, t: usize, b: usize, p: usize) -> Self {
        Layout { t, b, a: cfg.attn_dim, nh: cfg.heads, w: cfg.window, dh: cfg.head_dim(), p }
    }

    /// Offset of (position, row, head) in a `[·, B, A]` tensor.
    fn at(&self, t: usize, b: usize, hd: usize) -> usize {
        (t * self.b + b) * self.a + hd * self.dh
    }

    /// Copies one (row, head) slice of `n` positions of a `[n, B, A]` tensor
    /// onto the end of `out` as `[n, dh]`.
    fn gather_into<T: Real>(&self, out: &mut Vec<T>, x: &[T], n: usize, b: usize, hd: usize) {
        for t in 0..n {
            out.extend_from_slice(&x[self.at(t, b, hd)..self.at(t, b, hd) + self.dh]);
        }
    }

    /// One (row, head) slice of a `[T, B, A]` tensor as `[T, dh]`.
    fn gather<T: Real>(&self, x: &[T], b: usize, hd: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(self.t * self.dh);
        self.gather_into(&mut out, x, self.t, b, hd);
        out
    }

    /// The prefix's `[P, B, A]` and the window's `[T, B, A]` slices of one
    /// (row, head) on the extended axis, `[P + T, dh]`.
    fn gather_ext<T: Real>(&self, pre: &[T], x: &[T], b: usize, hd: usize) -> Vec<T> {
        let mut out = Vec::with_capacity((self.p + self.t) * self.dh);
        self.gather_into(&mut out, pre, self.p, b, hd);
        self.gather_into(&mut out, x, self.t, b, hd);
        out
    }

    /// Writes rows `from..from + n` of `[·, dh]` parts, one per task, into a
    /// `[n, B, A]` tensor.
    fn scatter_rows<'a, T: Real>(&self, parts: impl Iterator<Item = &'a Vec<T>>, from: usize, n: usize) -> Vec<T> {
        let mut out = vec![T::zero(); n * self.b * self.a];
        for (task, part) in parts.enumerate() {
            let (b, hd) = (task / self.nh, task % self.nh);
            for t in 0..n {
                let o = self.at(t, b, hd);
                out[o..o + self.dh].copy_from_slice(&part[(from + t) * self.dh..(from + t + 1) * self.dh]);
            }
        }
        out
    }

    /// Writes `[T, dh]` parts, one per task, back into a `[T, B, A]` tensor.
    fn scatter<'a, T: Real>(&self, parts: impl Iterator<Item = &'a Vec<T>>) -> Vec<T> {
        self.scatter_rows(parts, 0, self.t)
    }

    /// Query blocks `[t0, t1)` with their first visible key `j0` on the
    /// extended axis.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.t).step_by(QBLOCK).map(move |t0| {
            let t1 = (t0 + QBLOCK).min(self.t);
            (t0, t1, (self.p + t0 + 1).saturating_sub(self.w))
        })
    }

    /// First extended key position that query `t` sees (its last is `p + t`).
    fn window_start(&self, t: usize) -> usize {
        (self.p + t + 1).saturating_sub(self.w)
    }
}

/// The carried prefix's keys and values, each `[P, B, A]` (computed from the
/// carried states with the current `W_k`, `W_v`).
pub(crate) struct Prefix<'a, T> {
    pub k: &'a [T],
    pub v: &'a [T],
    pub len: usize,
}

impl<T> Prefix<'_, T> {
    pub(crate) fn empty() -> Self {
        Prefix { k: &[], v: &[], len: 0 }
    }
}

/// Returns the weights `[T, B, NH, W]` (slot `w` is key position
/// `t + 1 + w - W`; zero before the row's start) and `c` as `[T, B, A]`.
pub(crate) fn attention<T: Real>(cfg: &Config, q: &[T], k: &[T], v: &[T], tt: usize, bb: usize) -> (Vec<T>, Vec<T>) {
    attention_with(cfg, q, k, v, &Prefix::empty(), tt, bb)
}

/// [`attention`] whose first `W − 1` queries also see the carried prefix's
/// keys and values (slots before the window's start).
pub(crate) fn attention_with<T: Real>(
    cfg: &Config,
    q: &[T],
    k: &[T],
    v: &[T],
    pre: &Prefix<T>,
    tt: usize,
    bb: usize,
) -> (Vec<T>, Vec<T>) {
    let l = Layout::new(cfg, tt, bb, pre.len);
    let (w, dh) = (l.w, l.dh);
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let parts: Vec<(Vec<T>, Vec<T>)> = (0..bb * l.nh)
        .into_par_iter()
        .map(|task| {
            let (b, hd) = (task / l.nh, task % l.nh);
            let (qh, kh, vh) = (l.gather(q, b, hd), l.gather_ext(pre.k, k, b, hd), l.gather_ext(pre.v, v, b, hd));
            let mut weights = vec![T::zero(); tt * w];
            let mut c = vec![T::zero(); tt * dh];
            let mut s = Vec::new();
            for (t0, t1, j0) in l.blocks() {
                let (nq, nk) = (t1 - t0, l.p + t1 - j0);
                s.clear();
                s.resize(nq * nk, T::zero());
                let ke = l.p + t1;
                gemm_serial(&mut s, nq, nk, dh, &qh[t0 * dh..t1 * dh], false, &kh[j0 * dh..ke * dh], true, false);
                for (i, row) in s.chunks_mut(nk).enumerate() {
                    let t = t0 + i;
                    let (lo, hi) = (l.window_start(t) - j0, l.p + t - j0 + 1);
                    let m = row[lo..hi].iter().fold(T::neg_infinity(), |m, &x| m.max(x * scale));
                    let mut sum = T::zero();
                    for x in &mut row[lo..hi] {
                        *x = (*x * scale - m).exp();
                        sum += *x;
                    }
                    row[..lo].iter_mut().for_each(|x| *x = T::zero());
                    row[hi..].iter_mut().for_each(|x| *x = T::zero());
                    row[lo..hi].iter_mut().for_each(|x| *x /= sum);
                    let slots = &mut weights[t * w..(t + 1) * w];
                    slots[w - (hi - lo)..].copy_from_slice(&row[lo..hi]);
                }
                gemm_serial(&mut c[t0 * dh..t1 * dh], nq, dh, nk, &s, false, &vh[j0 * dh..ke * dh], false, false);
            }
            (weights, c)
        })
        .collect();
    let mut attn = vec![T::zero(); tt * bb * l.nh * w];
    for (task, (weights, _)) in parts.iter().enumerate() {
        let (b, hd) = (task / l.nh, task % l.nh);
        for t in 0..tt {
            let o = ((t * bb + b) * l.nh + hd) * w;
            attn[o..o + w].copy_from_slice(&weights[t * w..(t + 1) * w]);
        }
    }
    (attn, l.scatter(parts.iter().map(|(_, c)| c)))
}

/// Gradients of q, k, v (each `[T, B, A]`) given `∂/∂c` and the forward weights.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward<T: Real>(
    cfg: &Config,
    q: &[T],
    k: &[T],
    v: &[T],
    attn: &[T],
    d_c: &[T],
    tt: usize,
    bb: usize,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let g = attention_backward_with(cfg, q, k, v, &Prefix::empty(), attn, d_c, tt, bb);
    (g.dq, g.dk, g.dv)
}

/// The gradients [`attention_backward_with`] returns.
pub(crate) struct AttnGrads<T> {
    pub dq: Vec<T>,
    pub dk: Vec<T>,
    pub dv: Vec<T>,
    /// Gradients of the prefix's keys and values, each `[P, B, A]`.
    pub dk_pre: Vec<T>,
    pub dv_pre: Vec<T>,
}

/// [`attention_backward`] of [`attention_with`]: also the gradients of the
/// prefix's keys and values.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward_with<T: Real>(
    cfg: &Config,
    q: &[T],
    k: &[T],
    v: &[T],
    pre: &Prefix<T>,
    attn: &[T],
    d_c: &[T],
    tt: usize,
    bb: usize,
) -> AttnGrads<T> {
    let l = Layout::new(cfg, tt, bb, pre.len);
    let (w, dh, np) = (l.w, l.dh, pre.len);
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let parts: Vec<[Vec<T>; 3]> = (0..bb * l.nh)
        .into_par_iter()
        .map(|task| {
            let (b, hd) = (task / l.nh, task % l.nh);
            let (qh, dch) = (l.gather(q, b, hd), l.gather(d_c, b, hd));
            let (kh, vh) = (l.gather_ext(pre.k, k, b, hd), l.gather_ext(pre.v, v, b, hd));
            let ne = np + tt;
            let (mut dq, mut dk, mut dv) =
                (vec![T::zero(); tt * dh], vec![T::zero(); ne * dh], vec![T::zero(); ne * dh]);
            let (mut p, mut dp) = (Vec::new(), Vec::new());
            for (t0, t1, j0) in l.blocks() {
                let (nq, nk, ke) = (t1 - t0, np + t1 - j0, np + t1);
                // The block's weights as a dense [nq, nk] matrix.
                p.clear();
                p.resize(nq * nk, T::zero());
                for (i, row) in p.chunks_mut(nk).enumerate() {
                    let t = t0 + i;
                    let (lo, hi) = (l.window_start(t) - j0, np + t - j0 + 1);
                    let slots = &attn[((t * bb + b) * l.nh + hd) * w..((t * bb + b) * l.nh + hd + 1) * w];
                    row[lo..hi].copy_from_slice(&slots[w - (hi - lo)..]);
                }
                dp.clear();
                dp.resize(nq * nk, T::zero());
                let dc_blk = &dch[t0 * dh..t1 * dh];
                gemm_serial(&mut dp, nq, nk, dh, dc_blk, false, &vh[j0 * dh..ke * dh], true, false);
                gemm_serial(&mut dv[j0 * dh..ke * dh], nk, dh, nq, &p, true, dc_blk, false, true);
                // dS = P ⊙ (dP − Σ_j P dP) · scale, in place in dp.
                for (prow, drow) in p.chunks(nk).zip(dp.chunks_mut(nk)) {
                    let sum = prow.iter().zip(drow.iter()).fold(T::zero(), |s, (&a, &d)| s + a * d);
                    drow.iter_mut().zip(prow).for_each(|(d, &a)| *d = a * (*d - sum) * scale);
                }
                gemm_serial(&mut dq[t0 * dh..t1 * dh], nq, dh, nk, &dp, false, &kh[j0 * dh..ke * dh], false, true);
                gemm_serial(&mut dk[j0 * dh..ke * dh], nk, dh, nq, &dp, true, &qh[t0 * dh..t1 * dh], false, true);
            }
            [dq, dk, dv]
        })
        .collect();
    let window = |i: usize| l.scatter_rows(parts.iter().map(|p| &p[i]), np, tt);
    let prefix = |i: usize| l.scatter_rows(parts.iter().map(|p| &p[i]), 0, np);
    AttnGrads {
        dq: l.scatter(parts.iter().map(|p| &p[0])),
        dk: window(1),
        dv: window(2),
        dk_pre: prefix(1),
        dv_pre: prefix(2),
    }
}

//! Forward pass of MODEL.md on the CPU, recording every intermediate.
//!
//! Activations are time-major: the row of position `t` in batch row `b` is
//! `t * B + b`, so one timestep's hidden states `[B, H]` are contiguous for the
//! recurrence GEMM.

use rayon::prelude::*;

use super::CpuError;
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::tensor::{Real, gemm};

/// One GRU layer's forward intermediates, each `[T, B, ·]`.
#[derive(Clone, Debug)]
pub struct GruFwd<T> {
    /// `W_ih u_t + b_ih`, gate blocks r, z, n: `[T, B, 3H]`.
    pub gi: Vec<T>,
    /// `W_hh h_{t-1} + b_hh`: `[T, B, 3H]`.
    pub gh: Vec<T>,
    pub r: Vec<T>,
    pub z: Vec<T>,
    pub n: Vec<T>,
    /// Hidden states `h_t`: `[T, B, H]`.
    pub h: Vec<T>,
}

/// Everything the forward pass computed.
#[derive(Clone, Debug)]
pub struct Forward<T> {
    pub t: usize,
    pub b: usize,
    /// `e_t = E[x_t]`: `[T, B, D]`.
    pub emb: Vec<T>,
    pub gru: Vec<GruFwd<T>>,
    pub q: Vec<T>,
    pub k: Vec<T>,
    pub v: Vec<T>,
    /// Attention weights `[T, B, NH, W]`; slot `w` holds key position
    /// `t + 1 + w - W` (zero where that position is before the row's start).
    pub attn: Vec<T>,
    /// Context vectors `c_t`: `[T, B, A]`.
    pub c: Vec<T>,
    pub logits: Vec<T>,
    /// Per-position cross-entropy, 0 where the mask is 0: `[T, B]`.
    pub token_loss: Vec<T>,
    /// The masked mean loss (summed in float64).
    pub loss: f64,
    /// N = Σ mask.
    pub n_targets: usize,
}

impl<T: Real> Forward<T> {
    /// The top layer's hidden states, `s_t`.
    pub fn s(&self) -> &[T] {
        &self.gru.last().expect("at least one layer").h
    }
}

#[inline(always)]
pub(crate) fn sigmoid<T: Real>(x: T) -> T {
    T::one() / (T::one() + (-x).exp())
}

/// Adds `bias` to every row of `x` (`[rows, bias.len()]`).
pub(crate) fn add_bias<T: Real>(x: &mut [T], bias: &[T]) {
    x.par_chunks_mut(bias.len()).for_each(|row| row.iter_mut().zip(bias).for_each(|(a, &b)| *a += b));
}

pub fn forward<T: Real>(cfg: &Config, p: &Params<T>, batch: &Batch) -> Result<Forward<T>, CpuError> {
    let n_targets = batch.num_targets();
    if n_targets == 0 {
        return Err(CpuError::NoTargets);
    }
    let (tt, bb) = (batch.t, batch.rows);
    let rows = tt * bb;
    let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);

    // Embedding gather.
    let mut emb = vec![T::zero(); rows * d];
    emb.par_chunks_mut(d).enumerate().for_each(|(i, row)| {
        let (t, b) = (i / bb, i % bb);
        let x = batch.input(b, t) as usize;
        row.copy_from_slice(&p.embed.data[x * d..(x + 1) * d]);
    });

    // Stacked GRU.
    let mut gru: Vec<GruFwd<T>> = Vec::with_capacity(cfg.layers);
    for (l, layer) in p.gru.iter().enumerate() {
        let input = if l == 0 { &emb } else { &gru[l - 1].h };
        gru.push(gru_layer(layer, input, tt, bb, cfg.gru_in(l), h));
    }
    let s = &gru.last().expect("layers >= 1").h;

    // Context stream.
    let mut q = vec![T::zero(); rows * a];
    let mut k = vec![T::zero(); rows * a];
    let mut vv = vec![T::zero(); rows * a];
    gemm(&mut q, rows, a, h, s, false, &p.q.data, true, false);
    gemm(&mut k, rows, a, h, s, false, &p.k.data, true, false);
    gemm(&mut vv, rows, a, h, s, false, &p.v.data, true, false);
    let (attn, c) = attention(cfg, &q, &k, &vv, tt, bb);

    // Classifier.
    let mut logits = vec![T::zero(); rows * v];
    gemm(&mut logits, rows, v, h, s, false, &p.head_tok.data, true, false);
    gemm(&mut logits, rows, v, a, &c, false, &p.head_ctx.data, true, true);
    add_bias(&mut logits, &p.head_bias.data);

    let token_loss = token_losses(&logits, batch, v);
    let loss = token_loss.iter().map(|x| x.f64()).sum::<f64>() / n_targets as f64;

    Ok(Forward { t: tt, b: bb, emb, gru, q, k, v: vv, attn, c, logits, token_loss, loss, n_targets })
}

pub(crate) fn gru_layer<T: Real>(
    layer: &crate::model::GruLayer<T>,
    input: &[T],
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
) -> GruFwd<T> {
    let rows = tt * bb;
    let g3 = 3 * h;
    let mut gi = vec![T::zero(); rows * g3];
    gemm(&mut gi, rows, g3, n_in, input, false, &layer.w_ih.data, true, false);
    add_bias(&mut gi, &layer.b_ih.data);

    let mut gh = vec![T::zero(); rows * g3];
    let mut r = vec![T::zero(); rows * h];
    let mut z = vec![T::zero(); rows * h];
    let mut n = vec![T::zero(); rows * h];
    let mut hs = vec![T::zero(); rows * h];
    let zeros = vec![T::zero(); bb * h];
    for t in 0..tt {
        let (done, rest) = hs.split_at_mut(t * bb * h);
        let hprev: &[T] = if t == 0 { &zeros } else { &done[(t - 1) * bb * h..] };
        let h_t = &mut rest[..bb * h];
        let gh_t = &mut gh[t * bb * g3..(t + 1) * bb * g3];
        if t > 0 {
            gemm(gh_t, bb, g3, h, hprev, false, &layer.w_hh.data, true, false);
        }
        add_bias(gh_t, &layer.b_hh.data);
        let gi_t = &gi[t * bb * g3..(t + 1) * bb * g3];
        let span = t * bb * h..(t + 1) * bb * h;
        h_t.par_chunks_mut(h)
            .zip(r[span.clone()].par_chunks_mut(h))
            .zip(z[span.clone()].par_chunks_mut(h))
            .zip(n[span].par_chunks_mut(h))
            .enumerate()
            .for_each(|(b, (((h_row, r_row), z_row), n_row))| {
                let gi_b = &gi_t[b * g3..(b + 1) * g3];
                let gh_b = &gh_t[b * g3..(b + 1) * g3];
                let hp = &hprev[b * h..(b + 1) * h];
                for j in 0..h {
                    let rj = sigmoid(gi_b[j] + gh_b[j]);
                    let zj = sigmoid(gi_b[h + j] + gh_b[h + j]);
                    let nj = (gi_b[2 * h + j] + rj * gh_b[2 * h + j]).tanh();
                    r_row[j] = rj;
                    z_row[j] = zj;
                    n_row[j] = nj;
                    h_row[j] = (T::one() - zj) * nj + zj * hp[j];
                }
            });
    }
    GruFwd { gi, gh, r, z, n, h: hs }
}

/// Multi-head attention over the sliding window `J_t = {max(0, t-W+1) … t}`.
/// Returns the weights `[T, B, NH, W]` and the context vectors `[T, B, A]`.
pub(crate) fn attention<T: Real>(cfg: &Config, q: &[T], k: &[T], v: &[T], tt: usize, bb: usize) -> (Vec<T>, Vec<T>) {
    let (a, nh, w, dh) = (cfg.attn_dim, cfg.heads, cfg.window, cfg.head_dim());
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let mut attn = vec![T::zero(); tt * bb * nh * w];
    let mut c = vec![T::zero(); tt * bb * a];
    attn.par_chunks_mut(bb * nh * w).zip(c.par_chunks_mut(bb * a)).enumerate().for_each(|(t, (attn_t, c_t))| {
        let j0 = (t + 1).saturating_sub(w);
        let mut scores = vec![T::zero(); w];
        for b in 0..bb {
            let qrow = &q[(t * bb + b) * a..(t * bb + b + 1) * a];
            for hd in 0..nh {
                let qh = &qrow[hd * dh..(hd + 1) * dh];
                let mut m = T::neg_infinity();
                for (i, j) in (j0..=t).enumerate() {
                    let kh = &k[(j * bb + b) * a + hd * dh..(j * bb + b) * a + (hd + 1) * dh];
                    let s = dot(qh, kh) * scale;
                    scores[i] = s;
                    m = m.max(s);
                }
                let cnt = t + 1 - j0;
                let mut sum = T::zero();
                for s in &mut scores[..cnt] {
                    *s = (*s - m).exp();
                    sum += *s;
                }
                let weights = &mut attn_t[(b * nh + hd) * w..(b * nh + hd + 1) * w];
                let ch = &mut c_t[b * a + hd * dh..b * a + (hd + 1) * dh];
                for (i, j) in (j0..=t).enumerate() {
                    let aw = scores[i] / sum;
                    weights[w - cnt + i] = aw;
                    let vh = &v[(j * bb + b) * a + hd * dh..(j * bb + b) * a + (hd + 1) * dh];
                    ch.iter_mut().zip(vh).for_each(|(cv, &x)| *cv += aw * x);
                }
            }
        }
    });
    (attn, c)
}

/// Per-position cross-entropy by log-sum-exp with the maximum subtracted;
/// 0 where the mask is 0. `logits` is `[T, B, V]`.
pub(crate) fn token_losses<T: Real>(logits: &[T], batch: &Batch, v: usize) -> Vec<T> {
    let bb = batch.rows;
    logits
        .par_chunks(v)
        .enumerate()
        .map(|(i, row)| {
            let (t, b) = (i / bb, i % bb);
            if !batch.mask(b, t) {
                return T::zero();
            }
            let m = row.iter().fold(T::neg_infinity(), |m, &x| m.max(x));
            let sum = row.iter().fold(T::zero(), |s, &x| s + (x - m).exp());
            m + sum.ln() - row[batch.target(b, t) as usize]
        })
        .collect()
}

#[inline]
pub(crate) fn dot<T: Real>(x: &[T], y: &[T]) -> T {
    x.iter().zip(y).fold(T::zero(), |s, (&a, &b)| s + a * b)
}

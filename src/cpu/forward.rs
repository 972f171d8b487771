//! Forward pass of docs/model.md on the CPU, recording every intermediate.
//!
//! Activations are time-major: the row of position `t` in batch row `b` is
//! `t * B + b`, so one timestep's hidden states `[B, H]` are contiguous for the
//! recurrence GEMM.

use rayon::prelude::*;

use super::attention::{Prefix, attention_with};
use super::rounding::{Round, Rounding};
use super::{CpuError, profile};
use crate::dataset::Batch;
use crate::model::{Config, Params};
use crate::step::Carry;
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
    /// The carried state the pass started from (None: zeros, docs/model.md), with
    /// the prefix's keys and values `W_k s_pre`, `W_v s_pre` (`[P, B, A]`).
    pub carry: Option<Carry<T>>,
    pub k_pre: Vec<T>,
    pub v_pre: Vec<T>,
}

impl<T: Real> Forward<T> {
    /// The top layer's hidden states, `s_t`.
    pub fn s(&self) -> &[T] {
        &self.gru.last().expect("at least one layer").h
    }

    /// The state the next window of each row starts from.
    pub fn final_state(&self, cfg: &Config) -> Carry<T> {
        Carry::after(cfg, self, self.carry.as_ref())
    }
}

/// Adds `bias` to every row of `x` (`[rows, bias.len()]`).
pub(crate) fn add_bias<T: Real>(x: &mut [T], bias: &[T]) {
    x.par_chunks_mut(bias.len())
        .with_min_len(rows_per_task(bias.len()))
        .for_each(|row| row.iter_mut().zip(bias).for_each(|(a, &b)| *a += b));
}

pub fn forward<T: Real>(cfg: &Config, p: &Params<T>, batch: &Batch) -> Result<Forward<T>, CpuError> {
    forward_with(cfg, p, batch, None)
}

/// [`forward`] from a carried state (None, or an empty state: exactly
/// [`forward`]). The state must fit (`Carry::check`); callers check it.
pub fn forward_with<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    carry: Option<&Carry<T>>,
) -> Result<Forward<T>, CpuError> {
    forward_rounded(cfg, p, batch, carry, &Rounding::exact())
}

/// [`forward_with`] with each product's operands rounded as `rd` says
/// (`Rounding::exact()`: exactly [`forward_with`]).
pub fn forward_rounded<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    carry: Option<&Carry<T>>,
    rd: &Rounding,
) -> Result<Forward<T>, CpuError> {
    if let Some(c) = carry {
        c.check(cfg, batch.rows).map_err(CpuError::Carry)?;
    }
    let carry = carry.filter(|c| !c.is_empty());
    let n_targets = batch.num_targets();
    if n_targets == 0 {
        return Err(CpuError::NoTargets);
    }
    let (tt, bb) = (batch.t, batch.rows);
    let rows = tt * bb;
    let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);

    // Embedding gather.
    let sp = profile::span("embed_fwd");
    let mut emb = vec![T::zero(); rows * d];
    emb.par_chunks_mut(d).enumerate().for_each(|(i, row)| {
        let (t, b) = (i / bb, i % bb);
        let x = batch.input(b, t) as usize;
        row.copy_from_slice(&p.embed.data[x * d..(x + 1) * d]);
    });
    if !rd.embed.is_exact() {
        emb.iter_mut().for_each(|x| *x = rd.embed.value(*x));
    }

    drop(sp);
    // Stacked GRU.
    let mut gru: Vec<GruFwd<T>> = Vec::with_capacity(cfg.layers);
    for (l, layer) in p.gru.iter().enumerate() {
        let input = if l == 0 { &emb } else { &gru[l - 1].h };
        let h0 = carry.map(|c| c.h0[l].as_slice());
        let round = (rd.input(l, false), rd.rec(l, false));
        gru.push(gru_layer_rounded(layer, input, h0, tt, bb, cfg.gru_in(l), h, round));
    }
    let s = &gru.last().expect("layers >= 1").h;

    // Context stream.
    let sp = profile::span("qkv_fwd");
    let mut q = vec![T::zero(); rows * a];
    let mut k = vec![T::zero(); rows * a];
    let mut vv = vec![T::zero(); rows * a];
    let ra = rd.attn;
    let s_r = ra.slice(s);
    gemm(&mut q, rows, a, h, &s_r, false, &ra.slice(&p.q.data), true, false);
    gemm(&mut k, rows, a, h, &s_r, false, &ra.slice(&p.k.data), true, false);
    gemm(&mut vv, rows, a, h, &s_r, false, &ra.slice(&p.v.data), true, false);
    drop(s_r);
    // The prefix's keys and values, recomputed with the current weights.
    let np = carry.map_or(0, |c| c.prefix_len);
    let (mut k_pre, mut v_pre) = (vec![T::zero(); np * bb * a], vec![T::zero(); np * bb * a]);
    if let Some(c) = carry.filter(|c| c.prefix_len > 0) {
        let pre = ra.slice(&c.prefix);
        gemm(&mut k_pre, np * bb, a, h, &pre, false, &ra.slice(&p.k.data), true, false);
        gemm(&mut v_pre, np * bb, a, h, &pre, false, &ra.slice(&p.v.data), true, false);
    }
    drop(sp);
    let sp = profile::span("attn_fwd");
    let pre = Prefix { k: &k_pre, v: &v_pre, len: np };
    let (attn, c) = attention_with(cfg, &q, &k, &vv, &pre, tt, bb);

    drop(sp);
    // Classifier.
    let sp = profile::span("head_fwd");
    let mut logits = vec![T::zero(); rows * v];
    let rh = rd.head;
    gemm(&mut logits, rows, v, h, &rh.slice(s), false, &rh.slice(&p.head_tok.data), true, false);
    gemm(&mut logits, rows, v, a, &rh.slice(&c), false, &rh.slice(&p.head_ctx.data), true, true);
    add_bias(&mut logits, &p.head_bias.data);

    drop(sp);
    let _sp = profile::span("loss_fwd");
    let token_loss = token_losses(&logits, batch, v);
    let loss = token_loss.iter().map(|x| x.f64()).sum::<f64>() / n_targets as f64;

    let carry = carry.cloned();
    Ok(Forward {
        t: tt,
        b: bb,
        emb,
        gru,
        q,
        k,
        v: vv,
        attn,
        c,
        logits,
        token_loss,
        loss,
        n_targets,
        carry,
        k_pre,
        v_pre,
    })
}

/// One GRU layer from `h_{-1} = 0` (the finite-difference checks).
#[cfg(test)]
pub(crate) fn gru_layer<T: Real>(
    layer: &crate::model::GruLayer<T>,
    input: &[T],
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
) -> GruFwd<T> {
    gru_layer_from(layer, input, None, tt, bb, n_in, h)
}

/// [`gru_layer`] from `h_{-1} = h0` (`[B, H]`; None: zeros).
#[cfg(test)]
pub(crate) fn gru_layer_from<T: Real>(
    layer: &crate::model::GruLayer<T>,
    input: &[T],
    h0: Option<&[T]>,
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
) -> GruFwd<T> {
    gru_layer_rounded(layer, input, h0, tt, bb, n_in, h, (Round::Exact, Round::Exact))
}

/// [`gru_layer_from`] with the input product's and the recurrence's
/// operands rounded as `round` (input, recurrence) says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gru_layer_rounded<T: Real>(
    layer: &crate::model::GruLayer<T>,
    input: &[T],
    h0: Option<&[T]>,
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
    round: (Round, Round),
) -> GruFwd<T> {
    let rows = tt * bb;
    let g3 = 3 * h;
    let sp = profile::span("gru_fwd_input_gemm");
    let mut gi = vec![T::zero(); rows * g3];
    let ri = round.0;
    gemm(&mut gi, rows, g3, n_in, &ri.slice(input), false, &ri.slice(&layer.w_ih.data), true, false);
    add_bias(&mut gi, &layer.b_ih.data);

    let mut gh = vec![T::zero(); rows * g3];
    let mut r = vec![T::zero(); rows * h];
    let mut z = vec![T::zero(); rows * h];
    let mut n = vec![T::zero(); rows * h];
    let mut hs = vec![T::zero(); rows * h];
    drop(sp);
    let _sp = profile::span("gru_fwd_recurrence");
    super::recurrence::forward(
        round.1,
        &layer.w_hh.data,
        &layer.b_hh.data,
        &gi,
        h0,
        tt,
        bb,
        h,
        super::recurrence::RecurrenceOut { gh: &mut gh, r: &mut r, z: &mut z, n: &mut n, h: &mut hs },
    );
    GruFwd { gi, gh, r, z, n, h: hs }
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

/// Smallest number of elements a parallel task should get: below this the
/// fork-join costs more than the work.
pub(crate) const MIN_TASK: usize = 8192;

/// Rows of `width` elements per parallel task.
#[inline]
pub(crate) fn rows_per_task(width: usize) -> usize {
    (MIN_TASK / width.max(1)).max(1)
}

//! Backward pass of docs/model.md on the CPU: `∂(S·loss)/∂θ` for every parameter,
//! recording every intermediate gradient. The per-token guard on the `W_ctx`
//! gradient lives here too.

use rayon::prelude::*;

use super::attention::{Prefix, attention_backward_with};
use super::forward::Forward;
use super::math::dot;
use super::profile;
use super::rounding::{Round, Rounding};
use crate::dataset::Batch;
use crate::model::{Config, GruLayer, Params};
use crate::tensor::{Real, gemm};

/// One GRU layer's backward intermediates, each `[T, B, ·]`.
#[derive(Clone, Debug)]
pub struct GruBwd<T> {
    /// Gradient arriving at `h_t` from above (the layer above or the heads),
    /// not counting the recurrent path: `[T, B, H]`.
    pub d_h: Vec<T>,
    /// Gradient of the input pre-activations `gi`: `[T, B, 3H]`.
    pub d_gi: Vec<T>,
    /// Gradient of the recurrent pre-activations `gh`: `[T, B, 3H]`.
    pub d_gh: Vec<T>,
    /// Gradient of the layer's input `u_t`: `[T, B, in]`.
    pub d_in: Vec<T>,
}

#[derive(Clone, Debug)]
pub struct Backward<T> {
    /// `S · ∂loss/∂logits`: `[T, B, V]`.
    pub dlogits: Vec<T>,
    /// Gradient of `s` through `W_tok`: `[T, B, H]`.
    pub d_s_head: Vec<T>,
    /// Gradient of `c`: `[T, B, A]`.
    pub d_c: Vec<T>,
    pub d_q: Vec<T>,
    pub d_k: Vec<T>,
    pub d_v: Vec<T>,
    /// Gradient of `s` through the context stream: `[T, B, H]`.
    pub d_s_ctx: Vec<T>,
    /// Per layer, bottom first.
    pub gru: Vec<GruBwd<T>>,
    /// Gradient of the looked-up embeddings: `[T, B, D]`.
    pub d_emb: Vec<T>,
    /// Per position, `‖g_t‖·‖c_t‖` with `g_t = ∂loss/∂logits_t` (unscaled):
    /// the norm of that position's contribution to the `W_ctx` gradient. `[T, B]`.
    pub ctx_token_norm: Vec<T>,
    /// Positions whose `W_ctx` contribution the per-token guard capped.
    pub capped: usize,
    /// Parameter gradients of `S · loss`.
    pub grads: Params<T>,
}

/// Column sums of `x` (`[rows, cols]`), each summed in row order.
fn col_sum<T: Real>(x: &[T], cols: usize) -> Vec<T> {
    let mut out = vec![T::zero(); cols];
    for row in x.chunks(cols) {
        out.iter_mut().zip(row).for_each(|(o, &v)| *o += v);
    }
    out
}

/// `coef · (softmax − onehot)` on masked positions, 0 elsewhere (`coef = S/N`
/// gives `∂(S·loss)/∂logits`).
pub(crate) fn dlogits<T: Real>(logits: &[T], batch: &Batch, v: usize, coef: f64) -> Vec<T> {
    let bb = batch.rows;
    let coef = T::of(coef);
    let mut out = vec![T::zero(); logits.len()];
    out.par_chunks_mut(v).zip(logits.par_chunks(v)).enumerate().for_each(|(i, (g, l))| {
        let (t, b) = (i / bb, i % bb);
        if !batch.mask(b, t) {
            return;
        }
        let m = l.iter().fold(T::neg_infinity(), |m, &x| m.max(x));
        let mut sum = T::zero();
        for (gv, &lv) in g.iter_mut().zip(l) {
            *gv = (lv - m).exp();
            sum += *gv;
        }
        let inv = T::one() / sum;
        g.iter_mut().for_each(|x| *x = *x * inv * coef);
        g[batch.target(b, t) as usize] -= coef;
    });
    out
}

/// `loss_scale` is S; `token_cap` is the per-token guard's τ (None: off).
pub fn backward<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    fwd: &Forward<T>,
    loss_scale: f64,
    token_cap: Option<f64>,
) -> Backward<T> {
    backward_rounded(cfg, p, batch, fwd, loss_scale, token_cap, &Rounding::exact())
}

/// [`backward`] with each product's operands rounded as `rd` says (the
/// gradients at the loss scale S, as a kernel sees them); `Rounding::exact()`:
/// exactly [`backward`].
pub fn backward_rounded<T: Real>(
    cfg: &Config,
    p: &Params<T>,
    batch: &Batch,
    fwd: &Forward<T>,
    loss_scale: f64,
    token_cap: Option<f64>,
    rd: &Rounding,
) -> Backward<T> {
    let (tt, bb) = (fwd.t, fwd.b);
    let rows = tt * bb;
    let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
    let mut grads = Params::zeros(cfg);
    let s = fwd.s();

    // ∂(S·loss)/∂logits = S/N · (softmax − onehot) on masked positions.
    let sp = profile::span("loss_bwd");
    let dlogits = dlogits(&fwd.logits, batch, v, loss_scale / fwd.n_targets as f64);

    drop(sp);
    // Classifier.
    let sp = profile::span("head_bwd");
    let rh = rd.head_bwd;
    let (dl_r, s_r, c_r) = (rh.slice(&dlogits), rh.slice(s), rh.slice(&fwd.c));
    gemm(&mut grads.head_tok.data, v, h, rows, &dl_r, true, &s_r, false, false);
    grads.head_bias.data = col_sum(&dlogits, v);
    let unscale = 1.0 / loss_scale;
    let ctx_token_norm: Vec<T> = dlogits
        .par_chunks(v)
        .zip(fwd.c.par_chunks(a))
        .map(|(g, c)| T::of(dot(g, g).f64().sqrt() * unscale * dot(c, c).f64().sqrt()))
        .collect();
    let mut capped = 0;
    match token_cap {
        Some(tau) => {
            let factors: Vec<T> = ctx_token_norm
                .iter()
                .map(|&nrm| if nrm.f64() > tau { T::of(tau / nrm.f64()) } else { T::one() })
                .collect();
            capped = factors.iter().filter(|&&f| f != T::one()).count();
            let mut guarded = dlogits.clone();
            guarded.par_chunks_mut(v).zip(&factors).for_each(|(g, &f)| g.iter_mut().for_each(|x| *x *= f));
            gemm(&mut grads.head_ctx.data, v, a, rows, &rh.slice(&guarded), true, &c_r, false, false);
        }
        None => gemm(&mut grads.head_ctx.data, v, a, rows, &dl_r, true, &c_r, false, false),
    }
    let mut d_s_head = vec![T::zero(); rows * h];
    gemm(&mut d_s_head, rows, h, v, &dl_r, false, &rh.slice(&p.head_tok.data), false, false);
    let mut d_c = vec![T::zero(); rows * a];
    gemm(&mut d_c, rows, a, v, &dl_r, false, &rh.slice(&p.head_ctx.data), false, false);
    drop((dl_r, s_r, c_r));

    drop(sp);
    // Context stream.
    let sp = profile::span("attn_bwd");
    let np = fwd.carry.as_ref().map_or(0, |c| c.prefix_len);
    let pre = Prefix { k: &fwd.k_pre, v: &fwd.v_pre, len: np };
    let ag = attention_backward_with(cfg, &fwd.q, &fwd.k, &fwd.v, &pre, &fwd.attn, &d_c, tt, bb);
    let (d_q, d_k, d_v) = (ag.dq, ag.dk, ag.dv);
    drop(sp);
    let sp = profile::span("qkv_bwd");
    let ra = rd.attn_bwd;
    let (dq_r, dk_r, dv_r, s_r) = (ra.slice(&d_q), ra.slice(&d_k), ra.slice(&d_v), ra.slice(s));
    gemm(&mut grads.q.data, a, h, rows, &dq_r, true, &s_r, false, false);
    gemm(&mut grads.k.data, a, h, rows, &dk_r, true, &s_r, false, false);
    gemm(&mut grads.v.data, a, h, rows, &dv_r, true, &s_r, false, false);
    // The prefix's keys and values are the current W_k, W_v times constant
    // states: their gradients reach W_k and W_v (the chunk loss's exact
    // gradient with the previous window held fixed); none reaches the states.
    if let Some(c) = fwd.carry.as_ref().filter(|c| c.prefix_len > 0) {
        let pre = ra.slice(&c.prefix);
        gemm(&mut grads.k.data, a, h, np * bb, &ra.slice(&ag.dk_pre), true, &pre, false, true);
        gemm(&mut grads.v.data, a, h, np * bb, &ra.slice(&ag.dv_pre), true, &pre, false, true);
    }
    let mut d_s_ctx = vec![T::zero(); rows * h];
    gemm(&mut d_s_ctx, rows, h, a, &dq_r, false, &ra.slice(&p.q.data), false, false);
    gemm(&mut d_s_ctx, rows, h, a, &dk_r, false, &ra.slice(&p.k.data), false, true);
    gemm(&mut d_s_ctx, rows, h, a, &dv_r, false, &ra.slice(&p.v.data), false, true);
    drop((dq_r, dk_r, dv_r, s_r));

    drop(sp);
    // GRU layers, top to bottom.
    let mut d_above: Vec<T> = d_s_head.iter().zip(&d_s_ctx).map(|(&x, &y)| x + y).collect();
    let mut gru_bwd: Vec<GruBwd<T>> = Vec::with_capacity(cfg.layers);
    for l in (0..cfg.layers).rev() {
        let input = if l == 0 { &fwd.emb } else { &fwd.gru[l - 1].h };
        let h0 = fwd.carry.as_ref().map(|c| c.h0[l].as_slice());
        let (layer, grad) = (&p.gru[l], &mut grads.gru[l]);
        let round = (rd.input(l, true), rd.rec(l, true));
        let (f, n_in) = (&fwd.gru[l], cfg.gru_in(l));
        let gb = gru_layer_backward_rounded(layer, grad, f, input, h0, d_above, tt, bb, n_in, h, round);
        d_above = gb.d_in.clone();
        gru_bwd.push(gb);
    }
    gru_bwd.reverse();
    let d_emb = d_above;

    let _sp = profile::span("embed_bwd");
    // Embedding: a deterministic scatter-add in position order.
    for t in 0..tt {
        for b in 0..bb {
            let x = batch.input(b, t) as usize;
            let src = &d_emb[(t * bb + b) * d..(t * bb + b + 1) * d];
            grads.embed.data[x * d..(x + 1) * d].iter_mut().zip(src).for_each(|(g, &s)| *g += s);
        }
    }

    Backward { dlogits, d_s_head, d_c, d_q, d_k, d_v, d_s_ctx, gru: gru_bwd, d_emb, ctx_token_norm, capped, grads }
}

/// Backpropagation through time for one layer.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gru_layer_backward<T: Real>(
    layer: &GruLayer<T>,
    grad: &mut GruLayer<T>,
    f: &super::forward::GruFwd<T>,
    input: &[T],
    d_h: Vec<T>,
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
) -> GruBwd<T> {
    gru_layer_backward_from(layer, grad, f, input, None, d_h, tt, bb, n_in, h)
}

/// [`gru_layer_backward`] of a forward that started from `h_{-1} = h0`.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn gru_layer_backward_from<T: Real>(
    layer: &GruLayer<T>,
    grad: &mut GruLayer<T>,
    f: &super::forward::GruFwd<T>,
    input: &[T],
    h0: Option<&[T]>,
    d_h: Vec<T>,
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
) -> GruBwd<T> {
    gru_layer_backward_rounded(layer, grad, f, input, h0, d_h, tt, bb, n_in, h, (Round::Exact, Round::Exact))
}

/// [`gru_layer_backward_from`] with the input products' and the
/// recurrence's operands rounded as `round` (input, recurrence) says.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gru_layer_backward_rounded<T: Real>(
    layer: &GruLayer<T>,
    grad: &mut GruLayer<T>,
    f: &super::forward::GruFwd<T>,
    input: &[T],
    h0: Option<&[T]>,
    d_h: Vec<T>,
    tt: usize,
    bb: usize,
    n_in: usize,
    h: usize,
    round: (Round, Round),
) -> GruBwd<T> {
    let rows = tt * bb;
    let g3 = 3 * h;
    let mut d_gi = vec![T::zero(); rows * g3];
    let mut d_gh = vec![T::zero(); rows * g3];
    let sp = profile::span("gru_bwd_recurrence");
    let fin = super::recurrence::RecurrenceIn { gh: &f.gh, r: &f.r, z: &f.z, n: &f.n, h: &f.h };
    super::recurrence::backward(round.1, &layer.w_hh.data, fin, h0, &d_h, tt, bb, h, &mut d_gi, &mut d_gh);
    drop(sp);
    let _sp = profile::span("gru_bwd_weight_gemm");
    // The weight gradients' and the input gradient's products belong to the
    // input stage's backward (as on the GPU).
    let ri = round.0;
    let (dgi_r, dgh_r) = (ri.slice(&d_gi), ri.slice(&d_gh));
    gemm(&mut grad.w_ih.data, g3, n_in, rows, &dgi_r, true, &ri.slice(input), false, false);
    grad.b_ih.data = col_sum(&d_gi, g3);
    if tt > 1 {
        let shifted = (tt - 1) * bb;
        let hs = ri.slice(&f.h[..shifted * h]);
        gemm(&mut grad.w_hh.data, g3, h, shifted, &dgh_r[bb * g3..], true, &hs, false, false);
    }
    if let Some(h0) = h0 {
        // The t = 0 term, d_gh_0 · h0ᵀ (zero when h_{-1} = 0).
        gemm(&mut grad.w_hh.data, g3, h, bb, &dgh_r[..bb * g3], true, &ri.slice(h0), false, true);
    }
    grad.b_hh.data = col_sum(&d_gh, g3);
    let mut d_in = vec![T::zero(); rows * n_in];
    gemm(&mut d_in, rows, n_in, g3, &dgi_r, false, &ri.slice(&layer.w_ih.data), false, false);
    drop((dgi_r, dgh_r));
    GruBwd { d_h, d_gi, d_gh, d_in }
}

//! The named trace: every intermediate of a forward and backward pass under a
//! stable name, for the ladder to compare and the GUI to show.
//!
//! Activation tensors are time-major, `[T, B, …]`. Names:
//! `embed.out`; `gru.l{l}.{gi,gh,r,z,n,h}`; `ctx.{q,k,v,attn,c}`; `head.logits`;
//! `loss.token`, `loss.value`; `loss.dlogits`; `head.d_s`, `head.d_c`;
//! `ctx.d_q`, `ctx.d_k`, `ctx.d_v`, `ctx.d_s`, `ctx.token_norm`;
//! `gru.l{l}.{d_h,d_gi,d_gh,d_in}`; `embed.d_out`; and `grad.<parameter name>`.

use super::backward::Backward;
use super::forward::Forward;
use crate::model::Config;
use crate::tensor::{Real, Tensor};

#[derive(Clone, Debug, Default)]
pub struct Trace<T> {
    entries: Vec<(String, Tensor<T>)>,
}

impl<T: Real> Trace<T> {
    pub fn new() -> Self {
        Trace { entries: Vec::new() }
    }

    pub fn push(&mut self, name: impl Into<String>, t: Tensor<T>) {
        self.entries.push((name.into(), t));
    }

    pub fn get(&self, name: &str) -> Option<&Tensor<T>> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor<T>)> {
        self.entries.iter().map(|(n, t)| (n.as_str(), t))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records a forward pass.
    pub fn record_forward(&mut self, cfg: &Config, f: &Forward<T>) {
        let (t, b) = (f.t, f.b);
        let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
        let mut put =
            |name: String, shape: &[usize], data: &Vec<T>| self.push(name, Tensor::from_vec(shape, data.clone()));
        put("embed.out".into(), &[t, b, d], &f.emb);
        for (l, g) in f.gru.iter().enumerate() {
            put(format!("gru.l{l}.gi"), &[t, b, 3 * h], &g.gi);
            put(format!("gru.l{l}.gh"), &[t, b, 3 * h], &g.gh);
            put(format!("gru.l{l}.r"), &[t, b, h], &g.r);
            put(format!("gru.l{l}.z"), &[t, b, h], &g.z);
            put(format!("gru.l{l}.n"), &[t, b, h], &g.n);
            put(format!("gru.l{l}.h"), &[t, b, h], &g.h);
        }
        put("ctx.q".into(), &[t, b, a], &f.q);
        put("ctx.k".into(), &[t, b, a], &f.k);
        put("ctx.v".into(), &[t, b, a], &f.v);
        put("ctx.attn".into(), &[t, b, cfg.heads, cfg.window], &f.attn);
        put("ctx.c".into(), &[t, b, a], &f.c);
        put("head.logits".into(), &[t, b, v], &f.logits);
        put("loss.token".into(), &[t, b], &f.token_loss);
        self.push("loss.value", Tensor::from_vec(&[1], vec![T::of(f.loss)]));
    }

    /// Records a backward pass.
    pub fn record_backward(&mut self, cfg: &Config, f: &Forward<T>, g: &Backward<T>) {
        let (t, b) = (f.t, f.b);
        let (d, h, a, v) = (cfg.d_embed, cfg.hidden, cfg.attn_dim, cfg.vocab);
        let mut put =
            |name: String, shape: &[usize], data: &Vec<T>| self.push(name, Tensor::from_vec(shape, data.clone()));
        put("loss.dlogits".into(), &[t, b, v], &g.dlogits);
        put("head.d_s".into(), &[t, b, h], &g.d_s_head);
        put("head.d_c".into(), &[t, b, a], &g.d_c);
        put("ctx.d_q".into(), &[t, b, a], &g.d_q);
        put("ctx.d_k".into(), &[t, b, a], &g.d_k);
        put("ctx.d_v".into(), &[t, b, a], &g.d_v);
        put("ctx.d_s".into(), &[t, b, h], &g.d_s_ctx);
        put("ctx.token_norm".into(), &[t, b], &g.ctx_token_norm);
        for (l, gb) in g.gru.iter().enumerate() {
            put(format!("gru.l{l}.d_h"), &[t, b, h], &gb.d_h);
            put(format!("gru.l{l}.d_gi"), &[t, b, 3 * h], &gb.d_gi);
            put(format!("gru.l{l}.d_gh"), &[t, b, 3 * h], &gb.d_gh);
            put(format!("gru.l{l}.d_in"), &[t, b, cfg.gru_in(l)], &gb.d_in);
        }
        put("embed.d_out".into(), &[t, b, d], &g.d_emb);
        for (name, tensor) in g.grads.named(cfg) {
            self.push(format!("grad.{name}"), tensor.clone());
        }
    }
}

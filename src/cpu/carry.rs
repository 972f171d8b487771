//! How a forward pass moves a carried state on to the next window
//! (docs/carry-state.md); the state itself is [`crate::step::Carry`].

use super::forward::Forward;
use crate::model::Config;
use crate::step::Carry;
use crate::tensor::Real;

impl<T: Real> Carry<T> {
    /// The state after a forward pass that started from `prev` (None: from
    /// zero): each layer's `h` at the window's last position, and the last
    /// `min(W − 1, P + T)` top-layer states of the old prefix followed by the
    /// window's. A row shorter than the window ends its document; its state is
    /// still returned (taken at the last position) and the caller resets it.
    pub fn after(cfg: &Config, f: &Forward<T>, prev: Option<&Carry<T>>) -> Self {
        let (tt, bb, h) = (f.t, f.b, cfg.hidden);
        let bh = bb * h;
        let h0 = f.gru.iter().map(|g| g.h[(tt - 1) * bh..tt * bh].to_vec()).collect();
        let old: &[T] = prev.map(|c| c.prefix.as_slice()).unwrap_or(&[]);
        let keep = (cfg.window.saturating_sub(1)).min(old.len() / bh.max(1) + tt);
        let from_s = keep.min(tt);
        let from_old = keep - from_s;
        let mut prefix = Vec::with_capacity(keep * bh);
        prefix.extend_from_slice(&old[old.len() - from_old * bh..]);
        prefix.extend_from_slice(&f.s()[(tt - from_s) * bh..]);
        Carry { rows: bb, hidden: h, h0, prefix, prefix_len: keep }
    }
}

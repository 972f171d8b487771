//! Which positions of a batch dominate its gradient: per position, the norm
//! of the loss's gradient with respect to that position's looked-up
//! embedding, `‖∂loss/∂e_t‖` (it gathers every later loss term the token
//! reaches through the GRU and the attention window), computed by the CPU
//! reference.

use serde::{Deserialize, Serialize};

use crate::dataset::{Batch, RowOrigin};
use crate::engine::reference::{CpuError, backward};
use crate::model::{Config, Params};
use crate::tensor::Real;

/// One position of a batch and how much of the gradient flows through it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenGrad {
    pub row: usize,
    pub pos: usize,
    /// `‖∂loss/∂e_t‖`, unscaled.
    pub norm: f64,
    /// The position's cross-entropy (0 where it has no target).
    pub token_loss: f64,
    pub input: u8,
    /// The next token (none at a row's last token).
    pub target: Option<u8>,
    /// The row's document, and the byte offset of this position in it.
    pub document: Option<usize>,
    pub offset: Option<usize>,
    /// The text around the position, the position's byte in brackets.
    pub context: String,
}

/// The `k` positions with the largest `‖∂loss/∂e_t‖`, largest first, and
/// each row's share of `Σ_t ‖∂loss/∂e_t‖²`.
pub fn dominant_positions<T: Real>(
    cfg: &Config,
    params: &Params<T>,
    batch: &Batch,
    origins: &[RowOrigin],
    k: usize,
) -> Result<(Vec<TokenGrad>, Vec<f64>), CpuError> {
    dominant_positions_with(cfg, params, batch, origins, k, None)
}

/// [`dominant_positions`] from a carried state (a step of `train --carry-state`).
pub fn dominant_positions_with<T: Real>(
    cfg: &Config,
    params: &Params<T>,
    batch: &Batch,
    origins: &[RowOrigin],
    k: usize,
    carry: Option<&crate::step::Carry<T>>,
) -> Result<(Vec<TokenGrad>, Vec<f64>), CpuError> {
    let f = crate::engine::reference::forward_with(cfg, params, batch, carry)?;
    let g = backward(cfg, params, batch, &f, 1.0, None);
    let (rows, d) = (batch.rows, cfg.d_embed);
    let mut all = Vec::new();
    let mut row_ss = vec![0.0f64; rows];
    for t in 0..batch.t {
        for (b, acc) in row_ss.iter_mut().enumerate() {
            if t >= batch.lens[b] {
                continue;
            }
            let at = (t * rows + b) * d;
            let ss: f64 = g.d_emb[at..at + d].iter().map(|x| x.f64() * x.f64()).sum();
            *acc += ss;
            all.push((ss.sqrt(), b, t, f.token_loss[t * rows + b].f64()));
        }
    }
    all.sort_by(|x, y| y.0.total_cmp(&x.0));
    let total: f64 = row_ss.iter().sum();
    let shares = row_ss.iter().map(|&s| if total > 0.0 { s / total } else { 0.0 }).collect();
    let top = all
        .into_iter()
        .take(k)
        .map(|(norm, b, t, token_loss)| {
            let row = batch.row(b);
            let o = origins.get(b);
            TokenGrad {
                row: b,
                pos: t,
                norm,
                token_loss,
                input: row[t],
                target: row.get(t + 1).copied(),
                document: o.map(|o| o.document),
                offset: o.map(|o| o.offset + t),
                context: context_around(row, t, 24),
            }
        })
        .collect();
    Ok((top, shares))
}

/// `row[pos − radius .. pos + radius]` as one line of text: printable ASCII
/// as it is, `\n`, `\t` and other bytes escaped, the byte at `pos` in brackets.
pub fn context_around(row: &[u8], pos: usize, radius: usize) -> String {
    let from = pos.saturating_sub(radius);
    let to = (pos + radius + 1).min(row.len());
    let mut s = String::new();
    for (i, &c) in row.iter().enumerate().take(to).skip(from) {
        if i == pos {
            s.push('[');
        }
        match c {
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
        if i == pos {
            s.push(']');
        }
    }
    s
}

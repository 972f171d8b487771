//! The state a batch row carries from one window of its document to the next
//! (truncated backpropagation through time, `docs/carry-state.md`): each GRU
//! layer's last hidden state, used as `h_{-1}` of the next window, and the top
//! layer's last `P ≤ W − 1` states, from which the next window's attention
//! recomputes the keys and values of the positions before its start.
//!
//! Both are constants of the step that reads them: no gradient flows into the
//! previous window. An absent state (`None` where a `&Carry` is asked for) is
//! the model of docs/model.md exactly: `h_{-1} = 0` and an empty buffer.

use std::collections::BTreeMap;
use std::path::Path;

use crate::checkpoint::{CheckpointError, Metadata, NamedTensor, Values, ValuesRef, save_named};
use crate::model::Config;
use crate::tensor::Real;

/// A batch's carried state.
#[derive(Clone, Debug, PartialEq)]
pub struct Carry<T> {
    pub rows: usize,
    pub hidden: usize,
    /// Per layer (bottom first), `h_{-1}` of each row: `[L][B, H]`.
    pub h0: Vec<Vec<T>>,
    /// The top layer's states of the `prefix_len` positions before the
    /// window, oldest first, time-major like every activation: `[P, B, H]`.
    pub prefix: Vec<T>,
    pub prefix_len: usize,
}

/// Why a carried state does not fit a model or a batch.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CarryError {
    #[error("the carried state has {got} layers; the model has {want}")]
    Layers { got: usize, want: usize },
    #[error("the carried state is for {got} rows of {got_h} units; the batch has {want} rows of {want_h}")]
    Shape { got: usize, got_h: usize, want: usize, want_h: usize },
    #[error("the carried prefix holds {got} positions; the window W = {window} allows at most {}", window - 1)]
    PrefixTooLong { got: usize, window: usize },
    #[error("the carried state's buffers have the wrong length ({what}: {got}, expected {want})")]
    Length { what: &'static str, got: usize, want: usize },
}

impl<T: Real> Carry<T> {
    /// A state of zeros with an empty prefix (the first window of a document).
    pub fn zeros(cfg: &Config, rows: usize) -> Self {
        let h = cfg.hidden;
        Carry { rows, hidden: h, h0: vec![vec![T::zero(); rows * h]; cfg.layers], prefix: Vec::new(), prefix_len: 0 }
    }

    /// True where the state is all zeros with an empty prefix: such a state
    /// changes nothing, and engines run today's step for it.
    pub fn is_empty(&self) -> bool {
        self.prefix_len == 0 && self.h0.iter().all(|l| l.iter().all(|&x| x == T::zero()))
    }

    /// Checks the state against the model and a batch of `rows` rows.
    pub fn check(&self, cfg: &Config, rows: usize) -> Result<(), CarryError> {
        if self.h0.len() != cfg.layers {
            return Err(CarryError::Layers { got: self.h0.len(), want: cfg.layers });
        }
        if self.rows != rows || self.hidden != cfg.hidden {
            return Err(CarryError::Shape { got: self.rows, got_h: self.hidden, want: rows, want_h: cfg.hidden });
        }
        if self.prefix_len >= cfg.window.max(1) {
            return Err(CarryError::PrefixTooLong { got: self.prefix_len, window: cfg.window });
        }
        let bh = rows * cfg.hidden;
        if let Some(l) = self.h0.iter().find(|l| l.len() != bh) {
            return Err(CarryError::Length { what: "h0", got: l.len(), want: bh });
        }
        if self.prefix.len() != self.prefix_len * bh {
            return Err(CarryError::Length { what: "prefix", got: self.prefix.len(), want: self.prefix_len * bh });
        }
        Ok(())
    }

    /// The same state with every value passed through `f` (a cast).
    pub fn map<U: Real>(&self, f: impl Fn(T) -> U) -> Carry<U> {
        Carry {
            rows: self.rows,
            hidden: self.hidden,
            h0: self.h0.iter().map(|l| l.iter().map(|&x| f(x)).collect()).collect(),
            prefix: self.prefix.iter().map(|&x| f(x)).collect(),
            prefix_len: self.prefix_len,
        }
    }
}

impl Carry<f32> {
    /// Writes the state as the safetensors file `path`: `h0_l{l}` `[B, H]` per
    /// layer and `prefix` `[P, B, H]`, with `meta` as the file's metadata (the
    /// format of `carry_state.safetensors` and of a capture's `carry.safetensors`).
    pub fn save(&self, path: &Path, meta: &Metadata) -> Result<(), CheckpointError> {
        let (b, h) = (self.rows, self.hidden);
        let names: Vec<String> = (0..self.h0.len()).map(|l| format!("h0_l{l}")).collect();
        let shape_h = [b, h];
        let shape_p = [self.prefix_len, b, h];
        let mut tensors: Vec<(&str, &[usize], ValuesRef<'_>)> =
            names.iter().zip(&self.h0).map(|(n, v)| (n.as_str(), &shape_h[..], ValuesRef::F32(v))).collect();
        tensors.push(("prefix", &shape_p[..], ValuesRef::F32(&self.prefix)));
        save_named(path, &tensors, meta)
    }

    /// The state held by the tensors of a file [`Carry::save`] wrote, checked
    /// against the model and a batch of `rows` rows; the error names the
    /// tensor at fault and the shape expected.
    pub fn from_named(tensors: &BTreeMap<String, NamedTensor>, cfg: &Config, rows: usize) -> Result<Self, String> {
        let take = |name: &str, want: &[usize]| -> Result<Vec<f32>, String> {
            let t = tensors.get(name).ok_or_else(|| format!("no tensor {name}"))?;
            let shape_ok =
                t.shape.len() == want.len() && t.shape.iter().zip(want).all(|(&g, &w)| w == usize::MAX || g == w);
            if !shape_ok {
                let show = |s: &[usize]| {
                    s.iter().map(|&d| if d == usize::MAX { "P".into() } else { d.to_string() }).collect::<Vec<_>>()
                };
                return Err(format!("{name} has shape {:?}, expected [{}]", t.shape, show(want).join(", ")));
            }
            match &t.values {
                Values::F32(v) => Ok(v.clone()),
                Values::F64(_) => Err(format!("{name} is f64, expected f32")),
            }
        };
        let h = cfg.hidden;
        let mut h0 = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            h0.push(take(&format!("h0_l{l}"), &[rows, h])?);
        }
        if let Some(extra) =
            tensors.keys().find(|k| k.starts_with("h0_l") && !(0..cfg.layers).any(|l| **k == format!("h0_l{l}")))
        {
            return Err(format!("{extra}: the model has {} layers", cfg.layers));
        }
        let prefix = take("prefix", &[usize::MAX, rows, h])?;
        let prefix_len = tensors.get("prefix").and_then(|t| t.shape.first().copied()).unwrap_or(0);
        let c = Carry { rows, hidden: h, h0, prefix, prefix_len };
        c.check(cfg, rows).map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// The f32 state cast to `T` (the CPU reference in f64 reads the engines' f32 state).
pub fn cast<T: Real>(c: &Carry<f32>) -> Carry<T> {
    c.map(|x| T::of(x as f64))
}

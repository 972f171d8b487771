//! Where every parameter lives in the engine's flat buffers (parameters,
//! gradients and the two AdamW moments share one layout, in canonical order).

use crate::model::{Config, Params, decays, param_specs};
use crate::tensor::Tensor;

#[derive(Clone, Debug)]
pub struct ParamEntry {
    pub name: String,
    pub shape: Vec<usize>,
    /// Offset of element 0, in f32 values.
    pub offset: usize,
    pub len: usize,
    /// AdamW's decoupled weight decay applies.
    pub decays: bool,
}

#[derive(Clone, Debug)]
pub struct ParamLayout {
    pub entries: Vec<ParamEntry>,
    pub total: usize,
}

impl ParamLayout {
    pub fn new(cfg: &Config) -> Self {
        let mut offset = 0;
        let entries = param_specs(cfg)
            .into_iter()
            .map(|(name, shape)| {
                let len = shape.iter().product();
                let e = ParamEntry { decays: decays(&name, &shape), name, shape, offset, len };
                offset += len;
                e
            })
            .collect();
        ParamLayout { entries, total: offset }
    }

    pub fn get(&self, name: &str) -> Option<&ParamEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Offset of a parameter the engine knows exists.
    pub fn offset(&self, name: &str) -> usize {
        self.get(name).unwrap_or_else(|| panic!("no parameter {name}")).offset
    }

    pub fn flatten(&self, p: &Params<f32>) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.total);
        for t in p.tensors() {
            out.extend_from_slice(&t.data);
        }
        debug_assert_eq!(out.len(), self.total);
        out
    }

    pub fn unflatten(&self, cfg: &Config, flat: &[f32]) -> Params<f32> {
        let mut it = self.entries.iter().map(|e| Tensor::from_vec(&e.shape, flat[e.offset..e.offset + e.len].to_vec()));
        Params::from_iter_canonical(cfg, &mut it)
    }
}

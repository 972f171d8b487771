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

    /// The ranges of the flat buffers where weight decay applies, adjacent
    /// decaying tensors merged.
    pub fn decay_runs(&self) -> Vec<std::ops::Range<usize>> {
        let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
        for e in self.entries.iter().filter(|e| e.decays) {
            match runs.last_mut() {
                Some(r) if r.end == e.offset => r.end = e.offset + e.len,
                _ => runs.push(e.offset..e.offset + e.len),
            }
        }
        runs
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The decay runs cover exactly the decaying tensors' elements.
    #[test]
    fn decay_runs_cover_the_decaying_tensors() {
        for cfg in [Config::tiny(), Config::small(), Config::bench()] {
            let l = ParamLayout::new(&cfg);
            let runs = l.decay_runs();
            let mut covered = vec![false; l.total];
            for r in &runs {
                covered[r.clone()].iter_mut().for_each(|c| *c = true);
            }
            for e in &l.entries {
                assert!(covered[e.offset..e.offset + e.len].iter().all(|&c| c == e.decays), "{}", e.name);
            }
            assert!(runs.windows(2).all(|w| w[0].end < w[1].start), "{runs:?}");
            assert!(l.entries.iter().any(|e| e.decays) && l.entries.iter().any(|e| !e.decays));
        }
    }
}

//! The parameter set of docs/model.md: names, shapes, initialisation and the
//! canonical order (the table's order) in which norms and files visit them.

use super::Config;
use crate::rng::Rng;
use crate::tensor::{Real, Tensor};

/// One GRU layer, PyTorch `nn.GRU` layout, gate rows ordered r, z, n.
#[derive(Clone, Debug, PartialEq)]
pub struct GruLayer<T> {
    pub w_ih: Tensor<T>, // [3H, in]
    pub w_hh: Tensor<T>, // [3H, H]
    pub b_ih: Tensor<T>, // [3H]
    pub b_hh: Tensor<T>, // [3H]
}

/// Every parameter of the model (also used for gradients and Adam moments).
#[derive(Clone, Debug, PartialEq)]
pub struct Params<T> {
    pub embed: Tensor<T>,      // [V, D]
    pub gru: Vec<GruLayer<T>>, // L layers
    pub q: Tensor<T>,          // [A, H]
    pub k: Tensor<T>,          // [A, H]
    pub v: Tensor<T>,          // [A, H]
    pub head_tok: Tensor<T>,   // [V, H]
    pub head_ctx: Tensor<T>,   // [V, A]
    pub head_bias: Tensor<T>,  // [V]
}

/// Name and shape of every parameter, in canonical order.
pub fn param_specs(cfg: &Config) -> Vec<(String, Vec<usize>)> {
    let (v, d, h, a) = (cfg.vocab, cfg.d_embed, cfg.hidden, cfg.attn_dim);
    let mut s = vec![("embed.weight".to_string(), vec![v, d])];
    for l in 0..cfg.layers {
        s.push((format!("gru.weight_ih_l{l}"), vec![3 * h, cfg.gru_in(l)]));
        s.push((format!("gru.weight_hh_l{l}"), vec![3 * h, h]));
        s.push((format!("gru.bias_ih_l{l}"), vec![3 * h]));
        s.push((format!("gru.bias_hh_l{l}"), vec![3 * h]));
    }
    s.push(("ctx.q.weight".into(), vec![a, h]));
    s.push(("ctx.k.weight".into(), vec![a, h]));
    s.push(("ctx.v.weight".into(), vec![a, h]));
    s.push(("head.tok.weight".into(), vec![v, h]));
    s.push(("head.ctx.weight".into(), vec![v, a]));
    s.push(("head.bias".into(), vec![v]));
    s
}

/// AdamW weight decay applies to every 2-D parameter except the embedding.
pub fn decays(name: &str, shape: &[usize]) -> bool {
    shape.len() == 2 && name != "embed.weight"
}

impl<T: Real> Params<T> {
    pub fn zeros(cfg: &Config) -> Self {
        let mut it = param_specs(cfg).into_iter().map(|(_, s)| Tensor::zeros(&s));
        Self::from_iter_canonical(cfg, &mut it)
    }

    /// PyTorch's default initialisation, drawn from a seeded generator:
    /// embedding N(0, 1); GRU U(±1/√H); linear weights U(±1/√fan_in);
    /// output bias U(±1/√(H+A)).
    pub fn init(cfg: &Config, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut p = Self::zeros(cfg);
        let uni = |t: &mut Tensor<T>, bound: f64, rng: &mut Rng| {
            t.data.iter_mut().for_each(|x| *x = T::of(rng.range(-bound, bound)))
        };
        p.embed.data.iter_mut().for_each(|x| *x = T::of(rng.normal()));
        let gb = 1.0 / (cfg.hidden as f64).sqrt();
        for layer in &mut p.gru {
            uni(&mut layer.w_ih, gb, &mut rng);
            uni(&mut layer.w_hh, gb, &mut rng);
            uni(&mut layer.b_ih, gb, &mut rng);
            uni(&mut layer.b_hh, gb, &mut rng);
        }
        let hb = 1.0 / (cfg.hidden as f64).sqrt();
        uni(&mut p.q, hb, &mut rng);
        uni(&mut p.k, hb, &mut rng);
        uni(&mut p.v, hb, &mut rng);
        uni(&mut p.head_tok, hb, &mut rng);
        uni(&mut p.head_ctx, 1.0 / (cfg.attn_dim as f64).sqrt(), &mut rng);
        uni(&mut p.head_bias, 1.0 / ((cfg.hidden + cfg.attn_dim) as f64).sqrt(), &mut rng);
        p
    }

    /// Builds from tensors given in canonical order (shapes are not checked here).
    pub fn from_iter_canonical(cfg: &Config, it: &mut dyn Iterator<Item = Tensor<T>>) -> Self {
        let mut next = || it.next().expect("one tensor per parameter");
        let embed = next();
        let gru =
            (0..cfg.layers).map(|_| GruLayer { w_ih: next(), w_hh: next(), b_ih: next(), b_hh: next() }).collect();
        Params { embed, gru, q: next(), k: next(), v: next(), head_tok: next(), head_ctx: next(), head_bias: next() }
    }

    /// Tensors in canonical order.
    pub fn tensors(&self) -> Vec<&Tensor<T>> {
        let mut v = vec![&self.embed];
        for l in &self.gru {
            v.extend([&l.w_ih, &l.w_hh, &l.b_ih, &l.b_hh]);
        }
        v.extend([&self.q, &self.k, &self.v, &self.head_tok, &self.head_ctx, &self.head_bias]);
        v
    }

    pub fn tensors_mut(&mut self) -> Vec<&mut Tensor<T>> {
        let mut v = vec![&mut self.embed];
        for l in &mut self.gru {
            v.extend([&mut l.w_ih, &mut l.w_hh, &mut l.b_ih, &mut l.b_hh]);
        }
        v.extend([&mut self.q, &mut self.k, &mut self.v, &mut self.head_tok, &mut self.head_ctx, &mut self.head_bias]);
        v
    }

    /// (name, tensor) in canonical order.
    pub fn named(&self, cfg: &Config) -> Vec<(String, &Tensor<T>)> {
        param_specs(cfg).into_iter().map(|(n, _)| n).zip(self.tensors()).collect()
    }

    pub fn cast<U: Real>(&self) -> Params<U> {
        Params {
            embed: self.embed.cast(),
            gru: self
                .gru
                .iter()
                .map(|l| GruLayer {
                    w_ih: l.w_ih.cast(),
                    w_hh: l.w_hh.cast(),
                    b_ih: l.b_ih.cast(),
                    b_hh: l.b_hh.cast(),
                })
                .collect(),
            q: self.q.cast(),
            k: self.k.cast(),
            v: self.v.cast(),
            head_tok: self.head_tok.cast(),
            head_ctx: self.head_ctx.cast(),
            head_bias: self.head_bias.cast(),
        }
    }

    pub fn num_elements(&self) -> usize {
        self.tensors().iter().map(|t| t.len()).sum()
    }

    /// Global L2 norm, accumulated in float64 in canonical order.
    pub fn norm_f64(&self) -> f64 {
        self.tensors().iter().map(|t| t.sum_sq_f64()).sum::<f64>().sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_match_tensors() {
        let cfg = Config::small();
        let p = Params::<f32>::init(&cfg, 1);
        let specs = param_specs(&cfg);
        assert_eq!(specs.len(), 1 + 4 * cfg.layers + 6);
        for ((name, shape), (n2, t)) in specs.iter().zip(p.named(&cfg)) {
            assert_eq!(name, &n2);
            assert_eq!(shape, &t.shape, "{name}");
        }
        assert_eq!(specs[5].0, "gru.weight_ih_l1");
        assert_eq!(specs[5].1, vec![3 * 128, 128]);
    }

    #[test]
    fn init_is_deterministic_and_seeded() {
        let cfg = Config::tiny();
        assert_eq!(Params::<f32>::init(&cfg, 3), Params::<f32>::init(&cfg, 3));
        assert_ne!(Params::<f32>::init(&cfg, 3), Params::<f32>::init(&cfg, 4));
    }

    #[test]
    fn decay_rule() {
        assert!(!decays("embed.weight", &[256, 64]));
        assert!(decays("gru.weight_hh_l0", &[3, 3]));
        assert!(!decays("gru.bias_hh_l0", &[3]));
        assert!(decays("head.ctx.weight", &[256, 64]));
    }
}

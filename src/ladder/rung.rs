//! The rungs of docs/model.md as one enum: each rung's id, label, stage, the
//! tensors it compares and reads, its CPU profile phases, its base tolerance
//! and the product depth of its tensors. Adding a rung means adding a variant
//! here; every table below is an exhaustive match, so the compiler lists what
//! the new rung must say.

use serde::{Deserialize, Serialize};

use super::{LadderError, Mode};
use crate::model::Config;
use crate::vk::engine::Stage;

/// One rung of the ladder; it serialises as its id string (`"gemm"`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rung {
    Gemm,
    EmbedFwd,
    GruFwd,
    AttnFwd,
    HeadFwd,
    Loss,
    HeadBwd,
    AttnBwd,
    GruBwd,
    EmbedBwd,
    Optim,
}

impl Rung {
    /// Every rung, in ladder order.
    pub const ALL: [Rung; 11] = [
        Rung::Gemm,
        Rung::EmbedFwd,
        Rung::GruFwd,
        Rung::AttnFwd,
        Rung::HeadFwd,
        Rung::Loss,
        Rung::HeadBwd,
        Rung::AttnBwd,
        Rung::GruBwd,
        Rung::EmbedBwd,
        Rung::Optim,
    ];

    /// Rungs 2–11: the stages of the training step, which run through a
    /// [`super::ModelLadder`].
    pub const MODEL: &[Rung] = Rung::ALL.split_first().expect("the ladder has rungs").1;

    /// The id used on the command line, in JSON and in sessions.
    pub const fn id(self) -> &'static str {
        match self {
            Rung::Gemm => "gemm",
            Rung::EmbedFwd => "embed_fwd",
            Rung::GruFwd => "gru_fwd",
            Rung::AttnFwd => "attn_fwd",
            Rung::HeadFwd => "head_fwd",
            Rung::Loss => "loss",
            Rung::HeadBwd => "head_bwd",
            Rung::AttnBwd => "attn_bwd",
            Rung::GruBwd => "gru_bwd",
            Rung::EmbedBwd => "embed_bwd",
            Rung::Optim => "optim",
        }
    }

    /// What the rung checks, in words.
    pub fn label(self) -> &'static str {
        match self {
            Rung::Gemm => "matrix products",
            Rung::EmbedFwd => "embedding forward",
            Rung::GruFwd => "GRU forward",
            Rung::AttnFwd => "attention forward",
            Rung::HeadFwd => "output head forward",
            Rung::Loss => "loss and its gradient",
            Rung::HeadBwd => "output head backward",
            Rung::AttnBwd => "attention backward",
            Rung::GruBwd => "GRU backward",
            Rung::EmbedBwd => "embedding backward",
            Rung::Optim => "optimizer step",
        }
    }

    /// The rung an id names; the error lists the rungs.
    pub fn parse(id: &str) -> Result<Rung, LadderError> {
        Rung::ALL.into_iter().find(|r| r.id() == id).ok_or_else(|| LadderError::Unknown(id.to_string()))
    }

    /// Whether this build runs the rung (every rung, today).
    pub fn is_implemented(self) -> bool {
        match self {
            Rung::Gemm
            | Rung::EmbedFwd
            | Rung::GruFwd
            | Rung::AttnFwd
            | Rung::HeadFwd
            | Rung::Loss
            | Rung::HeadBwd
            | Rung::AttnBwd
            | Rung::GruBwd
            | Rung::EmbedBwd
            | Rung::Optim => true,
        }
    }

    /// The engine stage a model rung runs (`None` for `gemm`, which runs
    /// the products alone).
    pub fn stage(self) -> Option<Stage> {
        Some(match self {
            Rung::Gemm => return None,
            Rung::EmbedFwd => Stage::EmbedFwd,
            Rung::GruFwd => Stage::GruFwd,
            Rung::AttnFwd => Stage::AttnFwd,
            Rung::HeadFwd => Stage::HeadFwd,
            Rung::Loss => Stage::Loss,
            Rung::HeadBwd => Stage::HeadBwd,
            Rung::AttnBwd => Stage::AttnBwd,
            Rung::GruBwd => Stage::GruBwd,
            Rung::EmbedBwd => Stage::EmbedBwd,
            Rung::Optim => Stage::Optim,
        })
    }

    /// The trace tensors the rung compares (none for `gemm`, whose cases are
    /// products, see `gemm.rs`).
    pub fn outputs(self, cfg: &Config) -> Vec<String> {
        let layers = |fields: &[&str]| -> Vec<String> {
            (0..cfg.layers).flat_map(|l| fields.iter().map(move |f| format!("gru.l{l}.{f}"))).collect()
        };
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Rung::Gemm => Vec::new(),
            Rung::EmbedFwd => v(&["embed.out"]),
            Rung::GruFwd => layers(&["gi", "gh", "r", "z", "n", "h"]),
            Rung::AttnFwd => v(&["ctx.q", "ctx.k", "ctx.v", "ctx.attn", "ctx.c"]),
            Rung::HeadFwd => v(&["head.logits"]),
            Rung::Loss => v(&["loss.value", "loss.token", "loss.dlogits"]),
            Rung::HeadBwd => v(&[
                "grad.head.tok.weight",
                "grad.head.ctx.weight",
                "grad.head.bias",
                "head.d_s",
                "head.d_c",
                "ctx.token_norm",
            ]),
            Rung::AttnBwd => v(&[
                "ctx.d_q",
                "ctx.d_k",
                "ctx.d_v",
                "grad.ctx.q.weight",
                "grad.ctx.k.weight",
                "grad.ctx.v.weight",
                "ctx.d_s",
            ]),
            Rung::GruBwd => {
                let mut out = layers(&["d_h", "d_gi", "d_gh", "d_in"]);
                for l in 0..cfg.layers {
                    for p in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                        out.push(format!("grad.gru.{p}_l{l}"));
                    }
                }
                out
            }
            Rung::EmbedBwd => v(&["grad.embed.weight"]),
            Rung::Optim => {
                let mut out = vec!["grad_norm".to_string(), "post_clip_norm".to_string()];
                for (name, _) in crate::model::param_specs(cfg) {
                    for prefix in ["param.", "adam.m.", "adam.v."] {
                        out.push(format!("{prefix}{name}"));
                    }
                }
                out
            }
        }
    }

    /// The tensors the rung's stage reads that an earlier stage wrote
    /// (uploaded from the CPU in isolated mode). The `optim` rung's
    /// gradients are uploaded apart, scaled (see `ModelLadder::run`).
    pub fn inputs(self, cfg: &Config) -> Vec<String> {
        let top = format!("gru.l{}.h", cfg.layers - 1);
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Rung::Gemm | Rung::EmbedFwd | Rung::Optim => Vec::new(),
            Rung::GruFwd => v(&["embed.out"]),
            Rung::AttnFwd => vec![top],
            Rung::HeadFwd => vec![top, "ctx.c".into()],
            Rung::Loss => v(&["head.logits"]),
            Rung::HeadBwd => vec![top, "ctx.c".into(), "loss.dlogits".into()],
            Rung::AttnBwd => {
                vec![top, "ctx.q".into(), "ctx.k".into(), "ctx.v".into(), "ctx.attn".into(), "head.d_c".into()]
            }
            Rung::GruBwd => {
                let mut out = v(&["embed.out", "head.d_s", "ctx.d_s"]);
                for l in 0..cfg.layers {
                    for f in ["gh", "r", "z", "n", "h"] {
                        out.push(format!("gru.l{l}.{f}"));
                    }
                }
                out
            }
            Rung::EmbedBwd => v(&["embed.d_out"]),
        }
    }

    /// The CPU profile phases of the rung (`cpu::profile` span names).
    pub fn cpu_phases(self) -> &'static [&'static str] {
        match self {
            Rung::Gemm => &[],
            Rung::EmbedFwd => &["embed_fwd"],
            Rung::GruFwd => &["gru_fwd_input_gemm", "gru_fwd_recurrence"],
            Rung::AttnFwd => &["qkv_fwd", "attn_fwd"],
            Rung::HeadFwd => &["head_fwd"],
            Rung::Loss => &["loss_fwd", "loss_bwd"],
            Rung::HeadBwd => &["head_bwd"],
            Rung::AttnBwd => &["attn_bwd", "qkv_bwd"],
            Rung::GruBwd => &["gru_bwd_recurrence", "gru_bwd_weight_gemm"],
            Rung::EmbedBwd => &["embed_bwd"],
            Rung::Optim => &["optimizer"],
        }
    }

    /// The relative L2 tolerance of a tensor of the rung against the f32 CPU
    /// engine, in f32.
    ///
    /// Both engines compute in f32 with different summation orders, so they
    /// differ by rounding: for a sum of `k` terms, about sqrt(k)·2^-24
    /// relative, a few 1e-7 for the model's widths (measured: 1e-7 to 4e-7 on
    /// lavapipe and the H200). The forward rungs allow 1e-5, about 25× that;
    /// the GRU recurrence 2e-5, since its rounding differences carry from step
    /// to step; `embed_fwd` is a copy and must be exact. The backward rungs
    /// allow 1e-4, the contract of `grads --engine gpu` (gradients sum over
    /// every position, and their inputs already carry the forward's
    /// differences in chained mode). A wrong index, gate order, window edge or
    /// missing term gives errors of order 1e-2 to 1. `gemm` judges each
    /// product by its own bound (`gemm.rs`); 1e-4 is only what this table
    /// answers for it.
    pub fn tolerance(self, tensor: &str) -> f64 {
        match self {
            Rung::EmbedFwd => 0.0,
            Rung::GruFwd => 2e-5,
            Rung::AttnFwd | Rung::HeadFwd | Rung::Loss => 1e-5,
            Rung::Optim if tensor.starts_with("param.") || tensor.ends_with("_norm") => 1e-5,
            Rung::Optim | Rung::Gemm | Rung::HeadBwd | Rung::AttnBwd | Rung::GruBwd | Rung::EmbedBwd => 1e-4,
        }
    }

    /// How many matrix products lie on the longest path to `tensor` of the
    /// rung: from the rung's CPU inputs in isolated mode, from the batch in
    /// chained mode. In the mixed step each adds its inputs' rounding (0
    /// means the tensor is computed in f32 only, as in the f32 step).
    pub fn product_depth(self, cfg: &Config, mode: Mode, tensor: &str) -> usize {
        let layers = cfg.layers;
        let chained = mode == Mode::Chained;
        // The layer index in `gru.l{l}.…` or `…_l{l}`.
        let layer = |t: &str| -> usize {
            let digits = |s: &str| s.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok();
            t.strip_prefix("gru.l").and_then(digits).or_else(|| t.rsplit("_l").next().and_then(digits)).unwrap_or(0)
        };
        // The backward of layer l starts below the top at depth `base + (L-1-l)`
        // (d_h, d_gi, d_gh, the biases' gradients), one more for its products.
        let gru_bwd = |t: &str, base: usize| -> usize {
            let below = layers - 1 - layer(t).min(layers - 1);
            let product = t.ends_with(".d_in") || t.contains(".weight_");
            base + below + product as usize
        };
        let param_grad = |name: &str| -> usize {
            match name {
                "embed.weight" => 2 * layers + 4,
                n if n.starts_with("gru.") => gru_bwd(n, layers + 4),
                n if n.starts_with("ctx.") => layers + 4,
                "head.bias" => layers + 2,
                _ => layers + 3,
            }
        };
        // In chained mode a stage adds its own products to those of the
        // stages before it; in isolated mode only its own count.
        let after = |before: usize, own: usize| if chained { before + own } else { own };
        match self {
            Rung::Gemm | Rung::EmbedFwd => 0,
            Rung::GruFwd => layer(tensor) + 1,
            Rung::AttnFwd => after(layers, 1),
            Rung::HeadFwd => after(layers + 1, 1),
            Rung::Loss => after(layers + 2, 0),
            Rung::HeadBwd => after(layers + 2, !matches!(tensor, "grad.head.bias" | "ctx.token_norm") as usize),
            Rung::AttnBwd => after(layers + 3, !matches!(tensor, "ctx.d_q" | "ctx.d_k" | "ctx.d_v") as usize),
            Rung::GruBwd => gru_bwd(tensor, if chained { layers + 4 } else { 0 }),
            Rung::EmbedBwd => after(2 * layers + 4, 0),
            Rung::Optim => {
                let name = ["param.", "adam.m.", "adam.v."].iter().find_map(|p| tensor.strip_prefix(p));
                after(name.map_or(2 * layers + 4, param_grad), 0)
            }
        }
    }
}

impl std::fmt::Display for Rung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that a width in the format (the CLI's table) applies.
        f.pad(self.id())
    }
}

impl std::str::FromStr for Rung {
    type Err = LadderError;

    fn from_str(s: &str) -> Result<Rung, LadderError> {
        Rung::parse(s)
    }
}

impl Serialize for Rung {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for Rung {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rung, D::Error> {
        let id = String::deserialize(d)?;
        Rung::parse(&id).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_back_and_serialise_as_strings() {
        for r in Rung::ALL {
            assert_eq!(Rung::parse(r.id()).unwrap(), r);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{}\"", r.id()));
            assert_eq!(ron::from_str::<Rung>(&ron::to_string(&r).unwrap()).unwrap(), r);
        }
        assert_eq!(&Rung::ALL[1..], Rung::MODEL);
        assert!(Rung::ALL.iter().all(|r| r.stage().is_some() == (*r != Rung::Gemm)));
        let e = Rung::parse("nope").unwrap_err().to_string();
        assert!(e.contains("unknown rung \"nope\"") && e.contains("embed_fwd"), "{e}");
    }

    /// A rung formats as its id, widths included (the CLI's table pads it).
    #[test]
    fn display_is_the_padded_id() {
        for r in Rung::ALL {
            assert_eq!(format!("{r}"), r.id());
            assert_eq!(format!("{r:<10}|"), format!("{:<10}|", r.id()));
        }
    }

    /// The depths as the chained step counts them: a wrong arm shows here.
    #[test]
    fn product_depths() {
        let cfg = Config::small();
        let l = cfg.layers;
        let d = |r: Rung, m: Mode, t: &str| r.product_depth(&cfg, m, t);
        assert_eq!(d(Rung::Loss, Mode::Chained, "loss.value"), l + 2);
        assert_eq!(d(Rung::Loss, Mode::Isolated, "loss.value"), 0);
        assert_eq!(d(Rung::HeadBwd, Mode::Chained, "head.d_s"), l + 3);
        assert_eq!(d(Rung::HeadBwd, Mode::Isolated, "grad.head.bias"), 0);
        assert_eq!(d(Rung::AttnBwd, Mode::Chained, "ctx.d_q"), l + 3);
        assert_eq!(d(Rung::AttnFwd, Mode::Chained, "ctx.q"), l + 1);
        assert_eq!(d(Rung::HeadFwd, Mode::Chained, "head.logits"), l + 2);
        assert_eq!(d(Rung::EmbedBwd, Mode::Chained, "grad.embed.weight"), 2 * l + 4);
        assert_eq!(d(Rung::Optim, Mode::Chained, "param.head.bias"), l + 2);
        assert_eq!(d(Rung::Optim, Mode::Chained, "grad_norm"), 2 * l + 4);
        assert_eq!(d(Rung::Optim, Mode::Isolated, "param.head.bias"), 0);
        assert_eq!(d(Rung::GruFwd, Mode::Isolated, "gru.l1.h"), 2);
    }
}

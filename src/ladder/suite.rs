//! The ladder's suites. `quick` is one run on the shapes asked for. `full`
//! adds the runs that reach the code paths and states one run leaves out,
//! each chosen from the kernels' own tiling and chunking constants so that
//! it follows the code when a tile changes:
//! - `tiny`: every dimension tiny and odd-ish (the kernels' tails);
//! - `ragged`: full 128×128 GEMM tiles with a ragged K, an odd H whose 3H
//!   leaves a tail tile, heads wider than one 64-wide block, a window past
//!   one 64-key chunk;
//! - `single`: B = 1 and T = 1;
//! - `chunked`: one row longer than a chunk of both recurrences, so that each
//!   resumes from the state the chunk before left;
//! - `scaled`: a loss scale of 2^8 in the backward, so that unscaling counts;
//! - `clipped`: a clip far under the gradient norm, so that clipping engages
//!   and the clip factor and the post-clip step are compared, and no decay;
//! - `guarded`: the per-token guard on with a cap that engages.

use crate::model::Config;
use crate::vk::engine::{ATTN_WIDE_BLOCK, bwd_chunk, fwd_chunk};
use crate::vk::gemm::{GEMM_BIG_TILE, GEMM_TILE_K};

/// Which runs `ladder --suite` makes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// One run: the shapes and state asked for.
    #[default]
    Quick,
    /// That run and up to seven more (see `docs/mutation.md`).
    Full,
}

/// One run of a suite: what it changes from the run asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct SuiteRun {
    pub name: &'static str,
    /// A model and batch shape of its own (seeded init), or the one asked for.
    pub model: Option<Config>,
    pub loss_scale: Option<f64>,
    /// The clip and the weight decay (`clipped`).
    pub clip: Option<(f64, f64)>,
    /// The per-token guard's cap (`guarded`).
    pub token_cap: Option<f64>,
}

impl SuiteRun {
    fn asked(name: &'static str) -> SuiteRun {
        SuiteRun { name, model: None, loss_scale: None, clip: None, token_cap: None }
    }

    fn shaped(name: &'static str, cfg: Config) -> SuiteRun {
        SuiteRun { model: Some(cfg), ..SuiteRun::asked(name) }
    }

    /// One line saying what the run is: its model, and its batch where it
    /// has its own (else the batch asked for, which the run prints).
    pub fn describe(&self, base: &Config) -> String {
        let c = self.model.as_ref().unwrap_or(base);
        let head = c.attn_dim / c.heads.max(1);
        let (d, h, l, a, w) = (c.d_embed, c.hidden, c.layers, c.heads, c.window);
        let mut s = format!("D={d} H={h} L={l} A={a}×{head} W={w}");
        if self.model.is_some() {
            s += &format!(" B={} T={}", c.batch, c.seq_len);
        } else {
            s += ", the batch asked for";
        }
        if let Some(ls) = self.loss_scale {
            s += &format!(", loss scale {ls}");
        }
        if let Some((clip, decay)) = self.clip {
            s += &format!(", clip {clip}, decay {decay}");
        }
        if let Some(cap) = self.token_cap {
            s += &format!(", token cap {cap}");
        }
        s
    }
}

/// The runs of `suite` on the run asked for, whose model is `base`.
pub fn runs(suite: Suite, base: &Config) -> Vec<SuiteRun> {
    let mut out = vec![SuiteRun::asked("asked")];
    if suite == Suite::Quick {
        return out;
    }
    let (tile_m, tile_n, _) = GEMM_BIG_TILE;
    let block = ATTN_WIDE_BLOCK as usize;
    // H odd, with 3H two full N tiles and a tail; D two K steps and a ragged
    // third; heads one block and a tail wide; B·T two full M tiles and a tail.
    let hidden = ((2 * tile_n) / 3 + 1) | 1;
    let heads = 2;
    let ragged = Config {
        vocab: 256,
        d_embed: 2 * GEMM_TILE_K + 3,
        hidden,
        layers: 2,
        attn_dim: heads * (block + 8),
        heads,
        window: block + 3,
        batch: 3,
        seq_len: (2 * tile_m) / 3 + 5,
    };
    let single = Config { batch: 1, seq_len: 1, ..Config::tiny() };
    let long = fwd_chunk(base.hidden, false).max(bwd_chunk(base.hidden)) + 7;
    let chunked = Config { batch: 1, seq_len: long, ..base.clone() };
    // `tiny` is left out where it is the run asked for.
    let tiny = Config::tiny();
    let same_model = Config { batch: tiny.batch, seq_len: tiny.seq_len, ..base.clone() } == tiny;
    if !same_model {
        out.push(SuiteRun::shaped("tiny", tiny));
    }
    out.extend([
        SuiteRun::shaped("ragged", ragged),
        SuiteRun::shaped("single", single),
        SuiteRun::shaped("chunked", chunked),
        SuiteRun { loss_scale: Some(256.0), ..SuiteRun::asked("scaled") },
        SuiteRun { clip: Some((0.01, 0.0)), ..SuiteRun::asked("clipped") },
        SuiteRun { token_cap: Some(1e-4), ..SuiteRun::asked("guarded") },
    ]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_suite_reaches_the_tails_and_chunks() {
        let base = Config::small();
        assert_eq!(runs(Suite::Quick, &base).len(), 1);
        assert_eq!(runs(Suite::Full, &Config::tiny()).len(), 7);
        let runs = runs(Suite::Full, &base);
        assert_eq!(runs.len(), 8);
        let get = |n: &str| runs.iter().find(|r| r.name == n).unwrap().model.clone().unwrap();
        let r = get("ragged");
        let (tm, tn, _) = GEMM_BIG_TILE;
        assert!(r.d_embed % GEMM_TILE_K != 0 && r.hidden % 2 == 1);
        assert!(3 * r.hidden > tn && (3 * r.hidden) % tn != 0, "3H = {}", 3 * r.hidden);
        assert!(r.batch * r.seq_len > tm && (r.batch * r.seq_len) % tm != 0);
        assert!(r.attn_dim / r.heads > ATTN_WIDE_BLOCK as usize && r.window > ATTN_WIDE_BLOCK as usize);
        assert!(r.seq_len >= r.window);
        let c = get("chunked");
        assert!(c.seq_len > fwd_chunk(c.hidden, false) && c.seq_len > bwd_chunk(c.hidden));
        assert_eq!((get("single").batch, get("single").seq_len), (1, 1));
    }
}

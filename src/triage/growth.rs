//! Error growth along the sequence: one long row (B = 1) through the GPU
//! engine's forward and backward and through the CPU reference in f32 and
//! in f64, and per position and series (each GRU layer's state, the
//! attention output, the per-position gradients) how far the GPU is from
//! the f32 CPU against what rounding explains there.
//!
//! Per position `t` and series, the *difference* is
//! `‖gpu_t − cpu32_t‖ / ‖cpu64_t‖` and the *reference*
//! `‖cpu32_t − cpu64_t‖ / ‖cpu64_t‖` (over the feature dimension). The
//! [`Envelope`] (derived in docs/growth.md) bounds the difference by
//! `K × max(ref*_t, floor)`, where `ref*` is the reference's running
//! maximum over `±window` positions; in the mixed step the reference is
//! also measured on the CPU with every product's operands rounded where the
//! GPU's kernels round them (`growth_run::kernel_rounding`), and the larger
//! one counts. The runs are in `growth_run.rs` ([`run`]).

use serde::{Deserialize, Serialize};

use super::drift::F32_ROUNDOFF;
use crate::capture::float;
use crate::model::Config;
use crate::step::Precision;

pub use super::growth_run::{GrowthPlan, check_len, kernel_rounding, plant, rounded_weights, run};

/// The version of the report this code writes.
pub const GROWTH_FORMAT: u32 = 1;
/// How many times the smoothed f32 reference the GPU's difference may be:
/// the GPU rounds as often as the f32 CPU, in other orders (tiled products,
/// tree reductions, its own `exp` and `tanh`), so its error is of the same
/// order and independent of the CPU's.
pub const K: f64 = 16.0;
/// The floor of the reference in f32 unit roundoffs: one ulp (2^-23) of
/// relative error per position, what storing the vector in f32 alone can do.
pub const FLOOR_ROUNDOFFS: f64 = 2.0;
/// The half-width of the running maximum that smooths the reference: the
/// reference is one realisation of rounding, small at some positions by
/// chance; the GPU's realisation is independent, so its bound at `t` is the
/// largest reference nearby.
pub const WINDOW: usize = 8;

/// Which way a series' errors travel: a forward series (states, attention
/// output) carries an error from a position to the later ones; a backward
/// series (gradients, computed from the end) to the earlier ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Forward,
    Backward,
}

/// The compared series of `cfg`, forward ones first: `gru.l{l}.h`, `ctx.c`,
/// then `gru.l{l}.d_h` (∂loss/∂h_t of each layer) and `embed.d_out`
/// (∂loss/∂e_t).
pub fn series_names(cfg: &Config) -> Vec<(String, Direction)> {
    let mut out: Vec<(String, Direction)> =
        (0..cfg.layers).map(|l| (format!("gru.l{l}.h"), Direction::Forward)).collect();
    out.push(("ctx.c".into(), Direction::Forward));
    out.extend((0..cfg.layers).map(|l| (format!("gru.l{l}.d_h"), Direction::Backward)));
    out.push(("embed.d_out".into(), Direction::Backward));
    out
}

/// What rounding explains at a position: `k × max(ref*, floor)`, where
/// `ref*` is the running maximum of the f32 reference and, in the mixed
/// step, of the rounded-operand reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub k: f64,
    /// The precision the mixed step's reference rounds the products'
    /// weights to (f32: no such reference; the f32 one alone).
    pub operands: Precision,
    /// [`FLOOR_ROUNDOFFS`] × the f32 unit roundoff.
    pub floor: f64,
    /// The half-width of the reference's running maximum.
    pub window: usize,
}

impl Envelope {
    pub fn new(p: Precision) -> Envelope {
        Envelope { k: K, operands: p, floor: FLOOR_ROUNDOFFS * F32_ROUNDOFF, window: WINDOW }
    }

    /// The envelope along a series of per-position references (the f32
    /// one, and in the mixed step the rounded-operand one).
    pub fn along(&self, reference: &[f64], rounded: Option<&[f64]>) -> Vec<f64> {
        let r32 = running_max(reference, self.window);
        let r16 = rounded.map(|r| running_max(r, self.window));
        (0..r32.len())
            .map(|t| {
                let r = r16.as_ref().map_or(r32[t], |r16| max_nan(r16[t], r32[t]));
                if r.is_nan() { f64::NAN } else { self.k * r.max(self.floor) }
            })
            .collect()
    }
}

/// The larger of two values, NaN if either is.
fn max_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

/// The maximum of `xs` over `[t − w, t + w]` at each `t` (a NaN counts as
/// the largest value).
pub fn running_max(xs: &[f64], w: usize) -> Vec<f64> {
    let n = xs.len();
    (0..n)
        .map(|t| {
            let win = &xs[t.saturating_sub(w)..(t + w + 1).min(n)];
            win.iter().copied().fold(f64::NEG_INFINITY, max_nan)
        })
        .collect()
}

/// `‖a_t − b_t‖ / ‖den_t‖` at every position `t` of time-major vectors of
/// `width` features each (float64 sums): 0 where `a_t = b_t`, ∞ where the
/// denominator is zero and they differ, NaN where a value is not finite.
pub fn per_position<A: crate::tensor::Real, B: crate::tensor::Real>(
    a: &[A],
    b: &[B],
    den: &[f64],
    width: usize,
) -> Vec<f64> {
    let w = width.max(1);
    a.chunks(w)
        .zip(b.chunks(w))
        .zip(den.chunks(w))
        .map(|((a, b), c)| {
            let d: f64 = a.iter().zip(b).map(|(x, y)| (x.f64() - y.f64()).powi(2)).sum();
            let n: f64 = c.iter().map(|x| x * x).sum();
            if d.is_nan() || n.is_nan() {
                f64::NAN
            } else if d == 0.0 {
                0.0
            } else if n == 0.0 {
                f64::INFINITY
            } else {
                (d / n).sqrt()
            }
        })
        .collect()
}

/// One series along the row: per position the difference, the reference
/// and the envelope (float64 in memory, written as float32 in the JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub direction: Direction,
    /// Features per position.
    pub width: usize,
    #[serde(with = "f32_list")]
    pub difference: Vec<f64>,
    /// The f32 CPU's own error: `‖cpu32_t − cpu64_t‖ / ‖cpu64_t‖`.
    #[serde(with = "f32_list")]
    pub reference: Vec<f64>,
    /// The mixed step only: the same for the f32 CPU with the products'
    /// operands rounded as the GPU's kernels round them (empty otherwise).
    #[serde(with = "f32_list", default)]
    pub reference_rounded: Vec<f64>,
    #[serde(with = "f32_list")]
    pub envelope: Vec<f64>,
    /// The first position whose difference is outside the envelope.
    pub first_outside: Option<usize>,
    /// How many positions are outside.
    pub n_outside: usize,
    /// The position of the largest difference over envelope, and that ratio.
    pub worst: usize,
    #[serde(with = "float")]
    pub worst_ratio: f64,
}

impl Series {
    /// The series of `name` from its sides' values (time-major, `width`
    /// features per position; `rounded`: the CPU f32 run with rounded
    /// weights, in the mixed step) under `env`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        direction: Direction,
        width: usize,
        gpu: &[f32],
        cpu32: &[f32],
        cpu64: &[f64],
        rounded: Option<&[f32]>,
        env: &Envelope,
    ) -> Series {
        let difference = per_position(gpu, cpu32, cpu64, width);
        let reference = per_position(cpu32, cpu64, cpu64, width);
        let reference_rounded = rounded.map_or_else(Vec::new, |r| per_position(r, cpu64, cpu64, width));
        let envelope = env.along(&reference, rounded.map(|_| reference_rounded.as_slice()));
        let outside: Vec<usize> = (0..difference.len()).filter(|&t| is_outside(difference[t], envelope[t])).collect();
        let ratios: Vec<f64> = difference.iter().zip(&envelope).map(|(&d, &e)| ratio(d, e)).collect();
        let worst = (0..ratios.len()).max_by(|&a, &b| ratios[a].total_cmp(&ratios[b])).unwrap_or(0);
        Series {
            name: name.to_string(),
            direction,
            width,
            first_outside: outside.first().copied(),
            n_outside: outside.len(),
            worst,
            worst_ratio: ratios.get(worst).copied().unwrap_or(0.0),
            difference,
            reference,
            reference_rounded,
            envelope,
        }
    }

    pub fn len(&self) -> usize {
        self.difference.len()
    }

    pub fn is_empty(&self) -> bool {
        self.difference.is_empty()
    }
}

/// Whether a difference is outside its envelope: above it, or not
/// comparable with it (NaN).
pub fn is_outside(difference: f64, envelope: f64) -> bool {
    difference.partial_cmp(&envelope).is_none_or(|o| o == std::cmp::Ordering::Greater)
}

/// Difference over envelope (∞ where either is not finite, the difference
/// not 0).
pub fn ratio(difference: f64, envelope: f64) -> f64 {
    if difference == 0.0 {
        0.0
    } else if difference.is_finite() && envelope.is_finite() && envelope > 0.0 {
        difference / envelope
    } else {
        f64::INFINITY
    }
}

/// The first position outside the envelope: the series, the position, the
/// difference there and its envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outside {
    pub series: String,
    pub direction: Direction,
    pub position: usize,
    #[serde(with = "float")]
    pub difference: f64,
    #[serde(with = "float")]
    pub envelope: f64,
}

/// Everything a growth run found: what `--json` prints, `--out` holds and
/// the GUI plots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrowthReport {
    pub format_version: u32,
    pub config: Config,
    /// Where the row came from (`data.jsonl: 4096 positions at offset 0`).
    pub source: String,
    pub offset: usize,
    /// Positions (T); the row is T + 1 tokens.
    pub len: usize,
    pub precision: Precision,
    /// The GPU's product kernel.
    pub gemm_path: String,
    /// The GPU backward's loss scale (its gradients are divided by it).
    pub loss_scale: f64,
    #[serde(with = "float")]
    pub loss_gpu: f64,
    #[serde(with = "float")]
    pub loss_cpu32: f64,
    #[serde(with = "float")]
    pub loss_cpu64: f64,
    pub envelope: Envelope,
    /// The position whose input token the GPU's row has changed (a test of
    /// the report), if any.
    pub planted_at: Option<usize>,
    pub series: Vec<Series>,
    /// The first position outside: over the forward series when one left
    /// its envelope (an error there starts where it shows), else over the
    /// backward ones.
    pub first_outside: Option<Outside>,
    /// Engine notes (a recurrence fallback).
    pub notes: Vec<String>,
    /// The mixed step only: the stages whose products' operands the
    /// reference run rounds (`gru.l0.rec=f16`, …), those the GPU ran below f32.
    #[serde(default)]
    pub rounded_stages: Vec<String>,
}

impl GrowthReport {
    /// The report of these series (the first position outside found here).
    pub fn from_series(
        config: Config,
        source: String,
        offset: usize,
        precision: Precision,
        envelope: Envelope,
        series: Vec<Series>,
    ) -> GrowthReport {
        let len = series.first().map_or(0, |s| s.len());
        let mut r = GrowthReport {
            format_version: GROWTH_FORMAT,
            config,
            source,
            offset,
            len,
            precision,
            gemm_path: String::new(),
            loss_scale: 1.0,
            loss_gpu: f64::NAN,
            loss_cpu32: f64::NAN,
            loss_cpu64: f64::NAN,
            envelope,
            planted_at: None,
            series,
            first_outside: None,
            notes: Vec::new(),
            rounded_stages: Vec::new(),
        };
        r.first_outside = r.find_first_outside();
        r
    }

    fn find_first_outside(&self) -> Option<Outside> {
        let first_in = |dir: Direction| {
            self.series
                .iter()
                .filter(|s| s.direction == dir)
                .filter_map(|s| s.first_outside.map(|t| (t, s)))
                .min_by_key(|(t, _)| *t)
                .map(|(t, s)| Outside {
                    series: s.name.clone(),
                    direction: dir,
                    position: t,
                    difference: s.difference[t],
                    envelope: s.envelope[t],
                })
        };
        first_in(Direction::Forward).or_else(|| first_in(Direction::Backward))
    }

    pub fn series(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The closing line: `first position outside the rounding envelope: 812
    /// (gru.l1.h: 3.1e-3 > 4.0e-5)` or `none in N positions`.
    pub fn summary_line(&self) -> String {
        match &self.first_outside {
            Some(o) => format!(
                "first position outside the rounding envelope: {} ({}: {:.2e} > {:.2e})",
                o.position, o.series, o.difference, o.envelope
            ),
            None => format!("first position outside the rounding envelope: none in {} positions", self.len),
        }
    }

    /// One line per series: its worst ratio to the envelope and where, and
    /// its first position outside.
    pub fn series_lines(&self) -> Vec<String> {
        self.series
            .iter()
            .map(|s| {
                let first = s.first_outside.map_or("none".to_string(), |t| format!("{t} ({} positions)", s.n_outside));
                let (d, e) = (s.difference.get(s.worst), s.envelope.get(s.worst));
                format!(
                    "{:<14} {:<8} worst {:>8.3} × envelope at {:>6} ({:.2e} vs {:.2e}); outside from {first}",
                    s.name,
                    match s.direction {
                        Direction::Forward => "forward",
                        Direction::Backward => "backward",
                    },
                    s.worst_ratio,
                    s.worst,
                    d.copied().unwrap_or(f64::NAN),
                    e.copied().unwrap_or(f64::NAN),
                )
            })
            .collect()
    }
}

/// Lists of float64 written as float32 (half the digits: a 16k-position
/// report stays a few MB) with non-finite values as `"NaN"`, `"inf"`,
/// `"-inf"`; read back by [`float::list`].
mod f32_list {
    use serde::{Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f32),
        Text(&'static str),
    }

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let r: Vec<Repr> = v
            .iter()
            .map(|&x| {
                let y = x as f32;
                if y.is_finite() {
                    Repr::Num(y)
                } else if x.is_nan() {
                    Repr::Text("NaN")
                } else if x > 0.0 {
                    Repr::Text("inf")
                } else {
                    Repr::Text("-inf")
                }
            })
            .collect();
        r.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        crate::capture::float::list::deserialize(d)
    }
}

#[cfg(test)]
#[path = "growth_tests.rs"]
mod tests;

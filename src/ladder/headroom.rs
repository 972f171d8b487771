//! f16 headroom: how close a compared tensor runs to half precision's limits at
//! the loss scale in force (docs/headroom.md). For each side (CPU, GPU) of a
//! tensor it measures `|x·s|` against f16's largest finite value and smallest
//! normal, and counts the binary exponents; the ladder attaches the figures to
//! every case of rungs 2–11 and warns in f16 when a tensor is under a margin.

use serde::{Deserialize, Serialize};

use super::{CaseResult, MapStage, Precision, PrecisionMap, RungTensor, StageKind, Status};
use crate::model::Config;

/// f16's largest finite value, (2 − 2^-10)·2^15.
pub const F16_MAX: f64 = 65504.0;
/// f16's smallest normal value, 2^-14: below it a value keeps fewer than 11
/// significant bits (subnormal), below 2^-25 it rounds to zero.
pub const F16_MIN_NORMAL: f64 = 1.0 / 16384.0;
/// The histogram's lowest exponent bin: f16's smallest subnormal is 2^-24.
pub const EXP_MIN: i32 = -24;
/// The histogram's highest exponent bin: f16's largest finite value is in [2^15, 2^16).
pub const EXP_MAX: i32 = 15;
/// f16's smallest normal exponent (the plot's line).
pub const EXP_MIN_NORMAL: i32 = -14;

/// The warning margin on [`Headroom::headroom_bits`]: under one doubling of
/// the scale from overflow. GradScaler doubles the scale after every 2000
/// clean steps, so a tensor within one doubling of 65504 overflows at the next
/// growth (docs/headroom.md).
pub const MARGIN_BITS: f64 = 1.0;
/// The warning margin on [`Headroom::subnormal_share`]: more than 1 % of the
/// non-zero values would lose precision (or flush to zero) in f16 ...
pub const MARGIN_SUBNORMAL: f64 = 0.01;
/// ... and at least this many of them, so that a value or two that happen to
/// lie near zero in a small tensor (one of 84 is 1.2 %) do not warn.
pub const MIN_SUBNORMAL: usize = 10;

/// Counts of `floor(log2 |x·s|)` over f16's exponent range, with the values
/// outside it, the zeros and the non-finite values apart. Every value lands in
/// exactly one count.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpHistogram {
    /// `counts[i]` holds the values with exponent `EXP_MIN + i`, for
    /// exponents [`EXP_MIN`]..=[`EXP_MAX`] (40 bins).
    pub counts: Vec<u64>,
    /// Non-zero values below 2^-24 (exponent < [`EXP_MIN`]): zero in f16.
    pub underflow: u64,
    /// Values of 2^16 or more (exponent > [`EXP_MAX`]): infinite in f16.
    pub overflow: u64,
    pub zero: u64,
    pub nonfinite: u64,
}

impl ExpHistogram {
    /// The number of exponent bins, [`EXP_MIN`]..=[`EXP_MAX`].
    pub const BINS: usize = (EXP_MAX - EXP_MIN + 1) as usize;

    /// The count of exponent `e` (0 outside the range).
    pub fn count(&self, e: i32) -> u64 {
        if (EXP_MIN..=EXP_MAX).contains(&e) { self.counts.get((e - EXP_MIN) as usize).copied().unwrap_or(0) } else { 0 }
    }

    /// Every value counted once: the bins, under- and overflow, zeros, non-finite.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.underflow + self.overflow + self.zero + self.nonfinite
    }
}

/// One side's figures (docs/headroom.md has the definitions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// The number of values.
    pub count: usize,
    /// max |x·s| over the finite values (0 when there is none).
    pub max_abs: f64,
    /// `max_abs / 65504`: over 1, the tensor overflows f16.
    pub max_over_f16_max: f64,
    /// `log2(65504 / max_abs)`: how many doublings of the scale still fit
    /// (negative: already over). `None` without a non-zero finite value,
    /// where any scale fits.
    pub headroom_bits: Option<f64>,
    /// The share of the non-zero finite values with |x·s| < 2^-14 (0 when
    /// there is none).
    pub subnormal_share: f64,
    /// How many values that is.
    #[serde(default)]
    pub subnormal: usize,
    /// The share of all values that are exactly zero (0 for an empty tensor).
    pub zero_share: f64,
    /// NaN and ±inf values (left out of every other figure but the histogram's own bin).
    pub nonfinite: usize,
    pub histogram: ExpHistogram,
}

impl Headroom {
    /// Under the headroom margin: less than [`MARGIN_BITS`] doublings from overflow.
    pub fn under_bits_margin(&self) -> bool {
        self.headroom_bits.is_some_and(|b| b < MARGIN_BITS)
    }

    /// Over the subnormal margin: more than [`MARGIN_SUBNORMAL`] of the
    /// non-zero values, and at least [`MIN_SUBNORMAL`] of them, below 2^-14.
    pub fn under_subnormal_margin(&self) -> bool {
        self.subnormal_share > MARGIN_SUBNORMAL && self.subnormal >= MIN_SUBNORMAL
    }
}

/// `floor(log2 y)` of a positive finite f64, exactly, from its bits (a
/// subnormal f64, below 2^-1022, gives `i32::MIN`: it underflows any bin).
fn exponent(y: f64) -> i32 {
    let biased = ((y.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 { i32::MIN } else { biased - 1023 }
}

/// The figures of `values` multiplied by `scale` (in f64, so that the product
/// itself cannot overflow or round).
pub fn measure(values: &[f32], scale: f64) -> Headroom {
    let mut h = ExpHistogram { counts: vec![0; ExpHistogram::BINS], ..Default::default() };
    let (mut max_abs, mut nonzero, mut subnormal) = (0.0f64, 0usize, 0usize);
    for &x in values {
        let y = (x as f64 * scale).abs();
        if !y.is_finite() {
            h.nonfinite += 1;
            continue;
        }
        if y == 0.0 {
            h.zero += 1;
            continue;
        }
        nonzero += 1;
        max_abs = max_abs.max(y);
        subnormal += (y < F16_MIN_NORMAL) as usize;
        let e = exponent(y);
        if e < EXP_MIN {
            h.underflow += 1;
        } else if e > EXP_MAX {
            h.overflow += 1;
        } else {
            h.counts[(e - EXP_MIN) as usize] += 1;
        }
    }
    let share = |part: usize, of: usize| if of == 0 { 0.0 } else { part as f64 / of as f64 };
    Headroom {
        count: values.len(),
        max_abs,
        max_over_f16_max: max_abs / F16_MAX,
        headroom_bits: (max_abs > 0.0).then(|| (F16_MAX / max_abs).log2()),
        subnormal_share: share(subnormal, nonzero),
        subnormal,
        zero_share: share(h.zero as usize, values.len()),
        nonfinite: h.nonfinite as usize,
        histogram: h,
    }
}

/// A compared tensor's headroom on both sides, at the scale it was measured at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TensorHeadroom {
    /// The loss scale the values were multiplied by (1 for forward tensors).
    pub scale: f64,
    pub cpu: Headroom,
    pub gpu: Headroom,
}

impl TensorHeadroom {
    pub fn of(cpu: &[f32], gpu: &[f32], scale: f64) -> TensorHeadroom {
        TensorHeadroom { scale, cpu: measure(cpu, scale), gpu: measure(gpu, scale) }
    }

    /// The notes of the margins this tensor is under (empty: none), each
    /// naming the tensor, the figure on both sides and the margin.
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let fmt_bits = |h: &Headroom| h.headroom_bits.map_or("-".to_string(), |b| format!("{b:.2}"));
        if self.cpu.under_bits_margin() || self.gpu.under_bits_margin() {
            out.push(format!(
                "f16 headroom: {name} at scale {} reaches {:.3e} (CPU) / {:.3e} (GPU) of f16's 65504: {} / {} bits of headroom, under the margin of {MARGIN_BITS}",
                self.scale,
                self.cpu.max_over_f16_max,
                self.gpu.max_over_f16_max,
                fmt_bits(&self.cpu),
                fmt_bits(&self.gpu)
            ));
        }
        if self.cpu.under_subnormal_margin() || self.gpu.under_subnormal_margin() {
            out.push(format!(
                "f16 headroom: {name} at scale {} has {:.2}% (CPU, {}) / {:.2}% (GPU, {}) of its non-zero values below f16's smallest normal 2^-14, over the margin of {}%",
                self.scale,
                100.0 * self.cpu.subnormal_share,
                self.cpu.subnormal,
                100.0 * self.gpu.subnormal_share,
                self.gpu.subnormal,
                100.0 * MARGIN_SUBNORMAL
            ));
        }
        out
    }
}

/// The precision-map stages whose kernels hold `tensor`'s values (a compared
/// tensor of rungs 2–10): the stage that writes it and each stage whose
/// products read it as an operand. Forward: `embed.out` is written by
/// `embed` and read by `gru.l0.input`; layer `l`'s `h` by `gru.l{l}.rec`,
/// read by the same recurrence (`h_{t−1}`), `gru.l{l+1}.input` (or, on top,
/// `attn` and `head`) and their backward weight products; `ctx.c` by `attn`,
/// read by `head` and `head.bwd`. Backward: a gradient belongs to the
/// `.bwd` stage that makes it and those whose products read it (`d_gi`,
/// `d_gh`: `gru.l{l}.rec.bwd` and `gru.l{l}.input.bwd`; the top `d_h`:
/// `head.bwd` and `attn.bwd`). The optimizer's tensors run in f32 alone
/// (empty); a name this does not know gives every stage (today's rule: it
/// warns whenever a stage is in f16).
pub fn tensor_stages(cfg: &Config, tensor: &str) -> Vec<MapStage> {
    use StageKind::*;
    let (f, b) = (MapStage::fwd, MapStage::bwd);
    let layers = cfg.layers;
    let top = layers - 1;
    let digits = |s: &str| s.chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse::<usize>().ok();
    // The layer of `gru.l{l}.x` or `grad.gru.x_l{l}`, and the field.
    let gru = tensor
        .strip_prefix("gru.l")
        .and_then(|r| Some((digits(r)?, r.split_once('.')?.1)))
        .or_else(|| tensor.strip_prefix("grad.gru.").and_then(|r| Some((digits(r.rsplit("_l").next()?)?, "grad"))));
    // The stages reading layer l's h as an operand.
    let h_readers = |l: usize| -> Vec<MapStage> {
        let mut v = vec![f(GruRec, l), b(GruInput, l)];
        if l < top {
            v.extend([f(GruInput, l + 1), b(GruInput, l + 1)]);
        } else {
            v.extend([f(Attn, 0), f(Head, 0), b(Attn, 0), b(Head, 0)]);
        }
        v
    };
    if let Some((l, field)) = gru.filter(|(l, _)| *l < layers) {
        return match field {
            "gi" => vec![f(GruInput, l)],
            "gh" | "r" | "z" | "n" => vec![f(GruRec, l)],
            "h" => h_readers(l),
            "d_h" if l == top => vec![b(Head, 0), b(Attn, 0), b(GruRec, l)],
            "d_h" => vec![b(GruInput, l + 1), b(GruRec, l)],
            "d_gi" | "d_gh" => vec![b(GruRec, l), b(GruInput, l)],
            "d_in" | "grad" => vec![b(GruInput, l)],
            _ => PrecisionMap::stages(layers),
        };
    }
    match tensor {
        "embed.out" => vec![f(Embed, 0), f(GruInput, 0), b(GruInput, 0)],
        "ctx.q" | "ctx.k" | "ctx.v" | "ctx.attn" => vec![f(Attn, 0)],
        "ctx.c" => vec![f(Attn, 0), f(Head, 0), b(Head, 0)],
        "head.logits" | "loss.value" | "loss.token" => vec![f(Head, 0)],
        "loss.dlogits" | "head.d_s" | "head.d_c" | "ctx.token_norm" => vec![b(Head, 0)],
        t if t.starts_with("grad.head.") => vec![b(Head, 0)],
        "ctx.d_q" | "ctx.d_k" | "ctx.d_v" | "ctx.d_s" => vec![b(Attn, 0)],
        t if t.starts_with("grad.ctx.") => vec![b(Attn, 0)],
        "grad.embed.weight" => vec![b(Embed, 0), b(GruInput, 0)],
        "grad_norm" | "post_clip_norm" => Vec::new(),
        t if ["param.", "adam.m.", "adam.v."].iter().any(|p| t.starts_with(p)) => Vec::new(),
        _ => PrecisionMap::stages(layers),
    }
}

/// Whether `tensor`'s values pass through a stage that `map` runs in f16
/// ([`tensor_stages`]): the tensors whose f16 headroom can warn.
pub fn passes_f16(map: &PrecisionMap, cfg: &Config, tensor: &str) -> bool {
    tensor_stages(cfg, tensor).into_iter().any(|s| map.get(s) == Precision::F16)
}

/// Gives every case of `cases` with a kept tensor of the same name its
/// headroom at `scale_of(name)`; where `warn(name)`, a case that passed and
/// is under a margin becomes a warning with the note (a failure stays a failure).
pub(super) fn attach(
    cases: &mut [CaseResult],
    kept: &[RungTensor],
    scale_of: impl Fn(&str) -> f64,
    warn: impl Fn(&str) -> bool,
) {
    for c in cases.iter_mut() {
        let Some(t) = kept.iter().find(|t| t.name == c.name) else { continue };
        let h = TensorHeadroom::of(&t.cpu, &t.gpu, scale_of(&c.name));
        if warn(&c.name) {
            let notes = h.warnings(&c.name);
            if !notes.is_empty() && c.status == Status::Pass {
                c.status = Status::Warn;
            }
            c.notes.extend(notes);
        }
        c.headroom = Some(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_are_exact_at_powers_of_two() {
        assert_eq!(exponent(1.0), 0);
        assert_eq!(exponent(2f64.powi(15)), 15);
        assert_eq!(exponent(2f64.powi(15) * (1.0 - f64::EPSILON)), 14);
        assert_eq!(exponent(65504.0), 15);
        assert_eq!(exponent(2f64.powi(-24)), -24);
        assert_eq!(exponent(f64::MIN_POSITIVE / 2.0), i32::MIN);
    }
}

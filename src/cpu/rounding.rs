//! Operand rounding for the CPU reference: a run that rounds each product's
//! operands (both of them) to the precision a GPU kernel stores them in
//! before it multiplies, the accumulation and everything element-wise staying
//! in the run's own type. Used only by `triage::growth` to realise the mixed
//! step's rounding on the CPU; with [`Rounding::exact`] (what every other
//! caller gets) no value is touched, so the plain f32 and f64 references are
//! unchanged bit for bit.

use std::borrow::Cow;

use crate::tensor::Real;

/// How one stage's kernels round a product's operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Round {
    /// Not at all (an f32 stage).
    #[default]
    Exact,
    /// To IEEE f16, range included (to nearest, ties to even; subnormals
    /// below 2^-14, ±Inf past 65504): the f16 GEMM kernels' and the
    /// cooperative-matrix recurrences' f16 copies.
    F16,
    /// To f16's 11 significant bits with f32's range: the per-row
    /// recurrence kernels' `STAGE_F16` (shaders/include/stage_round.glsl).
    F16Mantissa,
    /// To bfloat16's 8 significant bits (f32's range).
    Bf16,
}

impl Round {
    /// `x` as the kernel sees it.
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Round::Exact => x,
            Round::F16 => ::gemm::f16::from_f32(x).to_f32(),
            Round::F16Mantissa => round_bits(x, 13),
            Round::Bf16 => round_bits(x, 16),
        }
    }

    /// `x` with every value rounded (borrowed unchanged where exact).
    pub fn slice<T: Real>(self, x: &[T]) -> Cow<'_, [T]> {
        if self == Round::Exact {
            return Cow::Borrowed(x);
        }
        Cow::Owned(x.iter().map(|&v| self.value(v)).collect())
    }

    /// One value of the run's type rounded (through f32).
    #[inline]
    pub fn value<T: Real>(self, v: T) -> T {
        T::of(self.apply(v.f64() as f32) as f64)
    }

    pub fn is_exact(self) -> bool {
        self == Round::Exact
    }
}

/// Rounds `x` to nearest (ties to even) at `drop` fewer mantissa bits, on the
/// bits as the shaders do (Inf and NaN stay).
fn round_bits(x: f32, drop: u32) -> f32 {
    let u = x.to_bits();
    if u & 0x7f80_0000 == 0x7f80_0000 {
        return x;
    }
    let half = (1u32 << (drop - 1)) - 1;
    let r = u.wrapping_add(half + ((u >> drop) & 1));
    f32::from_bits(r & !((1u32 << drop) - 1))
}

/// Each stage's operand rounding (the stages of a precision map,
/// docs/precision.md); a layer past a vector's end is [`Round::Exact`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rounding {
    /// The embedding's gathered rows (`embed`).
    pub embed: Round,
    /// Per layer, `W_ih u_t` (`gru.l{l}.input`) and its backward products.
    pub gru_input: Vec<Round>,
    pub gru_input_bwd: Vec<Round>,
    /// Per layer, `W_hh h_{t−1}` (`gru.l{l}.rec`) and `d_gh · W_hh`.
    pub gru_rec: Vec<Round>,
    pub gru_rec_bwd: Vec<Round>,
    /// The projections `W_q s`, `W_k s`, `W_v s` and their backward.
    pub attn: Round,
    pub attn_bwd: Round,
    /// The head's two products and their backward.
    pub head: Round,
    pub head_bwd: Round,
}

impl Rounding {
    /// No rounding anywhere: the plain reference.
    pub fn exact() -> Rounding {
        Rounding::default()
    }

    pub fn is_exact(&self) -> bool {
        let layers = |v: &[Round]| v.iter().all(|r| r.is_exact());
        [self.embed, self.attn, self.attn_bwd, self.head, self.head_bwd].iter().all(|r| r.is_exact())
            && layers(&self.gru_input)
            && layers(&self.gru_input_bwd)
            && layers(&self.gru_rec)
            && layers(&self.gru_rec_bwd)
    }

    pub(crate) fn input(&self, l: usize, backward: bool) -> Round {
        let v = if backward { &self.gru_input_bwd } else { &self.gru_input };
        v.get(l).copied().unwrap_or_default()
    }

    pub(crate) fn rec(&self, l: usize, backward: bool) -> Round {
        let v = if backward { &self.gru_rec_bwd } else { &self.gru_rec };
        v.get(l).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit rounding agrees with the f16 conversion on f16's normal range
    /// and keeps f32's range past it.
    #[test]
    fn mantissa_rounding_matches_f16_in_range() {
        for &x in &[1.0f32, 1.000_244_1, 1.000_732_4, -3.3_f32, 1.0e-3, 6.0e4, 0.1] {
            assert_eq!(Round::F16Mantissa.apply(x), Round::F16.apply(x), "{x}");
        }
        assert_eq!(Round::F16.apply(1.0e5), f32::INFINITY);
        assert!((Round::F16Mantissa.apply(1.0e5) - 1.0e5).abs() < 1.0e5 * 4.9e-4);
        assert_eq!(Round::Bf16.apply(1.0 + 1.0 / 512.0), 1.0);
        assert!(Round::F16.apply(f32::NAN).is_nan());
        assert_eq!(Round::Exact.slice(&[0.1f32]).as_ref(), &[0.1f32]);
    }
}

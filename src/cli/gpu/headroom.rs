//! The ladder's f16 headroom in its human output (docs/headroom.md): one
//! summary line, then one short line per tensor under a margin; and the
//! `--loss-scale` flag's parser.

use crate::ladder::headroom::{MARGIN_BITS, MARGIN_SUBNORMAL, TensorHeadroom};
use crate::ladder::{CaseResult, Rung, RungResult};

/// `--loss-scale S`: a power of two from 2^-24 to 2^64, as GradScaler's
/// scales are (scaling by one is exact, so the ladder's unscaled comparison is too).
pub fn parse_loss_scale(text: &str) -> Result<f64, String> {
    let s: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number"))?;
    let ok = s.is_finite() && s > 0.0 && s.log2().fract() == 0.0 && (-24.0..=64.0).contains(&s.log2());
    if ok { Ok(s) } else { Err(format!("{text} is not a power of two from 2^-24 to 2^64 (e.g. 65536)")) }
}

/// The lower of the two sides' headroom bits (`None`: no non-zero value on either).
fn low_bits(h: &TensorHeadroom) -> Option<f64> {
    match (h.cpu.headroom_bits, h.gpu.headroom_bits) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn high_subnormal(h: &TensorHeadroom) -> f64 {
    h.cpu.subnormal_share.max(h.gpu.subnormal_share)
}

/// Whether a note is one of the headroom warnings (printed apart, short).
pub fn is_headroom_note(note: &str) -> bool {
    note.starts_with("f16 headroom:")
}

/// `f16 headroom: lowest … bits (tensor), largest subnormal share …% (tensor)`
/// over the forward and backward tensors (the optimizer's parameters and
/// moments stay f32, the attention stress case is synthetic: both are left
/// out; their figures are in the JSON), then `  rung tensor: … bits, …% subnormal, scale S` for each tensor whose
/// case carries a headroom warning. Nothing when no case has figures.
pub fn print_headroom(results: &[RungResult]) {
    let cases: Vec<(&RungResult, &CaseResult, &TensorHeadroom)> = results
        .iter()
        .filter(|r| r.id != Rung::Optim)
        .flat_map(|r| r.cases.iter().filter_map(move |c| c.headroom.as_ref().map(|h| (r, c, h))))
        // The attention stress case's scores are made extreme on purpose (`ladder::stress`).
        .filter(|(_, c, _)| !c.name.contains("(stress:"))
        .collect();
    let lowest = cases.iter().filter_map(|(_, c, h)| low_bits(h).map(|b| (b, c))).min_by(|a, b| a.0.total_cmp(&b.0));
    let Some((bits, low)) = lowest else { return };
    let (share, high) = cases
        .iter()
        .map(|(_, c, h)| (high_subnormal(h), c))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .expect("a case has figures");
    println!(
        "\nf16 headroom: lowest {bits:.2} bits ({}), largest subnormal share {:.2}% ({}); margins {MARGIN_BITS} bit, {}%",
        low.name,
        100.0 * share,
        high.name,
        100.0 * MARGIN_SUBNORMAL
    );
    for (r, c, h) in cases.iter().filter(|(_, c, _)| c.notes.iter().any(|n| is_headroom_note(n))) {
        let bits = low_bits(h).map_or("-".into(), |b| format!("{b:.2}"));
        println!(
            "  warn {:<10} {:<40} {bits} bits, {:.2}% subnormal, scale {}",
            r.id.id(),
            c.name,
            100.0 * high_subnormal(h),
            h.scale
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_scales_are_powers_of_two_in_range() {
        assert_eq!(parse_loss_scale("65536"), Ok(65536.0));
        assert_eq!(parse_loss_scale("0.25"), Ok(0.25));
        assert_eq!(parse_loss_scale("1"), Ok(1.0));
        for bad in ["3", "0", "-2", "inf", "NaN", "1e30", "x", "2^16"] {
            assert!(parse_loss_scale(bad).is_err(), "{bad}");
        }
    }
}

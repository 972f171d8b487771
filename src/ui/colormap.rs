//! Colour maps, and the colours non-finite values get everywhere.

use egui::Color32;

pub const NAN: Color32 = Color32::from_rgb(255, 0, 255);
pub const POS_INF: Color32 = Color32::from_rgb(255, 255, 255);
pub const NEG_INF: Color32 = Color32::from_rgb(0, 255, 255);

/// Control points of viridis (sequential, perceptually uniform).
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// Blue – grey – red, for values centred on zero.
const DIVERGING: [[u8; 3]; 5] = [[33, 102, 172], [103, 169, 207], [90, 90, 90], [239, 138, 98], [178, 24, 43]];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMap {
    /// `lo → hi`.
    Sequential,
    /// `-m → 0 → m` with `m = max(|lo|, |hi|)`.
    Diverging,
}

fn lerp_table(table: &[[u8; 3]], x: f32) -> Color32 {
    let x = x.clamp(0.0, 1.0) * (table.len() - 1) as f32;
    let i = (x.floor() as usize).min(table.len() - 2);
    let f = x - i as f32;
    let c = |k: usize| table[i][k] as f32 * (1.0 - f) + table[i + 1][k] as f32 * f;
    Color32::from_rgb(c(0).round() as u8, c(1).round() as u8, c(2).round() as u8)
}

impl ColorMap {
    /// The colour of `v` on the scale `[lo, hi]`; non-finite values get their own colours.
    pub fn color(self, v: f32, lo: f32, hi: f32) -> Color32 {
        if v.is_nan() {
            return NAN;
        }
        if v.is_infinite() {
            return if v > 0.0 { POS_INF } else { NEG_INF };
        }
        match self {
            ColorMap::Sequential => {
                let span = hi - lo;
                let x = if span > 0.0 { (v - lo) / span } else { 0.5 };
                lerp_table(&VIRIDIS, x)
            }
            ColorMap::Diverging => {
                let m = lo.abs().max(hi.abs());
                let x = if m > 0.0 { 0.5 + 0.5 * v / m } else { 0.5 };
                lerp_table(&DIVERGING, x)
            }
        }
    }

    /// The lowest and highest values the bar spans for data in `[lo, hi]`.
    pub fn bar_range(self, lo: f32, hi: f32) -> (f32, f32) {
        match self {
            ColorMap::Sequential => (lo, hi),
            ColorMap::Diverging => {
                let m = lo.abs().max(hi.abs());
                (-m, m)
            }
        }
    }
}

/// Finite minimum and maximum (0, 0 when there is no finite value).
pub fn finite_range(values: &[f32]) -> (f32, f32) {
    let mut lo = f32::INFINITY;
    let mut hi = f32::NEG_INFINITY;
    for &v in values.iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi { (0.0, 0.0) } else { (lo, hi) }
}

/// The finite minimum and the 99.5th percentile of the finite values, so that
/// one outlier does not turn the rest of a map into one colour.
pub fn robust_range(values: &[f32]) -> (f32, f32) {
    let (lo, hi) = finite_range(values);
    let mut finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 200 {
        return (lo, hi);
    }
    let k = ((finite.len() as f64 * 0.995) as usize).min(finite.len() - 1);
    let (_, p, _) = finite.select_nth_unstable_by(k, |a, b| a.total_cmp(b));
    let p = *p;
    if p > lo { (lo, p) } else { (lo, hi) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_non_finite() {
        let m = ColorMap::Sequential;
        assert_eq!(m.color(0.0, 0.0, 1.0), Color32::from_rgb(68, 1, 84));
        assert_eq!(m.color(1.0, 0.0, 1.0), Color32::from_rgb(253, 231, 37));
        assert_eq!(m.color(f32::NAN, 0.0, 1.0), NAN);
        assert_eq!(m.color(f32::INFINITY, 0.0, 1.0), POS_INF);
        assert_eq!(m.color(f32::NEG_INFINITY, 0.0, 1.0), NEG_INF);
        assert_eq!(finite_range(&[f32::NAN, 2.0, -1.0, f32::INFINITY]), (-1.0, 2.0));
    }
}

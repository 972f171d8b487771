//! The numerical contract's measurements: a result against its reference.

use serde::{Deserialize, Serialize};

/// `got` (an engine's output) against `want` (the f64 reference).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// ‖got − want‖ / ‖want‖ over the positions where both are finite, in f64
    /// (the absolute norm when ‖want‖ = 0).
    pub rel_l2: f64,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub non_finite_want: usize,
    pub non_finite_got: usize,
    /// Positions where `got` is not finite but `want` is: always a failure.
    pub new_non_finite: usize,
}

pub fn compare(got: &[f32], want: &[f64]) -> Comparison {
    assert_eq!(got.len(), want.len(), "compare: {} values against {}", got.len(), want.len());
    let mut c = Comparison::default();
    let (mut diff2, mut want2) = (0.0f64, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g as f64;
        c.non_finite_got += !g.is_finite() as usize;
        c.non_finite_want += !w.is_finite() as usize;
        if !g.is_finite() || !w.is_finite() {
            c.new_non_finite += (!g.is_finite() && w.is_finite()) as usize;
            continue;
        }
        let d = (g - w).abs();
        diff2 += d * d;
        want2 += w * w;
        if d > c.max_abs_err {
            c.max_abs_err = d;
            c.max_abs_index = i;
        }
    }
    c.rel_l2 = if want2 > 0.0 { (diff2 / want2).sqrt() } else { diff2.sqrt() };
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_error_and_non_finite() {
        let c = compare(&[1.0, 2.5, f32::NAN, 4.0], &[1.0, 2.0, 3.0, f64::INFINITY]);
        assert_eq!(c.max_abs_index, 1);
        assert!((c.max_abs_err - 0.5).abs() < 1e-12);
        assert!((c.rel_l2 - 0.5 / 5f64.sqrt()).abs() < 1e-12);
        assert_eq!((c.non_finite_got, c.non_finite_want, c.new_non_finite), (1, 1, 1));
        assert_eq!(compare(&[0.0], &[0.0]).rel_l2, 0.0);
    }
}

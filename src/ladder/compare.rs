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

/// The worst single element of `got` against the f64 reference, in units of
/// the reference's RMS (so that one wrong element in a large tensor is not
/// diluted as it is in the relative L2), measured against an envelope: the
/// tolerance plus [`ELEMENT_ENVELOPE`] times the f32 CPU engine's own error
/// at that element (what f32 arithmetic costs there anyway).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorstElement {
    pub index: usize,
    /// |got − f64| / RMS(f64) at `index`.
    pub err: f64,
    /// |f32 CPU − f64| / RMS(f64) at `index`.
    pub cpu_err: f64,
    /// `err` over the envelope `tol + ELEMENT_ENVELOPE · cpu_err` (above 1: outside).
    pub excess: f64,
}

/// How many times the f32 CPU engine's own error an element may be off.
pub const ELEMENT_ENVELOPE: f64 = 16.0;

/// The element of `got` furthest outside its envelope (None when the sides'
/// lengths differ or nothing is finite on both).
pub fn worst_element(got: &[f32], want32: &[f32], want64: &[f64], tol: f64) -> Option<WorstElement> {
    if got.len() != want64.len() || want32.len() != want64.len() {
        return None;
    }
    let finite = |i: usize| (got[i] as f64).is_finite() && want64[i].is_finite() && want32[i].is_finite();
    let (mut sum2, mut n) = (0.0f64, 0usize);
    for (i, w) in want64.iter().enumerate() {
        if finite(i) {
            sum2 += w * w;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let rms = (sum2 / n as f64).sqrt();
    let unit = if rms > 0.0 { rms } else { 1.0 };
    let mut worst: Option<WorstElement> = None;
    for i in (0..got.len()).filter(|&i| finite(i)) {
        let err = (got[i] as f64 - want64[i]).abs() / unit;
        let cpu_err = (want32[i] as f64 - want64[i]).abs() / unit;
        let envelope = tol + ELEMENT_ENVELOPE * cpu_err;
        let excess = if envelope > 0.0 {
            err / envelope
        } else if err > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        if worst.is_none_or(|w| excess > w.excess) {
            worst = Some(WorstElement { index: i, err, cpu_err, excess });
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wrong_element_stands_out_where_the_l2_dilutes_it() {
        let n = 100_000;
        let want64: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.37).sin()).collect();
        let want32: Vec<f32> = want64.iter().map(|&x| x as f32).collect();
        let mut got = want32.clone();
        got[777] += 0.01;
        let w = worst_element(&got, &want32, &want64, 1e-4).unwrap();
        assert_eq!(w.index, 777);
        assert!(w.excess > 10.0, "{w:?}");
        assert!(compare(&got, &want64).rel_l2 < 1e-4, "the L2 alone would pass it");
        // Rounding-level differences everywhere stay inside.
        let noisy: Vec<f32> = want32.iter().map(|&x| f32::from_bits(x.to_bits() ^ 1)).collect();
        assert!(worst_element(&noisy, &want32, &want64, 1e-5).unwrap().excess < 1.0);
        // An element the f32 CPU is far off at gets that much more room.
        let (mut cpu, mut gpu) = (want32.clone(), want32.clone());
        cpu[5] += 1e-3;
        gpu[5] += 1e-2;
        assert!(worst_element(&gpu, &cpu, &want64, 1e-5).unwrap().excess < 1.0);
        assert!(worst_element(&[1.0], &[1.0], &[1.0, 2.0], 1e-5).is_none());
    }

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

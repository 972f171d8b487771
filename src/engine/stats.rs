//! Order statistics of timing samples: what the benchmark and the GUI's
//! speed run report.

/// Median, 10th and 90th percentile of `xs` (sorted in place; the median of
/// an even count is the mean of the middle two). `xs` must not be empty.
pub fn percentiles(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { 0.5 * (xs[n / 2 - 1] + xs[n / 2]) };
    (median, at(0.1), at(0.9))
}

/// The upper median of `xs` (the element at `len / 2` once sorted; for an
/// even count the larger middle value, never an interpolation), `None` when
/// empty: the GUI's speed panel shows this one.
pub fn upper_median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(xs[xs.len() / 2])
}

/// The mean of `xs` (0 for none).
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The median of each named series, in the order of the names.
pub fn medians_by_name(list: Vec<(String, Vec<f64>)>) -> Vec<(String, f64)> {
    list.into_iter().map(|(n, mut xs)| (n, percentiles(&mut xs).0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        assert_eq!(percentiles(&mut [3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(percentiles(&mut [4.0, 1.0, 2.0, 3.0]).0, 2.5);
        assert_eq!(upper_median(vec![2.0, 4.0]), Some(4.0));
        assert_eq!(upper_median(vec![10.0, 30.0, 20.0]), Some(20.0));
        assert_eq!(upper_median(Vec::new()), None);
    }
}

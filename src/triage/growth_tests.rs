use super::*;

#[test]
fn running_maximum_over_a_window() {
    let xs = [1.0, 5.0, 2.0, 0.0, 0.0, 0.0, 3.0];
    assert_eq!(running_max(&xs, 1), vec![5.0, 5.0, 5.0, 2.0, 0.0, 3.0, 3.0]);
    assert_eq!(running_max(&xs, 0), xs.to_vec());
    assert!(running_max(&[1.0, f64::NAN, 1.0, 1.0], 1)[2].is_nan());
    assert_eq!(running_max(&[1.0, f64::NAN, 1.0, 1.0], 1)[3], 1.0);
    assert!(running_max(&[], 3).is_empty());
}

#[test]
fn per_position_relative_differences() {
    // Two positions of two features.
    let a = [1.0f32, 2.0, 3.0, 4.0];
    let b = [1.0f32, 2.0, 3.0, 0.0];
    let den = [1.0f64, 2.0, 3.0, 4.0];
    let d = per_position(&a, &b, &den, 2);
    assert_eq!(d[0], 0.0);
    assert!((d[1] - 4.0 / 5.0).abs() < 1e-12);
    let z = per_position(&[1.0f32], &[0.0f32], &[0.0f64], 1);
    assert_eq!(z, vec![f64::INFINITY]);
    assert!(per_position(&[f32::NAN], &[0.0f32], &[1.0f64], 1)[0].is_nan());
}

#[test]
fn the_envelope_scales_with_precision_and_has_a_floor() {
    let e = Envelope::new(Precision::F32);
    assert_eq!(e.along(&[0.0], None), vec![K * FLOOR_ROUNDOFFS * F32_ROUNDOFF]);
    assert_eq!(e.along(&[1e-6, 0.0], None)[1], K * 1e-6, "the running maximum carries a neighbour's reference");
    // The mixed step: the larger of the two references counts.
    let m = Envelope::new(Precision::F16);
    assert_eq!(m.operands, Precision::F16);
    assert_eq!(m.along(&[1e-6, 1e-6], Some(&[3e-4, 0.0])), vec![K * 3e-4, K * 3e-4]);
    assert_eq!(m.along(&[1e-6], Some(&[1e-9])), vec![K * 1e-6]);
    assert!(m.along(&[1e-6], Some(&[f64::NAN]))[0].is_nan());
}

/// A series made of a reference whose GPU side leaves it at position 5.
fn series_leaving_at(at: usize, n: usize, dir: Direction, name: &str) -> Series {
    let cpu64: Vec<f64> = (0..n).map(|t| 1.0 + t as f64).collect();
    let cpu32: Vec<f32> = cpu64.iter().map(|&x| x as f32).collect();
    let gpu: Vec<f32> = cpu32.iter().enumerate().map(|(t, &x)| if t >= at { x * 1.01 } else { x }).collect();
    Series::new(name, dir, 1, &gpu, &cpu32, &cpu64, None, &Envelope::new(Precision::F32))
}

#[test]
fn a_series_names_its_first_position_outside() {
    let s = series_leaving_at(5, 12, Direction::Forward, "gru.l0.h");
    assert_eq!(s.first_outside, Some(5));
    assert_eq!(s.n_outside, 7);
    assert!(s.worst >= 5 && s.worst_ratio > 1.0);
    assert!(s.difference[..5].iter().all(|&d| d == 0.0));
    let clean = series_leaving_at(12, 12, Direction::Forward, "gru.l0.h");
    assert_eq!((clean.first_outside, clean.n_outside, clean.worst_ratio), (None, 0, 0.0));
}

#[test]
fn the_report_prefers_a_forward_series_and_round_trips() {
    let series = vec![
        series_leaving_at(7, 12, Direction::Forward, "gru.l0.h"),
        series_leaving_at(2, 12, Direction::Backward, "embed.d_out"),
    ];
    let r =
        GrowthReport::from_series(Config::tiny(), "x".into(), 0, Precision::F32, Envelope::new(Precision::F32), series);
    let o = r.first_outside.clone().unwrap();
    assert_eq!((o.series.as_str(), o.position, o.direction), ("gru.l0.h", 7, Direction::Forward));
    assert!(r.summary_line().contains("first position outside the rounding envelope: 7 (gru.l0.h"));
    let text = serde_json::to_string(&r).unwrap();
    let back: GrowthReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back.series.len(), 2);
    assert_eq!(back.first_outside, r.first_outside);
    assert_eq!(back.series[0].difference.len(), 12);
    // Float32 in the file: each value within f32's rounding.
    for (a, b) in back.series[0].envelope.iter().zip(&r.series[0].envelope) {
        assert!((a - b).abs() <= b.abs() * 1e-7);
    }
    let only_backward = GrowthReport::from_series(
        Config::tiny(),
        "x".into(),
        0,
        Precision::F32,
        Envelope::new(Precision::F32),
        vec![series_leaving_at(3, 12, Direction::Backward, "embed.d_out")],
    );
    assert_eq!(only_backward.first_outside.unwrap().position, 3);
}

#[test]
fn non_finite_values_survive_the_json() {
    let mut s = series_leaving_at(3, 4, Direction::Forward, "ctx.c");
    s.difference[3] = f64::NAN;
    s.reference[2] = f64::INFINITY;
    let back: Series = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert!(back.difference[3].is_nan() && back.reference[2] == f64::INFINITY);
    assert!(is_outside(f64::NAN, 1.0) && !is_outside(0.5, 1.0) && is_outside(2.0, 1.0));
}

#[test]
fn rounded_weights_round_the_products_operands_only() {
    let cfg = Config::tiny();
    let p = crate::model::Params::<f32>::init(&cfg, 3);
    let q = rounded_weights(&p, Precision::F16);
    assert_eq!(q.embed, p.embed, "the embedding is a gather, not a product");
    assert_eq!(q.head_bias, p.head_bias);
    assert_ne!(q.gru[0].w_hh, p.gru[0].w_hh);
    for (a, b) in q.gru[0].w_hh.data.iter().zip(&p.gru[0].w_hh.data) {
        assert!((a - b).abs() <= b.abs() / 2048.0, "{a} vs {b}");
    }
    assert_eq!(rounded_weights(&p, Precision::F32), p);
}

#[test]
fn planting_changes_one_token() {
    let row = b"abcdef".to_vec();
    let p = plant(&row, 2);
    assert_eq!(p, b"abddef".to_vec());
    assert_eq!(plant(&[255], 0), vec![0]);
}

#[test]
fn the_series_of_a_two_layer_model() {
    let names: Vec<String> = series_names(&Config::tiny()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["gru.l0.h", "gru.l1.h", "ctx.c", "gru.l0.d_h", "gru.l1.d_h", "embed.d_out"]);
}

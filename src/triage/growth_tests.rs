use super::*;
use crate::step::{MapStage, PrecisionMap, StageKind};

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

/// A tiny model and one row of `t + 1` tokens for the CPU runs below.
fn tiny_row(t: usize) -> (Config, crate::model::Params<f32>, crate::dataset::Batch) {
    let cfg = Config::tiny();
    let p = crate::model::Params::<f32>::init(&cfg, 5);
    let row: Vec<u8> = crate::dataset::corpus(3, 4 * t).into_iter().take(t + 1).collect();
    (cfg, p, crate::dataset::Batch::from_rows(&[&row]).unwrap())
}

/// Each series of a trace (the growth report's), gradients divided by `scale`.
fn series_of(tr: &crate::engine::reference::Trace<f32>, cfg: &Config, scale: f32) -> Vec<(String, Vec<f32>)> {
    series_names(cfg)
        .into_iter()
        .map(|(n, _)| {
            let mut v = tr.get(&n).unwrap().data.clone();
            if n.contains(".d_") {
                v.iter_mut().for_each(|x| *x /= scale);
            }
            (n, v)
        })
        .collect()
}

#[test]
fn operand_rounding_off_is_the_plain_run_bit_for_bit() {
    let (cfg, p, batch) = tiny_row(48);
    let (_, _, plain) = crate::engine::reference::traced(&cfg, &p, &batch, 1.0, None).unwrap();
    let (_, _, off) =
        crate::engine::reference::traced_rounded(&cfg, &p, &batch, 1.0, &crate::cpu::Rounding::exact()).unwrap();
    // An f32 map rounds nothing either.
    let (rd, names) = kernel_rounding(&PrecisionMap::uniform(Precision::F32, cfg.layers), true);
    assert!(rd.is_exact() && names.is_empty());
    for ((n, a), (_, b)) in series_of(&plain, &cfg, 1.0).iter().zip(series_of(&off, &cfg, 1.0)) {
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "{n} moved");
    }
}

#[test]
fn operand_rounding_rounds_more_than_the_weights() {
    let (cfg, p, batch) = tiny_row(48);
    let scale = 65536.0;
    let (_, _, weights_only) =
        crate::engine::reference::traced(&cfg, &rounded_weights(&p, Precision::F16), &batch, 1.0, None).unwrap();
    let map = PrecisionMap::default_for(Precision::F16, cfg.layers, true);
    let (rd, names) = kernel_rounding(&map, true);
    assert!(names.contains(&"gru.l0.rec=f16".to_string()) && names.contains(&"gru.l0.rec.bwd=f16".to_string()));
    let (_, _, operands) = crate::engine::reference::traced_rounded(&cfg, &p, &batch, scale as f64, &rd).unwrap();
    let (w, o) = (series_of(&weights_only, &cfg, 1.0), series_of(&operands, &cfg, scale));
    for ((n, a), (_, b)) in w.iter().zip(&o) {
        // The activations' rounding is of f16's size (2^-11 relative), not
        // an f32 ulp, and not a different model.
        let den: Vec<f64> = a.iter().map(|&x| x as f64).collect();
        let rel = per_position(a, b, &den, a.len())[0];
        assert!(rel > 1e-5 && rel < 3e-2, "{n}: operand- vs weights-only rounding differ by {rel:e}");
    }
    // The recurrence's hook alone does something: h_{t−1} rounded moves h.
    let mut only_rec = PrecisionMap::uniform(Precision::F32, cfg.layers);
    only_rec.set(MapStage { kind: StageKind::GruRec, layer: 0, backward: false }, Precision::F16);
    let (rd, names) = kernel_rounding(&only_rec, true);
    assert_eq!(names, ["gru.l0.rec=f16"]);
    assert_eq!((rd.gru_rec[0], rd.gru_input[0]), (crate::cpu::Round::F16, crate::cpu::Round::Exact));
    let (_, _, rec) = crate::engine::reference::traced_rounded(&cfg, &p, &batch, 1.0, &rd).unwrap();
    let (_, _, plain) = crate::engine::reference::traced(&cfg, &p, &batch, 1.0, None).unwrap();
    let (a, b) = (&rec.get("gru.l0.h").unwrap().data, &plain.get("gru.l0.h").unwrap().data);
    assert_eq!(a[..cfg.hidden], b[..cfg.hidden], "h_0 has no product with h_{{-1}} = 0");
    assert_ne!(a[cfg.hidden..], b[cfg.hidden..]);
}

#[test]
fn kernel_rounding_follows_the_kernels() {
    use crate::cpu::Round;
    // Per-row recurrences (not on cooperative matrices): their f16 variant
    // and the embedding's round to f16's mantissa in f32's range.
    let mut m = PrecisionMap::uniform(Precision::F16, 2);
    m.set(MapStage { kind: StageKind::Embed, layer: 0, backward: true }, Precision::F32);
    let (rd, _) = kernel_rounding(&m, false);
    assert_eq!(
        (rd.embed, rd.gru_rec[1], rd.gru_rec_bwd[0]),
        (Round::F16Mantissa, Round::F16Mantissa, Round::F16Mantissa)
    );
    assert_eq!((rd.gru_input[1], rd.attn_bwd, rd.head), (Round::F16, Round::F16, Round::F16));
    let (rd, _) = kernel_rounding(&m, true);
    assert_eq!(rd.gru_rec_bwd[1], Round::F16);
    // Today's mixed step off cooperative matrices: the recurrences stay exact.
    let (rd, names) = kernel_rounding(&PrecisionMap::default_for(Precision::F16, 2, false), false);
    assert_eq!((rd.gru_rec[0], rd.gru_rec_bwd[1], rd.embed), (Round::Exact, Round::Exact, Round::Exact));
    assert_eq!(names.len(), 8, "{names:?}");
}

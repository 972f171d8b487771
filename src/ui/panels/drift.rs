//! The drift plot: per step of a `dualscope drift` run, the divergence of
//! the tensor nearest to (or furthest past) its envelope and that envelope,
//! on a log axis, with a marker at the first step outside.

use egui::{Color32, RichText};
use egui_plot::{Line, PlotPoints, Points, VLine};

use crate::triage::drift::DriftReport;

/// `log10(x)` for the plot's log axis; `None` for values a log axis cannot
/// show (zero, negative, non-finite).
fn log10(x: f64) -> Option<f64> {
    (x.is_finite() && x > 0.0).then(|| x.log10())
}

/// Draws `r`: a summary line, then the plot (y: `log10` of the relative
/// divergence, labelled as powers of ten).
pub fn drift_plot(ui: &mut egui::Ui, r: &DriftReport) {
    let red = Color32::from_rgb(230, 60, 60);
    let blue = Color32::from_rgb(100, 160, 240);
    let gray = Color32::from_gray(160);
    let line = r.summary_line();
    ui.label(RichText::new(&line).color(if r.first_outside.is_some() { red } else { ui.visuals().text_color() }));
    if let (Some(p), Some(at)) = (&r.planted, r.planted_step) {
        ui.label(RichText::new(format!("planted: {p} from step {at} on")).weak());
    }
    if r.steps.is_empty() {
        ui.label("no steps ran");
        return;
    }
    let series = |f: &dyn Fn(&crate::triage::drift::DriftStep) -> f64| -> PlotPoints {
        r.steps.iter().filter_map(|s| log10(f(s)).map(|y| [s.step as f64, y])).collect()
    };
    let div = series(&|s| s.divergence[s.worst]);
    let env = series(&|s| s.envelope[s.worst]);
    // A non-finite divergence has no place on a log axis: its marker goes
    // one decade above the highest value drawn.
    let top = r
        .steps
        .iter()
        .flat_map(|s| [s.divergence[s.worst], s.envelope[s.worst]])
        .filter_map(log10)
        .fold(f64::NEG_INFINITY, f64::max);
    super::plot("drift_plot", 240.0)
        .x_axis_label("step")
        .y_axis_label("relative divergence from the f32 CPU run")
        .y_axis_formatter(|m, _| format!("{:.0e}", 10f64.powf(m.value)))
        .show(ui, |p| {
            p.line(Line::new("worst tensor's divergence", div).color(blue));
            p.line(Line::new("its rounding envelope", env).color(gray));
            if let Some(o) = &r.first_outside {
                let y = log10(o.divergence).unwrap_or(top + 1.0);
                p.vline(VLine::new(format!("first outside: step {}", o.step), o.step as f64).color(red));
                p.points(
                    Points::new(format!("{} at step {}", o.tensor, o.step), vec![[o.step as f64, y]])
                        .color(red)
                        .radius(5.0),
                );
            }
        });
}

#[cfg(test)]
mod tests {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;

    use super::*;
    use crate::step::Precision;
    use crate::triage::drift::{DRIFT_FORMAT, DriftStep, Envelope, Outside, TensorInfo};

    /// A report of `n` steps over two tensors, the second leaving its
    /// envelope at step 4 (with a non-finite divergence at the last step).
    fn report(n: u64, outside_at: Option<u64>) -> DriftReport {
        let env = Envelope::new(Precision::F32);
        let steps = (1..=n)
            .map(|k| {
                let bad = outside_at.is_some_and(|o| k >= o);
                let div = if k == n && bad {
                    f64::NAN
                } else if bad {
                    1e-3 * k as f64
                } else {
                    1e-8 * k as f64
                };
                DriftStep {
                    step: k,
                    loss_gpu: 5.0,
                    loss_cpu32: 5.0,
                    loss_cpu64: 5.0,
                    gpu_skipped: None,
                    divergence: vec![0.0, div],
                    reference: vec![0.0, 1e-7],
                    envelope: vec![env.bound(0.0, k), env.bound(1e-7, k)],
                    worst: 1,
                    outside: bad,
                }
            })
            .collect();
        DriftReport {
            format_version: DRIFT_FORMAT,
            config: crate::model::Config::tiny(),
            dataset: "corpus.txt".into(),
            precision: Precision::F32,
            gemm_path: "tiled_f32".into(),
            seed: 0,
            rows: 2,
            t: 7,
            steps_asked: n,
            optim: Default::default(),
            envelope: env,
            planted: outside_at.map(|_| "persistent=reset_before_matmul".into()),
            planted_step: outside_at,
            tensors: vec![
                TensorInfo { name: "head.bias".into(), n_elements: 256 },
                TensorInfo { name: "ctx.q.weight".into(), n_elements: 36 },
            ],
            steps,
            first_outside: outside_at.map(|o| Outside {
                step: o,
                tensor: "ctx.q.weight".into(),
                divergence: 1e-3 * o as f64,
                envelope: env.bound(1e-7, o),
                tensors: vec!["ctx.q.weight".into()],
            }),
            capture: None,
            notes: vec![],
        }
    }

    /// The plot draws a run with a step outside (and a NaN divergence), a
    /// clean run and an empty one, each with its summary line.
    #[test]
    fn the_drift_plot_draws() {
        for (r, says) in [
            (report(8, Some(4)), "first step outside the rounding envelope: 4 (ctx.q.weight: 4.0e-3 > "),
            (report(8, None), "first step outside the rounding envelope: none in 8 steps"),
            (report(0, None), "no steps ran"),
        ] {
            let mut h = Harness::builder().with_size(egui::vec2(600.0, 360.0)).build_ui(move |ui| drift_plot(ui, &r));
            h.run();
            h.get_by_label_contains(says);
        }
    }
}

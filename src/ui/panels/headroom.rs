//! The inspector's f16 headroom plot (docs/headroom.md): the exponent
//! histograms of a tensor's CPU and GPU values at the loss scale in force,
//! side by side, with f16's range marked, and the figures as text.

use egui::{Color32, RichText};
use egui_plot::{Bar, BarChart, VLine};

use crate::ladder::headroom::{
    EXP_MAX, EXP_MIN, EXP_MIN_NORMAL, ExpHistogram, Headroom, MARGIN_BITS, MARGIN_SUBNORMAL, MIN_SUBNORMAL,
    TensorHeadroom,
};

const CPU: Color32 = Color32::from_rgb(90, 170, 255);
const GPU: Color32 = Color32::from_rgb(255, 170, 60);

/// Where the underflow and overflow bins sit on the exponent axis.
const UNDER_X: f64 = (EXP_MIN - 2) as f64;
const OVER_X: f64 = (EXP_MAX + 2) as f64;

/// `CPU: max 1.2e3 = 1.9e-2 of 65504 (5.7 bits), subnormal 0.00%, zeros 12.5%, non-finite 0`.
pub fn side_line(label: &str, h: &Headroom) -> String {
    let bits = h.headroom_bits.map_or("no limit".into(), |b| format!("{b:.2} bits"));
    format!(
        "{label}: max |x·s| {:.3e} = {:.3e} of 65504 ({bits}), subnormal {:.2}% ({}), zeros {:.2}%, non-finite {}",
        h.max_abs,
        h.max_over_f16_max,
        100.0 * h.subnormal_share,
        h.subnormal,
        100.0 * h.zero_share,
        h.nonfinite
    )
}

/// Whether a side is under a warning margin.
fn under_margin(h: &Headroom) -> bool {
    h.under_bits_margin() || h.under_subnormal_margin()
}

/// One side's bars: each exponent bin, then the underflow and overflow bins,
/// offset so that the two sides stand side by side.
fn bars(label: &str, hist: &ExpHistogram, offset: f64, color: Color32) -> Vec<Bar> {
    let mut out: Vec<Bar> = (EXP_MIN..=EXP_MAX)
        .filter(|&e| hist.count(e) > 0)
        .map(|e| {
            Bar::new(e as f64 + offset, hist.count(e) as f64)
                .name(format!("{label} 2^{e}: {} values", hist.count(e)))
                .width(0.4)
                .fill(color)
        })
        .collect();
    for (x, n, what) in
        [(UNDER_X, hist.underflow, "below 2^-24 (zero in f16)"), (OVER_X, hist.overflow, "2^16 or more (inf in f16)")]
    {
        if n > 0 {
            out.push(Bar::new(x + offset, n as f64).name(format!("{label} {what}: {n} values")).width(0.4).fill(color));
        }
    }
    out
}

/// Draws the headroom of the selected tensor (`None`: it has none, e.g. a
/// session saved before the figures existed).
pub fn headroom_plot(ui: &mut egui::Ui, h: Option<&TensorHeadroom>) {
    ui.label(RichText::new("f16 headroom").strong());
    let Some(h) = h else {
        ui.label("No f16 headroom figures for this tensor (a ladder run from before they were recorded).");
        return;
    };
    ui.label(format!(
        "at loss scale {}: bars count the values by the binary exponent of |x·s|; left of the grey line (2^-14, f16's smallest normal) f16 is subnormal, right of the red one (2^15, the exponent of 65504) it overflows",
        h.scale
    ));
    ui.label(
        RichText::new(format!(
            "yellow: under a margin (under {MARGIN_BITS} bit of headroom, or over {}% and {MIN_SUBNORMAL} values subnormal); the ladder warns in f16",
            100.0 * MARGIN_SUBNORMAL
        ))
        .weak()
        .small(),
    );
    for (label, side) in [("CPU", &h.cpu), ("GPU", &h.gpu)] {
        let text = RichText::new(side_line(label, side)).monospace().size(11.0);
        ui.label(if under_margin(side) { text.color(Color32::YELLOW) } else { text });
    }
    // The whole of f16's range is always in view, and room above the bars for the legend.
    let top = [&h.cpu.histogram, &h.gpu.histogram]
        .iter()
        .flat_map(|g| g.counts.iter().chain([&g.underflow, &g.overflow]))
        .fold(0u64, |a, &b| a.max(b));
    super::plot("inspector_headroom", 180.0)
        .legend(egui_plot::Legend::default().position(egui_plot::Corner::RightTop))
        .include_x(UNDER_X - 1.0)
        .include_x(OVER_X + 1.0)
        .include_y(0.0)
        .include_y(top.max(1) as f64 * 1.6)
        .x_axis_label("binary exponent of |x·s|")
        .y_axis_label("values")
        .x_axis_formatter(|m, _| {
            let x = m.value.round();
            if x == UNDER_X {
                "under".into()
            } else if x == OVER_X {
                "over".into()
            } else {
                format!("2^{x}")
            }
        })
        .show(ui, |p| {
            p.bar_chart(BarChart::new("CPU", bars("CPU", &h.cpu.histogram, -0.2, CPU)).color(CPU));
            p.bar_chart(BarChart::new("GPU", bars("GPU", &h.gpu.histogram, 0.2, GPU)).color(GPU));
            // Unnamed, so that the legend lists only the two sides (the text says what the lines are).
            p.vline(VLine::new("", EXP_MIN_NORMAL as f64 - 0.5).color(Color32::from_gray(170)));
            p.vline(VLine::new("", EXP_MAX as f64 + 0.5).color(Color32::LIGHT_RED));
        });
}

#[cfg(test)]
mod tests {
    use egui_kittest::Harness;
    use egui_kittest::kittest::Queryable;

    use super::*;

    /// The plot draws a tensor with values across f16's range (an overflow,
    /// an underflow, a zero) with its figures, and says so when there are none.
    #[test]
    fn the_headroom_plot_draws() {
        let cpu = [70000.0f32, 1.0, 2f32.powi(-15), 0.0, -3.0, 1e-9];
        let gpu = [70001.0f32, 1.0, 2f32.powi(-15), 0.0, -3.0, f32::NAN];
        let h = TensorHeadroom::of(&cpu, &gpu, 1.0);
        assert_eq!(
            bars("CPU", &h.cpu.histogram, -0.2, CPU).len(),
            5,
            "three exponents, the underflow and the overflow bins"
        );
        let mut harness =
            Harness::builder().with_size(egui::vec2(900.0, 320.0)).build_ui(move |ui| headroom_plot(ui, Some(&h)));
        harness.run();
        harness.get_by_label_contains("CPU: max |x·s| 7.000e4 = 1.069e0 of 65504 (-0.10 bits), subnormal 40.00%");
        harness.get_by_label_contains("GPU: max |x·s| 7.000e4");
        harness.get_by_label_contains("non-finite 1");
        harness.get_by_label_contains("at loss scale 1");

        let mut none = Harness::builder().with_size(egui::vec2(600.0, 120.0)).build_ui(|ui| headroom_plot(ui, None));
        none.run();
        none.get_by_label_contains("No f16 headroom figures");
    }
}

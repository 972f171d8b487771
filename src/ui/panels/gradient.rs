//! The per-token context-stream gradient: position × feature of the `W_ctx`
//! contribution `‖g_t‖ · |c_t[f]|`, and the per-token norm `ctx.token_norm`.

use egui_plot::{Line, Plot, PlotPoints, VLine};

use crate::ui::command::Command;
use crate::ui::computed::Computed;
use crate::ui::heatmap::{Heatmap, HeatmapStyle};

pub fn heatmap(ui: &mut egui::Ui, c: &Computed, map: &mut Heatmap, cursor: usize, out: &mut Vec<Command>) {
    ui.label(
        egui::RichText::new(
            "rows: position; columns: feature f of c_t;  value |g_t| * |c_t[f]| (g_t = dloss/dlogits at t)",
        )
        .weak()
        .small(),
    );
    map.set_data(ui.ctx(), c.generation, || c.ctx_grad.clone());
    let describe = |r: usize, f: usize| format!("position {r}, feature {f}");
    let style = HeatmapStyle { height: 220.0, cursor_row: Some(cursor), describe: &describe };
    if let Some((row, _)) = map.show(ui, &style).clicked {
        out.push(Command::SetCursor(row));
    }
}

/// `ctx.token_norm` over positions; a click moves the cursor. Only the
/// positions in view are drawn, at most two points (a bucket's smallest and
/// largest value) per pixel, so that a 16k-position row costs what a short one does.
pub fn norm_plot(ui: &mut egui::Ui, c: &Computed, cursor: usize, out: &mut Vec<Command>) {
    let norms = c.trace.get("ctx.token_norm").map_or(&[][..], |t| &t.data[..]);
    let buckets = ui.available_width().max(64.0) as usize;
    let last = c.t.saturating_sub(1) as f64;
    let resp = Plot::new("token_norm_plot")
        .height(120.0)
        .allow_scroll(false)
        .include_y(0.0)
        .include_x(0.0)
        .include_x(last)
        .x_axis_label("position")
        .show(ui, |p| {
            let b = p.plot_bounds();
            let lo = b.min()[0].floor().clamp(0.0, last) as usize;
            let hi = (b.max()[0].ceil().clamp(0.0, last) as usize + 1).min(norms.len());
            p.line(Line::new("ctx.token_norm", PlotPoints::new(decimate(norms, lo..hi.max(lo), buckets))));
            p.vline(VLine::new("cursor", cursor as f64).color(egui::Color32::from_rgb(255, 140, 0)));
            p.pointer_coordinate()
        });
    if resp.response.clicked()
        && let Some(at) = resp.inner
    {
        let pos = at.x.round().clamp(0.0, last) as usize;
        out.push(Command::SetCursor(pos));
    }
}

/// The points `[i, v[i]]` of `range`, or where it holds more than two per
/// bucket, each of `buckets` runs of positions as its smallest and largest
/// value in position order (a non-finite value, where there is one, in place
/// of the largest, so that it shows).
pub fn decimate(v: &[f32], range: std::ops::Range<usize>, buckets: usize) -> Vec<[f64; 2]> {
    let n = range.len();
    if n <= 2 * buckets.max(1) {
        return range.map(|i| [i as f64, v[i] as f64]).collect();
    }
    let mut out = Vec::with_capacity(2 * buckets);
    for k in 0..buckets {
        let (s, e) = (range.start + k * n / buckets, range.start + (k + 1) * n / buckets);
        if s == e {
            continue;
        }
        let (mut lo, mut hi) = (s, s);
        for i in s..e {
            let x = v[i];
            if !x.is_finite() {
                hi = i;
                break;
            }
            if x < v[lo] {
                lo = i;
            }
            if v[hi].is_finite() && x > v[hi] {
                hi = i;
            }
        }
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push([a as f64, v[a] as f64]);
        if b != a {
            out.push([b as f64, v[b] as f64]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::decimate;

    #[test]
    fn decimation_keeps_extremes_and_non_finite() {
        let v: Vec<f32> = (0..16384).map(|i| (i % 100) as f32).collect();
        let short = decimate(&v, 10..20, 100);
        assert_eq!(short.len(), 10, "few positions: every one");
        assert_eq!(short[0], [10.0, 10.0]);
        let d = decimate(&v, 0..16384, 500);
        assert!(d.len() <= 1000, "{}", d.len());
        let top = d.iter().map(|p| p[1]).fold(f64::MIN, f64::max);
        let bottom = d.iter().map(|p| p[1]).fold(f64::MAX, f64::min);
        assert_eq!((bottom, top), (0.0, 99.0), "the extremes survive");
        assert!(d.windows(2).all(|w| w[0][0] < w[1][0]), "in position order");
        let mut w = v.clone();
        w[12345] = f32::NAN;
        assert!(decimate(&w, 0..16384, 500).iter().any(|p| p[0] == 12345.0 && p[1].is_nan()));
    }
}

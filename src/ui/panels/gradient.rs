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

/// `ctx.token_norm` over positions; a click moves the cursor.
pub fn norm_plot(ui: &mut egui::Ui, c: &Computed, cursor: usize, out: &mut Vec<Command>) {
    let norms = c.series("ctx.token_norm");
    let points: PlotPoints = norms.iter().enumerate().map(|(i, &v)| [i as f64, v as f64]).collect();
    let resp =
        Plot::new("token_norm_plot").height(120.0).allow_scroll(false).include_y(0.0).x_axis_label("position").show(
            ui,
            |p| {
                p.line(Line::new("ctx.token_norm", points));
                p.vline(VLine::new("cursor", cursor as f64).color(egui::Color32::from_rgb(255, 140, 0)));
                p.pointer_coordinate()
            },
        );
    if resp.response.clicked()
        && let Some(at) = resp.inner
    {
        let pos = at.x.round().clamp(0.0, c.t.saturating_sub(1) as f64) as usize;
        out.push(Command::SetCursor(pos));
    }
}

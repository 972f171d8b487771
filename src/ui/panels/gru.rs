//! Each GRU layer's hidden state and gates at the cursor, as colour strips.

use egui::{Color32, Rect, Sense, pos2, vec2};

use crate::ui::colormap::ColorMap;
use crate::ui::computed::Computed;
use crate::ui::heatmap::fmt_value;

const NAMES: [(&str, ColorMap, f32, f32); 4] = [
    ("h", ColorMap::Diverging, -1.0, 1.0),
    ("r", ColorMap::Sequential, 0.0, 1.0),
    ("z", ColorMap::Sequential, 0.0, 1.0),
    ("n", ColorMap::Diverging, -1.0, 1.0),
];

pub fn show(ui: &mut egui::Ui, c: &Computed, pos: usize) {
    ui.label(
        egui::RichText::new("h, n: blue -1 to red +1;  r, z: 0 (purple) to 1 (yellow); magenta NaN").weak().small(),
    );
    for l in 0..c.cfg.layers {
        for (g, map, lo, hi) in NAMES {
            let values = c.row(&format!("gru.l{l}.{g}"), pos);
            ui.horizontal(|ui| {
                ui.add_sized([42.0, 14.0], egui::Label::new(egui::RichText::new(format!("L{l} {g}")).monospace()));
                strip(ui, values, map, lo, hi, &format!("layer {l} {g}"));
            });
        }
        ui.add_space(4.0);
    }
}

/// One value per cell across the available width; hover names the value.
fn strip(ui: &mut egui::Ui, values: &[f32], map: ColorMap, lo: f32, hi: f32, name: &str) {
    let (rect, resp) = ui.allocate_exact_size(vec2(ui.available_width(), 14.0), Sense::hover());
    if values.is_empty() {
        return;
    }
    let painter = ui.painter_at(rect);
    let w = rect.width() / values.len() as f32;
    for (i, &v) in values.iter().enumerate() {
        let x = rect.min.x + i as f32 * w;
        let cell = Rect::from_min_max(pos2(x, rect.min.y), pos2(x + w + 0.5, rect.max.y));
        painter.rect_filled(cell, 0.0, map.color(v, lo, hi));
    }
    painter.rect_stroke(rect, 0.0, egui::Stroke::new(1.0, Color32::DARK_GRAY), egui::StrokeKind::Outside);
    if let Some(p) = resp.hover_pos() {
        let i = (((p.x - rect.min.x) / w) as usize).min(values.len() - 1);
        resp.on_hover_text_at_pointer(format!("{name}[{i}] = {}", fmt_value(values[i])));
    }
}

//! Each GRU layer's hidden state and gates at the cursor, as colour strips:
//! the CPU's, and where the GPU ran, the GPU's and their difference.

use egui::{Color32, Rect, RichText, Sense, pos2, vec2};

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
        RichText::new("h, n: blue -1 to red +1;  r, z: 0 (purple) to 1 (yellow); diff = GPU - CPU, blue - to red +, scaled to its largest |diff|; magenta NaN")
            .weak()
            .small(),
    );
    match &c.gpu {
        Ok(g) => {
            ui.label(
                RichText::new(format!(
                    "GPU trace of the same row: loss {:.6} (CPU {:.6}), largest |diff| here {} in {}",
                    g.loss,
                    c.loss,
                    fmt_value(g.divergence.get(pos).copied().unwrap_or(0.0)),
                    g.worst_tensor.get(pos).map_or("-", |s| if s.is_empty() { "-" } else { s })
                ))
                .small(),
            );
        }
        Err(why) => {
            ui.label(RichText::new(format!("CPU only: {why}")).small().color(Color32::from_rgb(230, 180, 40)));
        }
    }
    let gpu = c.gpu.is_ok();
    if gpu {
        ui.horizontal(|ui| {
            ui.add_space(LABEL + 4.0);
            let w = (ui.available_width() - 2.0 * GAP) / 3.0;
            for h in ["CPU", "GPU", "GPU - CPU"] {
                ui.add_sized([w, 12.0], egui::Label::new(RichText::new(h).small().strong()));
                ui.add_space(GAP - ui.spacing().item_spacing.x);
            }
        });
    }
    for l in 0..c.cfg.layers {
        for (g, map, lo, hi) in NAMES {
            let name = format!("gru.l{l}.{g}");
            let cpu = c.row(&name, pos);
            ui.horizontal(|ui| {
                ui.add_sized(
                    [LABEL, 14.0],
                    egui::Label::new(RichText::new(format!("L{l} {g}")).monospace().size(10.5)),
                );
                if !gpu {
                    strip(ui, ui.available_width(), cpu, map, lo, hi, &format!("layer {l} {g}"));
                    return;
                }
                let w = (ui.available_width() - 2.0 * GAP) / 3.0;
                strip(ui, w, cpu, map, lo, hi, &format!("layer {l} {g} CPU"));
                ui.add_space(GAP - ui.spacing().item_spacing.x);
                let gv = c.gpu_row(&name, pos);
                strip(ui, w, gv, map, lo, hi, &format!("layer {l} {g} GPU"));
                ui.add_space(GAP - ui.spacing().item_spacing.x);
                let diff: Vec<f32> = cpu.iter().zip(gv).map(|(a, b)| b - a).collect();
                let m = diff.iter().filter(|v| v.is_finite()).fold(0.0f32, |m, v| m.max(v.abs()));
                let what = format!("layer {l} {g} GPU - CPU (colours to ±{})", short(m));
                strip(ui, w, &diff, ColorMap::Diverging, -m, m, &what);
            });
        }
        ui.add_space(4.0);
    }
}

const LABEL: f32 = 42.0;
const GAP: f32 = 10.0;

fn short(v: f32) -> String {
    if v == 0.0 { "0".into() } else { format!("{v:.0e}") }
}

/// One value per cell across the available width; hover names the value.
fn strip(ui: &mut egui::Ui, width: f32, values: &[f32], map: ColorMap, lo: f32, hi: f32, name: &str) {
    let (rect, resp) = ui.allocate_exact_size(vec2(width.max(8.0), 14.0), Sense::hover());
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

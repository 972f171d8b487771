//! Attention: each head's row at the cursor (bars over key positions) and the
//! whole-sequence heatmap of one head (query position × window slot).

use egui_plot::{Bar, BarChart, Plot};

use crate::ui::command::Command;
use crate::ui::computed::Computed;
use crate::ui::heatmap::{Heatmap, HeatmapStyle};

/// Bar plots of every head's weights at `pos`, against key position.
pub fn rows(ui: &mut egui::Ui, c: &Computed, pos: usize, selected: usize, out: &mut Vec<Command>) {
    let (nh, w) = (c.cfg.heads, c.cfg.window);
    let attn = c.row("ctx.attn", pos);
    if attn.len() < nh * w {
        return;
    }
    let per_row = 2;
    for first in (0..nh).step_by(per_row) {
        ui.columns(per_row, |cols| {
            for (k, ui) in cols.iter_mut().enumerate() {
                let h = first + k;
                if h >= nh {
                    continue;
                }
                let bars: Vec<Bar> = (0..w)
                    .filter_map(|slot| {
                        let key = pos as i64 + 1 + slot as i64 - w as i64;
                        (key >= 0).then(|| Bar::new(key as f64, attn[h * w + slot] as f64).width(0.8))
                    })
                    .collect();
                let title = if h == selected { format!("head {h} (in heatmap)") } else { format!("head {h}") };
                if ui.selectable_label(h == selected, title).on_hover_text(Command::SelectHead(h).tooltip()).clicked() {
                    out.push(Command::SelectHead(h));
                }
                Plot::new(("attn_row", h))
                    .height(110.0)
                    .allow_drag(false)
                    .allow_zoom(false)
                    .allow_scroll(false)
                    .allow_boxed_zoom(false)
                    .include_y(0.0)
                    // The whole window, also where it reaches before the sequence's start.
                    .include_x(pos as f64 - w as f64 + 0.5)
                    .include_x(pos as f64 + 0.5)
                    .show(ui, |p| p.bar_chart(BarChart::new(format!("head {h}"), bars)));
            }
        });
    }
    ui.label(egui::RichText::new("x: key position; y: weight").weak().small());
}

/// The heatmap of head `head` over the whole sequence, with the head selector.
pub fn heatmap(ui: &mut egui::Ui, c: &Computed, map: &mut Heatmap, head: usize, cursor: usize, out: &mut Vec<Command>) {
    let head = head.min(c.cfg.heads - 1);
    ui.horizontal(|ui| {
        ui.label("Head:");
        for h in 0..c.cfg.heads {
            let r = ui.selectable_label(h == head, format!("{h}")).on_hover_text(Command::SelectHead(h).tooltip());
            if r.clicked() && h != head {
                out.push(Command::SelectHead(h));
            }
        }
        ui.label(egui::RichText::new("rows: query position; columns: window slot").weak().small());
    });
    let key = c.generation.wrapping_mul(64).wrapping_add(head as u64);
    map.set_data(ui.ctx(), key, || std::sync::Arc::new(c.attention(head)));
    let w = c.cfg.window;
    let describe = |r: usize, s: usize| {
        let key = r as i64 + 1 + s as i64 - w as i64;
        format!("query {r}, slot {s} (key {key})")
    };
    let style = HeatmapStyle { height: 260.0, cursor_row: Some(cursor), describe: &describe };
    if let Some((row, _)) = map.show(ui, &style).clicked {
        out.push(Command::SetCursor(row));
    }
}

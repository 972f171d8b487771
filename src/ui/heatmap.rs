//! A reusable heatmap: a colour-mapped texture of a [`Matrix`] (rows down,
//! columns across) with a colour bar, the value under the pointer, zoom (scroll:
//! rows; ctrl+scroll: columns), pan (drag), reset (double-click), and NaN/±Inf
//! in their own colours. The textures are built once per data change (`key`),
//! not per frame: the data in tiles of rows at full resolution, and a pyramid
//! of coarser levels (blocks of 2, 4, … rows pooled) for views that show more
//! rows than pixels; a frame draws only the tiles of one level that the view
//! reaches, so a 16384 × 128 tensor costs a few quads while the cursor moves
//! (docs/long-rows.md). When the cursor row leaves the view, the view follows it.

use std::sync::Arc;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Vec2, pos2, vec2};

use super::colormap::{self, ColorMap};
use super::computed::Matrix;

mod tiles;
use tiles::{Pyramid, TILE_ROWS, non_finite_runs, pool};

/// The data a heatmap shows, its texture and its view. One per heatmap on screen.
pub struct Heatmap {
    name: String,
    colormap: ColorMap,
    key: Option<u64>,
    matrix: Option<Arc<Matrix>>,
    /// The textures: the data in tiles, and its coarser levels.
    pyramid: Pyramid,
    range: (f32, f32),
    /// The finite minimum and maximum of the data (for the summary line).
    finite: (f32, f32),
    /// Runs of rows holding any non-finite value (`start..end`), marked beside
    /// the map (a row thinner than a pixel would otherwise vanish when the map
    /// is zoomed out).
    non_finite_runs: Vec<(usize, usize)>,
    counts: [usize; 3],
    /// The cursor row of the last frame: when it moves out of the view, the view follows.
    last_cursor: Option<usize>,
    /// The visible part, in cell units (x: columns, y: rows).
    view: Option<Rect>,
    builds: u64,
    /// Values above the colour range's top exist (it is the 99.5th percentile).
    saturated: bool,
    /// The hover hint (what scrolling, dragging and clicking do).
    hint: &'static str,
}

/// What happened to a heatmap this frame.
pub struct HeatmapResponse {
    /// The cell clicked (row, column).
    pub clicked: Option<(usize, usize)>,
    pub response: egui::Response,
}

/// How to draw and describe one heatmap.
pub struct HeatmapStyle<'a> {
    pub height: f32,
    /// Highlighted row (the cursor).
    pub cursor_row: Option<usize>,
    /// Describes a cell for the hover line: (row, column) → text.
    pub describe: &'a dyn Fn(usize, usize) -> String,
}

const GUTTER: f32 = 44.0;
const HINT: &str =
    "scroll: zoom positions · ctrl+scroll: zoom columns · drag: pan · double-click: reset · click: move the cursor";
const BAR: f32 = 78.0;

impl Heatmap {
    pub fn new(name: impl Into<String>, colormap: ColorMap) -> Self {
        Heatmap {
            name: name.into(),
            colormap,
            key: None,
            matrix: None,
            pyramid: Pyramid::default(),
            range: (0.0, 0.0),
            finite: (0.0, 0.0),
            non_finite_runs: Vec::new(),
            counts: [0; 3],
            last_cursor: None,
            view: None,
            builds: 0,
            saturated: false,
            hint: HINT,
        }
    }

    /// The same heatmap with another hover hint.
    pub fn with_hint(mut self, hint: &'static str) -> Self {
        self.hint = hint;
        self
    }

    /// Shows `view` (cell units) from the next frame on, kept inside the data.
    pub fn set_view(&mut self, view: Rect) {
        if let Some(m) = &self.matrix {
            let full = Self::full_view(m);
            let w = view.width().clamp(1.0f32.min(full.width()), full.width());
            let h = view.height().clamp(1.0f32.min(full.height()), full.height());
            self.view = Some(clamp_view(Rect::from_min_size(view.min, vec2(w, h)), full));
        }
    }

    /// The data's extent in cell units, once there is data.
    pub fn full(&self) -> Option<Rect> {
        self.matrix.as_deref().map(Self::full_view)
    }

    /// Sets the data; `build` runs (and the texture is rebuilt) only when `key` changed.
    pub fn set_data(&mut self, ctx: &egui::Context, key: u64, build: impl FnOnce() -> Arc<Matrix>) {
        self.set_data_in(ctx, key, None, build);
    }

    /// [`Self::set_data`] with the colour range given (`None`: the data's
    /// robust range), so that maps shown side by side share one scale.
    pub fn set_data_in(
        &mut self,
        ctx: &egui::Context,
        key: u64,
        range: Option<(f32, f32)>,
        build: impl FnOnce() -> Arc<Matrix>,
    ) {
        if self.key == Some(key) && !self.pyramid.is_empty() {
            return;
        }
        let m = build();
        let (lo, hi) = range.unwrap_or_else(|| colormap::robust_range(&m.data));
        let (counts, runs) = non_finite_runs(&m);
        // Wider than a texture may be: pool blocks of columns into one texel each.
        let max_side = ctx.input(|i| i.max_texture_side).max(64);
        let pooled = pool(&m, 1, m.cols.div_ceil(max_side).max(1));
        let name = format!("heatmap:{}", self.name);
        let tile_rows = max_side.min(TILE_ROWS);
        self.pyramid.build(ctx, &name, self.colormap, pooled.as_ref().unwrap_or(&m), (lo, hi), tile_rows);
        let same_shape = self.matrix.as_ref().is_some_and(|old| old.rows == m.rows && old.cols == m.cols);
        if !same_shape {
            self.view = None;
        }
        self.key = Some(key);
        self.finite = colormap::finite_range(&m.data);
        // Saturated when the 99.5th percentile cut off a visibly larger maximum.
        self.saturated = self.finite.1 > hi + 1e-3 * hi.abs();
        self.matrix = Some(m);
        self.range = (lo, hi);
        self.non_finite_runs = runs;
        self.counts = counts;
        self.builds += 1;
    }

    /// The level and the tiles a view draws ([`Pyramid::tiles_in_view`]).
    pub fn tiles_in_view(&self, map: Rect, view: Rect, full: Rect) -> (usize, Vec<(usize, Rect, Rect)>) {
        self.pyramid.tiles_in_view(map, view, full)
    }

    /// The textures of each level of the pyramid (for tests).
    pub fn tiles_per_level(&self) -> Vec<usize> {
        self.pyramid.tiles_per_level()
    }

    /// The visible part in cell units (x: columns, y: rows); `None` before the first frame.
    pub fn view(&self) -> Option<Rect> {
        self.view
    }

    /// How many times the texture was built (for tests: once per data change).
    pub fn builds(&self) -> u64 {
        self.builds
    }

    fn full_view(m: &Matrix) -> Rect {
        Rect::from_min_max(Pos2::ZERO, pos2(m.cols as f32, m.rows as f32))
    }

    pub fn show(&mut self, ui: &mut egui::Ui, style: &HeatmapStyle<'_>) -> HeatmapResponse {
        let width = ui.available_width().max(GUTTER + BAR + 40.0);
        let (outer, response) = ui.allocate_exact_size(vec2(width, style.height), Sense::click_and_drag());
        let name = self.name.clone();
        response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, &name));
        let response = response.on_hover_text(self.hint);
        let (Some(m), false) = (self.matrix.clone(), self.pyramid.is_empty()) else {
            ui.painter().text(outer.center(), Align2::CENTER_CENTER, "no data", FontId::default(), Color32::GRAY);
            return HeatmapResponse { clicked: None, response };
        };
        // Above the map: a line for the column range.
        let map = Rect::from_min_max(outer.min + vec2(GUTTER, 12.0), pos2(outer.max.x - BAR, outer.max.y));
        let full = Self::full_view(&m);
        let mut view = self.view.unwrap_or(full);
        // A cursor moved out of the view brings the view to it (centred), once per move.
        if let Some(r) = style.cursor_row
            && self.last_cursor != Some(r)
        {
            self.last_cursor = Some(r);
            let (top, bottom) = (r as f32, r as f32 + 1.0);
            if top < view.min.y || bottom > view.max.y {
                view = clamp_view(view.translate(vec2(0.0, (top + bottom) / 2.0 - view.center().y)), full);
            }
        }

        // Zoom around the pointer, pan by dragging, reset by double-clicking.
        if let Some(p) = response.hover_pos().filter(|p| map.contains(*p)) {
            let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta()));
            let at = to_cell(map, view, p);
            if scroll.y != 0.0 {
                view = zoom_axis(view, at, (-scroll.y * 0.004).exp(), false, full);
                ui.input_mut(|i| i.smooth_scroll_delta = Vec2::ZERO);
            }
            if zoom != 1.0 {
                view = zoom_axis(view, at, 1.0 / zoom, true, full);
            }
        }
        if response.dragged() {
            let d = response.drag_delta();
            let cells = vec2(-d.x * view.width() / map.width(), -d.y * view.height() / map.height());
            view = clamp_view(view.translate(cells), full);
        }
        let double_clicked = response.double_clicked();
        if double_clicked {
            view = full;
        }
        self.view = Some(view);

        let painter = ui.painter_at(outer);
        self.pyramid.paint(&painter, map, view, full);
        painter.rect_stroke(map, 0.0, Stroke::new(1.0, Color32::DARK_GRAY), egui::StrokeKind::Outside);

        // Non-finite rows, marked in the gutter: the runs the view reaches,
        // those less than a pixel apart drawn as one mark.
        let first = self.non_finite_runs.partition_point(|&(_, end)| (end as f32) <= view.min.y);
        let mut marks: Vec<(f32, f32)> = Vec::new();
        for &(start, end) in self.non_finite_runs[first..].iter().take_while(|(s, _)| (*s as f32) < view.max.y) {
            let y0 = to_screen_y(map, view, start as f32).max(map.min.y);
            let y1 = to_screen_y(map, view, end as f32).min(map.max.y);
            match marks.last_mut() {
                Some(last) if y0 - last.1 < 1.0 => last.1 = last.1.max(y1),
                _ => marks.push((y0, y1)),
            }
        }
        for (y0, y1) in marks {
            let (y0, y1) = if y1 - y0 < 2.0 { ((y0 + y1) / 2.0 - 1.0, (y0 + y1) / 2.0 + 1.0) } else { (y0, y1) };
            let mark = Rect::from_min_max(pos2(map.min.x - 6.0, y0), pos2(map.min.x - 1.0, y1));
            painter.rect_filled(mark, 0.0, colormap::NAN);
        }
        // The cursor row.
        if let Some(r) = style.cursor_row {
            let y0 = to_screen_y(map, view, r as f32);
            let y1 = to_screen_y(map, view, r as f32 + 1.0).max(y0 + 2.0);
            if y1 >= map.min.y && y0 <= map.max.y {
                let row = Rect::from_min_max(pos2(map.min.x, y0), pos2(map.max.x, y1));
                painter.rect_stroke(
                    row,
                    0.0,
                    Stroke::new(1.5, Color32::from_rgb(255, 140, 0)),
                    egui::StrokeKind::Outside,
                );
                painter.text(
                    pos2(map.min.x - 8.0, (y0 + y1) / 2.0),
                    Align2::RIGHT_CENTER,
                    format!("{r}"),
                    FontId::monospace(10.0),
                    Color32::from_rgb(255, 140, 0),
                );
            }
        }
        // Row range of the view, where the cursor's label does not cover it.
        let small = FontId::monospace(10.0);
        let dim = ui.visuals().weak_text_color();
        let cursor_y = style.cursor_row.map(|r| to_screen_y(map, view, r as f32 + 0.5));
        let clear = |y: f32| cursor_y.is_none_or(|c| (c - y).abs() > 12.0);
        if clear(map.min.y + 5.0) {
            let top = format!("{}", view.min.y as usize);
            painter.text(map.left_top() + vec2(-8.0, 0.0), Align2::RIGHT_TOP, top, small.clone(), dim);
        }
        if clear(map.max.y - 5.0) {
            let bottom = format!("{}", (view.max.y.ceil() as usize).saturating_sub(1));
            painter.text(map.left_bottom() + vec2(-8.0, 0.0), Align2::RIGHT_BOTTOM, bottom, small.clone(), dim);
        }
        painter.text(
            map.left_top() - vec2(0.0, 1.0),
            Align2::LEFT_BOTTOM,
            format!("{}", view.min.x as usize),
            small.clone(),
            dim,
        );
        painter.text(
            map.right_top() - vec2(0.0, 1.0),
            Align2::RIGHT_BOTTOM,
            format!("{}", (view.max.x.ceil() as usize).saturating_sub(1)),
            small.clone(),
            dim,
        );
        let text = ui.visuals().text_color();
        self.draw_bar(&painter, Rect::from_min_max(pos2(map.max.x + 8.0, map.min.y), outer.max), &small, text);

        // The value under the pointer.
        let hovered = response.hover_pos().filter(|p| map.contains(*p)).map(|p| to_cell(map, view, p));
        let cell = |c: Pos2| {
            let (r, col) = (c.y.floor() as usize, c.x.floor() as usize);
            (r < m.rows && col < m.cols).then_some((r, col))
        };
        let hover_text = match hovered.and_then(cell) {
            Some((r, c)) => format!("{}: {}", (style.describe)(r, c), fmt_value(m.get(r, c))),
            None => self.summary(&m),
        };
        ui.label(egui::RichText::new(hover_text).monospace().size(11.0));
        let clicked = if response.clicked() && !double_clicked {
            response.interact_pointer_pos().filter(|p| map.contains(*p)).and_then(|p| cell(to_cell(map, view, p)))
        } else {
            None
        };
        HeatmapResponse { clicked, response }
    }

    fn summary(&self, m: &Matrix) -> String {
        let [nan, pinf, ninf] = self.counts;
        let (lo, hi) = self.finite;
        let mut s = format!("{} × {}, range [{}, {}]", m.rows, m.cols, fmt_value(lo), fmt_value(hi));
        if self.saturated {
            s += &format!(", colours saturate at {}", fmt_short(self.range.1));
        }
        if nan + pinf + ninf > 0 {
            s += &format!("; NaN {nan} (magenta), +Inf {pinf} (white), -Inf {ninf} (cyan)");
        }
        s
    }

    fn draw_bar(&self, painter: &egui::Painter, area: Rect, font: &FontId, text: Color32) {
        let bar = Rect::from_min_size(area.min, vec2(14.0, area.height()));
        let (lo, hi) = self.colormap.bar_range(self.range.0, self.range.1);
        let steps = 64;
        for i in 0..steps {
            let f0 = i as f32 / steps as f32;
            let f1 = (i + 1) as f32 / steps as f32;
            let v = hi - (hi - lo) * (f0 + f1) / 2.0;
            let r = Rect::from_min_max(
                pos2(bar.min.x, bar.lerp_inside(vec2(0.0, f0)).y),
                pos2(bar.max.x, bar.lerp_inside(vec2(0.0, f1)).y),
            );
            painter.rect_filled(r, 0.0, self.colormap.color(v, self.range.0, self.range.1));
        }
        let top = if self.saturated { format!("≥{}", fmt_short(hi)) } else { fmt_short(hi) };
        painter.text(bar.right_top() + vec2(3.0, 0.0), Align2::LEFT_TOP, top, font.clone(), text);
        painter.text(bar.right_bottom() + vec2(3.0, 0.0), Align2::LEFT_BOTTOM, fmt_short(lo), font.clone(), text);
    }
}

fn to_cell(map: Rect, view: Rect, p: Pos2) -> Pos2 {
    pos2(
        view.min.x + (p.x - map.min.x) / map.width() * view.width(),
        view.min.y + (p.y - map.min.y) / map.height() * view.height(),
    )
}

fn to_screen_y(map: Rect, view: Rect, row: f32) -> f32 {
    map.min.y + (row - view.min.y) / view.height() * map.height()
}

/// Scales one axis of `view` by `factor` around `at`, keeping at least one cell.
fn zoom_axis(view: Rect, at: Pos2, factor: f32, columns: bool, full: Rect) -> Rect {
    let (lo, hi, c, max) =
        if columns { (view.min.x, view.max.x, at.x, full.max.x) } else { (view.min.y, view.max.y, at.y, full.max.y) };
    let span = ((hi - lo) * factor).clamp(1.0_f32.min(max), max);
    let t = if hi > lo { (c - lo) / (hi - lo) } else { 0.5 };
    let new_lo = c - t * span;
    let mut v = view;
    if columns {
        v.min.x = new_lo;
        v.max.x = new_lo + span;
    } else {
        v.min.y = new_lo;
        v.max.y = new_lo + span;
    }
    clamp_view(v, full)
}

/// Moves `view` back inside `full` without changing its size.
fn clamp_view(view: Rect, full: Rect) -> Rect {
    let dx = if view.min.x < 0.0 { -view.min.x } else { (full.max.x - view.max.x).min(0.0) };
    let dy = if view.min.y < 0.0 { -view.min.y } else { (full.max.y - view.max.y).min(0.0) };
    view.translate(vec2(dx, dy))
}

/// A value in at most 8 characters, for the colour bar.
fn fmt_short(v: f32) -> String {
    let a = v.abs();
    if !v.is_finite() || a == 0.0 || (0.01..1000.0).contains(&a) { format!("{v:.3}") } else { format!("{v:.1e}") }
}

/// A value in a short, fixed form.
pub fn fmt_value(v: f32) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e4).contains(&a) { format!("{v:.3e}") } else { format!("{v:.4}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoom_keeps_point_and_bounds() {
        let full = Rect::from_min_max(Pos2::ZERO, pos2(10.0, 100.0));
        let v = zoom_axis(full, pos2(5.0, 50.0), 0.5, false, full);
        assert_eq!((v.min.y, v.max.y), (25.0, 75.0));
        assert_eq!((v.min.x, v.max.x), (0.0, 10.0));
        let out = zoom_axis(v, pos2(5.0, 50.0), 100.0, false, full);
        assert_eq!(out, full);
        let shifted = clamp_view(v.translate(vec2(0.0, 60.0)), full);
        assert_eq!((shifted.min.y, shifted.max.y), (50.0, 100.0));
    }
}

#[cfg(test)]
mod texture_tests {
    use super::*;

    #[test]
    fn builds_once_per_key_and_counts_non_finite() {
        let ctx = egui::Context::default();
        let (rows, cols) = (4096, 128);
        let mut data: Vec<f32> = (0..rows * cols).map(|i| (i % 97) as f32).collect();
        data[5 * cols + 3] = f32::NAN;
        data[7 * cols] = f32::INFINITY;
        data[7 * cols + 1] = f32::NEG_INFINITY;
        let m = Arc::new(Matrix { rows, cols, data });
        let mut h = Heatmap::new("test", ColorMap::Sequential);
        let start = std::time::Instant::now();
        h.set_data(&ctx, 1, || m.clone());
        let built = start.elapsed();
        for _ in 0..10 {
            h.set_data(&ctx, 1, || panic!("the same key must not rebuild"));
        }
        assert_eq!(h.builds(), 1);
        assert_eq!(h.non_finite_runs, [(5, 6), (7, 8)]);
        assert_eq!(h.counts, [1, 1, 1]);
        assert!(built.as_secs_f32() < 2.0, "building a 4096 × 128 texture took {built:?}");
        h.set_data(&ctx, 2, || m.clone());
        assert_eq!(h.builds(), 2);
    }

    /// A 16384-row map: tiles at full resolution and a pyramid of pooled
    /// levels, built once; a view draws the level of about one texel row per
    /// pixel and only the tiles it reaches, mapped to the rows it shows.
    #[test]
    fn long_maps_draw_only_the_visible_tiles() {
        let ctx = egui::Context::default();
        let side = ctx.input(|i| i.max_texture_side).min(TILE_ROWS);
        let (rows, cols) = (16384, 32);
        let mut data: Vec<f32> = (0..rows * cols).map(|i| (i / cols) as f32).collect();
        data[(rows - 1) * cols] = f32::NAN;
        let m = Arc::new(Matrix { rows, cols, data });
        let mut h = Heatmap::new("long", ColorMap::Sequential);
        h.set_data(&ctx, 1, || m.clone());
        let tiles = h.tiles_per_level();
        assert_eq!(tiles[0], rows.div_ceil(side));
        assert_eq!(tiles.len(), 8, "16384 rows pool to 128 in 7 halvings: {tiles:?}");
        assert_eq!(h.non_finite_runs, [(rows - 1, rows)]);
        let full = Heatmap::full_view(&m);
        let map = Rect::from_min_size(Pos2::ZERO, vec2(400.0, 256.0));
        // The whole map in 256 pixels: 64 rows a pixel, level 6 (blocks of 64 rows).
        let (l, drawn) = h.tiles_in_view(map, full, full);
        assert_eq!(l, 6);
        assert_eq!(drawn.len(), h.tiles_per_level()[6]);
        // 100 rows at the end: level 0, the last tile only, its last 100 rows.
        let end = Rect::from_min_max(pos2(0.0, (rows - 100) as f32), pos2(cols as f32, rows as f32));
        let (l, drawn) = h.tiles_in_view(map, end, full);
        assert_eq!(l, 0);
        assert_eq!(drawn.len(), 1);
        let (i, screen, uv) = drawn[0];
        assert_eq!(i, tiles[0] - 1);
        assert_eq!(screen, map);
        let tile = (rows - i * side) as f32;
        assert!((uv.min.y - (tile - 100.0) / tile).abs() < 1e-6 && uv.max.y == 1.0, "{uv:?}");
        // A view across a tile boundary draws both tiles, meeting where the boundary is.
        let across = Rect::from_min_max(pos2(0.0, side as f32 - 50.0), pos2(cols as f32, side as f32 + 50.0));
        let (_, drawn) = h.tiles_in_view(map, across, full);
        assert_eq!(drawn.iter().map(|d| d.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(drawn[0].1.max.y, drawn[1].1.min.y);
        assert!((drawn[0].1.max.y - 128.0).abs() < 1e-3);
        assert_eq!(h.builds(), 1);
    }
}

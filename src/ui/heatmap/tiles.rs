//! The heatmap's textures: the data in tiles of rows at full resolution, and
//! a pyramid of coarser levels, each pooling pairs of the previous level's
//! rows (largest magnitude kept, non-finite values over finite ones), built
//! once per data change; a frame draws one level, the tiles of it its view
//! reaches (docs/long-rows.md).

use egui::{Color32, Rect, TextureHandle, TextureOptions, pos2};

use super::to_screen_y;
use crate::ui::colormap::ColorMap;
use crate::ui::computed::Matrix;

/// One level of the texture pyramid: its textures, each covering a range of
/// the level's (pooled) rows.
struct Level {
    /// Source rows per texel row: `2^l`.
    rows_per_texel: usize,
    tiles: Vec<(std::ops::Range<usize>, TextureHandle)>,
}

/// Texel rows per tile (or fewer where the device's textures are smaller).
pub(super) const TILE_ROWS: usize = 4096;
/// The pyramid stops at the first level of at most this many texel rows.
const TOP_ROWS: usize = 128;

/// Every level of the pyramid; level `l` pools blocks of `2^l` rows into one
/// texel row, level 0 is the data.
#[derive(Default)]
pub(super) struct Pyramid {
    levels: Vec<Level>,
}

impl Pyramid {
    pub(super) fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The pyramid of `m` (columns already pooled to the texture's width):
    /// level 0 is `m` itself, each next level pools pairs of the previous
    /// level's rows, until one has at most [`TOP_ROWS`]; each level in tiles
    /// of at most `tile_rows` rows. The textures of the last build are reused.
    pub(super) fn build(
        &mut self,
        ctx: &egui::Context,
        name: &str,
        colormap: ColorMap,
        m: &Matrix,
        (lo, hi): (f32, f32),
        tile_rows: usize,
    ) {
        let options = TextureOptions { magnification: egui::TextureFilter::Nearest, ..TextureOptions::LINEAR };
        let mut old = std::mem::take(&mut self.levels).into_iter();
        let mut level: Option<Matrix> = None;
        for l in 0.. {
            let src = level.as_ref().unwrap_or(m);
            let mut reuse = old.next().map(|lv| lv.tiles.into_iter().map(|(_, t)| t)).into_iter().flatten();
            let mut tiles = Vec::new();
            for (i, r0) in (0..src.rows.max(1)).step_by(tile_rows).enumerate() {
                let r1 = (r0 + tile_rows).min(src.rows);
                let size = [src.cols.max(1), (r1 - r0).max(1)];
                let cells = &src.data[(r0 * src.cols).min(src.data.len())..(r1 * src.cols).min(src.data.len())];
                let mut pixels: Vec<Color32> = cells.iter().map(|&v| colormap.color(v, lo, hi)).collect();
                pixels.resize(size[0] * size[1], Color32::BLACK);
                let image = egui::ColorImage::new(size, pixels);
                let texture = match reuse.next() {
                    Some(mut t) => {
                        t.set(image, options);
                        t
                    }
                    None => ctx.load_texture(format!("{name}:{l}:{i}"), image, options),
                };
                tiles.push((r0..r1.max(r0 + 1), texture));
            }
            self.levels.push(Level { rows_per_texel: 1 << l, tiles });
            if src.rows <= TOP_ROWS {
                break;
            }
            level = pool(src, 2, 1);
        }
    }

    /// The level drawn for `view` (cell units) in `map`: the one whose texel
    /// rows come closest to one a pixel without being thinner; and the tiles
    /// of it the view reaches, as (tile index, screen rect, uv rect).
    pub(super) fn tiles_in_view(&self, map: Rect, view: Rect, full: Rect) -> (usize, Vec<(usize, Rect, Rect)>) {
        let rows_per_px = view.height() / map.height().max(1.0);
        let l = (rows_per_px.max(1.0).log2().floor() as usize).min(self.levels.len().saturating_sub(1));
        let Some(level) = self.levels.get(l) else { return (l, Vec::new()) };
        let (u0, u1) = (view.min.x / full.max.x, view.max.x / full.max.x);
        let k = level.rows_per_texel as f32;
        let mut out = Vec::new();
        for (i, (rows, _)) in level.tiles.iter().enumerate() {
            let (c0, c1) = (rows.start as f32 * k, rows.end as f32 * k);
            let (y0, y1) = (view.min.y.max(c0), view.max.y.min(c1));
            if y1 > y0 {
                let (s0, s1) = (to_screen_y(map, view, y0), to_screen_y(map, view, y1));
                let screen = Rect::from_min_max(pos2(map.min.x, s0), pos2(map.max.x, s1));
                let uv = Rect::from_min_max(pos2(u0, (y0 - c0) / (c1 - c0)), pos2(u1, (y1 - c0) / (c1 - c0)));
                out.push((i, screen, uv));
            }
        }
        (l, out)
    }

    /// Draws the part `view` of the data into `map` ([`Self::tiles_in_view`]).
    pub(super) fn paint(&self, painter: &egui::Painter, map: Rect, view: Rect, full: Rect) {
        let (l, tiles) = self.tiles_in_view(map, view, full);
        for (i, screen, uv) in tiles {
            painter.image(self.levels[l].tiles[i].1.id(), screen, uv, Color32::WHITE);
        }
    }

    /// The textures drawn at each level of the pyramid (for tests).
    pub(super) fn tiles_per_level(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.tiles.len()).collect()
    }
}

/// The counts of NaN, +Inf and -Inf in `m`, and the runs of consecutive rows
/// holding any of them (`start..end`, ascending).
pub(super) fn non_finite_runs(m: &Matrix) -> ([usize; 3], Vec<(usize, usize)>) {
    let mut counts = [0usize; 3];
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for r in 0..m.rows {
        let mut bad = false;
        for &v in &m.data[r * m.cols..(r + 1) * m.cols] {
            if !v.is_finite() {
                bad = true;
                counts[if v.is_nan() {
                    0
                } else if v > 0.0 {
                    1
                } else {
                    2
                }] += 1;
            }
        }
        match runs.last_mut() {
            Some(last) if bad && last.1 == r => last.1 = r + 1,
            _ if bad => runs.push((r, r + 1)),
            _ => {}
        }
    }
    (counts, runs)
}

/// Pools `kr × kc` blocks into one cell each, keeping the value of largest
/// magnitude, and any non-finite value over finite ones (so that a NaN stays
/// visible however far the map is shrunk). `None` when there is nothing to pool.
pub(super) fn pool(m: &Matrix, kr: usize, kc: usize) -> Option<Matrix> {
    if kr == 1 && kc == 1 {
        return None;
    }
    let (rows, cols) = (m.rows.div_ceil(kr), m.cols.div_ceil(kc));
    let rank = |v: f32| {
        if v.is_nan() {
            f32::INFINITY
        } else if v.is_infinite() {
            f32::MAX
        } else {
            v.abs()
        }
    };
    let mut data = vec![0.0f32; rows * cols];
    for r in 0..m.rows {
        for c in 0..m.cols {
            let v = m.get(r, c);
            let slot = &mut data[(r / kr) * cols + c / kc];
            if (r % kr == 0 && c % kc == 0) || rank(v) > rank(*slot) {
                *slot = v;
            }
        }
    }
    Some(Matrix { rows, cols, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_keeps_the_largest_and_non_finite() {
        let m = Matrix { rows: 4, cols: 3, data: vec![1., -5., 2., 0., 3., f32::NAN, 1., 1., 1., 9., 1., 1.] };
        let p = pool(&m, 2, 2).unwrap();
        assert_eq!((p.rows, p.cols), (2, 2));
        assert_eq!(p.data[0], -5.0);
        assert!(p.data[1].is_nan());
        assert_eq!(&p.data[2..], &[9.0, 1.0]);
        assert!(pool(&m, 1, 1).is_none());
    }
}

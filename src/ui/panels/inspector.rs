//! The tensor inspector: every tensor of the selected rung with its stats, and
//! the selected one as CPU, GPU and difference heatmaps (linked zoom and pan),
//! a numeric grid of the visible region, a row/column slice plot, jump to the
//! worst element, export, and the tensor's f16 headroom (`headroom.rs`).

use egui::{Color32, Rect, RichText, pos2, vec2};
use egui_plot::{Line, PlotPoints, VLine};

use crate::ladder::{Rung, Status};
use crate::ui::colormap::{self, ColorMap};
use crate::ui::command::{Command, button};
use crate::ui::heatmap::{Heatmap, HeatmapStyle, fmt_value};
use crate::ui::inspect::{ExportFormat, InspectedTensor, fmt_index, multi_index};
use crate::ui::ladder_run::LadderView;

const HINT: &str = "scroll: zoom rows · ctrl+scroll: zoom columns · drag: pan (all three maps) · double-click: reset · click: pick the cell for the slice plot and grid";

/// Which side a view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Cpu,
    Gpu,
    Diff,
}

impl Side {
    pub const ALL: [Side; 3] = [Side::Cpu, Side::Gpu, Side::Diff];

    pub fn label(self) -> &'static str {
        match self {
            Side::Cpu => "CPU",
            Side::Gpu => "GPU",
            Side::Diff => "GPU - CPU",
        }
    }

    fn values(self, t: &InspectedTensor) -> &[f32] {
        match self {
            Side::Cpu => &t.cpu.data,
            Side::Gpu => &t.gpu.data,
            Side::Diff => &t.diff.data,
        }
    }
}

/// The slice plot's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Row,
    Column,
}

/// The inspector's live view state (not saved).
pub struct InspectorUi {
    maps: [Heatmap; 3],
    key: Option<u64>,
    /// The tensor the shared colour range was computed for.
    range_key: Option<u64>,
    /// The picked cell (row, column): the slice plot's row or column, outlined in the grid.
    pub focus: Option<(usize, usize)>,
    pub axis: Axis,
    pub grid_side: Side,
    /// The path typed in the export field.
    pub export_path: String,
    /// Scroll the headroom plot into view on the next frame (`--commands`' `headroom`).
    pub scroll_to_headroom: bool,
}

impl Default for InspectorUi {
    fn default() -> Self {
        let map = |name: &str, c| Heatmap::new(name, c).with_hint(HINT);
        InspectorUi {
            maps: [
                map("inspector CPU", ColorMap::Diverging),
                map("inspector GPU", ColorMap::Diverging),
                map("inspector difference", ColorMap::Diverging),
            ],
            key: None,
            range_key: None,
            focus: None,
            axis: Axis::Row,
            grid_side: Side::Diff,
            export_path: String::new(),
            scroll_to_headroom: false,
        }
    }
}

impl InspectorUi {
    /// The maps' visible region (cell units), once shown.
    pub fn view(&self) -> Option<Rect> {
        self.maps[0].view()
    }

    /// Zooms every map onto the tensor's worst element and picks it.
    pub fn jump_to_worst(&mut self, t: &InspectedTensor) {
        let Some(w) = t.stats.worst else { return };
        let (r, c) = t.cell(w);
        self.focus = Some((r, c));
        let (rows, cols) = (t.cpu.rows as f32, t.cpu.cols as f32);
        let (h, wd) = (rows.min(16.0), cols.min(16.0));
        let view = Rect::from_min_size(pos2(c as f32 + 0.5 - wd / 2.0, r as f32 + 0.5 - h / 2.0), vec2(wd, h));
        for m in &mut self.maps {
            m.set_view(view);
        }
    }
}

/// The contract's tolerance of `tensor` in the rung `id` names (1e-4 when it
/// names none: an old session's selection).
fn tolerance(id: &str, tensor: &str) -> f64 {
    Rung::parse(id).map_or(1e-4, |r| r.tolerance(tensor))
}

/// The tensor to show: the named one, else the rung's worst.
pub fn pick<'a>(rung: &str, tensors: &'a [InspectedTensor], name: Option<&str>) -> Option<&'a InspectedTensor> {
    if let Some(t) = name.and_then(|n| tensors.iter().find(|t| t.name == n)) {
        return Some(t);
    }
    let badness = |t: &InspectedTensor| {
        let tol = tolerance(rung, &t.name).max(1e-12);
        (t.stats.new_non_finite > 0, t.stats.rel_l2 / tol)
    };
    tensors.iter().max_by(|a, b| {
        let (x, y) = (badness(a), badness(b));
        x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
    })
}

fn sci(v: f64) -> String {
    if v.is_nan() { "-".into() } else { format!("{v:.2e}") }
}

fn num(v: f64) -> String {
    fmt_value(v as f32)
}

pub fn show(
    ui: &mut egui::Ui,
    st: &mut InspectorUi,
    view: &LadderView,
    rung: Option<&str>,
    tensor: Option<&str>,
    cmds: &mut Vec<Command>,
) {
    // The width the view has, taken before any row could widen the scroll area's content.
    let width = ui.available_width();
    let Some(rung) = rung else {
        ui.label("Click a rung in the ladder panel (right) to inspect the tensors it compared.");
        return;
    };
    ui.horizontal(|ui| {
        ui.heading(format!("Tensors of rung {rung}"));
        match view.results.get(rung) {
            Some(Ok(r)) => {
                let (text, color) = match r.status {
                    Status::Pass => ("pass", Color32::LIGHT_GREEN),
                    Status::Warn => ("warn", Color32::YELLOW),
                    Status::NotRun => ("not run", Color32::from_rgb(200, 140, 255)),
                    Status::Fail => ("FAIL", Color32::LIGHT_RED),
                };
                ui.label(RichText::new(text).color(color).strong());
                ui.label(format!("worst rel L2 {:.3e} (tolerance {:.1e})", r.rel_l2, r.tolerance));
            }
            Some(Err(e)) => {
                ui.colored_label(Color32::LIGHT_RED, e);
            }
            None => {}
        }
    });
    if let Some(input) = &view.input {
        ui.label(RichText::new(format!("ran on {}", input.describe())).weak().small());
    }
    // The rung's cases, worst first: here (the central area's width) rather
    // than in the ladder panel, which they used to widen over this view.
    let cases = view.results.get(rung).and_then(|r| r.as_ref().ok()).map_or(0, |r| r.cases.len());
    egui::CollapsingHeader::new(format!("Cases of rung {rung} ({cases})"))
        .id_salt("rung_cases_header")
        .default_open(true)
        .show(ui, |ui| super::ladder::inspector(ui, view, rung));
    let Some(tensors) = view.tensors.get(rung) else {
        let why = if rung == "gemm" {
            "Rung gemm checks matrix products of many shapes, case by case: its cases are listed above; it keeps no model tensors."
        } else if view.running == Some(rung) || view.is_busy() {
            "Running…"
        } else if view.results.contains_key(rung) {
            "This rung's tensors are not available (it did not run to the comparison, or the session's side file is missing)."
        } else {
            "Not run yet: press \"Run ladder\"."
        };
        ui.label(why);
        return;
    };
    let Some(t) = pick(rung, tensors, tensor) else {
        ui.label("This rung compared no tensor.");
        return;
    };
    table(ui, rung, tensors, &t.name, cmds);
    ui.separator();
    selected(ui, st, rung, t, width, cmds);
    // The tensor's f16 headroom, from its case in the rung's result.
    let case =
        view.results.get(rung).and_then(|r| r.as_ref().ok()).and_then(|r| r.cases.iter().find(|c| c.name == t.name));
    ui.separator();
    let plot = ui.scope(|ui| super::headroom::headroom_plot(ui, case.and_then(|c| c.headroom.as_ref()))).response;
    // A command file's `headroom` step: bring the plot into view once.
    if std::mem::take(&mut st.scroll_to_headroom) {
        plot.scroll_to_me(Some(egui::Align::Max));
    }
}

/// Every tensor of the rung with its stats; a click selects it.
fn table(ui: &mut egui::Ui, rung: &str, tensors: &[InspectedTensor], selected: &str, cmds: &mut Vec<Command>) {
    egui::ScrollArea::both().id_salt("inspector_table").max_height(300.0).show(ui, |ui| {
        egui::Grid::new("inspector_tensors").striped(true).num_columns(12).spacing(vec2(10.0, 3.0)).show(ui, |ui| {
            for h in [
                "tensor",
                "shape",
                "CPU min / max",
                "CPU mean",
                "GPU min / max",
                "GPU mean",
                "rel L2 / tol",
                "GPU vs f64",
                "CPU vs f64",
                "max abs err",
                "at",
                "non-finite CPU/GPU",
            ] {
                ui.label(RichText::new(h).strong().small());
            }
            ui.end_row();
            for t in tensors {
                let s = &t.stats;
                let tol = tolerance(rung, &t.name);
                let bad = s.new_non_finite > 0 || s.rel_l2 > tol;
                let name = RichText::new(&t.name).monospace().size(11.5);
                let name = if bad { name.color(Color32::LIGHT_RED) } else { name };
                if ui.selectable_label(t.name == selected, name).on_hover_text("Inspect this tensor").clicked() {
                    cmds.push(Command::SelectTensor(t.name.clone()));
                }
                ui.label(format!("{:?}", t.shape));
                ui.label(format!("{} / {}", num(s.cpu.min), num(s.cpu.max)));
                ui.label(num(s.cpu.mean));
                ui.label(format!("{} / {}", num(s.gpu.min), num(s.gpu.max)));
                ui.label(num(s.gpu.mean));
                ui.label(format!("{} / {:.0e}", sci(s.rel_l2), tol));
                ui.label(s.rel_l2_gpu_f64.map_or("-".into(), sci));
                ui.label(s.rel_l2_cpu_f64.map_or("-".into(), sci));
                ui.label(sci(s.max_abs_err));
                ui.label(s.worst.map_or("-".into(), |w| fmt_index(&multi_index(w, &t.shape))));
                let nf = format!("{}/{}", s.cpu.non_finite(), s.gpu.non_finite());
                ui.label(if s.new_non_finite > 0 { RichText::new(nf).color(Color32::LIGHT_RED) } else { nf.into() });
                ui.end_row();
            }
        });
        // Room for the horizontal scroll bar, which floats over the last row otherwise.
        ui.add_space(14.0);
    });
}

fn key(rung: &str, t: &InspectedTensor) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    rung.hash(&mut h);
    t.name.hash(&mut h);
    (std::sync::Arc::as_ptr(&t.cpu) as usize).hash(&mut h);
    h.finish()
}

fn selected(
    ui: &mut egui::Ui,
    st: &mut InspectorUi,
    rung: &str,
    t: &InspectedTensor,
    width: f32,
    cmds: &mut Vec<Command>,
) {
    let k = key(rung, t);
    if st.key != Some(k) {
        st.key = Some(k);
        st.focus = t.stats.worst.map(|w| t.cell(w));
    }
    let s = &t.stats;
    ui.horizontal_wrapped(|ui| {
        ui.strong(&t.name);
        ui.label(format!(
            "shape {:?} -> {} × {} (leading dims as rows); rel L2 {}; max abs err {} at {}; non-finite CPU {} (NaN {}, +Inf {}, -Inf {}), GPU {} (NaN {}, +Inf {}, -Inf {})",
            t.shape,
            t.cpu.rows,
            t.cpu.cols,
            sci(s.rel_l2),
            sci(s.max_abs_err),
            s.worst.map_or("-".into(), |w| fmt_index(&multi_index(w, &t.shape))),
            s.cpu.non_finite(),
            s.cpu.nan,
            s.cpu.pos_inf,
            s.cpu.neg_inf,
            s.gpu.non_finite(),
            s.gpu.nan,
            s.gpu.pos_inf,
            s.gpu.neg_inf,
        ));
    });
    ui.horizontal_wrapped(|ui| {
        button(ui, Command::JumpToWorst, s.worst.is_some(), cmds);
        ui.separator();
        ui.label("slice:");
        ui.selectable_value(&mut st.axis, Axis::Row, "row")
            .on_hover_text("The slice plot follows the picked cell's row");
        ui.selectable_value(&mut st.axis, Axis::Column, "column")
            .on_hover_text("The slice plot follows the picked cell's column");
        let (mut r, mut c) = st.focus.unwrap_or((0, 0));
        let l = ui.label("row");
        ui.add(egui::DragValue::new(&mut r).range(0..=t.cpu.rows.saturating_sub(1))).labelled_by(l.id);
        let l = ui.label("column");
        ui.add(egui::DragValue::new(&mut c).range(0..=t.cpu.cols.saturating_sub(1))).labelled_by(l.id);
        st.focus = Some((r, c));
        ui.separator();
        ui.label("grid shows");
        for side in Side::ALL {
            ui.selectable_value(&mut st.grid_side, side, side.label()).on_hover_text(format!(
                "The numeric grid lists the {} values of the maps' visible region",
                side.label()
            ));
        }
    });

    export_row(ui, st, cmds);

    // The three maps, with one view.
    let before: Vec<Option<Rect>> = st.maps.iter().map(|m| m.view()).collect();
    let ctx = ui.ctx().clone();
    // CPU and GPU share one colour scale (the wider of their robust ranges),
    // so that the same colour means the same value in both; the difference has its own.
    let shared = if st.maps[0].builds() == 0 || st.range_key != Some(k) {
        st.range_key = Some(k);
        let (a, b) = (colormap::robust_range(&t.cpu.data), colormap::robust_range(&t.gpu.data));
        Some((a.0.min(b.0), a.1.max(b.1)))
    } else {
        None
    };
    for (i, side) in Side::ALL.iter().enumerate() {
        let m = match side {
            Side::Cpu => t.cpu.clone(),
            Side::Gpu => t.gpu.clone(),
            Side::Diff => t.diff.clone(),
        };
        let range = if *side == Side::Diff { None } else { shared };
        st.maps[i].set_data_in(&ctx, k ^ (i as u64 + 1), range, || m);
    }
    let focus = st.focus;
    let mut clicked = None;
    // Three equal columns of the view's width (not of a row that overflowed it).
    let gap = ui.spacing().item_spacing.x;
    let each = ((width - 2.0 * gap) / 3.0).max(60.0);
    ui.horizontal_top(|ui| {
        for (i, side) in Side::ALL.iter().enumerate() {
            ui.vertical(|ui| {
                ui.set_width(each);
                ui.label(RichText::new(side.label()).strong());
                let describe = |r: usize, c: usize| {
                    let f = t.flat(r, c);
                    format!(
                        "{} cpu {} gpu {} diff {}, {}",
                        fmt_index(&multi_index(f, &t.shape)),
                        fmt_value(t.cpu.data[f]),
                        fmt_value(t.gpu.data[f]),
                        fmt_value(t.diff.data[f]),
                        side.label()
                    )
                };
                let style = HeatmapStyle { height: 230.0, cursor_row: focus.map(|f| f.0), describe: &describe };
                if let Some(cell) = st.maps[i].show(ui, &style).clicked {
                    clicked = Some(cell);
                }
            });
        }
    });
    if let Some(c) = clicked {
        st.focus = Some(c);
    }
    // Whichever map the user moved leads the others.
    let moved = (0..3).find(|&i| st.maps[i].view() != before[i] && before[i].is_some());
    if let Some(v) = moved.and_then(|i| st.maps[i].view()) {
        for m in &mut st.maps {
            m.set_view(v);
        }
    }

    ui.columns(2, |cols| {
        slice_plot(&mut cols[0], st, t);
        grid(&mut cols[1], st, t);
    });
}

fn points(xs: impl Iterator<Item = (usize, f32)>) -> PlotPoints<'static> {
    xs.filter(|(_, v)| v.is_finite()).map(|(i, v)| [i as f64, v as f64]).collect()
}

fn slice_plot(ui: &mut egui::Ui, st: &InspectorUi, t: &InspectedTensor) {
    let (r, c) = st.focus.unwrap_or((0, 0));
    let (r, c) = (r.min(t.cpu.rows.saturating_sub(1)), c.min(t.cpu.cols.saturating_sub(1)));
    let idx: Vec<usize> = match st.axis {
        Axis::Row => (0..t.cpu.cols).map(|j| t.flat(r, j)).collect(),
        Axis::Column => (0..t.cpu.rows).map(|i| t.flat(i, c)).collect(),
    };
    let (what, at) = match st.axis {
        Axis::Row => (format!("row {r}, over columns"), c),
        Axis::Column => (format!("column {c}, over rows"), r),
    };
    ui.label(RichText::new(format!("Slice: {what} (non-finite values left out)")).strong());
    let series = |side: Side| points(idx.iter().enumerate().map(|(x, &f)| (x, side.values(t)[f])));
    let link = egui::Id::unique("inspector_slice_link");
    super::plot("inspector_slice_values", 150.0).link_axis(link, [true, false]).show(ui, |p| {
        p.line(Line::new("CPU", series(Side::Cpu)).color(Color32::from_rgb(90, 170, 255)));
        p.line(Line::new("GPU", series(Side::Gpu)).color(Color32::from_rgb(255, 170, 60)));
        p.vline(VLine::new("picked", at as f64).color(Color32::GRAY));
    });
    super::plot("inspector_slice_diff", 100.0).link_axis(link, [true, false]).show(ui, |p| {
        p.line(Line::new("GPU - CPU", series(Side::Diff)).color(Color32::from_rgb(240, 80, 80)));
        p.vline(VLine::new("picked", at as f64).color(Color32::GRAY));
    });
}

/// The most cells the grid lists (rows × columns), from the view's top left.
const GRID_ROWS: usize = 48;
const GRID_COLS: usize = 16;

/// The values of the visible region, as numbers.
fn grid(ui: &mut egui::Ui, st: &InspectorUi, t: &InspectedTensor) {
    let full = Rect::from_min_max(pos2(0.0, 0.0), pos2(t.cpu.cols as f32, t.cpu.rows as f32));
    let v = st.view().unwrap_or(full);
    let (r0, c0) = (v.min.y.max(0.0).floor() as usize, v.min.x.max(0.0).floor() as usize);
    let r1 = (v.max.y.ceil() as usize).min(t.cpu.rows);
    let c1 = (v.max.x.ceil() as usize).min(t.cpu.cols);
    let (r1s, c1s) = (r1.min(r0 + GRID_ROWS), c1.min(c0 + GRID_COLS));
    let mut title = format!("{} values, rows {r0}..{r1s}, columns {c0}..{c1s}", st.grid_side.label());
    if r1s < r1 || c1s < c1 {
        title += &format!(" (of the visible {}..{} × {}..{}: zoom in to see all)", r0, r1, c0, c1);
    }
    ui.label(RichText::new(title).strong());
    let worst = t.stats.worst.map(|w| t.cell(w));
    let values = st.grid_side.values(t);
    egui::ScrollArea::both().id_salt("inspector_grid").max_height(240.0).show(ui, |ui| {
        egui::Grid::new("inspector_grid_cells").striped(true).spacing(vec2(6.0, 2.0)).show(ui, |ui| {
            ui.label("");
            for c in c0..c1s {
                ui.label(RichText::new(c.to_string()).small().weak());
            }
            ui.end_row();
            for r in r0..r1s {
                ui.label(RichText::new(r.to_string()).small().weak());
                for c in c0..c1s {
                    let v = values[t.flat(r, c)];
                    let mut text = RichText::new(fmt_value(v)).monospace().size(10.5);
                    if !v.is_finite() {
                        text = text.color(Color32::from_rgb(255, 0, 255));
                    }
                    if worst == Some((r, c)) {
                        text = text.background_color(Color32::from_rgb(120, 20, 20)).color(Color32::WHITE);
                    } else if st.focus == Some((r, c)) {
                        text = text.background_color(Color32::from_rgb(120, 70, 0)).color(Color32::WHITE);
                    }
                    ui.label(text).on_hover_text(fmt_index(&multi_index(t.flat(r, c), &t.shape)));
                }
                ui.end_row();
            }
        });
    });
}

fn export_row(ui: &mut egui::Ui, st: &mut InspectorUi, cmds: &mut Vec<Command>) {
    ui.horizontal_wrapped(|ui| {
        ui.label("Export the selected tensor:");
        ui.add(egui::TextEdit::singleline(&mut st.export_path).hint_text("file path").desired_width(260.0));
        let path = std::path::PathBuf::from(st.export_path.trim());
        let ok = !st.export_path.trim().is_empty();
        for f in [ExportFormat::Safetensors, ExportFormat::Csv] {
            let mut p = path.clone();
            if ok && ExportFormat::of_path(&p) != Some(f) {
                p.set_extension(f.extension());
            }
            button(ui, Command::ExportTensor(f, p), ok, cmds);
        }
        button(ui, Command::ExportTensorDialog, true, cmds);
    });
}

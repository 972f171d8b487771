//! Error growth along the sequence: a `dualscope growth` run on the row the
//! stepper shows (on a [`Job`], the GPU from `session::gpu`), and its plot —
//! per series the GPU–CPU difference and its rounding envelope along the
//! positions on a log axis, a vertical line at the stepper's cursor, a
//! click moving the cursor there (`Command::SetCursor`).

use crate::ui::error::{UiError, UiResult};
use std::sync::Arc;
use std::time::Instant;

use egui::{Color32, RichText};
use egui_plot::{Line, LineStyle, PlotPoints, VLine};

use crate::capture::Capture;
use crate::model::{Config, Params};
use crate::session::gpu;
use crate::session::job::{Job, Waker};
use crate::step::{GemmChoice, Precision};
use crate::triage::growth::{GrowthPlan, GrowthReport, Series};
use crate::ui::command::{Command, button};

/// The most points a line of the plot draws: a longer series is cut into
/// this many buckets, each drawn as its largest value (the envelope's and
/// the difference's peaks stay visible at 16k positions, and a frame stays
/// cheap).
pub const MAX_POINTS: usize = 2000;

/// The plot's accessible label (tests click it).
pub const PLOT_LABEL: &str = "error growth plot";

/// The model and row a growth run takes: the capture's model, or a preset's.
pub struct GrowthJob {
    pub config: Config,
    pub params: Params<f32>,
    pub tokens: Vec<u8>,
    pub offset: usize,
    pub source: String,
    pub precision: Precision,
}

impl GrowthJob {
    /// A job on `tokens` with the capture's model when one is open.
    pub fn new(
        capture: Option<&Arc<Capture>>,
        preset: (crate::session::state::ConfigName, u64, &crate::session::weights::Weights),
        tokens: Vec<u8>,
        offset: usize,
        source: String,
        precision: Precision,
    ) -> UiResult<GrowthJob> {
        let (config, params) = match capture {
            Some(c) => (c.config.clone(), c.state.params.clone()),
            None => (preset.0.config(), preset.2.params(preset.0, preset.1)?),
        };
        Ok(GrowthJob { config, params, tokens, offset, source, precision })
    }
}

/// A line's points: `(position, log10 value)`, bucketed to [`MAX_POINTS`].
type Points = Vec<[f64; 2]>;

/// The last report, its lines ready to draw, and the run in flight.
#[derive(Default)]
pub struct GrowthRun {
    pub report: Option<Arc<GrowthReport>>,
    /// Per series: (difference, envelope) points.
    lines: Vec<(Points, Points)>,
    pub started: Option<Instant>,
    /// The stage the run in flight reported last.
    pub stage: String,
    job: Option<Job<String, UiResult<GrowthReport>>>,
}

impl GrowthRun {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    pub fn start(&mut self, job: GrowthJob, wake: Waker) -> UiResult<()> {
        if self.is_busy() {
            return Err(UiError::refused("an error-growth run is already running"));
        }
        let running = Job::spawn("growth", wake, move |r| {
            let ctx = gpu::engine()?;
            let plan = GrowthPlan {
                config: job.config,
                params: job.params,
                row: job.tokens,
                source: job.source,
                offset: job.offset,
                precision: job.precision,
                gemm: GemmChoice::Auto,
                plant_token_at: None,
            };
            crate::triage::growth::run(&ctx, &plan, &mut |stage| {
                r.progress(stage.to_string());
            })
            .map_err(UiError::from)
        })
        .map_err(|e| UiError::refused(format!("cannot start the error-growth thread: {e}")))?;
        self.started = Some(running.started());
        self.stage = "starting".into();
        self.job = Some(running);
        Ok(())
    }

    /// The result once the run ended (also kept in `report` when it succeeded).
    pub fn poll(&mut self) -> Option<UiResult<()>> {
        let polled = self.job.as_mut()?.poll();
        if let Some(s) = polled.progress.into_iter().last() {
            self.stage = s;
        }
        let done = polled.done?;
        self.job = None;
        match done.map_err(UiError::from).and_then(|r| r) {
            Ok(r) => {
                self.set_report(r);
                Some(Ok(()))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Shows `r` (a finished run's, or one read elsewhere).
    pub fn set_report(&mut self, r: GrowthReport) {
        self.lines = r.series.iter().map(|s| (bucketed(&s.difference), bucketed(&s.envelope))).collect();
        self.report = Some(Arc::new(r));
    }
}

/// `log10(x)` for the log axis; `None` for what it cannot show.
fn log10(x: f64) -> Option<f64> {
    (x.is_finite() && x > 0.0).then(|| x.log10())
}

/// The points of `v` on the log axis, at most [`MAX_POINTS`]: each bucket's
/// largest value at the bucket's position of that value.
fn bucketed(v: &[f64]) -> Points {
    let step = v.len().div_ceil(MAX_POINTS).max(1);
    v.chunks(step)
        .enumerate()
        .filter_map(|(b, c)| {
            let (i, y) = c
                .iter()
                .enumerate()
                .filter_map(|(i, &x)| log10(x).map(|y| (i, y)))
                .max_by(|a, b| a.1.total_cmp(&b.1))?;
            Some([(b * step + i) as f64, y])
        })
        .collect()
}

/// A series' colour: layers' states blue to cyan, the attention output
/// green, gradients orange to red.
fn colour(i: usize) -> Color32 {
    const C: [Color32; 8] = [
        Color32::from_rgb(90, 140, 250),
        Color32::from_rgb(80, 200, 230),
        Color32::from_rgb(110, 210, 110),
        Color32::from_rgb(250, 170, 60),
        Color32::from_rgb(240, 110, 70),
        Color32::from_rgb(220, 90, 200),
        Color32::from_rgb(200, 200, 90),
        Color32::from_rgb(170, 170, 170),
    ];
    C[i % C.len()]
}

fn plot_x(at: Option<egui_plot::PlotPoint>, t: usize) -> Option<usize> {
    at.map(|p| p.x.round().clamp(0.0, t.saturating_sub(1) as f64) as usize)
}

/// One series' line of the table: its worst ratio and where, its first
/// position outside (a button there moves the cursor to it).
fn series_row(ui: &mut egui::Ui, s: &Series, i: usize, out: &mut Vec<Command>) {
    ui.label(RichText::new(&s.name).color(colour(i)));
    let ratio = RichText::new(format!("{:.3}", s.worst_ratio));
    ui.label(if s.worst_ratio > 1.0 { ratio.color(Color32::LIGHT_RED) } else { ratio });
    if ui.small_button(format!("{}", s.worst)).on_hover_text("Move the cursor to the worst position").clicked() {
        out.push(Command::SetCursor(s.worst));
    }
    match s.first_outside {
        Some(p) => {
            if ui
                .small_button(RichText::new(format!("{p} ({} outside)", s.n_outside)).color(Color32::LIGHT_RED))
                .on_hover_text("Move the cursor to the first position outside the envelope")
                .clicked()
            {
                out.push(Command::SetCursor(p));
            }
        }
        None => {
            ui.label("none");
        }
    }
    ui.end_row();
}

/// The section: the button, the run's state, the summary, a row per
/// series and the plot. `cursor` is the stepper's; `row` says what a run
/// would take (`None`: nothing computed yet).
pub fn show(ui: &mut egui::Ui, run: &GrowthRun, cursor: usize, row: Option<&str>, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        button(ui, Command::RunGrowth, !run.is_busy() && row.is_some(), out);
        if let (true, Some(t)) = (run.is_busy(), run.started) {
            ui.spinner();
            ui.label(format!("{} · {:.1} s", run.stage, t.elapsed().as_secs_f64()));
        } else if let Some(row) = row {
            ui.label(RichText::new(row).small().weak());
        }
    });
    let Some(r) = run.report.as_deref() else {
        ui.label("No error-growth run yet: press \"Error growth\".");
        return;
    };
    let red = Color32::from_rgb(230, 60, 60);
    let line = r.summary_line();
    ui.label(RichText::new(&line).color(if r.first_outside.is_some() { red } else { ui.visuals().text_color() }));
    ui.label(
        RichText::new(format!(
            "{} · GPU {} ({}) · envelope {} x max(reference over +-{}, {:.1e}){}",
            r.source,
            r.precision.name(),
            r.gemm_path,
            r.envelope.k,
            r.envelope.window,
            r.envelope.floor,
            if r.precision.is_mixed() { ", the reference with the weights rounded as the GPU's operands" } else { "" }
        ))
        .small()
        .weak(),
    );
    egui::Grid::new("growth_series").striped(true).num_columns(4).show(ui, |ui| {
        for h in ["series", "worst / envelope", "at", "first outside"] {
            ui.label(RichText::new(h).strong());
        }
        ui.end_row();
        for (i, s) in r.series.iter().enumerate() {
            series_row(ui, s, i, out);
        }
    });
    let t = r.len;
    let resp = super::plot("growth_plot", 260.0)
        .x_axis_label("position")
        .y_axis_label("|gpu - cpu32| / |cpu64| per position")
        .y_axis_formatter(|m, _| format!("{:.0e}", 10f64.powf(m.value)))
        .include_x(0.0)
        .include_x(t.saturating_sub(1) as f64)
        .show(ui, |p| {
            for (i, (s, (diff, env))) in r.series.iter().zip(&run.lines).enumerate() {
                let c = colour(i);
                p.line(Line::new(s.name.clone(), PlotPoints::from(diff.clone())).color(c));
                p.line(
                    Line::new(s.name.clone(), PlotPoints::from(env.clone()))
                        .color(c.gamma_multiply(0.6))
                        .style(LineStyle::dashed_loose()),
                );
            }
            if let Some(o) = &r.first_outside {
                p.vline(VLine::new(format!("first outside: {}", o.position), o.position as f64).color(red));
            }
            p.vline(VLine::new("cursor", cursor as f64).color(Color32::from_rgb(255, 140, 0)));
            p.pointer_coordinate()
        });
    resp.response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Image, true, PLOT_LABEL));
    if resp.response.clicked()
        && let Some(p) = plot_x(resp.inner, t)
    {
        out.push(Command::SetCursor(p));
    }
    ui.label(
        RichText::new("solid: the GPU's difference; dashed: its envelope; click to move the cursor").small().weak(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_series_are_bucketed_to_their_peaks() {
        let mut v = vec![1e-7; 10_000];
        v[4321] = 1e-2;
        v[17] = 0.0;
        let p = bucketed(&v);
        assert!(p.len() <= MAX_POINTS);
        assert!(p.iter().any(|q| q[0] == 4321.0 && (q[1] + 2.0).abs() < 1e-12));
        assert_eq!(bucketed(&[0.0, f64::NAN]), Vec::<[f64; 2]>::new());
        assert_eq!(bucketed(&[1.0, 10.0]), vec![[0.0, 0.0], [1.0, 1.0]]);
    }
}

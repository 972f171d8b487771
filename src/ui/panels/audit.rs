//! The CPU/GPU norm audit: a table of every parameter tensor's verdict and
//! evidence, and the selected tensor's per-token contribution norms on both
//! engines (and the cosine of their directions), linked to the stepper.

use egui::{Color32, RichText};
use egui_plot::{Line, PlotPoints, VLine};

use crate::ladder::audit::Verdict;
use crate::session::state::{FaultTool, State};
use crate::ui::command::{Command, button};
use crate::ui::diagnose::{AUDIT_LOSS_SCALE, AuditRun};

pub fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Noise => "noise",
        Verdict::MissingUnscale => "missing unscale",
        Verdict::PerTokenScale => "per-token scale",
        Verdict::RealError => "real error",
    }
}

fn verdict_rich(v: Verdict) -> RichText {
    let color = match v {
        Verdict::Noise => Color32::LIGHT_GREEN,
        Verdict::MissingUnscale | Verdict::PerTokenScale => Color32::YELLOW,
        Verdict::RealError => Color32::LIGHT_RED,
    };
    RichText::new(verdict_label(v)).color(color)
}

fn plot_x(at: Option<egui_plot::PlotPoint>, t: usize) -> Option<usize> {
    at.map(|p| p.x.round().clamp(0.0, t.saturating_sub(1) as f64) as usize)
}

pub fn show(ui: &mut egui::Ui, state: &State, run: &AuditRun, out: &mut Vec<Command>) {
    ui.heading("CPU/GPU norm audit");
    ui.horizontal(|ui| {
        ui.add_enabled_ui(!run.is_busy(), |ui| {
            super::faults::combo(ui, "Audit fault", FaultTool::Audit, state.fault(FaultTool::Audit), out);
        });
        button(ui, Command::RunAudit, !run.is_busy(), out);
        if let (true, Some(t)) = (run.is_busy(), run.started) {
            ui.spinner();
            ui.label(format!("{:.1} s", t.elapsed().as_secs_f64()));
        }
    });
    ui.label(
        RichText::new(format!(
            "on the sequence (tokens {}..{}); the GPU's backward at loss scale {AUDIT_LOSS_SCALE}, unscaled after",
            state.offset,
            state.offset + state.len
        ))
        .small()
        .weak(),
    );
    ui.separator();
    let Some(r) = run.report.as_deref() else {
        ui.label("No audit yet: press \"Run audit\".");
        return;
    };
    ui.label(format!(
        "{} positions, fault {}; loss CPU {:.6} GPU {:.6}; gradient norm CPU {:.6e} GPU {:.6e}",
        r.len,
        r.fault.as_deref().unwrap_or("none"),
        r.loss_cpu,
        r.loss_gpu,
        r.grad_norm_cpu,
        r.grad_norm_gpu
    ));
    egui::ScrollArea::vertical().id_salt("audit_table").max_height(260.0).show(ui, |ui| {
        egui::Grid::new("audit_grid").striped(true).num_columns(4).show(ui, |ui| {
            for h in ["tensor", "verdict", "tokens off", "evidence"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for (i, a) in r.tensors.iter().enumerate() {
                if ui
                    .selectable_label(i == run.selected, &a.tensor)
                    .on_hover_text(Command::SelectAuditTensor(i).tooltip())
                    .clicked()
                {
                    out.push(Command::SelectAuditTensor(i));
                }
                ui.label(verdict_rich(a.verdict));
                ui.label(format!("{}", a.tokens_off));
                ui.label(RichText::new(crate::ui::diagnose::ascii(&a.evidence)).small());
                ui.end_row();
            }
        });
    });
    ui.separator();
    let Some(a) = r.tensors.get(run.selected) else { return };
    let t = a.cpu_norm.len();
    ui.strong(format!("{}: per-token contribution norm", a.tensor));
    let line = |name: &str, v: &[f64]| {
        let pts: PlotPoints = v.iter().enumerate().map(|(i, &y)| [i as f64, y]).collect();
        Line::new(name.to_string(), pts)
    };
    let cursor_line =
        |p: Option<usize>| p.map(|p| VLine::new("picked", p as f64).color(Color32::from_rgb(255, 140, 0)));
    let resp = super::plot("audit_norm_plot", 170.0).include_y(0.0).x_axis_label("position").show(ui, |p| {
        p.line(line("CPU", &a.cpu_norm).color(Color32::from_rgb(100, 160, 240)).width(3.0));
        p.line(line("GPU", &a.gpu_norm).color(Color32::from_rgb(240, 120, 60)));
        if let Some(v) = cursor_line(run.position) {
            p.vline(v);
        }
        p.pointer_coordinate()
    });
    let mut hovered = None;
    if resp.response.hovered() {
        hovered = plot_x(resp.inner, t);
    }
    if resp.response.clicked()
        && let Some(p) = plot_x(resp.inner, t)
    {
        out.push(Command::PickAuditPosition(p));
    }
    let resp = super::plot("audit_cosine_plot", 90.0).include_y(1.0).x_axis_label("position").show(ui, |p| {
        p.line(line("cosine", &a.cosine));
        if let Some(v) = cursor_line(run.position) {
            p.vline(v);
        }
        p.pointer_coordinate()
    });
    if resp.response.hovered() {
        hovered = hovered.or(plot_x(resp.inner, t));
    }
    if resp.response.clicked()
        && let Some(p) = plot_x(resp.inner, t)
    {
        out.push(Command::PickAuditPosition(p));
    }
    let shown = hovered.or(run.position).or(a.worst_position);
    ui.horizontal(|ui| match shown {
        Some(p) if p < t => {
            let what = if hovered.is_some() {
                "hovered"
            } else if run.position.is_some() {
                "picked"
            } else {
                "worst"
            };
            ui.label(format!(
                "{what} position {p}: CPU {:.6e}, GPU {:.6e}, ratio {:.6}, cosine {:.6}",
                a.cpu_norm[p],
                a.gpu_norm[p],
                a.gpu_norm[p] / a.cpu_norm[p],
                a.cosine[p]
            ));
            if let Some(p) = run.position.or(a.worst_position) {
                button(ui, Command::GoToPosition(p), true, out);
            }
        }
        _ => {
            ui.label("click a position in the plot to pick it");
        }
    });
}

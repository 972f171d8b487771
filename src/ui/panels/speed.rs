//! The speedup panel: each engine's time per training step as a live plot,
//! the ratio of their medians, and the GPU step's per-kernel breakdown.

use egui::{Color32, RichText};
use egui_plot::{Bar, BarChart, Line, Plot, PlotPoints};

use crate::engine::EngineKind;
use crate::ui::command::{Command, button};
use crate::ui::speed::{KERNEL_STEPS, SpeedRun, kernel_means, medians};

/// Samples per engine the medians are taken over.
const WINDOW: usize = 20;

pub fn show(ui: &mut egui::Ui, run: &mut SpeedRun, cmds: &mut Vec<Command>) {
    ui.heading("Speedup: time per training step");
    ui.label(
        RichText::new(
            "One CPU step, then one GPU step, on the same random batch of the current dataset, \
             each engine training its own copy of the model from the same initialisation.",
        )
        .weak()
        .small(),
    );
    ui.horizontal(|ui| {
        button(ui, Command::StartSpeed, !run.is_running(), cmds);
        button(ui, Command::StopSpeed, run.is_running(), cmds);
        // Read when a run starts: each step as `train` runs it by default.
        ui.add_enabled_ui(!run.is_running(), |ui| {
            ui.checkbox(&mut run.controller, "with the controller").on_hover_text(
                "Each engine's step as `train` runs it with the controller on: the gradients' per-tensor norms \
                 (on the GPU computed on the device), the controller's judgement, then the optimizer.",
            );
        });
        if run.is_running() {
            ui.spinner();
        }
        if !run.label.is_empty() {
            ui.label(&run.label);
        }
    });
    if let Some(why) = &run.gpu_problem {
        ui.colored_label(Color32::from_rgb(230, 180, 40), format!("GPU not timed: {why}. CPU only."));
    }
    if let Some(e) = &run.error {
        ui.colored_label(Color32::LIGHT_RED, format!("stopped: {e}"));
    }
    let run = &*run;
    let n = |e: EngineKind| run.samples.iter().filter(|s| s.engine == e).count();
    let (cpu, gpu_wall, gpu_dev) = medians(&run.samples, WINDOW);
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2} ms"));
    egui::Grid::new("speed_stats").num_columns(4).striped(true).show(ui, |ui| {
        for h in ["", "steps", "median (last 20)", "speedup vs CPU"] {
            ui.label(RichText::new(h).strong());
        }
        ui.end_row();
        ui.label("CPU wall");
        ui.label(n(EngineKind::Cpu).to_string());
        ui.label(ms(cpu));
        ui.label("1×");
        ui.end_row();
        let ratio = |g: Option<f64>| match (cpu, g) {
            (Some(c), Some(g)) if g > 0.0 => format!("{:.2}×", c / g),
            _ => "-".into(),
        };
        ui.label("GPU wall");
        ui.label(n(EngineKind::Vulkan).to_string());
        ui.label(ms(gpu_wall));
        ui.label(RichText::new(ratio(gpu_wall)).strong());
        ui.end_row();
        ui.label("GPU device");
        ui.label(run.samples.iter().filter(|s| s.device_ms.is_some()).count().to_string());
        ui.label(ms(gpu_dev));
        ui.label(ratio(gpu_dev));
        ui.end_row();
    });
    let line = |e: EngineKind, device: bool| -> PlotPoints<'static> {
        run.samples
            .iter()
            .filter(|s| s.engine == e)
            .filter_map(|s| if device { s.device_ms } else { Some(s.wall_ms) }.map(|v| [s.step as f64, v]))
            .collect()
    };
    super::plot("speed_plot", 320.0).x_axis_label("step").y_axis_label("ms / step").include_y(0.0).show(ui, |p| {
        p.line(Line::new("CPU (wall)", line(EngineKind::Cpu, false)).color(Color32::from_rgb(90, 170, 255)));
        p.line(Line::new("GPU (wall)", line(EngineKind::Vulkan, false)).color(Color32::from_rgb(255, 170, 60)));
        p.line(Line::new("GPU (device)", line(EngineKind::Vulkan, true)).color(Color32::from_rgb(120, 220, 120)));
    });
    let ratio: PlotPoints = {
        let cpu: std::collections::HashMap<u64, f64> =
            run.samples.iter().filter(|s| s.engine == EngineKind::Cpu).map(|s| (s.step, s.wall_ms)).collect();
        run.samples
            .iter()
            .filter(|s| s.engine == EngineKind::Vulkan && s.wall_ms > 0.0)
            .filter_map(|s| cpu.get(&s.step).map(|c| [s.step as f64, c / s.wall_ms]))
            .collect()
    };
    super::plot("speed_ratio", 140.0).x_axis_label("step").y_axis_label("CPU / GPU").include_y(0.0).show(ui, |p| {
        p.line(Line::new("speedup (wall)", ratio).color(Color32::from_rgb(240, 80, 80)));
    });
    kernel_chart(ui, run);
}

/// Kernels shown in the breakdown; the rest are summed into one bar.
const TOP_KERNELS: usize = 14;

/// The GPU step's device time per kernel (mean of the last steps) as
/// horizontal bars, largest at the top.
fn kernel_chart(ui: &mut egui::Ui, run: &SpeedRun) {
    let means = kernel_means(&run.kernels);
    if means.is_empty() {
        return;
    }
    let total: f64 = means.iter().map(|k| k.1).sum();
    ui.label(
        RichText::new(format!(
            "GPU step by kernel: device ms, mean of the last {} ({total:.2} ms in all)",
            match run.kernels.len().min(KERNEL_STEPS) {
                1 => "step".to_string(),
                n => format!("{n} steps"),
            }
        ))
        .strong(),
    );
    let mut shown: Vec<(String, f64)> = means.iter().take(TOP_KERNELS).cloned().collect();
    if means.len() > TOP_KERNELS {
        let rest: f64 = means[TOP_KERNELS..].iter().map(|k| k.1).sum();
        shown.push((format!("{} others", means.len() - TOP_KERNELS), rest));
    }
    let n = shown.len();
    let bars: Vec<Bar> = shown
        .iter()
        .enumerate()
        .map(|(i, (name, ms))| {
            Bar::new((n - 1 - i) as f64, *ms).name(format!("{name}: {ms:.3} ms")).width(0.7).fill(bar_color(name))
        })
        .collect();
    let labels: Vec<String> = shown.iter().map(|k| k.0.clone()).collect();
    Plot::new("speed_kernels")
        .height(22.0 * n as f64 as f32 + 40.0)
        .x_axis_label("ms / step")
        .include_x(0.0)
        .allow_scroll(false)
        .allow_drag(false)
        .show_grid([true, false])
        .y_axis_formatter(move |mark, _range| {
            let i = mark.value.round();
            if (mark.value - i).abs() > 1e-6 || i < 0.0 || i as usize >= labels.len() {
                return String::new();
            }
            labels[labels.len() - 1 - i as usize].clone()
        })
        .show(ui, |p| p.bar_chart(BarChart::new("kernels", bars).horizontal()));
}

/// One colour per kind of kernel: recurrences, products, attention, the rest.
fn bar_color(name: &str) -> Color32 {
    if name.contains("recurrence") {
        Color32::from_rgb(240, 120, 60)
    } else if name.starts_with("gemm") {
        Color32::from_rgb(90, 170, 255)
    } else if name.starts_with("attn") {
        Color32::from_rgb(170, 120, 240)
    } else {
        Color32::from_rgb(140, 200, 120)
    }
}

//! The speedup panel: each engine's time per training step as a live plot,
//! and the ratio of their medians.

use egui::{Color32, RichText};
use egui_plot::{Legend, Line, Plot, PlotPoints};

use crate::ui::command::{Command, button};
use crate::ui::engines::Engine;
use crate::ui::speed::{SpeedRun, medians};

/// Samples per engine the medians are taken over.
const WINDOW: usize = 20;

pub fn show(ui: &mut egui::Ui, run: &SpeedRun, cmds: &mut Vec<Command>) {
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
    let n = |e: Engine| run.samples.iter().filter(|s| s.engine == e).count();
    let (cpu, gpu_wall, gpu_dev) = medians(&run.samples, WINDOW);
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2} ms"));
    egui::Grid::new("speed_stats").num_columns(4).striped(true).show(ui, |ui| {
        for h in ["", "steps", "median (last 20)", "speedup vs CPU"] {
            ui.label(RichText::new(h).strong());
        }
        ui.end_row();
        ui.label("CPU wall");
        ui.label(n(Engine::Cpu).to_string());
        ui.label(ms(cpu));
        ui.label("1×");
        ui.end_row();
        let ratio = |g: Option<f64>| match (cpu, g) {
            (Some(c), Some(g)) if g > 0.0 => format!("{:.2}×", c / g),
            _ => "-".into(),
        };
        ui.label("GPU wall");
        ui.label(n(Engine::Vulkan).to_string());
        ui.label(ms(gpu_wall));
        ui.label(RichText::new(ratio(gpu_wall)).strong());
        ui.end_row();
        ui.label("GPU device");
        ui.label(run.samples.iter().filter(|s| s.device_ms.is_some()).count().to_string());
        ui.label(ms(gpu_dev));
        ui.label(ratio(gpu_dev));
        ui.end_row();
    });
    let line = |e: Engine, device: bool| -> PlotPoints<'static> {
        run.samples
            .iter()
            .filter(|s| s.engine == e)
            .filter_map(|s| if device { s.device_ms } else { Some(s.wall_ms) }.map(|v| [s.step as f64, v]))
            .collect()
    };
    Plot::new("speed_plot")
        .height(320.0)
        .legend(Legend::default())
        .x_axis_label("step")
        .y_axis_label("ms / step")
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| {
            p.line(Line::new("CPU (wall)", line(Engine::Cpu, false)).color(Color32::from_rgb(90, 170, 255)));
            p.line(Line::new("GPU (wall)", line(Engine::Vulkan, false)).color(Color32::from_rgb(255, 170, 60)));
            p.line(Line::new("GPU (device)", line(Engine::Vulkan, true)).color(Color32::from_rgb(120, 220, 120)));
        });
    let ratio: PlotPoints = {
        let cpu: std::collections::HashMap<u64, f64> =
            run.samples.iter().filter(|s| s.engine == Engine::Cpu).map(|s| (s.step, s.wall_ms)).collect();
        run.samples
            .iter()
            .filter(|s| s.engine == Engine::Vulkan && s.wall_ms > 0.0)
            .filter_map(|s| cpu.get(&s.step).map(|c| [s.step as f64, c / s.wall_ms]))
            .collect()
    };
    Plot::new("speed_ratio")
        .height(140.0)
        .legend(Legend::default())
        .x_axis_label("step")
        .y_axis_label("CPU / GPU")
        .include_y(0.0)
        .allow_scroll(false)
        .show(ui, |p| {
            p.line(Line::new("speedup (wall)", ratio).color(Color32::from_rgb(240, 80, 80)));
        });
}

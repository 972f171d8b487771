//! The capture panel: what the open capture is (step, why, engine,
//! precision, loss scale, dataset), its rows with their origins, what the
//! step did as recorded, and the positions that dominate its gradient; a
//! click on a row or a position shows it in the token stepper.

use egui::{Color32, RichText};

use crate::capture::CaptureMeta;
use crate::ui::capture_view::{OpenCapture, ReplayRun};
use crate::ui::command::{Command, button};
use crate::ui::diagnose::ascii;

/// `open`, with `shown_row` the row the stepper shows (if it shows one) and
/// `cursor` the stepper's position.
pub fn show(
    ui: &mut egui::Ui,
    open: &OpenCapture,
    replay: &ReplayRun,
    shown_row: Option<usize>,
    cursor: usize,
    out: &mut Vec<Command>,
) {
    let meta = &open.capture.meta;
    let title = format!("Capture: step {} ({})", meta.step, meta.triggers.join(", "));
    egui::CollapsingHeader::new(RichText::new(title).strong()).id_salt("capture_panel").default_open(true).show(
        ui,
        |ui| {
            ui.horizontal(|ui| {
                ui.label(RichText::new(crate::dataset::show_path(&open.path)).small().weak());
                button(ui, Command::CloseCapture, true, out);
                button(ui, Command::ReplayCapture, !replay.is_busy(), out);
                if replay.is_busy() {
                    ui.spinner();
                    ui.label(RichText::new(replay.stage.as_deref().map(ascii).unwrap_or_default()).small());
                }
            });
            replay_result(ui, replay, open);
            for r in &meta.reasons {
                ui.label(RichText::new(ascii(r)).color(Color32::from_rgb(230, 180, 40)));
            }
            ui.horizontal_top(|ui| {
                facts(ui, meta);
                ui.add_space(24.0);
                rows(ui, open, shown_row, out);
            });
            dominant(ui, open, shown_row.map(|r| (r, cursor)), out);
        },
    );
}

fn facts(ui: &mut egui::Ui, meta: &CaptureMeta) {
    egui::Grid::new("capture_facts").num_columns(2).striped(true).show(ui, |ui| {
        let row = |ui: &mut egui::Ui, k: &str, v: String| {
            ui.label(k);
            ui.label(RichText::new(v).monospace());
            ui.end_row();
        };
        row(ui, "step", meta.step.to_string());
        row(ui, "engine", format!("{} ({})", meta.engine, meta.gemm_path));
        row(ui, "precision", meta.precision.name().to_string());
        let s = &meta.loss_scale;
        row(ui, "loss scale", format!("{}{}", s.scale, if s.dynamic { " (dynamic)" } else { " (fixed)" }));
        row(ui, "optimizer step", format!("{} · lr {:.3e}", meta.optim_step, meta.optim.lr));
        let ds = &meta.dataset;
        row(ui, "dataset", format!("{} ({} bytes)", ascii(&ds.name), ds.len_bytes));
        row(ui, "content hash", ds.content_hash.clone());
        if let Some(p) = &meta.planted {
            row(ui, "planted", p.clone());
        }
        if meta.carry {
            let k = meta.carry_windows.map_or("?".to_string(), |k| k.to_string());
            let p = meta.carry_prefix_len.unwrap_or(0);
            row(ui, "carried state", format!("yes: h0 and a prefix of {p} (--carry-windows {k}); replay uses it"));
            // The stepper's trace runs the row from zero (it takes no carried state).
            row(ui, "stepper", "traces the row from a zero state, not the carried one".into());
        }
        match &meta.recorded {
            Some(r) => {
                row(ui, "recorded loss", format!("{:.5}", r.loss));
                row(ui, "recorded grad norm", format!("{:.4e}", r.grad_norm));
                let applied = r.skipped.as_deref().map_or("applied".to_string(), |w| format!("skipped: {}", ascii(w)));
                row(ui, "the step", applied);
                row(ui, "scale after", r.scale_after.to_string());
            }
            None => row(ui, "recorded", "none (not from a training run)".into()),
        }
    });
}

fn rows(ui: &mut egui::Ui, open: &OpenCapture, shown: Option<usize>, out: &mut Vec<Command>) {
    let b = &open.capture.batch;
    ui.vertical(|ui| {
        ui.label(RichText::new(format!("rows ({} x {} positions)", b.rows, b.t)).strong());
        egui::ScrollArea::vertical().id_salt("capture_rows").max_height(180.0).show(ui, |ui| {
            egui::Grid::new("capture_rows_grid").num_columns(5).striped(true).show(ui, |ui| {
                for h in ["row", "tokens", "document", "offset", "grad share"] {
                    ui.label(RichText::new(h).strong());
                }
                ui.end_row();
                for r in 0..b.rows {
                    let label = format!("row {r}");
                    let pick =
                        ui.selectable_label(shown == Some(r), label).on_hover_text("Show this row in the stepper");
                    if pick.clicked() {
                        out.push(Command::CaptureGoTo { row: r, pos: 0 });
                    }
                    ui.label(b.lens[r].to_string());
                    let o = open.capture.origin(r);
                    ui.label(o.map_or("-".into(), |o| o.document.to_string()));
                    ui.label(o.map_or("-".into(), |o| o.offset.to_string()));
                    ui.label(open.shares.get(r).map_or("-".into(), |s| format!("{:.1}%", 100.0 * s)));
                    ui.end_row();
                }
            });
        });
    });
}

/// The dominant positions; `shown` is the stepper's (row, position).
fn dominant(ui: &mut egui::Ui, open: &OpenCapture, shown: Option<(usize, usize)>, out: &mut Vec<Command>) {
    ui.label(RichText::new("positions that dominate the gradient (|dloss/de_t|, CPU reference)").strong());
    let top = match &open.dominant {
        Ok(t) => t,
        Err(e) => {
            ui.colored_label(Color32::LIGHT_RED, format!("cannot compute them: {e}"));
            return;
        }
    };
    egui::ScrollArea::vertical().id_salt("capture_dominant").max_height(150.0).show(ui, |ui| {
        egui::Grid::new("capture_dominant_grid").num_columns(7).striped(true).show(ui, |ui| {
            for h in ["#", "row:pos", "norm", "token loss", "document", "offset", "context"] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for (i, t) in top.iter().enumerate() {
                ui.label(format!("{}", i + 1));
                let here = shown == Some((t.row, t.pos));
                let r = ui
                    .selectable_label(here, format!("{}:{}", t.row, t.pos))
                    .on_hover_text(Command::CaptureGoTo { row: t.row, pos: t.pos }.tooltip());
                if r.clicked() {
                    out.push(Command::CaptureGoTo { row: t.row, pos: t.pos });
                }
                ui.label(RichText::new(format!("{:.3e}", t.norm)).monospace());
                ui.label(RichText::new(format!("{:.3}", t.token_loss)).monospace());
                ui.label(t.document.map_or("-".into(), |d| d.to_string()));
                ui.label(t.offset.map_or("-".into(), |d| d.to_string()));
                ui.label(RichText::new(&t.context).monospace());
                ui.end_row();
            }
        });
    });
}

/// The replay's verdict and its evidence, when this capture was replayed.
fn replay_result(ui: &mut egui::Ui, replay: &ReplayRun, open: &OpenCapture) {
    match replay.of(&open.path) {
        None => {}
        Some(Err(e)) => {
            ui.colored_label(Color32::LIGHT_RED, ascii(&e.to_string()));
        }
        Some(Ok(r)) => {
            let color = match r.verdict {
                crate::triage::verdict::Verdict::Clean => Color32::LIGHT_GREEN,
                crate::triage::verdict::Verdict::Data => Color32::from_rgb(120, 200, 255),
                _ => Color32::LIGHT_RED,
            };
            ui.label(RichText::new(ascii(&r.verdict_line())).color(color).strong());
            for e in &r.evidence {
                ui.label(RichText::new(ascii(e)).monospace().small());
            }
        }
    }
}

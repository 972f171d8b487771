//! Panels: small functions over the state they draw. Each pushes the
//! [`Command`](super::command::Command)s of the user's actions; none mutates the app.

pub mod attention;
pub mod audit;
pub mod bisect;
pub mod capture;
pub mod controls;
pub mod drift;
pub mod faults;
pub mod gradient;
pub mod growth;
pub mod gru;
pub mod headroom;
pub mod inspector;
pub mod ladder;
pub mod model_source;
pub mod mutation;
pub mod precision_bisect;
pub mod session;
pub mod speed;
pub mod status;
pub mod stepper;
pub mod text;
pub mod training;

/// The diagnostic views' plots: `height` points tall, with a legend, and the
/// mouse wheel left to the page (a plot under the pointer would swallow it).
fn plot<'a>(id: &'static str, height: f32) -> egui_plot::Plot<'a> {
    egui_plot::Plot::new(id).height(height).legend(egui_plot::Legend::default()).allow_scroll(false)
}

//! Panels: small functions over the state they draw. Each pushes the
//! [`Command`](super::command::Command)s of the user's actions; none mutates the app.

pub mod attention;
pub mod audit;
pub mod bisect;
pub mod controls;
pub mod faults;
pub mod gradient;
pub mod gru;
pub mod inspector;
pub mod ladder;
pub mod speed;
pub mod status;
pub mod stepper;
pub mod text;
pub mod training;
